//! A key's sorted set through the module API (a key's leases: member ids
//! scored by the ms they lapse at), read and changed in place, far cheaper
//! than Redis's commands called from the module; what changes is sent to
//! replicas and the AOF as the commands the scripts run.

use super::{replicate, ApiError, Arg, Ctx, Key};
use redis_module::raw;
use std::os::raw::{c_char, c_int};

/// A Redis string made from bytes, freed when dropped.
struct Owned {
    ctx: Ctx,
    ptr: Arg,
}

impl Owned {
    fn new(ctx: Ctx, bytes: &[u8]) -> Result<Owned, ApiError> {
        let create = api!(RedisModule_CreateString);
        let ptr = unsafe { create(ctx, bytes.as_ptr().cast::<c_char>(), bytes.len()) };
        if ptr.is_null() {
            return Err(ApiError("a string could not be made"));
        }
        Ok(Owned { ctx, ptr })
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(free) = unsafe { raw::RedisModule_FreeString } {
            unsafe { free(self.ctx, self.ptr) };
        }
    }
}

/// Where a range of scores starts.
#[derive(Debug, Clone, Copy)]
pub enum ScoresFrom {
    /// Above this score (not at it).
    Above(f64),
    /// At this score or above.
    At(f64),
}

impl Key {
    /// The members scored from `from` to `upto`, lowest score first: each
    /// member's bytes and score. An empty key has none.
    pub fn scored(&self, from: ScoresFrom, upto: f64) -> Result<Vec<(Vec<u8>, f64)>, ApiError> {
        let mut out = Vec::new();
        self.each_scored(from, upto, |member, score| {
            out.push((super::bytes(member)?.to_vec(), score));
            Ok(())
        })?;
        Ok(out)
    }

    /// How many members are scored above `after`, and the lowest such score.
    pub fn count_above(&self, after: f64) -> Result<(i64, Option<f64>), ApiError> {
        let (mut count, mut lowest) = (0, None);
        self.each_scored(ScoresFrom::Above(after), f64::INFINITY, |_, score| {
            count += 1;
            lowest.get_or_insert(score);
            Ok(())
        })?;
        Ok((count, lowest))
    }

    /// Calls `each` with every member (a string Redis frees after the
    /// call) scored from `from` to `upto`, and its score, lowest first.
    fn each_scored(
        &self,
        from: ScoresFrom,
        upto: f64,
        mut each: impl FnMut(Arg, f64) -> Result<(), ApiError>,
    ) -> Result<(), ApiError> {
        if self.ptr.is_null() {
            return Ok(());
        }
        let first = api!(RedisModule_ZsetFirstInScoreRange);
        let current = api!(RedisModule_ZsetRangeCurrentElement);
        let next = api!(RedisModule_ZsetRangeNext);
        let ended = api!(RedisModule_ZsetRangeEndReached);
        let stop = api!(RedisModule_ZsetRangeStop);
        let free = api!(RedisModule_FreeString);
        let (min, minex) = match from {
            ScoresFrom::Above(after) => (after, 1),
            ScoresFrom::At(at) => (at, 0),
        };
        if unsafe { first(self.ptr, min, upto, minex as c_int, 0) } != raw::REDISMODULE_OK as c_int
        {
            return Ok(());
        }
        let mut outcome = Ok(());
        while outcome.is_ok() && unsafe { ended(self.ptr) } == 0 {
            let mut score = 0.0;
            let member = unsafe { current(self.ptr, &mut score) };
            if member.is_null() {
                break;
            }
            outcome = each(member, score);
            unsafe { free(self.ctx, member) };
            if unsafe { next(self.ptr) } == 0 {
                break;
            }
        }
        unsafe { stop(self.ptr) };
        outcome
    }

    /// A member's score, when it is one.
    pub fn score_of(&self, member: &[u8]) -> Result<Option<f64>, ApiError> {
        if self.ptr.is_null() {
            return Ok(None);
        }
        let score_of = api!(RedisModule_ZsetScore);
        let member = Owned::new(self.ctx, member)?;
        let mut score = 0.0;
        let found = unsafe { score_of(self.ptr, member.ptr, &mut score) };
        Ok((found == raw::REDISMODULE_OK as c_int).then_some(score))
    }

    /// Adds `member` with `score` (or sets its score), as `ZADD key score
    /// member` does on replicas and in the AOF.
    pub fn zadd(&mut self, score: i64, member: &[u8]) -> Result<(), ApiError> {
        let add = api!(RedisModule_ZsetAdd);
        let owned = Owned::new(self.ctx, member)?;
        if unsafe { add(self.ptr, score as f64, owned.ptr, std::ptr::null_mut()) }
            != raw::REDISMODULE_OK as c_int
        {
            return Err(ApiError("the sorted set could not take a member"));
        }
        replicate(self.ctx, |send| unsafe {
            send(
                self.ctx,
                c"ZADD".as_ptr(),
                c"slb".as_ptr(),
                self.name,
                score as std::os::raw::c_longlong,
                member.as_ptr().cast::<c_char>(),
                member.len(),
            )
        })
    }

    /// Removes `member`, as `ZREM key member` does on replicas and in the
    /// AOF (a sorted set left empty is deleted).
    pub fn zrem(&mut self, member: &[u8]) -> Result<(), ApiError> {
        let remove = api!(RedisModule_ZsetRem);
        let owned = Owned::new(self.ctx, member)?;
        let mut deleted: c_int = 0;
        unsafe { remove(self.ptr, owned.ptr, &mut deleted) };
        if deleted == 0 {
            return Ok(());
        }
        replicate(self.ctx, |send| unsafe {
            send(
                self.ctx,
                c"ZREM".as_ptr(),
                c"sb".as_ptr(),
                self.name,
                member.as_ptr().cast::<c_char>(),
                member.len(),
            )
        })
    }

    /// Removes the leases that lapsed by `upto`: the members scored from 0
    /// to `upto`, as `ZREMRANGEBYSCORE key 0 upto` does on replicas and in
    /// the AOF (when any were).
    pub fn zrem_lapsed(&mut self, upto: i64) -> Result<(), ApiError> {
        let lapsed = self.scored(ScoresFrom::At(0.0), upto as f64)?;
        if lapsed.is_empty() {
            return Ok(());
        }
        let remove = api!(RedisModule_ZsetRem);
        for (member, _) in &lapsed {
            let owned = Owned::new(self.ctx, member)?;
            unsafe { remove(self.ptr, owned.ptr, std::ptr::null_mut()) };
        }
        let upto = upto.to_string();
        replicate(self.ctx, |send| unsafe {
            send(
                self.ctx,
                c"ZREMRANGEBYSCORE".as_ptr(),
                c"scb".as_ptr(),
                self.name,
                c"0".as_ptr(),
                upto.as_ptr().cast::<c_char>(),
                upto.len(),
            )
        })
    }

    /// Makes the key live at least `ms` from `clock`: when it has less
    /// left, `ms` and a quarter more (so that a key held again soon keeps
    /// its expiry), as `PTTL` then `PEXPIRE` do in the scripts, sent as
    /// `PEXPIREAT`.
    pub fn live_at_least(&mut self, ms: i64, clock: i64) -> Result<(), ApiError> {
        let remaining = api!(RedisModule_GetExpire);
        let left = unsafe { remaining(self.ptr) };
        if left != raw::REDISMODULE_NO_EXPIRE as i64 && left >= ms {
            return Ok(());
        }
        let at = clock + ms + ms / 4;
        self.expire_at(at)?;
        super::replicate_pexpireat(self.ctx, self.name, at)
    }
}
