//! Replaying an access log through candidate rule sets (`ratekeeper
//! analyze`): who would be limited, and each user's peak usage per window.
//!
//! In the order a line goes through them: [`source`] reads the file (gzip or
//! not) and cuts its lines, the format is chosen from the first lines that
//! parse, [`clf`] and [`json`] read a line's key and time (with
//! [`times`], and [`python`] where the report spells what Python spelled),
//! lines wait in a reorder buffer until the newest time seen is
//! [`REORDER_SECONDS`] past them, and [`tally`] replays each request
//! through one [`sliding`] log per user and rule set and counts. The Python
//! CLI parses the arguments and prints the report.
//!
//! Memory grows with the users, never with the lines: per user a few
//! counters and, per rule set, the times of its requests still inside the
//! longest window.
//!
//! This crate uses the core's rule sets and errors (`ratekeeper_core`) and
//! the engine's range of a stored time; nothing but the Python binding uses
//! it, so the core and the Ruby gem build without it.

pub mod clf;
pub mod json;
pub mod python;
pub mod sliding;
pub mod source;
pub mod tally;
pub mod times;

use ratekeeper_core::error::Error;
use ratekeeper_core::rule::RuleSet;
use source::Source;
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use tally::Tally;

/// A line's key (`None`: the line has none) and its time in epoch seconds.
pub type Parsed<'a> = (Option<Cow<'a, str>>, f64);

/// How far out of order (seconds behind the newest line) a line may come
/// and still be replayed in time order; an older one counts at its user's
/// newest time.
pub const REORDER_SECONDS: f64 = 60.0;
/// Lines read to choose the format: the first that parses decides.
pub const DETECT_LINES: usize = 1000;
/// Bad lines kept as examples.
pub const MAX_BAD_EXAMPLES: usize = 3;
/// Characters of a bad line an example keeps.
pub const EXAMPLE_CHARS: usize = 200;
/// Lines between two calls of the progress callback.
pub const PROGRESS_EVERY: u64 = 4096;
/// Most lines the reorder buffer holds: past it, the oldest is replayed at
/// once (a log written at over 30,000 lines a second, or a flood of lines
/// far out of order, which would otherwise all wait for a newer line).
pub const MAX_HELD: usize = 2_000_000;
/// Most rule sets one replay compares.
pub const MAX_RULE_SETS: usize = 64;

/// The formats a log can be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The common or combined log format.
    Clf,
    /// JSON lines.
    Json,
}

impl Format {
    /// The name the report gives it: `clf` or `json`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Clf => "clf",
            Format::Json => "json",
        }
    }
}

/// What to replay.
#[derive(Debug, Clone)]
pub struct Options {
    /// The rule sets, the one given by `--rules` first.
    pub rule_sets: Vec<RuleSet>,
    /// Who is limited: `ip`, `user`, or any field of JSON lines.
    pub key: String,
    /// The length of a user-period: a day or an hour.
    pub period_seconds: u64,
}

/// A line that could not be replayed.
#[derive(Debug, Clone, PartialEq)]
pub struct BadLine {
    /// Its number, from 1.
    pub line: u64,
    /// Why.
    pub reason: String,
    /// Its first characters, without its end.
    pub text: String,
}

/// What a replay found.
pub struct Replayed {
    /// The log's format.
    pub format: Format,
    /// Whether it was gzipped.
    pub gzip: bool,
    /// Lines read, blank ones included.
    pub lines: u64,
    /// Lines further out of order than [`REORDER_SECONDS`].
    pub late: u64,
    /// Bad lines, and the first few.
    pub bad: u64,
    /// (see `bad`)
    pub bad_examples: Vec<BadLine>,
    /// Per window of `tally.windows_ms`, each user's peak, ascending.
    pub peaks: Vec<Vec<u64>>,
    /// The counts.
    pub tally: Tally,
}

/// Why a replay could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The options are wrong (a key the format has not, too many rule sets).
    #[error(transparent)]
    Config(#[from] Error),
    /// The file could not be read (or un-gzipped).
    #[error("{0}")]
    Read(#[from] std::io::Error),
    /// No line of the first ones is in a format the replay reads.
    #[error(
        "no line is in the combined log format or a JSON object (read the first {lines} lines)"
    )]
    NoFormat {
        /// Non-blank lines read.
        lines: usize,
    },
    /// The progress callback asked to stop.
    #[error("stopped")]
    Stopped,
}

