//! A key's leases in Redis ([`crate::in_flight`]): a sorted set beside its
//! log (`<prefix>:{<tag>}:f`, lease ids scored by their lapse times), held
//! and checked with the rates by the hold script ([`HOLD_SCRIPT`]), released,
//! extended and listed by the leases script ([`LEASES_SCRIPT`]); on a
//! Redis with the module, by its twins `RATEKEEPER.HOLD` (the check's
//! arguments packed, as `RATEKEEPER.CHECK` takes them) and
//! `RATEKEEPER.LEASES`, which take the same keys and give the same replies
//! (a module without them sends the calls through the scripts).

use super::module::{HOLD_COMMAND, LEASES_COMMAND};
use super::wire::{check_args, parse_reply, Lua, Via};
use super::RedisStore;
use crate::controls::{Applied, DecidedBy};
use crate::decision::Observation;
use crate::error::{Error, Result};
use crate::in_flight::{Held, LeaseCall, LeasesSeen};
use crate::keys::{lease_key, log_key, record_key};
use crate::store::{Mode, Request};
use redis::Value;

/// The hold script: `check.lua` as a function, then `engine/lua/hold.lua`.
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
        parse_held(&reply)
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
        parse_held(&reply)
    }
}

/// The observation in the hold script's reply.
fn parse_hold(reply: &Value, request: &Request<'_>) -> Result<Observation> {
    let bad = || {
        Error::storage(format!(
            "unexpected reply from the ratekeeper hold script: {reply:?}"
        ))
    };
    let Value::Array(parts) = reply else {
        return Err(bad());
    };
    let int = |i: usize| match parts.get(i) {
        Some(Value::Int(n)) => Ok(*n),
        _ => Err(bad()),
    };
    let (live, taken, soonest, now) = (int(1)?, int(2)?, int(3)?, int(4)?);
    if live < 0 || now < 0 {
        return Err(bad());
    }
    let mut seen = match parts.first() {
        Some(Value::Int(0)) => Observation {
            now_ms: now as u64,
            allowed: true,
            rules: Vec::new(),
            decided_by: DecidedBy::Limited(Applied::Given),
            leases: None,
        },
        Some(check) => parse_reply(check, request)?,
        None => return Err(bad()),
    };
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

/// The leases in the leases script's reply: id, lapse time, ...
fn parse_held(reply: &Value) -> Result<Vec<Held>> {
    let bad = || {
        Error::storage(format!(
            "unexpected reply from the ratekeeper leases script: {reply:?}"
        ))
    };
    let Value::Array(items) = reply else {
        return Err(bad());
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
