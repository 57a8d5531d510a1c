//! What a check and a change of the controls are on the wire: the scripts and the
//! module's commands (sent by SHA-1, by source after `NOSCRIPT`, or as the
//! module's command), a check's arguments, and its reply read back.

use super::failure::storage_error;
use super::module::Path;
use crate::controls::{Applied, DecidedBy, Listing};
use crate::decision::{Observation, RuleObservation};
use crate::engine::command::Item;
use crate::engine::packed::unpack_reply;
use crate::error::{Error, Result};
use crate::rule::RuleSet;
use crate::store::{Mode, Request};
use redis::{RedisError, Value};

/// A script and its SHA-1, run by EVALSHA and sent again on NOSCRIPT, and
/// the module's command that does what it does (when the module has one).
pub(super) struct Lua {
    pub(super) source: &'static str,
    pub(super) sha: String,
    pub(super) module: Option<&'static str>,
}

impl Lua {
    pub(super) fn new(source: &'static str, module: Option<&'static str>) -> Lua {
        Lua {
            source,
            sha: sha1_smol::Sha1::from(source).digest().to_string(),
            module,
        }
    }

    /// The call with these keys, as `via` says; the arguments follow, the
    /// same for all three.
    pub(super) fn command(&self, via: Via, keys: &[&[u8]]) -> redis::Cmd {
        // room for a check's arguments at once: growing a command's buffers
        // an argument at a time cost more than the rest of building it
        let mut cmd = redis::Cmd::with_capacity(COMMAND_ARGS, COMMAND_BYTES);
        cmd.arg(match via {
            Via::Sha => "EVALSHA",
            Via::Source => "EVAL",
            Via::Module => self.module.expect("a script the module does is sent so"),
        });
        match via {
            Via::Sha => cmd.arg(&self.sha),
            Via::Source => cmd.arg(self.source),
            Via::Module => &mut cmd,
        };
        cmd.arg(keys.len());
        for key in keys {
            cmd.arg(*key);
        }
        cmd
    }
}

/// The arguments and bytes a command is made with room for: a check of
/// four rules and two tiers through the script, every check through the
/// module (the script's source, after `NOSCRIPT`, grows it once).
const COMMAND_ARGS: usize = 32;
const COMMAND_BYTES: usize = 512;

/// How a script's call is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Via {
    /// EVALSHA: the script by its SHA-1.
    Sha,
    /// EVAL: the script's source (after NOSCRIPT).
    Source,
    /// The module's command (same keys, arguments and reply).
    Module,
}

impl Via {
    /// The way a call sent so is counted.
    pub(super) fn path(self) -> Path {
        match self {
            Via::Module => Path::Module,
            Via::Sha | Via::Source => Path::Script,
        }
    }
}

pub(super) fn is_noscript(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// Appends a check's arguments to `cmd`: as the script takes them (see
/// [`super::SCRIPT`]), or for the module packed into one
/// ([`crate::engine::packed`]).
pub(super) fn check_args(cmd: &mut redis::Cmd, r: &Request<'_>, via: Via) {
    if let Some(settle) = r.mode.settle() {
        return settle_args(cmd, r, settle, via);
    }
    let writing = r.mode == Mode::Check;
    if via == Via::Module {
        let tiers = r.tiers.iter().filter(|_| r.read_record);
        cmd.arg(crate::engine::packed::pack_check(
            writing,
            r.rules.exact(),
            r.log_cost() as u64,
            r.now_ms,
            r.rules.log_rules(),
            tiers.map(|(name, rules)| (name.as_bytes(), rules.log_rules())),
        ));
        return;
    }
    let mode = match (writing, r.rules.exact()) {
        (true, false) => "c",
        (false, false) => "p",
        (true, true) => "cx",
        (false, true) => "px",
    };
    cmd.arg(mode).arg(r.log_cost());
    match r.now_ms {
        Some(now) => cmd.arg(now),
        None => cmd.arg(""),
    };
    rule_args(cmd, r.rules);
    if r.read_record {
        for (name, rules) in r.tiers {
            cmd.arg(name.as_str());
            rule_args(cmd, rules);
        }
    }
}

/// A settle's arguments (see [`check_args`]): against the request's rules
/// alone (the ones its reservation was checked by), no record or tier read.
fn settle_args(
    cmd: &mut redis::Cmd,
    r: &Request<'_>,
    settle: crate::engine::log::Settle,
    via: Via,
) {
    if via == Via::Module {
        cmd.arg(crate::engine::packed::pack_settle(
            r.rules.exact(),
            r.log_cost() as u64,
            settle,
            r.now_ms,
            r.rules.log_rules(),
        ));
        return;
    }
    cmd.arg(if r.rules.exact() { "sx" } else { "s" })
        .arg(format!("{} {} {}", r.log_cost(), settle.at, settle.refund));
    match r.now_ms {
        Some(now) => cmd.arg(now),
        None => cmd.arg(""),
    };
    rule_args(cmd, r.rules);
}

/// A rule set as the check script takes it: the count, the windows as the
/// log's header stores them (5 bytes each, big-endian, so the script tells
/// whether a log fits these rules with one comparison), the limits, the windows.
pub(super) fn rule_args(cmd: &mut redis::Cmd, rules: &RuleSet) {
    cmd.arg(rules.rules().len())
        .arg(rules.log_rules().encoded.as_slice());
    for rule in rules.rules() {
        cmd.arg(rule.limit);
    }
    for rule in rules.rules() {
        cmd.arg(rule.window_ms);
    }
}

/// The replies of a pipeline of `count` checks, or, when the pipeline as a
/// whole failed (Redis unreachable, an error, replies missing), the outcome
/// each of its checks gets.
pub(super) fn pipeline_replies<T>(
    count: usize,
    answered: Result<std::result::Result<Vec<T>, RedisError>>,
) -> std::result::Result<Vec<T>, Vec<Result<Observation>>> {
    let failed = match answered {
        Ok(Ok(replies)) if replies.len() == count => return Ok(replies),
        Ok(Ok(replies)) => Error::storage(format!(
            "a pipeline of {count} checks got {} replies",
            replies.len()
        )),
        Ok(Err(e)) => storage_error(e),
        Err(e) => e,
    };
    Err((0..count).map(|_| Err(failed.clone())).collect())
}

/// The observation in a check's reply: the script's array (see
/// [`super::SCRIPT`]), or the same items packed into one string by the module.
pub(super) fn parse_reply(reply: &Value, request: &Request<'_>) -> Result<Observation> {
    let bad = || {
        Error::storage(format!(
            "unexpected reply from the ratekeeper script: {reply:?}"
        ))
    };
    let items: Vec<Item<'_>> = match reply {
        Value::Array(values) => values
            .iter()
            .map(|v| match v {
                Value::Int(i) => Ok(Item::Int(*i)),
                Value::BulkString(b) => Ok(Item::Bytes(b)),
                Value::SimpleString(s) => Ok(Item::Bytes(s.as_bytes())),
                _ => Err(bad()),
            })
            .collect::<Result<_>>()?,
        Value::BulkString(b) => unpack_reply(b).ok_or_else(bad)?,
        _ => return Err(bad()),
    };
    observation(&items, request, bad)
}

