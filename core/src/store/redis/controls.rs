//! The control calls on Redis (a key's record, the shared hashes and their
//! version, fail2ban strikes, the clock), written once over [`Wire`]: the
//! blocking pool's calls ([`ControlStore`]) or the multiplexed connection's,
//! awaited ([`crate::store::AsyncControlStore`]).

use super::RedisStore;
use crate::controls::{version_key, Fail2Ban, Field, RawRecord, SharedHash, Strike};
use crate::error::{Error, Result};
use crate::keys::{record_key, strikes_key};
use crate::store::{BoxFuture, ControlStore, HashFields};
use redis::{Cmd, FromRedisValue, Value};

/// How a control call reaches Redis: a command, or the record script's call
/// (the module's command where this process uses it) on `key` with `args`.
pub(super) trait Wire: Sync {
    /// The store the calls go to.
    fn store(&self) -> &RedisStore;

    /// A command's reply, or the storage error it met.
    fn query<'a>(&'a self, cmd: &'a Cmd) -> BoxFuture<'a, Result<Value>>;

    /// The record script's reply to `args` on `key`.
    fn record_script<'a>(
        &'a self,
        key: &'a [u8],
        args: &'a [Vec<u8>],
    ) -> BoxFuture<'a, Result<Value>>;
}

/// The blocking calls, whose futures are ready when made.
pub(super) struct Blocking<'s>(pub(super) &'s RedisStore);

impl Wire for Blocking<'_> {
    fn store(&self) -> &RedisStore {
        self.0
    }

    fn query<'a>(&'a self, cmd: &'a Cmd) -> BoxFuture<'a, Result<Value>> {
        Box::pin(std::future::ready(self.0.query(cmd)))
    }

    fn record_script<'a>(
        &'a self,
        key: &'a [u8],
        args: &'a [Vec<u8>],
    ) -> BoxFuture<'a, Result<Value>> {
        let store = self.0;
        Box::pin(std::future::ready(
            store.script(Some(key), |via| store.record_call(via, key, args)),
        ))
    }
}

impl RedisStore {
    /// The record script's call on `key` with `args`, as `via` says.
    pub(super) fn record_call(&self, via: super::wire::Via, key: &[u8], args: &[Vec<u8>]) -> Cmd {
        let mut cmd = self.record.command(via, &[key]);
        for arg in args {
            cmd.arg(arg.as_slice());
        }
        cmd
    }
}

fn read<T: FromRedisValue>(value: Value, what: &str) -> Result<T> {
    redis::from_redis_value(value)
        .map_err(|e| Error::storage(format!("unexpected reply to {what} from Redis: {e}")))
}

/// The store's clock, in ms since the epoch (`TIME`).
pub(super) async fn clock_ms(wire: &dyn Wire) -> Result<u64> {
    let (secs, micros): (u64, u64) = read(wire.query(&redis::cmd("TIME")).await?, "TIME")?;
    Ok(secs * 1000 + micros / 1000)
}

/// [`ControlStore::record`].
pub(super) async fn record(wire: &dyn Wire, tag: &[u8], scope: &str) -> Result<RawRecord> {
    let mut cmd = redis::cmd("HMGET");
    cmd.arg(record_key(&wire.store().prefix, tag, scope));
    for field in Field::ALL {
        cmd.arg(field.code());
    }
    let values: Vec<Option<String>> = read(wire.query(&cmd).await?, "HMGET")?;
    let mut raw = RawRecord::default();
    for (slot, value) in raw.iter_mut().zip(values) {
        *slot = value;
    }
    Ok(raw)
}

/// [`ControlStore::set_record`].
pub(super) async fn set_record(
    wire: &dyn Wire,
    tag: &[u8],
    scope: &str,
    field: Field,
    value: Option<&str>,
    now_ms: u64,
) -> Result<()> {
    let key = record_key(&wire.store().prefix, tag, scope);
    let mut args = vec![
        b"set".to_vec(),
        now_ms.to_string().into_bytes(),
        field.code().as_bytes().to_vec(),
    ];
    if let Some(value) = value {
        args.push(value.as_bytes().to_vec());
    }
    read::<i64>(wire.record_script(&key, &args).await?, "the record script")?;
    Ok(())
}

/// [`ControlStore::shared`].
pub(super) async fn shared(wire: &dyn Wire, hash: SharedHash) -> Result<HashFields> {
    let cmd = redis::cmd("HGETALL")
        .arg(hash.key(&wire.store().prefix))
        .clone();
    read(wire.query(&cmd).await?, "HGETALL")
}

/// [`ControlStore::set_shared`].
pub(super) async fn set_shared(
    wire: &dyn Wire,
    hash: SharedHash,
    field: &[u8],
    value: Option<&[u8]>,
) -> Result<bool> {
    let prefix = &wire.store().prefix;
    let key = hash.key(prefix);
    let existed = match value {
        Some(value) => {
            let cmd = redis::cmd("HSET").arg(&key).arg(field).arg(value).clone();
            read::<i64>(wire.query(&cmd).await?, "HSET")? == 0
        }
        None => {
            let cmd = redis::cmd("HDEL").arg(&key).arg(field).clone();
            read::<i64>(wire.query(&cmd).await?, "HDEL")? == 1
        }
    };
    if hash.held_in_process() {
        let cmd = redis::cmd("INCR").arg(version_key(prefix)).clone();
        read::<i64>(wire.query(&cmd).await?, "INCR")?;
    }
    Ok(existed)
}

/// [`ControlStore::controls_version`].
pub(super) async fn controls_version(wire: &dyn Wire) -> Result<u64> {
    let cmd = redis::cmd("GET")
        .arg(version_key(&wire.store().prefix))
        .clone();
    let version: Option<u64> = read(wire.query(&cmd).await?, "GET")?;
    Ok(version.unwrap_or(0))
}