/// A line's parser, for the log's format and the key.
enum Parser {
    Clf(clf::Parser),
    Json(json::Parser),
}

impl Parser {
    fn new(format: Format, key: &str) -> Result<Parser, Error> {
        Ok(match format {
            Format::Clf => Parser::Clf(clf::Parser::new(match key {
                "ip" => clf::Field::Host,
                "user" => clf::Field::AuthUser,
                _ => {
                    return Err(Error::config(format!(
                        "--key {key}: the common and combined log formats have only 'ip' and 'user'"
                    )))
                }
            })),
            Format::Json => Parser::Json(json::Parser::new(match key {
                "ip" => vec!["ip".into(), "remote_addr".into()],
                _ => vec![key.to_owned()],
            })),
        })
    }

    fn parse<'a>(&mut self, line: &'a str) -> Result<Parsed<'a>, String> {
        match self {
            Parser::Clf(p) => p.parse(line),
            Parser::Json(p) => p.parse(line),
        }
    }
}

/// Whether a line (without its end) is blank: Python's `str.isspace` of
/// it with its end (an empty last line has none).
fn is_blank(line: &str, ended: bool) -> bool {
    (ended || !line.is_empty()) && line.chars().all(python::is_space)
}

/// The format of the first of `head` that is a common/combined log line or a
/// JSON object (a cut-off first line does not decide).
fn detect(head: &[&str]) -> Option<Format> {
    head.iter().find_map(|line| {
        if clf::matches(line) {
            Some(Format::Clf)
        } else if json::is_object(line) {
            Some(Format::Json)
        } else {
            None
        }
    })
}

/// A line waiting in the reorder buffer, oldest (then first read) first:
/// ordered by one integer, its time's bits (in `f64::total_cmp`'s order)
/// above its line's number, so that the buffer compares one number.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Held {
    order: u128,
    user: Option<u32>,
}

impl Held {
    fn new(at: f64, line: u64, user: Option<u32>) -> Held {
        // f64::total_cmp's key: flip the bits below the sign of a negative
        // time, then the sign, so that the integers order as the times
        let bits = at.to_bits() as i64;
        let ordered = (bits ^ (((bits >> 63) as u64) >> 1) as i64) as u64 ^ (1 << 63);
        Held {
            order: (u128::from(ordered) << 64) | u128::from(line),
            user,
        }
    }

    /// Its time (epoch seconds).
    fn at(&self) -> f64 {
        let ordered = (self.order >> 64) as u64 ^ (1 << 63);
        let bits = ordered as i64;
        f64::from_bits((bits ^ (((bits >> 63) as u64) >> 1) as i64) as u64)
    }
}

