//! The check command's arguments and the key's record, as
//! `engine/lua/check.lua` takes them: parsed, checked, and turned into the
//! rules a check applies (or a listing that answers it without one).

pub use crate::layout::{MAX_COST, MAX_LIMIT};
use crate::rules::Rules;
use crate::seen::Seen;
use crate::settle::Settle;
use crate::write::Scratch;

/// Arguments a command cannot run with; the text names what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError(pub String);

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArgError {}

fn bad<T>(why: impl Into<String>) -> Result<T, ArgError> {
    Err(ArgError(why.into()))
}

/// Most rules a log holds (its header keeps the count in one byte).
pub const MAX_RULES: usize = 255;
/// Latest time a check may give (ms): 2^47, past which a timestamp's
/// reading relative to the newest one is no longer exact.
pub const MAX_NOW: i64 = 1 << 47;
/// The longest window a rule may have, 366 days (ms): well inside the
/// range a stored timestamp is read back in.
pub const MAX_WINDOW_MS: i64 = 366 * 24 * 3_600_000;

/// A decimal number of at most 18 digits, no sign, within `min..=max`.
pub fn number(arg: &[u8], what: &str, min: i64, max: i64) -> Result<i64, ArgError> {
    if arg.is_empty() || arg.len() > 18 || !arg.iter().all(u8::is_ascii_digit) {
        return bad(format!("{what} must be a whole number"));
    }
    let n = arg.iter().fold(0i64, |n, &d| n * 10 + i64::from(d - b'0'));
    within(n, what, min, max)
}

/// `n` when it is within `min..=max`, else the error that names `what`.
pub fn within(n: i64, what: &str, min: i64, max: i64) -> Result<i64, ArgError> {
    if n < min || n > max {
        return bad(format!("{what} must be from {min} to {max}"));
    }
    Ok(n)
}

/// What one check asks (ARGV of the check script).
#[derive(Debug, Clone)]
pub struct CheckArgs<'a> {
    /// "c": log the cost on admission; "p": only observe.
    pub writing: bool,
    /// "cx", "px", "sx": keep every entry (never merge close ones).
    pub exact: bool,
    /// Units the check costs (at least 1; a settle's: what it charges over
    /// the estimate, 0 or more).
    pub cost: i64,
    /// "s": a settle of a reservation, not a check (`writing` too).
    pub settle: Option<Settle>,
    /// The check's time (ms), or `None` for the server clock.
    pub now: Option<i64>,
    /// The caller's rules.
    pub rules: Rules,
    /// The tiers a stored tier may select, by name.
    pub tiers: Vec<(&'a [u8], Rules)>,
}

/// Reads `n`, the windows as stored, the limits and the windows from `args`
/// at `at`; returns the rules and where the next argument is.
fn rule_set(args: &[&[u8]], at: usize, whose: &str) -> Result<(Rules, usize), ArgError> {
    // (the messages are made only on an error: this runs on every check)
    let named = |e: ArgError| ArgError(format!("{whose}: {}", e.0));
    let Some(count) = args.get(at) else {
        return bad(format!("{whose}: the number of rules is missing"));
    };
    let n = number(count, "the number of rules", 1, MAX_RULES as i64).map_err(named)? as usize;
    let end = at + 2 + 2 * n;
    if args.len() < end {
        return bad(format!(
            "{whose}: {n} rules need their windows as stored, {n} limits and {n} windows"
        ));
    }
    let mut rules = Rules::with_capacity(n);
    for i in 0..n {
        let limit = number(args[at + 2 + i], "a limit", 1, MAX_LIMIT).map_err(named)?;
        let window =
            number(args[at + 2 + n + i], "a window (ms)", 1, MAX_WINDOW_MS).map_err(named)?;
        rules.push(limit, window);
    }
    if args[at + 1] != rules.encoded.as_slice() {
        return bad(format!(
            "{whose}: the windows as stored ({} bytes) do not encode the windows given",
            args[at + 1].len()
        ));
    }
    Ok((rules, end))
}

