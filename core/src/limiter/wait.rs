//! Waiting for a slot: "let me through as soon as I may". A check is
//! retried after exactly its `retry_after`, plus a little jitter so that
//! waiters do not all come back at the same instant, until it is admitted
//! or the next wait would end past the deadline.
//!
//! There is no queue: whoever checks first after a unit leaves the window
//! gets the slot, so waiters are served about in the order their waits end,
//! not strictly first come, first served.

use super::{CheckOptions, Limiter, Reservation};
use crate::decision::Decision;
use crate::error::{Error, Result};
use std::cell::Cell;
use std::time::{Duration, Instant};

/// How a wait for a slot ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// The check was admitted (and logged).
    Admitted(Decision),
    /// The next wait would have ended past the deadline: the last denial.
    TimedOut(Decision),
    /// The cost exceeds a limit and can never pass: the denial, at once.
    Never(Decision),
}

impl Acquired {
    /// Why there is no slot (what a binding's `RateLimitExceeded` says), or
    /// `None` when the check was admitted.
    pub fn refusal(&self) -> Option<String> {
        match self {
            Acquired::Admitted(_) => None,
            Acquired::TimedOut(decision) => Some(format!(
                "rate limited: no slot within the timeout (the next in {} s)",
                crate::time::seconds(decision.retry_after_ms.unwrap_or(0))
            )),
            Acquired::Never(_) => {
                Some("rate limited: the cost exceeds a limit and can never pass".to_owned())
            }
        }
    }

    /// The last decision: the admitting one, or the last denial.
    pub fn decision(self) -> Decision {
        match self {
            Acquired::Admitted(d) | Acquired::TimedOut(d) | Acquired::Never(d) => d,
        }
    }
}

/// The most jitter added to a wait.
pub const MAX_JITTER: Duration = Duration::from_millis(25);

thread_local! {
    static SEED: Cell<u64> = const { Cell::new(0) };
}

/// A pseudo-random number for the jitter (xorshift, seeded per thread).
pub(super) fn random() -> u64 {
    SEED.with(|seed| {
        let mut x = seed.get();
        if x == 0 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64);
            let here = &x as *const u64 as u64;
            x = (nanos ^ here.rotate_left(17)) | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        seed.set(x);
        x
    })
}

/// The pause before checking again after a denial with `retry_after_ms`:
/// that wait, 1 ms (the window's edge is exclusive) and a jitter of up to a
/// tenth of the wait, at most [`MAX_JITTER`].
pub fn pause(retry_after_ms: u64) -> Duration {
    let spread = (retry_after_ms / 10).min(MAX_JITTER.as_millis() as u64);
    let jitter = if spread == 0 {
        0
    } else {
        random() % (spread + 1)
    };
    Duration::from_millis(retry_after_ms + 1 + jitter)
}

/// Checks the timeout of a wait: seconds, from 0, or `None` for no limit.
pub fn check_timeout(timeout: Option<f64>) -> Result<Option<Duration>> {
    match timeout {
        None => Ok(None),
        Some(t) if (0.0..=1e9).contains(&t) => Ok(Some(Duration::from_secs_f64(t))),
        Some(t) => Err(Error::config(format!(
            "invalid timeout {}: give seconds, from 0, or none to wait as long as it takes",
            crate::error::shown(t)
        ))),
    }
}

/// What to do after a check made while waiting since `started`.
enum Next {
    Done(Acquired),
    Sleep(Duration),
}

/// (`most`: the longest pause before trying again, for a wait that may end
/// before its `retry_after`, as a hold's does when a slot is released.)
fn next(decision: Decision, started: Instant, timeout: Option<Duration>, most: Duration) -> Next {
    if decision.allowed() {
        return Next::Done(Acquired::Admitted(decision));
    }
    let Some(wait_ms) = decision.retry_after_ms else {
        return Next::Done(Acquired::Never(decision));
    };
    let pause = pause(wait_ms).min(most);
    match timeout {
        Some(limit) if started.elapsed() + pause > limit => {
            Next::Done(Acquired::TimedOut(decision))
        }
        _ => Next::Sleep(pause),
    }
}

