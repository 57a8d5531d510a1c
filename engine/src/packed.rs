//! The module's packed check: what `check.lua` takes as ARGV (mode, cost,
//! now, the rules, the tiers) as ONE argument, and its reply (the same
//! items) as ONE string. Redis parses, allocates and answers each argument
//! and each reply item on its own, which costs more than the check itself
//! (about 300 instructions apiece against the engine's ~2,300 for four
//! rules); packed, a 4-rule check is 4 arguments and 1 reply item instead of
//! 17 and 17.
//!
//! The check (numbers big-endian):
//!
//! * [`FORMAT`] (1 byte), flags (1 byte: [`WRITING`], [`NOW_GIVEN`],
//!   [`EXACT`], [`SETTLE`]), the cost (8 bytes), for a settle the
//!   reservation's time and the units it gives back (8 bytes each), the
//!   check's time in ms when [`NOW_GIVEN`] (8 bytes);
//! * the caller's rules: their count `n` (1 byte), the windows as a log's
//!   header stores them (5 bytes each), the limits (5 bytes each; 4 in the
//!   previous format, 1, which the module still reads from older clients);
//! * then each tier until the end: its name's length (2 bytes), the name,
//!   and its rules as above.
//!
//! The reply is [`crate::command::Item`]s in order: an integer as `i` and
//! 8 bytes, a string as `s`, its length (4 bytes) and its bytes.

use crate::command::{
    within, ArgError, CheckArgs, Item, Reply, MAX_COST, MAX_LIMIT, MAX_NOW, MAX_RULES,
    MAX_WINDOW_MS,
};
use crate::layout::{dec5, enc5, MAX5};
use crate::log::{Rules, Scratch, Settle};

/// The packed check's first byte: which format follows. (The script's
/// ARGV never comes as one argument, so a call with one is a packed one.)
pub const FORMAT: u8 = 2;
/// The previous format: limits of 4 bytes, as older clients send them.
pub const FORMAT_4_BYTE_LIMITS: u8 = 1;
/// Flag: log the cost on admission (a check), else only observe (a peek).
pub const WRITING: u8 = 1;
/// Flag: the check's time follows the cost (else the server clock).
pub const NOW_GIVEN: u8 = 2;
/// Flag: keep every entry (never merge close ones).
pub const EXACT: u8 = 4;
/// Flag: a settle of a reservation (with [`WRITING`]; see
/// [`crate::log::Settle`]); a module older than this flag refuses it by name.
pub const SETTLE: u8 = 8;

/// Appends a rule set as the packed check carries it.
fn push_rules(out: &mut Vec<u8>, rules: &Rules) {
    out.push(rules.len() as u8);
    out.extend_from_slice(&rules.encoded);
    for &limit in &rules.limits {
        // (a limit past 2^40 - 1, never the core's, is refused when read)
        out.extend_from_slice(&enc5(limit.clamp(0, MAX5 as i64)));
    }
}

/// A packed check: `writing` (else a peek), `exact` (keep every entry),
/// `cost` units, at `now_ms` (None: the server clock), the caller's
/// `rules`, then each tier by name. Rules
/// past the bounds [`parse_packed`] holds are refused there; a tier's name
/// must be at most 65,535 bytes (the core's are at most 64).
pub fn pack_check<'a>(
    writing: bool,
    exact: bool,
    cost: u64,
    now_ms: Option<u64>,
    rules: &Rules,
    tiers: impl Iterator<Item = (&'a [u8], &'a Rules)>,
) -> Vec<u8> {
    pack(writing, exact, cost, None, now_ms, rules, tiers)
}

/// A packed settle of a reservation (see [`crate::log::Settle`]): `exact`
/// as the rules' checks, `charged` units over the estimate, at `now_ms`
/// (None: the server clock), against the `rules` the reservation was
/// checked by.
pub fn pack_settle(
    exact: bool,
    charged: u64,
    settle: Settle,
    now_ms: Option<u64>,
    rules: &Rules,
) -> Vec<u8> {
    pack(
        true,
        exact,
        charged,
        Some(settle),
        now_ms,
        rules,
        std::iter::empty(),
    )
}

