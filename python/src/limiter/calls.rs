//! The core calls `Limiter`'s blocking methods and their awaited twins make
//! (see `crate::twin`), each taken from its Python arguments once.

use crate::call::deliver;
use crate::convert;
use crate::errors::guard;
use crate::twin::Twin;
use crate::types::{Decision, Fail2Ban};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBool;
use ratekeeper_core as core;
use std::sync::{Arc, Mutex};

/// A decision as Python gets it (its outage warning logged).
fn decision(py: Python<'_>, inner: core::Decision) -> PyResult<Py<PyAny>> {
    Ok(Py::new(py, deliver(py, inner)?)?.into_any())
}

/// The arguments of one check by `limiter`, converted: `cost` an int, or
/// for a metered limiter a mapping of meter names to units.
pub(super) fn asked(
    py: Python<'_>,
    limiter: &core::Limiter,
    key: &Bound<'_, PyAny>,
    cost: Option<&Bound<'_, PyAny>>,
    now: Option<&Bound<'_, PyAny>>,
    tier: Option<String>,
    ip: Option<String>,
) -> PyResult<core::Asked> {
    let units = cost.map(convert::meter_units).transpose()?.flatten();
    let (cost, meter_costs) = match units {
        Some(units) => (1, Some(guard(py, || limiter.meter_costs(&units))?)),
        None => (convert::cost(py, cost)?, None),
    };
    Ok(core::Asked {
        key: convert::key_bytes(key)?.into_owned(),
        cost,
        now: convert::now(now)?,
        tier,
        ip,
        meter_costs,
    })
}

/// A check (logging on admission) or a peek (logging nothing).
pub(super) struct Checking {
    pub(super) asked: core::Asked,
    pub(super) logs: bool,
}

impl Twin for Checking {
    type On = Arc<core::Limiter>;
    type Out = core::Decision;
    fn waits(&self, on: &Self::On) -> bool {
        on.waits_on_io()
    }
    fn blocking(&self, on: &Self::On) -> core::Result<core::Decision> {
        let options = self.asked.options();
        if self.logs {
            on.check_with(&self.asked.key, &options)
        } else {
            on.peek_with(&self.asked.key, &options)
        }
    }
    async fn awaited(&self, on: &Self::On) -> core::Result<core::Decision> {
        let options = self.asked.options();
        if self.logs {
            on.check_async(&self.asked.key, &options).await
        } else {
            on.peek_async(&self.asked.key, &options).await
        }
    }
    fn deliver(&self, py: Python<'_>, _: &Self::On, out: core::Decision) -> PyResult<Py<PyAny>> {
        decision(py, out)
    }
}

/// A reservation: a check for an estimate, settled later; made at once, or
/// waited for (`Some(timeout)`) as `acquire` waits.
pub(super) struct Reserving {
    pub(super) asked: core::Asked,
    pub(super) waiting: Option<Option<std::time::Duration>>,
    /// The exception a signal handler raised while a thread slept.
    pub(super) interrupted: Mutex<Option<PyErr>>,
}

impl Reserving {
    pub(super) fn new(
        py: Python<'_>,
        asked: core::Asked,
        wait: bool,
        timeout: Option<f64>,
    ) -> PyResult<Reserving> {
        let timeout = guard(py, || core::limiter::wait::check_timeout(timeout))?;
        Ok(Reserving {
            asked,
            waiting: wait.then_some(timeout),
            interrupted: Mutex::new(None),
        })
    }
}