impl Limiter {
    /// Waits until a check of `key` as `options` say (its `now` must be
    /// `None`: the wait is on the real clock) is admitted, sleeping each
    /// denial's exact `retry_after` (with a little jitter), or until the next
    /// wait would end past `timeout`. The caller's thread sleeps (bindings
    /// release the GIL or GVL around it).
    pub fn acquire(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
        timeout: Option<Duration>,
    ) -> Result<Acquired> {
        self.acquire_pausing(key, options, timeout, &mut |pause| {
            std::thread::sleep(pause);
            Ok(())
        })
    }

    /// [`Limiter::acquire`], each wait made by `pause` (a binding sleeps in
    /// slices, to hear Ctrl-C between them; its error ends the wait).
    pub fn acquire_pausing(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
        timeout: Option<Duration>,
        pause: &mut dyn FnMut(Duration) -> Result<()>,
    ) -> Result<Acquired> {
        let attempt = &mut || Ok((self.check_with(key, options)?, ()));
        Ok(self.waiting(options, timeout, pause, attempt)?.0)
    }

    /// A reservation ([`Limiter::reserve`]) made as [`Limiter::acquire`]
    /// makes a check: tried again after each refusal's `retry_after` until
    /// admitted or the next wait would end past `timeout`; how the wait
    /// ended, and the last reservation (refused, when it did not end
    /// admitted).
    pub fn reserve_pausing(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
        timeout: Option<Duration>,
        pause: &mut dyn FnMut(Duration) -> Result<()>,
    ) -> Result<(Acquired, Reservation)> {
        let attempt = &mut || {
            let reservation = self.reserve(key, options)?;
            Ok((reservation.decision.clone(), reservation))
        };
        self.waiting(options, timeout, pause, attempt)
    }

    /// The wait of [`Limiter::acquire_pausing`] and
    /// [`Limiter::reserve_pausing`]: `attempt` made until its decision admits
    /// or the wait ends; how it ended, and what the last attempt made.
    fn waiting<T>(
        &self,
        options: &CheckOptions<'_>,
        timeout: Option<Duration>,
        pause: &mut dyn FnMut(Duration) -> Result<()>,
        attempt: &mut dyn FnMut() -> Result<(Decision, T)>,
    ) -> Result<(Acquired, T)> {
        self.waiting_bounded(options, timeout, Duration::MAX, pause, attempt)
    }

    /// [`Limiter::waiting`], each pause at most `most` long (a hold's).
    pub(crate) fn waiting_bounded<T>(
        &self,
        options: &CheckOptions<'_>,
        timeout: Option<Duration>,
        most: Duration,
        pause: &mut dyn FnMut(Duration) -> Result<()>,
        attempt: &mut dyn FnMut() -> Result<(Decision, T)>,
    ) -> Result<(Acquired, T)> {
        refuse_now(options)?;
        let started = Instant::now();
        loop {
            let (decision, made) = attempt()?;
            if self.warden.clock.frozen().is_some() {
                return Ok((once(decision), made));
            }
            match next(decision, started, timeout, most) {
                Next::Done(acquired) => return Ok((acquired, made)),
                Next::Sleep(wait) => pause(wait)?,
            }
        }
    }

    /// [`Limiter::acquire`], awaited: the waits are timers, not sleeping threads.
    #[cfg(feature = "async")]
    pub async fn acquire_async(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
        timeout: Option<Duration>,
    ) -> Result<Acquired> {
        let attempt = || async { Ok((self.check_async(key, options).await?, ())) };
        Ok(self.waiting_async(options, timeout, attempt).await?.0)
    }

    /// [`Limiter::reserve_pausing`], awaited.
    #[cfg(feature = "async")]
    pub async fn reserve_waiting_async(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
        timeout: Option<Duration>,
    ) -> Result<(Acquired, Reservation)> {
        let attempt = || async {
            let reservation = self.reserve_async(key, options).await?;
            Ok((reservation.decision.clone(), reservation))
        };
        self.waiting_async(options, timeout, attempt).await
    }

