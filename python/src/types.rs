//! The value classes Python sees: `Rule`, `RuleState`, `Decision` and
//! `Fail2Ban`.

use crate::errors::{guard, to_py};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ratekeeper_core as core;
use ratekeeper_core::time::seconds;

/// One rule: at most `limit` units in any window of `window` seconds.
#[pyclass(frozen, eq, hash, module = "ratekeeper")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Rule {
    pub inner: core::Rule,
}

#[pymethods]
impl Rule {
    /// `Rule("20/minute")` or `Rule(20, 60)` (window in seconds).
    #[new]
    #[pyo3(signature = (limit, window = None))]
    fn new(py: Python<'_>, limit: &Bound<'_, PyAny>, window: Option<f64>) -> PyResult<Rule> {
        let inner = match window {
            None => {
                let text: String = limit.extract().map_err(|_| {
                    PyTypeError::new_err(
                        "Rule takes a str such as '20/minute', or (limit, window_seconds)",
                    )
                })?;
                core::rule::parse_rule(&text).map_err(|e| to_py(py, e))?
            }
            Some(window) => {
                if !limit.is_instance_of::<pyo3::types::PyInt>()
                    || limit.is_instance_of::<pyo3::types::PyBool>()
                {
                    return Err(PyTypeError::new_err(format!(
                        "limit must be an int, not {}",
                        limit.get_type().name()?
                    )));
                }
                core::Rule::from_seconds(limit.extract::<i128>().unwrap_or(i128::MAX), window)
                    .map_err(|e| to_py(py, e))?
            }
        };
        Ok(Rule { inner })
    }

    /// Units admitted per window.
    #[getter]
    fn limit(&self) -> u64 {
        self.inner.limit
    }

    /// The window in seconds.
    #[getter]
    fn window(&self) -> f64 {
        seconds(self.inner.window_ms)
    }

    /// The window's short name, as headers show it: `1s`, `5m`, `1d`, `500ms`.
    #[getter]
    fn window_name(&self) -> String {
        self.inner.window_name()
    }

    fn __str__(&self) -> String {
        self.inner.to_string()
    }

    fn __repr__(&self) -> String {
        format!("Rule('{}')", self.inner)
    }
}

/// The state of one rule after a check.
#[pyclass(frozen, module = "ratekeeper")]
pub struct RuleState {
    inner: core::RuleState,
}

#[pymethods]
impl RuleState {
    /// The rule's limit.
    #[getter]
    fn limit(&self) -> u64 {
        self.inner.limit
    }

    /// The rule's window in seconds.
    #[getter]
    fn window(&self) -> f64 {
        seconds(self.inner.window_ms)
    }

    /// Units left in the window after this check.
    #[getter]
    fn remaining(&self) -> u64 {
        self.inner.remaining
    }

    /// Units in use in the window (`limit - remaining`).
    #[getter]
    fn used(&self) -> u64 {
        self.inner.used()
    }

    /// Seconds until the oldest unit in the window leaves it (0 if none).
    #[getter]
    fn reset_after(&self) -> f64 {
        seconds(self.inner.reset_after_ms)
    }

    fn __repr__(&self) -> String {
        format!(
            "RuleState(rule='{}/{}', remaining={}, reset_after={:?})",
            self.inner.limit,
            self.inner.window_name(),
            self.inner.remaining,
            seconds(self.inner.reset_after_ms)
        )
    }
}

/// The answer to a check or a peek. `bool(decision)` is `decision.allowed`.
#[pyclass(frozen, module = "ratekeeper")]
pub struct Decision {
    pub inner: core::Decision,
}

#[pymethods]
impl Decision {
    /// Whether the check was admitted.
    #[getter]
    fn allowed(&self) -> bool {
        self.inner.allowed()
    }

    /// Seconds to wait before the same check would pass: 0.0 when admitted,
    /// None when the cost exceeds a limit and can never pass.
    #[getter]
    fn retry_after(&self) -> Option<f64> {
        self.inner.retry_after_ms.map(seconds)
    }

    /// The binding rule's limit (a rate's, or the in-flight rule's when
    /// it has fewer slots free).
    #[getter]
    fn limit(&self) -> u64 {
        self.inner.binding_state().limit
    }

    /// The binding rule's remaining units.
    #[getter]
    fn remaining(&self) -> u64 {
        self.inner.binding_state().remaining
    }

    /// The binding rule's reset_after, in seconds.
    #[getter]
    fn reset_after(&self) -> f64 {
        seconds(self.inner.binding_state().reset_after_ms)
    }

    /// The binding rule's window, in seconds (0 for an in-flight rule).
    #[getter]
    fn window(&self) -> f64 {
        seconds(self.inner.binding_state().window_ms)
    }

    /// The leases held after this hold or peek (a taken one included), for
    /// a limiter with an in-flight rule; None for one without.
    #[getter]
    fn in_flight(&self) -> Option<u64> {
        self.inner.in_flight.map(|f| f.held)
    }

    /// One state per rule, shortest window first (a metered limiter's:
    /// each meter's in turn).
    #[getter]
    fn rules(&self) -> Vec<RuleState> {
        self.inner
            .rules
            .iter()
            .map(|&inner| RuleState { inner })
            .collect()
    }