impl Twin for Reserving {
    type On = Arc<core::Limiter>;
    type Out = core::Reservation;
    fn waits(&self, on: &Self::On) -> bool {
        self.waiting.is_some() || on.waits_on_io()
    }
    fn blocking(&self, on: &Self::On) -> core::Result<core::Reservation> {
        let options = self.asked.options();
        match self.waiting {
            None => on.reserve(&self.asked.key, &options),
            Some(timeout) => {
                let pausing = &mut |wait| pause(wait, &self.interrupted);
                Ok(on
                    .reserve_pausing(&self.asked.key, &options, timeout, pausing)?
                    .1)
            }
        }
    }
    async fn awaited(&self, on: &Self::On) -> core::Result<core::Reservation> {
        let options = self.asked.options();
        match self.waiting {
            None => on.reserve_async(&self.asked.key, &options).await,
            Some(timeout) => Ok(on
                .reserve_waiting_async(&self.asked.key, &options, timeout)
                .await?
                .1),
        }
    }
    fn deliver(
        &self,
        py: Python<'_>,
        on: &Self::On,
        out: core::Reservation,
    ) -> PyResult<Py<PyAny>> {
        if let Some(warning) = &out.decision.warning {
            crate::call::log_warning(py, warning)?;
        }
        let made = crate::reservation::Reservation::wrap(on.clone(), out);
        Ok(Py::new(py, made)?.into_any())
    }
    fn failed(&self, _py: Python<'_>, err: PyErr) -> PyErr {
        interrupted_or(&self.interrupted, err)
    }
}

/// Sleeps `wait` in slices of at most 100 ms, checking for signals between
/// them; a signal handler's exception is kept in `interrupted` and ends the wait.
fn pause(wait: std::time::Duration, interrupted: &Mutex<Option<PyErr>>) -> core::Result<()> {
    let until = std::time::Instant::now() + wait;
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(std::time::Duration::from_millis(100)));
        if let Err(err) = Python::attach(|py| py.check_signals()) {
            *interrupted.lock().unwrap_or_else(|p| p.into_inner()) = Some(err);
            return Err(core::Error::storage("the wait was interrupted"));
        }
    }
}

/// The exception a signal handler raised during a wait, else `err`.
fn interrupted_or(interrupted: &Mutex<Option<PyErr>>, err: PyErr) -> PyErr {
    let raised = interrupted.lock().unwrap_or_else(|p| p.into_inner()).take();
    raised.unwrap_or(err)
}

/// One check of a batch: limiter, key, cost, tier.
pub(super) type Item = (Arc<core::Limiter>, Vec<u8>, u64, Option<String>);

/// Checks of several (limiter, key, cost, tier), in one round trip for the
/// limiters that share a store.
pub(super) struct Batch {
    pub(super) items: Vec<Item>,
    pub(super) ip: Option<String>,
    pub(super) now: Option<f64>,
}

impl Batch {
    fn items(&self) -> Vec<core::BatchItem<'_>> {
        self.items
            .iter()
            .map(|(limiter, key, cost, tier)| core::BatchItem {
                ip: self.ip.as_deref(),
                tier: tier.as_deref(),
                ..core::BatchItem::new(limiter, key, *cost)
            })
            .collect()
    }
}

impl Twin for Batch {
    type On = ();
    type Out = Vec<core::Decision>;
    fn waits(&self, _: &Self::On) -> bool {
        self.items.iter().any(|(limiter, ..)| limiter.waits_on_io())
    }
    fn blocking(&self, _: &Self::On) -> core::Result<Vec<core::Decision>> {
        core::check_batch(&self.items(), self.now)
    }
    async fn awaited(&self, _: &Self::On) -> core::Result<Vec<core::Decision>> {
        core::check_batch_async(&self.items(), self.now).await
    }
    fn deliver(
        &self,
        py: Python<'_>,
        _: &Self::On,
        out: Vec<core::Decision>,
    ) -> PyResult<Py<PyAny>> {
        let decisions: Vec<Decision> = out
            .into_iter()
            .map(|inner| deliver(py, inner))
            .collect::<PyResult<_>>()?;
        Ok(decisions.into_pyobject(py)?.into_any().unbind())
    }
}

/// Forgetting what a limiter logged for a key.
pub(super) struct Resetting {
    pub(super) key: Vec<u8>,
}

impl Twin for Resetting {
    type On = Arc<core::Limiter>;
    type Out = ();
    fn waits(&self, on: &Self::On) -> bool {
        on.waits_on_io()
    }
    fn blocking(&self, on: &Self::On) -> core::Result<()> {
        on.reset(&self.key)
    }
    async fn awaited(&self, on: &Self::On) -> core::Result<()> {
        on.reset_async(&self.key).await
    }
    fn deliver(&self, py: Python<'_>, _: &Self::On, _: ()) -> PyResult<Py<PyAny>> {
        Ok(py.None())
    }
}