fn pack<'a>(
    writing: bool,
    exact: bool,
    cost: u64,
    settle: Option<Settle>,
    now_ms: Option<u64>,
    rules: &Rules,
    tiers: impl Iterator<Item = (&'a [u8], &'a Rules)>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + 9 * rules.len());
    let flags = if writing { WRITING } else { 0 }
        | if now_ms.is_some() { NOW_GIVEN } else { 0 }
        | if exact { EXACT } else { 0 }
        | if settle.is_some() {
            SETTLE | WRITING
        } else {
            0
        };
    out.extend_from_slice(&[FORMAT, flags]);
    out.extend_from_slice(&cost.to_be_bytes());
    if let Some(settle) = settle {
        out.extend_from_slice(&(settle.at.max(0) as u64).to_be_bytes());
        out.extend_from_slice(&(settle.refund.max(0) as u64).to_be_bytes());
    }
    if let Some(now) = now_ms {
        out.extend_from_slice(&now.to_be_bytes());
    }
    push_rules(&mut out, rules);
    for (name, tier) in tiers {
        debug_assert!(
            name.len() <= usize::from(u16::MAX),
            "a tier name of {} bytes",
            name.len()
        );
        out.extend_from_slice(&(name.len() as u16).to_be_bytes());
        out.extend_from_slice(name);
        push_rules(&mut out, tier);
    }
    out
}

/// A big-endian number of at most 8 bytes.
fn big_endian(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |v, &b| v << 8 | u64::from(b))
}

/// Reads a packed check from its front.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Bytes per limit (4 in the previous format).
    limit_bytes: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ArgError> {
        let end = self.at.saturating_add(n);
        let Some(taken) = self.bytes.get(self.at..end) else {
            return Err(ArgError(format!(
                "the packed check ends before {what} ({} bytes)",
                self.bytes.len()
            )));
        };
        self.at = end;
        Ok(taken)
    }

    fn number(&mut self, n: usize, what: &str) -> Result<u64, ArgError> {
        Ok(big_endian(self.take(n, what)?))
    }

    fn done(&self) -> bool {
        self.at == self.bytes.len()
    }

    /// A rule set, held to the bounds the script's arguments are
    /// ([`crate::command::parse_check`]), in `scratch`'s buffers; `whose`
    /// names it in an error.
    fn rules(&mut self, whose: &str, scratch: &mut Scratch) -> Result<Rules, ArgError> {
        let named = |e: ArgError| ArgError(format!("{whose}: {}", e.0));
        let count = self.number(1, "the number of rules")? as i64;
        let n = within(count, "the number of rules", 1, MAX_RULES as i64).map_err(named)? as usize;
        let windows = self.take(5 * n, "the windows")?;
        let width = self.limit_bytes;
        let limits = self.take(width * n, "the limits")?;
        let mut rules = scratch.rules();
        for (window, limit) in windows.chunks_exact(5).zip(limits.chunks_exact(width)) {
            let limit = big_endian(limit) as i64;
            let limit = within(limit, "a limit", 1, MAX_LIMIT).map_err(named)?;
            let window = dec5(window, 0).unwrap_or(0);
            let window = within(window, "a window (ms)", 1, MAX_WINDOW_MS).map_err(named)?;
            rules.limits.push(limit);
            rules.windows.push(window);
        }
        // (the windows as the header stores them: the bytes they came in)
        rules.encoded.extend_from_slice(windows);
        Ok(rules)
    }
}

