//! The few Redis module API calls the commands make, wrapped so that a
//! missing function is an error reply, never a panic, and keys are closed
//! when dropped.

use crate::replication;
use redis_module::raw;
use std::os::raw::{c_char, c_int};

pub(crate) use crate::Ctx;
/// A command argument.
pub type Arg = *mut raw::RedisModuleString;

/// Something the module API could not do; the reply says it.
#[derive(Debug)]
pub struct ApiError(pub &'static str);

/// A module API function, or the error that it is missing.
macro_rules! api {
    ($name:ident) => {
        // SAFETY: the pointers are set once by RedisModule_Init, before any command runs.
        match unsafe { raw::$name } {
            Some(f) => f,
            None => return Err(ApiError(concat!("this Redis lacks ", stringify!($name)))),
        }
    };
}

mod zset;
pub use zset::ScoresFrom;

/// The bytes of a Redis string; valid while the string is.
pub fn bytes<'a>(s: *mut raw::RedisModuleString) -> Result<&'a [u8], ApiError> {
    let ptr_len = api!(RedisModule_StringPtrLen);
    let mut len = 0usize;
    // SAFETY: Redis gives a pointer to `len` bytes owned by the string.
    let ptr = unsafe { ptr_len(s, &mut len) };
    if ptr.is_null() {
        return Ok(&[]);
    }
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// The server clock in ms.
pub fn clock_ms() -> Result<i64, ApiError> {
    let ms = api!(RedisModule_Milliseconds);
    Ok(unsafe { ms() })
}

/// What a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Nothing.
    Empty,
    /// A string.
    Text,
    /// A hash.
    Hash,
    /// A sorted set.
    Sorted,
    /// Anything else.
    Other,
}

/// An open key, closed when dropped. A key opened only for reading that
/// does not exist has no handle (Redis gives none) and reads as empty.
pub struct Key {
    ptr: *mut raw::RedisModuleKey,
    ctx: Ctx,
    name: Arg,
}

impl Key {
    /// Opens `name` for reading, or for writing too.
    pub fn open(ctx: Ctx, name: Arg, write: bool) -> Result<Key, ApiError> {
        let open = api!(RedisModule_OpenKey);
        let mode = raw::REDISMODULE_READ | if write { raw::REDISMODULE_WRITE } else { 0 };
        let ptr = unsafe { open(ctx, name, mode as c_int) };
        if ptr.is_null() && write {
            return Err(ApiError("the key could not be opened"));
        }
        Ok(Key { ptr, ctx, name })
    }

    /// What the key holds.
    pub fn kind(&self) -> Result<Kind, ApiError> {
        if self.ptr.is_null() {
            return Ok(Kind::Empty);
        }
        let key_type = api!(RedisModule_KeyType);
        Ok(match unsafe { key_type(self.ptr) } as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => Kind::Empty,
            raw::REDISMODULE_KEYTYPE_STRING => Kind::Text,
            raw::REDISMODULE_KEYTYPE_HASH => Kind::Hash,
            raw::REDISMODULE_KEYTYPE_ZSET => Kind::Sorted,
            _ => Kind::Other,
        })
    }

    /// The string's bytes, in place. The borrow keeps every method that
    /// changes the key (all take `&mut self`) away while the slice lives.
    pub fn bytes(&self) -> Result<&[u8], ApiError> {
        let (ptr, len) = self.dma(false)?;
        // SAFETY: Redis gives `len` bytes of the key's string, valid until the
        // key changes, which needs `&mut self`.
        Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
    }

    /// The string's bytes, in place, to write (the key must be open for writing).
    pub fn bytes_mut(&mut self) -> Result<&mut [u8], ApiError> {
        let (ptr, len) = self.dma(true)?;
        // SAFETY: as `bytes`, and the exclusive borrow makes this the only view.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
    }

    /// Where the string's bytes are and how many (a dangling pointer and 0
    /// for an empty key).
    fn dma(&self, write: bool) -> Result<(*mut u8, usize), ApiError> {
        let empty = (std::ptr::NonNull::<u8>::dangling().as_ptr(), 0);
        if self.ptr.is_null() {
            return Ok(empty);
        }
        let dma = api!(RedisModule_StringDMA);
        let mode = if write {
            raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        };
        let mut len = 0usize;
        let ptr = unsafe { dma(self.ptr, &mut len, mode as c_int) };
        if ptr.is_null() || len == 0 {
            return Ok(empty);
        }
        Ok((ptr.cast::<u8>(), len))
    }

    /// Makes the string `len` bytes long (padding with zeros).
    pub fn truncate(&mut self, len: usize) -> Result<(), ApiError> {
        let truncate = api!(RedisModule_StringTruncate);
        if unsafe { truncate(self.ptr, len) } != raw::REDISMODULE_OK as c_int {
            return Err(ApiError("the string could not be resized"));
        }
        Ok(())
    }

    /// Replaces the key's value with the string `value`.
    pub fn set(&mut self, value: &[u8]) -> Result<(), ApiError> {
        let create = api!(RedisModule_CreateString);
        let set = api!(RedisModule_StringSet);
        let free = api!(RedisModule_FreeString);
        let s = unsafe { create(self.ctx, value.as_ptr().cast::<c_char>(), value.len()) };
        let status = unsafe { set(self.ptr, s) };
        unsafe { free(self.ctx, s) };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(ApiError("the string could not be set"));
        }
        Ok(())
    }

    /// Makes the key expire at `at_ms` by the server clock.
    pub fn expire_at(&mut self, at_ms: i64) -> Result<(), ApiError> {
        let expire = api!(RedisModule_SetAbsExpire);
        if unsafe { expire(self.ptr, at_ms) } != raw::REDISMODULE_OK as c_int {
            return Err(ApiError("the key's expiry could not be set"));
        }
        Ok(())
    }

    /// The hash fields `s`, `b`, `t` and `o`, as owned strings (freed when dropped).
    pub fn record_fields(&self) -> Result<Fields, ApiError> {
        let hash_get = api!(RedisModule_HashGet);
        let mut out: [Arg; 4] = [std::ptr::null_mut(); 4];
        let [s, b, t, o] = &mut out;
        let status = unsafe {
            hash_get(
                self.ptr,
                raw::REDISMODULE_HASH_CFIELDS as c_int,
                c"s".as_ptr(),
                s as *mut Arg,
                c"b".as_ptr(),
                b as *mut Arg,
                c"t".as_ptr(),
                t as *mut Arg,
                c"o".as_ptr(),
                o as *mut Arg,
                std::ptr::null::<c_char>(),
            )
        };
        let fields = Fields {
            ctx: self.ctx,
            values: out,
        };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(ApiError("the record's fields could not be read"));
        }
        Ok(fields)
    }

    /// The key's name.
    pub fn name(&self) -> Arg {
        self.name
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if self.ptr.is_null() {
            return;
        }
        if let Some(close) = unsafe { raw::RedisModule_CloseKey } {
            unsafe { close(self.ptr) };
        }
    }
}