/// [`ControlStore::strike`].
pub(super) async fn strike(
    wire: &dyn Wire,
    tag: &[u8],
    rule: &Fail2Ban,
    now_ms: Option<u64>,
) -> Result<Strike> {
    let key = strikes_key(&wire.store().prefix, tag, &rule.name);
    let args = [
        b"strike".to_vec(),
        now_ms
            .map(|now| now.to_string())
            .unwrap_or_default()
            .into_bytes(),
        rule.maxretry.to_string().into_bytes(),
        rule.findtime_ms.to_string().into_bytes(),
    ];
    let (now, strikes, banned): (u64, u64, i64) =
        read(wire.record_script(&key, &args).await?, "the record script")?;
    let banned = banned == 1;
    Ok(Strike {
        strikes,
        banned,
        until_ms: banned.then_some(now + rule.bantime_ms),
    })
}

/// The audit trail's list: `<prefix>:audit`.
fn audit_key(prefix: &str) -> Vec<u8> {
    format!("{prefix}:audit").into_bytes()
}

/// [`ControlStore::push_change`]: the change at the head of the list, which
/// is cut to its newest `keep`.
pub(super) async fn push_change(wire: &dyn Wire, change: &[u8], keep: usize) -> Result<()> {
    let key = audit_key(&wire.store().prefix);
    let push = redis::cmd("LPUSH").arg(&key).arg(change).clone();
    read::<i64>(wire.query(&push).await?, "LPUSH")?;
    let trim = redis::cmd("LTRIM")
        .arg(&key)
        .arg(0)
        .arg(keep.saturating_sub(1))
        .clone();
    read::<Value>(wire.query(&trim).await?, "LTRIM")?;
    Ok(())
}

/// [`ControlStore::changes`].
pub(super) async fn changes(wire: &dyn Wire, limit: usize) -> Result<Vec<Vec<u8>>> {
    let cmd = redis::cmd("LRANGE")
        .arg(audit_key(&wire.store().prefix))
        .arg(0)
        .arg(limit.saturating_sub(1))
        .clone();
    read(wire.query(&cmd).await?, "LRANGE")
}

/// A minute's record of denials: `<prefix>:denials:<minute ms>`.
fn denials_key(prefix: &str, minute_ms: u64) -> Vec<u8> {
    format!("{prefix}:denials:{minute_ms}").into_bytes()
}

/// [`ControlStore::put_denials`]: the process's field of the minute's hash,
/// which expires `ttl_s` after its last write.
pub(super) async fn put_denials(
    wire: &dyn Wire,
    minute_ms: u64,
    process: u64,
    tally: &[u8],
    ttl_s: u64,
) -> Result<()> {
    let key = denials_key(&wire.store().prefix, minute_ms);
    let set = redis::cmd("HSET").arg(&key).arg(process).arg(tally).clone();
    read::<i64>(wire.query(&set).await?, "HSET")?;
    let expire = redis::cmd("EXPIRE").arg(&key).arg(ttl_s).clone();
    read::<i64>(wire.query(&expire).await?, "EXPIRE")?;
    Ok(())
}

/// [`ControlStore::denials`].
pub(super) async fn denials(wire: &dyn Wire, minutes: &[u64]) -> Result<Vec<Vec<Vec<u8>>>> {
    let mut out = Vec::with_capacity(minutes.len());
    for &minute_ms in minutes {
        let cmd = redis::cmd("HVALS")
            .arg(denials_key(&wire.store().prefix, minute_ms))
            .clone();
        out.push(read(wire.query(&cmd).await?, "HVALS")?);
    }
    Ok(out)
}

impl ControlStore for RedisStore {
    fn record(&self, tag: &[u8], scope: &str) -> Result<RawRecord> {
        crate::store::in_place(record(&Blocking(self), tag, scope))
    }

    fn set_record(
        &self,
        tag: &[u8],
        scope: &str,
        field: Field,
        value: Option<&str>,
        now_ms: u64,
    ) -> Result<()> {
        crate::store::in_place(set_record(
            &Blocking(self),
            tag,
            scope,
            field,
            value,
            now_ms,
        ))
    }

    fn shared(&self, hash: SharedHash) -> Result<HashFields> {
        crate::store::in_place(shared(&Blocking(self), hash))
    }

    fn set_shared(&self, hash: SharedHash, field: &[u8], value: Option<&[u8]>) -> Result<bool> {
        crate::store::in_place(set_shared(&Blocking(self), hash, field, value))
    }

    fn controls_version(&self) -> Result<u64> {
        crate::store::in_place(controls_version(&Blocking(self)))
    }

    fn push_change(&self, change: &[u8], keep: usize) -> Result<()> {
        crate::store::in_place(push_change(&Blocking(self), change, keep))
    }

    fn changes(&self, limit: usize) -> Result<Vec<Vec<u8>>> {
        crate::store::in_place(changes(&Blocking(self), limit))
    }

    fn put_denials(&self, minute_ms: u64, process: u64, tally: &[u8], ttl_s: u64) -> Result<()> {
        let wire = Blocking(self);
        crate::store::in_place(put_denials(&wire, minute_ms, process, tally, ttl_s))
    }

    fn denials(&self, minutes: &[u64]) -> Result<Vec<Vec<Vec<u8>>>> {
        crate::store::in_place(denials(&Blocking(self), minutes))
    }

    fn strike(&self, tag: &[u8], rule: &Fail2Ban, now_ms: Option<u64>) -> Result<Strike> {
        crate::store::in_place(strike(&Blocking(self), tag, rule, now_ms))
    }
}
