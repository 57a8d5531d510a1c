//! A key's leases in Redis ([`crate::in_flight`]): a sorted set beside its
//! log (`<prefix>:{<tag>}:f`, lease ids scored by their lapse times), held
//! and checked with the rates by the hold script ([`HOLD_SCRIPT`]), released,
//! extended and listed by the leases script ([`LEASES_SCRIPT`]); on a
//! Redis with the module, by its twins `RATEKEEPER.HOLD` (the check's
//! arguments packed, as `RATEKEEPER.CHECK` takes them) and
//! `RATEKEEPER.LEASES`, which take the same keys and give the same replies
//! (a module without them sends the calls through the scripts).

use super::module::{HOLD_COMMAND, LEASES_COMMAND};
use super::wire::{check_args, observation, parse_reply, Lua, Via};
use super::RedisStore;
use crate::controls::{Applied, DecidedBy};
use crate::decision::Observation;
use crate::engine::command::Item;
use crate::engine::packed::unpack_reply;
use crate::error::{Error, Result};
use crate::in_flight::{Held, LeaseCall, LeasesSeen};
use crate::keys::{lease_key, log_key, record_key};
use crate::store::{Mode, Request};
use redis::Value;

/// The hold script: `bands.lua` and `log.lua`, then `engine/lua/hold.lua`.
pub const HOLD_SCRIPT: &str = ratekeeper_engine::lua::HOLD_SCRIPT;
/// The leases script (`engine/lua/leases.lua`).
pub const LEASES_SCRIPT: &str = ratekeeper_engine::lua::LEASES_SCRIPT;

/// The two lease scripts, run by their SHA-1.
pub(super) struct LeaseScripts {
    hold: Lua,
    calls: Lua,
}

impl Default for LeaseScripts {
    fn default() -> LeaseScripts {
        LeaseScripts {
            hold: Lua::new(HOLD_SCRIPT, Some(HOLD_COMMAND)),
            calls: Lua::new(LEASES_SCRIPT, Some(LEASES_COMMAND)),
        }
    }
}

impl RedisStore {
    /// The hold script's call for `r` (see `engine/lua/hold.lua`).
    fn hold_command(&self, r: &Request<'_>, id: &str, lease_ms: u64, via: Via) -> redis::Cmd {
        let leases = lease_key(&self.prefix, r.tag, r.scope);
        let log = log_key(&self.prefix, r.tag, r.scope);
        let record = record_key(&self.prefix, r.tag, "");
        let banned = record_key(&self.prefix, r.tag, r.scope);
        let rates = !r.rules.rules().is_empty();
        let keys: &[&[u8]] = match (rates, r.read_record, r.scope.is_empty()) {
            (false, _, _) => &[&leases],
            (true, false, _) => &[&leases, &log],
            (true, true, true) => &[&leases, &log, &record],
            (true, true, false) => &[&leases, &log, &record, &banned],
        };
        let mut cmd = self.leases.hold.command(via, keys);
        let taking = if r.mode == Mode::Check { "h" } else { "q" };
        cmd.arg(taking)
            .arg(r.rules.in_flight().unwrap_or(0))
            .arg(lease_ms)
            .arg(id);
        match r.now_ms {
            Some(now) => cmd.arg(now),
            None => cmd.arg(""),
        };
        if rates {
            check_args(&mut cmd, r, via);
        }
        cmd
    }

    /// The leases script's call.
    fn leases_command(
        &self,
        tag: &[u8],
        scope: &str,
        call: LeaseCall<'_>,
        now_ms: Option<u64>,
        via: Via,
    ) -> redis::Cmd {
        let key = lease_key(&self.prefix, tag, scope);
        let mut cmd = self.leases.calls.command(via, &[&key]);
        match call {
            LeaseCall::Release(id) => cmd.arg("r").arg(id).arg(0),
            LeaseCall::Extend(id, lease_ms) => cmd.arg("e").arg(id).arg(lease_ms),
            LeaseCall::List => cmd.arg("l").arg("").arg(0),
        };
        match now_ms {
            Some(now) => cmd.arg(now),
            None => cmd.arg(""),
        };
        cmd
    }