/// Hash fields read from a key, freed when dropped.
pub struct Fields {
    ctx: Ctx,
    values: [Arg; 4],
}

impl Fields {
    /// Field `i`'s bytes, when it is set.
    pub fn get(&self, i: usize) -> Result<Option<&[u8]>, ApiError> {
        let v = self.values[i];
        if v.is_null() {
            Ok(None)
        } else {
            bytes(v).map(Some)
        }
    }
}

impl Drop for Fields {
    fn drop(&mut self) {
        if let Some(free) = unsafe { raw::RedisModule_FreeString } {
            for v in self.values {
                if !v.is_null() {
                    unsafe { free(self.ctx, v) };
                }
            }
        }
    }
}

/// `RedisModule_Replicate`: a command by name, its arguments by a format.
type ReplicateFn = unsafe extern "C" fn(Ctx, *const c_char, *const c_char, ...) -> c_int;

/// Sends a write to replicas and the AOF through `send` (which calls
/// `RedisModule_Replicate`) while something receives replicated writes
/// ([`crate::replication`]); otherwise only counts it where Redis counts
/// writes, for `save` points (`RedisModule_ReplicateVerbatim`, which Redis
/// then drops, as it would the built command).
fn replicate(ctx: Ctx, send: impl FnOnce(ReplicateFn) -> c_int) -> Result<(), ApiError> {
    let status = if replication::received() {
        send(api!(RedisModule_Replicate))
    } else {
        let count = api!(RedisModule_ReplicateVerbatim);
        unsafe { count(ctx) }
    };
    if status == raw::REDISMODULE_OK as c_int {
        Ok(())
    } else {
        Err(ApiError(
            "the write could not be sent to replicas and the AOF",
        ))
    }
}