/// How the address lists judge a client address.
pub(super) struct Screening {
    pub(super) ip: String,
}

impl Twin for Screening {
    type On = Arc<core::Limiter>;
    type Out = Option<core::Decision>;
    /// Only the process's first read of the lists (or the first after a
    /// change it made) waits on the store.
    fn waits(&self, on: &Self::On) -> bool {
        on.waits_on_io() && !on.controls_ready()
    }
    fn blocking(&self, on: &Self::On) -> core::Result<Option<core::Decision>> {
        Ok(on.screen(&self.ip))
    }
    async fn awaited(&self, on: &Self::On) -> core::Result<Option<core::Decision>> {
        Ok(on.screen_async(&self.ip).await)
    }
    fn deliver(
        &self,
        py: Python<'_>,
        _: &Self::On,
        out: Option<core::Decision>,
    ) -> PyResult<Py<PyAny>> {
        out.map_or_else(|| Ok(py.None()), |inner| decision(py, inner))
    }
}

/// One fail2ban strike against a key or a client address.
pub(super) struct Penalizing {
    key: Option<Vec<u8>>,
    ip: Option<String>,
    rule: core::Fail2Ban,
    now: Option<f64>,
}

impl Penalizing {
    /// The strike `penalize`'s arguments describe: a key or `ip` (one of
    /// them), the ban's parameters as `ban` or one by one (each not given
    /// taking its default), `now`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        py: Python<'_>,
        key: Option<&Bound<'_, PyAny>>,
        ip: Option<String>,
        ban: Option<PyRef<'_, Fail2Ban>>,
        maxretry: Option<i64>,
        findtime: Option<f64>,
        bantime: Option<f64>,
        name: Option<&str>,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Penalizing> {
        let key = key
            .map(|k| convert::key_bytes(k).map(|k| k.into_owned()))
            .transpose()?;
        let now = convert::now(now)?;
        let parts_given =
            maxretry.is_some() || findtime.is_some() || bantime.is_some() || name.is_some();
        let rule = match ban {
            Some(ban) if !parts_given => ban.inner.clone(),
            Some(_) => {
                return Err(PyTypeError::new_err(
                    "penalize takes ban= or maxretry/findtime/bantime/name, not both",
                ))
            }
            None => guard(py, || {
                core::Fail2Ban::given(name, maxretry, findtime, bantime)
            })?,
        };
        if key.is_some() == ip.is_some() {
            return Err(PyTypeError::new_err(
                "penalize takes a key or ip=, one of them",
            ));
        }
        Ok(Penalizing { key, ip, rule, now })
    }

    fn offender(&self) -> core::Offender<'_> {
        match (&self.key, &self.ip) {
            (Some(key), _) => core::Offender::Key(key),
            (None, ip) => core::Offender::Address(ip.as_deref().unwrap_or_default()),
        }
    }
}

impl Twin for Penalizing {
    type On = Arc<core::Limiter>;
    type Out = core::Strike;
    fn waits(&self, on: &Self::On) -> bool {
        on.waits_on_io()
    }
    fn blocking(&self, on: &Self::On) -> core::Result<core::Strike> {
        on.penalize(self.offender(), &self.rule, self.now)
    }
    async fn awaited(&self, on: &Self::On) -> core::Result<core::Strike> {
        on.penalize_async(self.offender(), &self.rule, self.now)
            .await
    }
    fn deliver(&self, py: Python<'_>, _: &Self::On, strike: core::Strike) -> PyResult<Py<PyAny>> {
        Ok(PyBool::new(py, strike.banned)
            .to_owned()
            .into_any()
            .unbind())
    }
}

/// Waiting until a check is admitted: a thread sleeps each denial's exact
/// wait in slices, hearing signals (Ctrl-C) between them; awaited, the
/// waits are timers on the runtime.
pub(super) struct Acquiring {
    asked: core::Asked,
    timeout: Option<std::time::Duration>,
    /// The exception a signal handler raised while a thread slept.
    interrupted: Mutex<Option<PyErr>>,
}