/// Parses the check script's ARGV: `c|p` (`cx|px` to keep every entry), cost, now (ms, or "" for the
/// server clock), the caller's rules, then each tier: name and rules.
pub fn parse_check<'a>(args: &[&'a [u8]]) -> Result<CheckArgs<'a>, ArgError> {
    if args.len() < 6 {
        return bad("wrong number of arguments: give c|p, cost, now, then the rules");
    }
    let (writing, exact) =
        match args[0] {
            b"c" | b"s" => (true, false),
            b"p" => (false, false),
            b"cx" | b"sx" => (true, true),
            b"px" => (false, true),
            _ => return bad(
                "the mode must be c (check), p (peek) or s (settle), with x to keep every entry",
            ),
        };
    let (cost, settle) = if args[0][0] == b's' {
        settle_args(args[1])?
    } else {
        (number(args[1], "the cost", 1, MAX_COST)?, None)
    };
    let now = match args[2] {
        b"" => None,
        given => Some(number(given, "now (ms)", 0, MAX_NOW)?),
    };
    let (rules, mut at) = rule_set(args, 3, "the rules")?;
    let mut tiers = Vec::new();
    while at < args.len() {
        let name = args[at];
        let (tier, next) = rule_set(args, at + 1, "a tier")?;
        tiers.push((name, tier));
        at = next;
    }
    Ok(CheckArgs {
        writing,
        exact,
        cost,
        settle,
        now,
        rules,
        tiers,
    })
}

/// A settle's cost argument, `<charged> <at> <refund>`: the units charged
/// over the estimate, the time the reservation was logged at, the units it
/// gives back.
fn settle_args(arg: &[u8]) -> Result<(i64, Option<Settle>), ArgError> {
    let mut parts = arg.split(|&b| b == b' ');
    let (Some(charged), Some(at), Some(refund), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return bad("a settle's cost must be <charged> <at> <refund>");
    };
    let charged = number(charged, "the units charged", 0, MAX_COST)?;
    let at = number(at, "the reservation's time (ms)", 0, MAX_NOW)?;
    let refund = number(refund, "the units given back", 0, MAX_COST)?;
    Ok((charged, Some(Settle { at, refund })))
}

/// The fields of a key's record the check reads: `s`, `b`, `t`, `o`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Record<'a> {
    /// Safelisted: `<until ms> <reason>`.
    pub safe: Option<&'a [u8]>,
    /// Blocked: `<until ms> <reason>`.
    pub block: Option<&'a [u8]>,
    /// A tier's name.
    pub tier: Option<&'a [u8]>,
    /// Rules that replace the caller's: `<limit>:<window ms>;...`.
    pub overrides: Option<&'a [u8]>,
    /// Blocked in the check's scope (a ban the key earned there, kept in
    /// the scope's record): `<until ms> <reason>`; judged after `safe` and
    /// `block`.
    pub scope_block: Option<&'a [u8]>,
}

/// The leading number of a listing (`<until ms> <reason>`) and its reason,
/// when it starts with digits (a number too large for 63 bits reads as the
/// largest one).
pub fn listing(field: &[u8]) -> Option<(i64, &[u8])> {
    let digits = field.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let until = field[..digits].iter().fold(0i64, |n, &d| {
        n.saturating_mul(10).saturating_add(i64::from(d - b'0'))
    });
    let rest = &field[digits..];
    Some((until, rest.strip_prefix(b" ").unwrap_or(rest)))
}