    /// See [`crate::store::LogStore::hold`].
    pub(super) fn hold_now(
        &self,
        request: &Request<'_>,
        id: &str,
        lease_ms: u64,
    ) -> Result<Observation> {
        let route = self.route(request);
        let reply: Value = self.script(route.as_deref(), |via| {
            self.hold_command(request, id, lease_ms, via)
        })?;
        parse_hold(&reply, request)
    }

    /// See [`crate::store::LogStore::leases`].
    pub(super) fn leases_now(
        &self,
        tag: &[u8],
        scope: &str,
        call: LeaseCall<'_>,
        now_ms: Option<u64>,
    ) -> Result<Vec<Held>> {
        let route = self.cluster.then(|| lease_key(&self.prefix, tag, scope));
        let reply: Value = self.script(route.as_deref(), |via| {
            self.leases_command(tag, scope, call, now_ms, via)
        })?;
        parse_held(&reply, call)
    }

    /// [`RedisStore::hold_now`], awaited.
    #[cfg(feature = "async")]
    pub(super) async fn hold_awaited(
        &self,
        request: &Request<'_>,
        id: &str,
        lease_ms: u64,
    ) -> Result<Observation> {
        let route = self.route(request);
        let reply = self
            .script_async(route.as_deref(), |via| {
                self.hold_command(request, id, lease_ms, via)
            })
            .await?;
        parse_hold(&reply, request)
    }

    /// [`RedisStore::leases_now`], awaited.
    #[cfg(feature = "async")]
    pub(super) async fn leases_awaited(
        &self,
        tag: &[u8],
        scope: &str,
        call: LeaseCall<'_>,
        now_ms: Option<u64>,
    ) -> Result<Vec<Held>> {
        let route = self.cluster.then(|| lease_key(&self.prefix, tag, scope));
        let reply = self
            .script_async(route.as_deref(), |via| {
                self.leases_command(tag, scope, call, now_ms, via)
            })
            .await?;
        parse_held(&reply, call)
    }
}

/// The observation in the hold script's reply: `{check's reply (0 with no
/// rates), live, taken, soonest, now}`, or, from the module to a packed
/// check, the check's reply and those four numbers packed into one string.
fn parse_hold(reply: &Value, request: &Request<'_>) -> Result<Observation> {
    let bad = || {
        Error::storage(format!(
            "unexpected reply from the ratekeeper hold script: {reply:?}"
        ))
    };
    let (seen, numbers) = match reply {
        Value::BulkString(packed) => {
            let items = unpack_reply(packed).ok_or_else(bad)?;
            let split = items.len().checked_sub(4).ok_or_else(bad)?;
            let mut numbers = [0; 4];
            for (n, item) in numbers.iter_mut().zip(&items[split..]) {
                let Item::Int(i) = item else {
                    return Err(bad());
                };
                *n = *i;
            }
            (Some(observation(&items[..split], request, bad)?), numbers)
        }
        Value::Array(parts) if parts.len() == 5 => {
            let mut numbers = [0; 4];
            for (n, part) in numbers.iter_mut().zip(&parts[1..]) {
                let Value::Int(i) = part else {
                    return Err(bad());
                };
                *n = *i;
            }
            let seen = match &parts[0] {
                Value::Int(0) => None,
                check => Some(parse_reply(check, request)?),
            };
            (seen, numbers)
        }
        _ => return Err(bad()),
    };
    let [live, taken, soonest, now] = numbers;
    if live < 0 || now < 0 {
        return Err(bad());
    }
    let mut seen = seen.unwrap_or(Observation {
        now_ms: now as u64,
        allowed: true,
        rules: Vec::new(),
        decided_by: DecidedBy::Limited(Applied::Given),
        leases: None,
    });
    if matches!(seen.decided_by, DecidedBy::Listed(..)) {
        return Ok(seen);
    }
    let room = (live as u64) < request.rules.in_flight().unwrap_or(0);
    seen.allowed &= room;
    seen.leases = Some(LeasesSeen {
        held: live as u64,
        soonest_lapse_ms: (soonest >= 0).then_some(soonest as u64),
        taken: taken == 1,
    });
    Ok(seen)
}