/// Reads a packed check (see the module docs) into the arguments the check
/// script's ARGV gives, with the same bounds, its rules in `scratch`'s
/// buffers (hand them back with [`Scratch::keep_args`]).
pub fn parse_packed<'a>(bytes: &'a [u8], scratch: &mut Scratch) -> Result<CheckArgs<'a>, ArgError> {
    let mut r = Reader {
        bytes,
        at: 0,
        limit_bytes: 5,
    };
    let format = r.number(1, "its format")? as u8;
    match format {
        FORMAT => {}
        FORMAT_4_BYTE_LIMITS => r.limit_bytes = 4,
        _ => {
            return Err(ArgError(format!(
                "the packed check's format is {format}, not {FORMAT}: upgrade the module before the clients"
            )))
        }
    }
    let flags = r.number(1, "its flags")? as u8;
    if flags & !(WRITING | NOW_GIVEN | EXACT | SETTLE) != 0 {
        return Err(ArgError(format!(
            "the packed check's flags {flags} are unknown"
        )));
    }
    // (a number past i64 is past every bound: read as i64::MAX)
    let signed = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let settling = flags & SETTLE != 0;
    let least = if settling { 0 } else { 1 };
    let cost = within(
        signed(r.number(8, "the cost")?),
        "the cost",
        least,
        MAX_COST,
    )?;
    let settle = if settling {
        let at = signed(r.number(8, "the reservation's time")?);
        let refund = signed(r.number(8, "the units given back")?);
        Some(Settle {
            at: within(at, "the reservation's time (ms)", 0, MAX_NOW)?,
            refund: within(refund, "the units given back", 0, MAX_COST)?,
        })
    } else {
        None
    };
    let now = match flags & NOW_GIVEN {
        0 => None,
        _ => Some(within(
            signed(r.number(8, "now (ms)")?),
            "now (ms)",
            0,
            MAX_NOW,
        )?),
    };
    let rules = r.rules("the rules", scratch)?;
    let mut tiers = Vec::new();
    while !r.done() {
        let len = r.number(2, "a tier's name")? as usize;
        let name = r.take(len, "a tier's name")?;
        tiers.push((name, r.rules("a tier", scratch)?));
    }
    Ok(CheckArgs {
        writing: flags & WRITING != 0 || settling,
        exact: flags & EXACT != 0,
        cost,
        settle,
        now,
        rules,
        tiers,
    })
}

/// Appends `reply` as one string to `out`.
pub fn pack_reply<'a, R: Reply<'a> + ?Sized>(reply: &R, out: &mut Vec<u8>) {
    reply.each(|item| match item {
        Item::Int(n) => {
            out.push(b'i');
            out.extend_from_slice(&n.to_be_bytes());
        }
        Item::Bytes(b) => {
            out.push(b's');
            out.extend_from_slice(&(b.len() as u32).to_be_bytes());
            out.extend_from_slice(b);
        }
    });
}