/// The rules of a stored override: every `<limit>:<window>` in it.
pub fn parse_override(text: &[u8]) -> Result<Rules, ArgError> {
    let invalid = || ArgError("the key's stored override is not <limit>:<window ms>;...".into());
    let run = |from: usize| {
        text[from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let mut rules = Rules::with_capacity(0);
    let mut i = 0;
    while i < text.len() {
        let digits = run(i);
        let colon = i + digits;
        if digits > 0 && text.get(colon) == Some(&b':') && run(colon + 1) > 0 {
            let end = colon + 1 + run(colon + 1);
            let limit = number(&text[i..colon], "", 1, MAX_LIMIT).map_err(|_| invalid())?;
            let window =
                number(&text[colon + 1..end], "", 1, MAX_WINDOW_MS).map_err(|_| invalid())?;
            rules.push(limit, window);
            i = end;
        } else {
            i += 1;
        }
    }
    if rules.is_empty() || rules.len() > MAX_RULES {
        return Err(invalid());
    }
    Ok(rules)
}

/// What a key's record makes of a check.
#[derive(Debug)]
pub enum Selected<'r> {
    /// Safelisted (kind 1, admitted) or blocked (kind 2, denied) until `until`.
    Listed {
        /// 1: safelisted; 2: blocked.
        kind: i64,
        /// The listing's reason.
        reason: &'r [u8],
        /// When it lapses (ms).
        until: i64,
    },
    /// Checked against these rules; `detail` says whose (`""`, `t<name>`, `o<rules>`).
    Rules {
        /// The caller's, a tier's or the override's.
        rules: std::borrow::Cow<'r, Rules>,
        /// What the reply's detail says.
        detail: Vec<u8>,
    },
}

/// The rules (or listing) that apply to a check at `now`, given the key's
/// record: a standing safelisting, blocklisting or ban in the check's scope
/// (in that order), else the record's override, else its tier when it is one
/// of `tiers`, else the `given` rules. The check command, the check script
/// and the memory store all choose this way.
pub fn select<'r>(
    given: &'r Rules,
    tiers: impl IntoIterator<Item = (&'r [u8], &'r Rules)>,
    record: Option<&Record<'r>>,
    now: i64,
) -> Result<Selected<'r>, ArgError> {
    use std::borrow::Cow;
    let given = || Selected::Rules {
        rules: Cow::Borrowed(given),
        detail: Vec::new(),
    };
    let Some(record) = record else {
        return Ok(given());
    };
    for (kind, field) in [(1, record.safe), (2, record.block), (2, record.scope_block)] {
        if let Some((until, reason)) = field.and_then(listing) {
            if until > now {
                return Ok(Selected::Listed {
                    kind,
                    reason,
                    until,
                });
            }
        }
    }
    if let Some(text) = record.overrides {
        let mut detail = b"o".to_vec();
        detail.extend_from_slice(text);
        return Ok(Selected::Rules {
            rules: Cow::Owned(parse_override(text)?),
            detail,
        });
    }
    if let Some(name) = record.tier {
        if let Some((_, rules)) = tiers.into_iter().find(|(n, _)| *n == name) {
            let mut detail = b"t".to_vec();
            detail.extend_from_slice(name);
            return Ok(Selected::Rules {
                rules: Cow::Borrowed(rules),
                detail,
            });
        }
    }
    Ok(given())
}

impl Scratch {
    /// Takes back the buffers of parsed arguments' rules.
    pub fn keep_args(&mut self, args: CheckArgs<'_>) {
        self.keep_rules(args.rules);
        for (_, rules) in args.tiers {
            self.keep_rules(rules);
        }
    }
}

impl CheckArgs<'_> {
    /// The tiers by name, as [`select`] takes them.
    pub fn tier_rules(&self) -> impl Iterator<Item = (&[u8], &Rules)> {
        self.tiers.iter().map(|(name, rules)| (*name, rules))
    }
}

/// The check command's reply, element by element (see `check.lua`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item<'a> {
    /// An integer.
    Int(i64),
    /// A bulk string.
    Bytes(&'a [u8]),
}