    /// [`Limiter::waiting`], awaited: the waits are timers.
    #[cfg(feature = "async")]
    async fn waiting_async<T, F, Made>(
        &self,
        options: &CheckOptions<'_>,
        timeout: Option<Duration>,
        attempt: F,
    ) -> Result<(Acquired, T)>
    where
        F: FnMut() -> Made,
        Made: std::future::Future<Output = Result<(Decision, T)>>,
    {
        let sleep = |pause: Duration| tokio::time::sleep(pause);
        self.waiting_bounded_async(options, timeout, Duration::MAX, sleep, attempt)
            .await
    }

    /// [`Limiter::waiting_bounded`], awaited: each pause made by `sleep`.
    #[cfg(feature = "async")]
    pub(crate) async fn waiting_bounded_async<T, F, Made, S, Slept>(
        &self,
        options: &CheckOptions<'_>,
        timeout: Option<Duration>,
        most: Duration,
        sleep: S,
        mut attempt: F,
    ) -> Result<(Acquired, T)>
    where
        F: FnMut() -> Made,
        Made: std::future::Future<Output = Result<(Decision, T)>>,
        S: Fn(Duration) -> Slept,
        Slept: std::future::Future<Output = ()>,
    {
        refuse_now(options)?;
        let started = Instant::now();
        loop {
            let (decision, made) = attempt().await?;
            if self.warden.clock.frozen().is_some() {
                return Ok((once(decision), made));
            }
            match next(decision, started, timeout, most) {
                Next::Done(acquired) => return Ok((acquired, made)),
                Next::Sleep(pause) => sleep(pause).await,
            }
        }
    }
}

/// The outcome of one check when the clock is frozen (a test's): waiting
/// would never end, so a denial ends the wait at once.
fn once(decision: Decision) -> Acquired {
    match decision.retry_after_ms {
        _ if decision.allowed() => Acquired::Admitted(decision),
        None => Acquired::Never(decision),
        Some(_) => Acquired::TimedOut(decision),
    }
}

fn refuse_now(options: &CheckOptions<'_>) -> Result<()> {
    match options.now {
        None => Ok(()),
        Some(_) => Err(Error::config("a wait is on the real clock: give no now")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::OnError;
    use crate::rule::RuleSet;
    use crate::store::StoreOptions;

    #[test]
    fn pauses_are_the_wait_and_a_little_more() {
        for _ in 0..100 {
            let p = pause(200).as_millis() as u64;
            assert!((201..=221).contains(&p), "{p}");
            let long = pause(10_000).as_millis() as u64;
            assert!((10_001..=10_026).contains(&long), "{long}");
        }
        assert_eq!(pause(0), Duration::from_millis(1));
    }

    #[test]
    fn waits_for_the_slot_or_says_why_not() {
        let rules = RuleSet::parse("2/200ms").unwrap();
        let limiter =
            Limiter::open(rules, "memory://", &StoreOptions::default(), OnError::Allow).unwrap();
        let options = CheckOptions::default();
        let started = Instant::now();
        for _ in 0..5 {
            let got = limiter.acquire(b"k", &options, None).unwrap();
            assert!(matches!(got, Acquired::Admitted(_)));
        }
        // 5 units at 2 per 200 ms: two waits of about 200 ms
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(400), "{took:?}");
        limiter.check(b"t", 2, None).unwrap();
        let short = limiter.acquire(b"t", &options, Some(Duration::from_millis(10)));
        assert!(matches!(short, Ok(Acquired::TimedOut(_))));
        let huge = CheckOptions {
            cost: 3,
            ..CheckOptions::default()
        };
        assert!(matches!(
            limiter.acquire(b"k", &huge, None),
            Ok(Acquired::Never(_))
        ));
        let at = CheckOptions {
            now: Some(1.0),
            ..CheckOptions::default()
        };
        assert!(limiter.acquire(b"k", &at, None).is_err());
        assert!(check_timeout(Some(-1.0)).is_err());
        assert!(check_timeout(Some(f64::NAN)).is_err());
    }
}