/// Sends `SETRANGE key at bytes` to replicas and the AOF.
pub fn replicate_setrange(ctx: Ctx, key: Arg, at: usize, value: &[u8]) -> Result<(), ApiError> {
    replicate(ctx, |send| unsafe {
        send(
            ctx,
            c"SETRANGE".as_ptr(),
            c"slb".as_ptr(),
            key,
            at as std::os::raw::c_longlong,
            value.as_ptr().cast::<c_char>(),
            value.len(),
        )
    })
}

/// Sends `SET key bytes PXAT at` to replicas and the AOF.
pub fn replicate_set(ctx: Ctx, key: Arg, value: &[u8], at_ms: i64) -> Result<(), ApiError> {
    replicate(ctx, |send| unsafe {
        send(
            ctx,
            c"SET".as_ptr(),
            c"sbcl".as_ptr(),
            key,
            value.as_ptr().cast::<c_char>(),
            value.len(),
            c"PXAT".as_ptr(),
            at_ms as std::os::raw::c_longlong,
        )
    })
}

/// Sends `PEXPIREAT key at` to replicas and the AOF.
pub fn replicate_pexpireat(ctx: Ctx, key: Arg, at_ms: i64) -> Result<(), ApiError> {
    replicate(ctx, |send| unsafe {
        send(
            ctx,
            c"PEXPIREAT".as_ptr(),
            c"sl".as_ptr(),
            key,
            at_ms as std::os::raw::c_longlong,
        )
    })
}

/// Reply building: an array, integers, bulk strings, an error.
pub mod reply {
    use super::{ApiError, Ctx};
    use redis_module::raw;
    use std::os::raw::c_char;

    /// An array of `len` elements follows.
    pub fn array(ctx: Ctx, len: usize) -> Result<(), ApiError> {
        let f = api!(RedisModule_ReplyWithArray);
        unsafe { f(ctx, len as std::os::raw::c_long) };
        Ok(())
    }

    /// An integer.
    pub fn int(ctx: Ctx, n: i64) -> Result<(), ApiError> {
        let f = api!(RedisModule_ReplyWithLongLong);
        unsafe { f(ctx, n) };
        Ok(())
    }

    /// A bulk string.
    pub fn bulk(ctx: Ctx, b: &[u8]) -> Result<(), ApiError> {
        let f = api!(RedisModule_ReplyWithStringBuffer);
        unsafe { f(ctx, b.as_ptr().cast::<c_char>(), b.len()) };
        Ok(())
    }

    /// An error reply: `text` starts with its code (ERR, WRONGTYPE).
    pub fn error(ctx: Ctx, text: &str) {
        let Some(f) = (unsafe { raw::RedisModule_ReplyWithError }) else {
            return;
        };
        let clean: Vec<u8> = text
            .bytes()
            .map(|b| {
                if b == b'\r' || b == b'\n' || b == 0 {
                    b' '
                } else {
                    b
                }
            })
            .chain([0])
            .collect();
        unsafe { f(ctx, clean.as_ptr().cast::<c_char>()) };
    }
}