/// A command's reply: integers and bulk strings, in order.
pub trait Reply<'a> {
    /// How many items.
    fn len(&self) -> usize;

    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Gives each item, in order, to `put`.
    fn each(&self, put: impl FnMut(Item<'a>));
}

impl<'a> Reply<'a> for [Item<'a>] {
    fn len(&self) -> usize {
        <[Item<'a>]>::len(self)
    }

    fn each(&self, put: impl FnMut(Item<'a>)) {
        self.iter().cloned().for_each(put);
    }
}

/// The reply to a listed key: `{now, allowed, kind, reason, until}`.
pub fn listed_reply(now: i64, kind: i64, reason: &[u8], until: i64) -> [Item<'_>; 5] {
    [
        Item::Int(now),
        Item::Int(i64::from(kind == 1)),
        Item::Int(kind),
        Item::Bytes(reason),
        Item::Int(until),
    ]
}

/// The reply to a check the rules decided: `{now, allowed, 0, detail, 0}`
/// then per rule its count, oldest unit (-1: none) and free time (-1: n/a).
#[derive(Debug, Clone, Copy)]
pub struct CheckedReply<'a> {
    /// What the check saw.
    pub seen: &'a Seen,
    /// Whose rules decided it (see [`Selected::Rules`]).
    pub detail: &'a [u8],
}

impl<'a> Reply<'a> for CheckedReply<'a> {
    fn len(&self) -> usize {
        5 + 3 * self.seen.rules.len()
    }

    fn each(&self, mut put: impl FnMut(Item<'a>)) {
        let seen = self.seen;
        put(Item::Int(seen.now));
        put(Item::Int(i64::from(seen.allowed)));
        put(Item::Int(0));
        put(Item::Bytes(self.detail));
        put(Item::Int(0));
        for rule in &seen.rules {
            put(Item::Int(rule.count));
            put(Item::Int(rule.oldest));
            put(Item::Int(rule.free_at));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The windows as the check command takes them (5 bytes each).
    fn encode_windows(windows: &[i64]) -> Vec<u8> {
        windows
            .iter()
            .flat_map(|&w| crate::layout::enc5(w))
            .collect()
    }

    fn args(list: &[&str]) -> Vec<Vec<u8>> {
        list.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    fn parse(list: Vec<Vec<u8>>) -> Result<usize, ArgError> {
        let refs: Vec<&[u8]> = list.iter().map(Vec::as_slice).collect();
        parse_check(&refs).map(|a| a.tiers.len())
    }

    fn with_windows(mut list: Vec<Vec<u8>>, at: usize, windows: &[i64]) -> Vec<Vec<u8>> {
        list[at] = encode_windows(windows);
        list
    }

    #[test]
    fn a_check_with_tiers_parses() {
        let list = args(&[
            "c", "1", "", "2", "W", "5", "50", "1000", "60000", "gold", "1", "W", "9", "1000",
        ]);
        let list = with_windows(with_windows(list, 4, &[1000, 60000]), 11, &[1000]);
        assert_eq!(parse(list), Ok(1));
    }

    #[test]
    fn hostile_arguments_are_named() {
        let cases: Vec<(Vec<Vec<u8>>, &str)> = vec![
            (args(&["c"]), "wrong number of arguments"),
            (args(&["x", "1", "", "1", "W", "5", "1000"]), "the mode"),
            (args(&["c", "-1", "", "1", "W", "5", "1000"]), "the cost"),
            (
                args(&["c", "1", "99999999999999999999", "1", "W", "5", "1000"]),
                "now",
            ),
            (
                args(&["c", "1", "", "0", "W", "5", "1000"]),
                "number of rules",
            ),
            (args(&["c", "1", "", "3", "W", "5", "1000"]), "3 rules need"),
            (
                args(&["c", "1", "", "1", "W", "5", "1000"]),
                "do not encode",
            ),
            (args(&["c", "1", "", "1", "W", "0", "1000"]), "a limit"),
            (args(&["c", "1", "", "1", "W", "1", "1e3"]), "a window"),
        ];
        for (list, want) in cases {
            let err = parse(list).unwrap_err().0;
            assert!(err.contains(want), "{err} lacks {want}");
        }
        let tail = with_windows(
            args(&["c", "1", "", "1", "W", "5", "1000", "gold"]),
            4,
            &[1000],
        );
        assert!(parse(tail).unwrap_err().0.contains("a tier"));
    }

    #[test]
    fn a_cost_one_past_every_limit_is_taken_and_no_more() {
        // what the core sends for any cost past every limit: a denial
        let with_cost = |cost: i64| {
            let list = args(&["c", &cost.to_string(), "", "1", "W", "5", "1000"]);
            parse(with_windows(list, 4, &[1000]))
        };
        assert_eq!(with_cost(MAX_COST), Ok(0));
        assert!(with_cost(MAX_COST + 1).unwrap_err().0.contains("the cost"));
    }

    #[test]
    fn listings_and_overrides_read_as_the_script_reads_them() {
        assert_eq!(listing(b"1700 spam bot"), Some((1700, &b"spam bot"[..])));
        assert_eq!(listing(b"1700"), Some((1700, &b""[..])));
        assert_eq!(listing(b"x1700"), None);
        assert_eq!(listing(b"99999999999999999999999 r").unwrap().0, i64::MAX);
        let rules = parse_override(b"10:1000;200:3600000").unwrap();
        assert_eq!(rules.limits, vec![10, 200]);
        assert_eq!(rules.windows, vec![1000, 3_600_000]);
        assert_eq!(parse_override(b"a1:2:3;x4:5").unwrap().limits, vec![1, 4]);
        assert!(parse_override(b"none").is_err());
        assert!(parse_override(b"0:1000").is_err());
    }
}