    /// A metered limiter's rule states by the meter the check charged, in
    /// order (empty without meters).
    #[getter]
    fn meters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let meters = pyo3::types::PyDict::new(py);
        for meter in &self.inner.meters {
            let states: Vec<RuleState> = self.inner.rules[meter.rules.clone()]
                .iter()
                .map(|&inner| RuleState { inner })
                .collect();
            meters.set_item(&meter.name, states)?;
        }
        Ok(meters)
    }

    /// The binding rule's meter (None without meters).
    #[getter]
    fn meter(&self) -> Option<&str> {
        self.inner.meter()
    }

    /// The time of the decision, seconds since the epoch.
    #[getter]
    fn now(&self) -> f64 {
        seconds(self.inner.now_ms)
    }

    /// True when the store failed and this is the on_error fallback.
    #[getter]
    fn degraded(&self) -> bool {
        self.inner.degraded()
    }

    /// True when this denial was remembered in-process (Redis was not asked).
    #[getter]
    fn cached(&self) -> bool {
        self.inner.cached
    }

    /// What the check came to: "admitted", "denied", "blocked",
    /// "safelisted", "degraded" or "shadowed".
    #[getter]
    fn outcome(&self) -> &'static str {
        self.inner.outcome.name()
    }

    /// True when the key or the client address is on the blocklist (or was
    /// banned by fail2ban); `retry_after` is then the time until that lapses.
    #[getter]
    fn blocked(&self) -> bool {
        self.inner.blocked()
    }

    /// True when the key or the client address is on the safelist: admitted, not counted.
    #[getter]
    fn safelisted(&self) -> bool {
        self.inner.safelisted()
    }

    /// Why the key or address is listed ("" when no reason was given), else None.
    #[getter]
    fn reason(&self) -> Option<&str> {
        self.inner.reason.as_deref()
    }

    /// True in shadow mode when the rules would have denied (`allowed` is True anyway).
    #[getter]
    fn shadowed(&self) -> bool {
        self.inner.shadowed()
    }

    /// The tier whose rules decided (named by the caller or stored for the key), or None.
    #[getter]
    fn tier(&self) -> Option<&str> {
        self.inner.tier.as_deref()
    }

    /// True when the key's stored override decided.
    #[getter]
    fn overridden(&self) -> bool {
        self.inner.overridden
    }

    /// The decision as a dict: `outcome`, `allowed`, `retry_after`, `limit`,
    /// `remaining`, `reset_after`, `window`, `degraded`, `blocked`,
    /// `safelisted`, `shadowed`, `cached`, `tier`, `overridden`, `reason`,
    /// `meter`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::plain::to_dict(py, &self.inner.plain())
    }

    /// The response headers for this decision (all styles), as a dict of str to str.
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (name, value) in self.inner.headers() {
            dict.set_item(name, value)?;
        }
        Ok(dict)
    }

    fn __bool__(&self) -> bool {
        self.inner.allowed()
    }

    fn __repr__(&self) -> String {
        let bind = self.inner.binding_state();
        let retry = match self.inner.retry_after_ms {
            Some(ms) => format!("{:?}", seconds(ms)),
            None => "None".to_owned(),
        };
        let meter = match self.inner.meter() {
            Some(name) => format!("{name} "),
            None => String::new(),
        };
        format!(
            "Decision(allowed={}, retry_after={retry}, limit={}, remaining={}, reset_after={:?}, rule='{meter}{}/{}'{})",
            if self.inner.allowed() { "True" } else { "False" },
            bind.limit,
            bind.remaining,
            seconds(bind.reset_after_ms),
            bind.limit,
            bind.window_name(),
            if self.inner.degraded() { ", degraded=True" } else { "" }
        )
    }
}

/// Fail2ban parameters, checked when made: `maxretry` strikes within
/// `findtime` seconds ban for `bantime` seconds; `name` keeps the strikes of
/// different bans apart. Each not given takes its default.
#[pyclass(frozen, module = "ratekeeper")]
pub struct Fail2Ban {
    pub inner: core::Fail2Ban,
}

#[pymethods]
impl Fail2Ban {
    #[new]
    #[pyo3(signature = (name = None, *, maxretry = None, findtime = None, bantime = None))]
    fn new(
        py: Python<'_>,
        name: Option<&str>,
        maxretry: Option<i64>,
        findtime: Option<f64>,
        bantime: Option<f64>,
    ) -> PyResult<Fail2Ban> {
        let inner = guard(py, || {
            core::Fail2Ban::given(name, maxretry, findtime, bantime)
        })?;
        Ok(Fail2Ban { inner })
    }

    /// The ban's name.
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// Strikes that ban.
    #[getter]
    fn maxretry(&self) -> u64 {
        self.inner.maxretry
    }

    /// The window strikes are counted in, in seconds.
    #[getter]
    fn findtime(&self) -> f64 {
        seconds(self.inner.findtime_ms)
    }

    /// How long a ban lasts, in seconds.
    #[getter]
    fn bantime(&self) -> f64 {
        seconds(self.inner.bantime_ms)
    }

    fn __repr__(&self) -> String {
        format!(
            "Fail2Ban('{}', maxretry={}, findtime={:?}, bantime={:?})",
            self.inner.name,
            self.inner.maxretry,
            seconds(self.inner.findtime_ms),
            seconds(self.inner.bantime_ms)
        )
    }
}