/// Replays the log at `path`. `progress(bytes of the file read, its size,
/// lines read)` is called every [`PROGRESS_EVERY`] lines; when it returns
/// false the replay stops with [`ReplayError::Stopped`].
pub fn replay_file(
    path: &str,
    options: &Options,
    progress: &mut dyn FnMut(u64, u64, u64) -> bool,
) -> Result<Replayed, ReplayError> {
    if options.rule_sets.len() > MAX_RULE_SETS {
        return Err(Error::config(format!(
            "{} rule sets: a replay compares at most {MAX_RULE_SETS}",
            options.rule_sets.len()
        ))
        .into());
    }
    let mut source = Source::open(path)?;
    // the first lines choose the format, and are replayed like the rest
    let mut head: Vec<(String, bool)> = Vec::new();
    let mut found = 0;
    while found < DETECT_LINES {
        let Some((line, ended)) = source.next_line()? else {
            break;
        };
        if !is_blank(&line, ended) {
            found += 1;
        }
        head.push((line.into_owned(), ended));
    }
    let non_blank: Vec<&str> = head
        .iter()
        .filter(|(line, ended)| !is_blank(line, *ended))
        .map(|(line, _)| line.as_str())
        .collect();
    let format = detect(&non_blank).ok_or(ReplayError::NoFormat { lines: found })?;
    let mut parser = Parser::new(format, &options.key)?;
    let mut tally = Tally::new(options.rule_sets.clone(), options.period_seconds);
    let mut held: BinaryHeap<Reverse<Held>> = BinaryHeap::new();
    let mut newest = f64::NEG_INFINITY;
    let (mut lines, mut late, mut bad) = (0_u64, 0_u64, 0_u64);
    let mut bad_examples = Vec::new();
    let mut head = head.into_iter();
    let (read, size) = (source.read_count(), source.size);
    loop {
        let (line, ended): (Cow<'_, str>, bool) = match head.next() {
            Some((line, ended)) => (Cow::Owned(line), ended),
            None => match source.next_line()? {
                Some(next) => next,
                None => break,
            },
        };
        lines += 1;
        if lines % PROGRESS_EVERY == 0 && !progress(read.get(), size, lines) {
            return Err(ReplayError::Stopped);
        }
        if is_blank(&line, ended) {
            continue;
        }
        let (key, at) = match parser.parse(&line) {
            Ok(parsed) => parsed,
            Err(reason) => {
                bad += 1;
                if bad_examples.len() < MAX_BAD_EXAMPLES {
                    bad_examples.push(BadLine {
                        line: lines,
                        reason,
                        text: line.chars().take(EXAMPLE_CHARS).collect(),
                    });
                }
                continue;
            }
        };
        if at < newest - REORDER_SECONDS {
            late += 1;
        }
        let user = key.map(|k| tally.user_id(&k));
        if let Some(id) = user {
            tally.prefetch(id);
        }
        held.push(Reverse(Held::new(at, lines, user)));
        if at > newest {
            newest = at;
            release(&mut held, &mut tally, newest - REORDER_SECONDS);
        }
        if held.len() > MAX_HELD {
            release(&mut held, &mut tally, f64::NEG_INFINITY);
        }
    }
    release(&mut held, &mut tally, f64::INFINITY);
    let peaks = tally.sorted_peaks();
    Ok(Replayed {
        format,
        gzip: source.gzip,
        lines,
        late,
        bad,
        bad_examples,
        peaks,
        tally,
    })
}

/// Replays the held lines up to time `until`, oldest first, and the oldest
/// past [`MAX_HELD`].
fn release(held: &mut BinaryHeap<Reverse<Held>>, tally: &mut Tally, until: f64) {
    while held
        .peek()
        .is_some_and(|Reverse(h)| h.at() <= until || held.len() > MAX_HELD)
    {
        let Some(Reverse(h)) = held.pop() else { break };
        tally.feed(h.user, h.at());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reorder_buffer_orders_by_time_then_line_and_keeps_the_time() {
        let times = [-1.5, -0.0, 0.0, 1e-9, 1.0, 1_709_596_800.125, 7.3e9];
        let held: Vec<Held> = times
            .iter()
            .enumerate()
            .map(|(i, &at)| Held::new(at, i as u64, None))
            .collect();
        for (h, &at) in held.iter().zip(&times) {
            assert_eq!(h.at().to_bits(), at.to_bits());
        }
        assert!(held.windows(2).all(|w| w[0] < w[1]));
        assert!(Held::new(5.0, 1, None) < Held::new(5.0, 2, Some(0)));
    }

    #[test]
    fn a_replay_of_no_candidate_counts_requests() {
        let mut tally = tally::Tally::new(Vec::new(), 3600);
        let id = tally.user_id("10.0.0.1");
        tally.prefetch(id);
        tally.feed(Some(id), 1_700_000_000.0);
        assert_eq!(tally.requests, 1);
    }

    #[test]
    fn keys_are_numbered_once_each() {
        let mut tally = tally::Tally::new(
            vec![ratekeeper_core::rule::RuleSet::parse("1/s").unwrap()],
            3600,
        );
        let keys = [
            "10.0.0.1",
            "",
            "10.0.0.10",
            "alice",
            "10.0.0.1",
            "ａlice",
            "alice",
        ];
        let ids: Vec<u32> = keys.iter().map(|k| tally.user_id(k)).collect();
        assert_eq!(ids, [0, 1, 2, 3, 0, 4, 3]);
        assert_eq!(tally.users(), 5);
    }
}