/// The leases in the leases script's reply to `call`: a release's or an
/// extension's lease with its lapse time (the reply's number; 0: it was
/// not held), or the live ones (id, lapse time, ...).
fn parse_held(reply: &Value, call: LeaseCall<'_>) -> Result<Vec<Held>> {
    let bad = || {
        Error::storage(format!(
            "unexpected reply from the ratekeeper leases script: {reply:?}"
        ))
    };
    let items = match (reply, call) {
        (Value::Int(lapse), LeaseCall::Release(id) | LeaseCall::Extend(id, _)) => {
            return match *lapse {
                0 => Ok(Vec::new()),
                lapse if lapse > 0 => Ok(vec![(id.to_owned(), lapse as u64)]),
                _ => Err(bad()),
            };
        }
        // (a module of an earlier build answers a release as a list too)
        (Value::Array(items), _) => items,
        _ => return Err(bad()),
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => Ok(String::from_utf8_lossy(b).into_owned()),
        _ => Err(bad()),
    };
    items
        .chunks(2)
        .map(|pair| match pair {
            [id, lapse] => Ok((
                text(id)?,
                text(lapse)?.parse::<f64>().map_err(|_| bad())? as u64,
            )),
            _ => Err(bad()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::packed::pack_reply;
    use crate::rule::RuleSet;

    fn request(rules: &RuleSet) -> Request<'_> {
        Request {
            tag: b"k",
            scope: "",
            rules,
            tiers: &[],
            read_record: false,
            cost: 1,
            now_ms: None,
            mode: Mode::Check,
        }
    }

    /// The module's packed reply and the script's array say the same hold.
    #[test]
    fn a_hold_reads_alike_packed_and_as_an_array() {
        let rules = RuleSet::parse("2 concurrent; 10/minute").unwrap();
        let check = [
            Item::Int(1_000),
            Item::Int(1),
            Item::Int(0),
            Item::Bytes(b""),
            Item::Int(0),
            Item::Int(3),
            Item::Int(900),
            Item::Int(-1),
        ];
        let mut packed = Vec::new();
        let numbers = [
            Item::Int(1),
            Item::Int(1),
            Item::Int(61_000),
            Item::Int(1_000),
        ];
        pack_reply(&[&check[..], &numbers[..]].concat()[..], &mut packed);
        let array = Value::Array(vec![
            Value::Array(vec![
                Value::Int(1_000),
                Value::Int(1),
                Value::Int(0),
                Value::BulkString(Vec::new()),
                Value::Int(0),
                Value::Int(3),
                Value::Int(900),
                Value::Int(-1),
            ]),
            Value::Int(1),
            Value::Int(1),
            Value::Int(61_000),
            Value::Int(1_000),
        ]);
        let from_module = parse_hold(&Value::BulkString(packed), &request(&rules)).unwrap();
        let from_script = parse_hold(&array, &request(&rules)).unwrap();
        assert_eq!(from_module, from_script);
        let leases = from_module.leases.unwrap();
        assert!(leases.taken && leases.held == 1);
        assert_eq!(leases.soonest_lapse_ms, Some(61_000));
        assert_eq!(from_module.rules[0].count, 3);
        // a packed reply too short for the lease's numbers is an error, not a panic
        let mut short = Vec::new();
        pack_reply(&numbers[..3], &mut short);
        assert!(parse_hold(&Value::BulkString(short), &request(&rules)).is_err());
    }

    /// A release is answered with the lease's lapse time (0: not held), or,
    /// by a module of an earlier build, with the lease as a list.
    #[test]
    fn a_release_reads_as_a_number_or_as_a_list() {
        let release = LeaseCall::Release("5-ab");
        assert_eq!(
            parse_held(&Value::Int(61_000), release).unwrap(),
            [("5-ab".to_owned(), 61_000)]
        );
        assert!(parse_held(&Value::Int(0), release).unwrap().is_empty());
        assert!(parse_held(&Value::Int(-3), release).is_err());
        let listed = Value::Array(vec![
            Value::BulkString(b"5-ab".to_vec()),
            Value::BulkString(b"61000".to_vec()),
        ]);
        assert_eq!(
            parse_held(&listed, release).unwrap(),
            [("5-ab".to_owned(), 61_000)]
        );
        assert!(parse_held(&Value::Int(61_000), LeaseCall::List).is_err());
    }
}