/// The observations in the meters script's reply: one check's reply per
/// request, in order.
pub(super) fn parse_together(reply: &Value, requests: &[Request<'_>]) -> Result<Vec<Observation>> {
    match reply {
        Value::Array(replies) if replies.len() == requests.len() => replies
            .iter()
            .zip(requests)
            .map(|(reply, request)| parse_reply(reply, request))
            .collect(),
        _ => Err(Error::storage(format!(
            "unexpected reply from the ratekeeper meters script: {reply:?}"
        ))),
    }
}

/// The observation the reply's items give; `bad` is the error when they are
/// not a check's reply.
pub(super) fn observation(
    reply: &[Item<'_>],
    request: &Request<'_>,
    bad: impl Fn() -> Error,
) -> Result<Observation> {
    let int = |item: &Item<'_>| match item {
        Item::Int(i) if *i >= -1 => Ok(*i),
        _ => Err(bad()),
    };
    let text = |item: &Item<'_>| match item {
        Item::Bytes(b) => Ok(String::from_utf8_lossy(b).into_owned()),
        Item::Int(_) => Err(bad()),
    };
    if reply.len() < 5 {
        return Err(bad());
    }
    let now_ms = int(&reply[0])? as u64;
    let allowed = int(&reply[1])? == 1;
    let detail = text(&reply[3])?;
    let decided_by = match int(&reply[2])? {
        0 => DecidedBy::Limited(Applied::from_detail(&detail)?),
        kind @ (1 | 2) => {
            let listing = Listing {
                until_ms: int(&reply[4])? as u64,
                reason: detail,
            };
            let list = if kind == 1 {
                crate::controls::List::Safe
            } else {
                crate::controls::List::Block
            };
            return Ok(Observation {
                now_ms,
                allowed,
                rules: Vec::new(),
                decided_by: DecidedBy::Listed(list, listing),
                leases: None,
            });
        }
        _ => return Err(bad()),
    };
    let expected = match &decided_by {
        DecidedBy::Limited(Applied::Override(rules)) => rules.rules().len(),
        DecidedBy::Limited(Applied::Tier(name)) => request
            .tiers
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, r)| r.rules().len()),
        _ => request.rules.rules().len(),
    };
    let numbers = reply[5..].iter().map(int).collect::<Result<Vec<i64>>>()?;
    if numbers.len() != 3 * expected {
        return Err(bad());
    }
    let at = |v: i64| (v >= 0).then_some(v as u64);
    Ok(Observation {
        now_ms,
        allowed,
        rules: numbers
            .chunks_exact(3)
            .map(|c| RuleObservation {
                count: c[0] as u64,
                oldest_ms: at(c[1]),
                free_at_ms: at(c[2]),
            })
            .collect(),
        decided_by,
        leases: None,
    })
}