impl Acquiring {
    pub(super) fn new(
        py: Python<'_>,
        asked: core::Asked,
        timeout: Option<f64>,
    ) -> PyResult<Acquiring> {
        Ok(Acquiring {
            asked,
            timeout: guard(py, || core::limiter::wait::check_timeout(timeout))?,
            interrupted: Mutex::new(None),
        })
    }
}

impl Twin for Acquiring {
    type On = Arc<core::Limiter>;
    type Out = core::Acquired;
    fn waits(&self, _: &Self::On) -> bool {
        true
    }
    fn blocking(&self, on: &Self::On) -> core::Result<core::Acquired> {
        let options = self.asked.options();
        on.acquire_pausing(&self.asked.key, &options, self.timeout, &mut |wait| {
            pause(wait, &self.interrupted)
        })
    }
    async fn awaited(&self, on: &Self::On) -> core::Result<core::Acquired> {
        let options = self.asked.options();
        on.acquire_async(&self.asked.key, &options, self.timeout)
            .await
    }
    /// The admitting decision, or `RateLimitExceeded` with the last denial.
    fn deliver(
        &self,
        py: Python<'_>,
        _: &Self::On,
        acquired: core::Acquired,
    ) -> PyResult<Py<PyAny>> {
        let refusal = acquired.refusal();
        let decision = decision(py, acquired.decision())?;
        match refusal {
            None => Ok(decision),
            Some(why) => Err(crate::errors::rate_limit_exceeded(py, why, decision)),
        }
    }
    fn failed(&self, _py: Python<'_>, err: PyErr) -> PyErr {
        interrupted_or(&self.interrupted, err)
    }
}

/// A hold of a slot of an in-flight rule: taken at once, or waited for
/// (`Some(timeout)`) until a slot frees.
pub(super) struct Holding {
    pub(super) asked: core::Asked,
    pub(super) lease_ms: Option<u64>,
    pub(super) waiting: Option<Option<std::time::Duration>>,
    /// The exception a signal handler raised while a thread slept.
    pub(super) interrupted: Mutex<Option<PyErr>>,
}

impl Holding {
    pub(super) fn new(
        py: Python<'_>,
        asked: core::Asked,
        lease: Option<f64>,
        wait: bool,
        timeout: Option<f64>,
    ) -> PyResult<Holding> {
        let timeout = guard(py, || core::limiter::wait::check_timeout(timeout))?;
        let lease_ms = lease
            .map(|seconds| guard(py, || core::in_flight::lease_ms_from(seconds)))
            .transpose()?;
        Ok(Holding {
            asked,
            lease_ms,
            waiting: wait.then_some(timeout),
            interrupted: Mutex::new(None),
        })
    }
}

impl Twin for Holding {
    type On = Arc<core::Limiter>;
    type Out = core::Hold;
    fn waits(&self, on: &Self::On) -> bool {
        self.waiting.is_some() || on.waits_on_io()
    }
    fn blocking(&self, on: &Self::On) -> core::Result<core::Hold> {
        let options = self.asked.options();
        match self.waiting {
            None => on.hold(&self.asked.key, &options, self.lease_ms),
            Some(timeout) => {
                let pausing = &mut |wait| pause(wait, &self.interrupted);
                Ok(on
                    .hold_pausing(&self.asked.key, &options, self.lease_ms, timeout, pausing)?
                    .1)
            }
        }
    }
    async fn awaited(&self, on: &Self::On) -> core::Result<core::Hold> {
        let options = self.asked.options();
        match self.waiting {
            None => {
                on.hold_async(&self.asked.key, &options, self.lease_ms)
                    .await
            }
            Some(timeout) => Ok(on
                .hold_waiting_async(&self.asked.key, &options, self.lease_ms, timeout)
                .await?
                .1),
        }
    }
    fn deliver(&self, py: Python<'_>, on: &Self::On, out: core::Hold) -> PyResult<Py<PyAny>> {
        if let Some(warning) = &out.decision.warning {
            crate::call::log_warning(py, warning)?;
        }
        Ok(Py::new(py, crate::lease::Lease::wrap(on.clone(), out))?.into_any())
    }
    fn failed(&self, _py: Python<'_>, err: PyErr) -> PyErr {
        interrupted_or(&self.interrupted, err)
    }
}