/// The items of a packed reply, or `None` when the bytes are not one.
pub fn unpack_reply(bytes: &[u8]) -> Option<Vec<Item<'_>>> {
    let mut r = Reader {
        bytes,
        at: 0,
        limit_bytes: 5,
    };
    let mut items = Vec::with_capacity(bytes.len() / 9);
    while !r.done() {
        let item = match r.take(1, "").ok()? {
            b"i" => Item::Int(r.number(8, "").ok()? as i64),
            b"s" => {
                let len = r.number(4, "").ok()? as usize;
                Item::Bytes(r.take(len, "").ok()?)
            }
            _ => return None,
        };
        items.push(item);
    }
    Some(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::parse_check;

    fn rules(pairs: &[(i64, i64)]) -> Rules {
        Rules::new(pairs)
    }

    #[test]
    fn a_packed_check_reads_as_the_scripts_arguments_do() {
        let (given, gold) = (rules(&[(5, 1000), (50, 60_000)]), rules(&[(9, 1000)]));
        let (w, g) = (given.encoded.clone(), gold.encoded.clone());
        let packed = pack_check(
            true,
            false,
            3,
            Some(1_700_000_000_000),
            &given,
            [(&b"gold"[..], &gold)].into_iter(),
        );
        // parsed in buffers kept from parse to parse: each as it reads alone
        let mut scratch = Scratch::default();
        let args = parse_packed(&packed, &mut scratch).unwrap();
        let legacy: Vec<Vec<u8>> = vec![
            b"c".to_vec(),
            b"3".to_vec(),
            b"1700000000000".to_vec(),
            b"2".to_vec(),
            w.clone(),
            b"5".to_vec(),
            b"50".to_vec(),
            b"1000".to_vec(),
            b"60000".to_vec(),
            b"gold".to_vec(),
            b"1".to_vec(),
            g.clone(),
            b"9".to_vec(),
            b"1000".to_vec(),
        ];
        let refs: Vec<&[u8]> = legacy.iter().map(Vec::as_slice).collect();
        let want = parse_check(&refs).unwrap();
        assert_eq!(format!("{args:?}"), format!("{want:?}"));
        scratch.keep_args(args);
        let peek = pack_check(
            false,
            false,
            1,
            None,
            &rules(&[(7, 1000)]),
            std::iter::empty(),
        );
        let args = parse_packed(&peek, &mut scratch).unwrap();
        assert!(!args.writing && args.now.is_none() && args.tiers.is_empty());
        assert_eq!(args.rules, rules(&[(7, 1000)]));
        scratch.keep_args(args);
        let again = parse_packed(&packed, &mut scratch).unwrap();
        assert_eq!(format!("{again:?}"), format!("{want:?}"));
        // the previous format, as older clients send it: limits of 4 bytes
        let mut older = vec![FORMAT_4_BYTE_LIMITS, WRITING, 0, 0, 0, 0, 0, 0, 0, 1, 1];
        older.extend_from_slice(&crate::layout::enc5(1000));
        older.extend_from_slice(&7u32.to_be_bytes());
        let args = parse_packed(&older, &mut scratch).unwrap();
        assert_eq!(args.rules, rules(&[(7, 1000)]));
        assert!(args.writing && !args.exact);
        // a limit past 4 bytes, and every entry kept
        let big = rules(&[((1 << 40) - 1, 1000)]);
        let exact = pack_check(true, true, 1, None, &big, std::iter::empty());
        let args = parse_packed(&exact, &mut scratch).unwrap();
        assert_eq!(args.rules, big);
        assert!(args.exact);
        // a cost past every limit, as the core sends it: taken (and denied)
        let past = pack_check(true, false, MAX_COST as u64, None, &big, std::iter::empty());
        assert_eq!(parse_packed(&past, &mut scratch).unwrap().cost, MAX_COST);
    }

    #[test]
    fn a_hostile_packed_check_is_named_never_a_panic() {
        let one = rules(&[(5, 1000)]);
        let good = pack_check(true, false, 1, None, &one, std::iter::empty());
        let with = |at: usize, byte: u8| {
            let mut b = good.clone();
            b[at] = byte;
            b
        };
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (Vec::new(), "ends before its format"),
            (with(0, 9), "format is 9"),
            (with(1, 0x80), "flags 128"),
            (with(9, 0), "the cost"),
            (with(10, 0), "number of rules"),
            (with(10, 3), "ends before the windows"),
            ([&good[..11], &[0; 5], &good[16..]].concat(), "a window"),
            (good[..18].to_vec(), "ends before the limits"),
            (
                [&good[..], &[0, 9, b'x']].concat(),
                "ends before a tier's name",
            ),
            (
                [&good[..], &[0, 1, b'x', 1]].concat(),
                "ends before the windows",
            ),
        ];
        for (bytes, want) in cases {
            let err = parse_packed(&bytes, &mut Scratch::default()).unwrap_err().0;
            assert!(err.contains(want), "{err} lacks {want}");
        }
        let mut zero_limit = good.clone();
        let end = zero_limit.len();
        zero_limit[end - 4..].copy_from_slice(&[0; 4]);
        assert!(parse_packed(&zero_limit, &mut Scratch::default())
            .unwrap_err()
            .0
            .contains("a limit"));
        let mut late = pack_check(true, false, 1, Some(0), &one, std::iter::empty());
        late[10..18].copy_from_slice(&u64::MAX.to_be_bytes());
        assert!(parse_packed(&late, &mut Scratch::default())
            .unwrap_err()
            .0
            .contains("now (ms)"));
        // every truncation of a valid check is an error, never a panic
        let tier = rules(&[(1, 1000)]);
        let full = pack_check(
            true,
            false,
            1,
            Some(5),
            &one,
            [(&b"t"[..], &tier)].into_iter(),
        );
        for cut in 0..full.len() {
            if cut != full.len() - 14 {
                assert!(
                    parse_packed(&full[..cut], &mut Scratch::default()).is_err(),
                    "cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn a_packed_reply_gives_back_its_items() {
        let items = vec![
            Item::Int(1_700_000_000_000),
            Item::Int(1),
            Item::Int(0),
            Item::Bytes(b"o5:1000"),
            Item::Int(-1),
        ];
        let mut packed = Vec::new();
        pack_reply(&items[..], &mut packed);
        assert_eq!(unpack_reply(&packed).unwrap(), items);
        assert_eq!(unpack_reply(b""), Some(Vec::new()));
        for bad in [&b"x"[..], b"i1234", b"s\0\0\0\x09abc"] {
            assert!(unpack_reply(bad).is_none(), "{bad:?}");
        }
    }
}
