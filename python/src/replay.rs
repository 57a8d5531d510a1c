//! `replay_log`: `ratekeeper analyze`'s replay of an access log, run by the
//! core without the GIL; Python parses the arguments, draws the progress
//! bar and prints the report.

use crate::errors;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use ratekeeper_replay::tally::PEAK_LIMIT;
use ratekeeper_replay::{replay_file, Options, ReplayError, Replayed, REORDER_SECONDS};
use std::sync::Mutex;

/// Replays the access log at `path` (common/combined log format or JSON
/// lines, gzip or not) through each rule set of `rule_sets` (the first is
/// `--rules`), keyed by `key` (`ip`, `user`, or a JSON field), counting
/// user-periods `period_seconds` long. `progress(bytes_read, file_size,
/// lines)` is called every 4096 lines. Returns the replay's counts as a
/// dict (`format` None when no line of the first 1000 is in a format it
/// reads), with the bounds the report quotes (`reorder_seconds`, and
/// `peak_limit`, the largest limit a suggestion may name); raises `ConfigurationError` for a key the format has not and
/// `OSError` when the file cannot be read.
#[pyfunction]
#[pyo3(signature = (path, rule_sets, key, period_seconds, progress = None))]
pub fn replay_log<'py>(
    py: Python<'py>,
    path: &str,
    rule_sets: Vec<Bound<'py, PyAny>>,
    key: &str,
    period_seconds: u64,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let rule_sets = rule_sets
        .iter()
        .map(|rules| crate::convert::rule_set(py, rules))
        .collect::<PyResult<Vec<_>>>()?;
    let options = Options {
        rule_sets,
        key: key.to_owned(),
        period_seconds: period_seconds.max(1),
    };
    // an exception of the callback (or Ctrl-C) stops the replay and is raised
    let raised: Mutex<Option<PyErr>> = Mutex::new(None);
    let outcome = py.detach(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            replay_file(path, &options, &mut |read, size, lines| {
                Python::attach(|py| {
                    let called = py.check_signals().and_then(|()| match &progress {
                        Some(callback) => callback.call1(py, (read, size, lines)).map(drop),
                        None => Ok(()),
                    });
                    called
                        .map_err(|err| {
                            *raised.lock().unwrap_or_else(|p| p.into_inner()) = Some(err)
                        })
                        .is_ok()
                })
            })
        }))
    });
    let outcome = match outcome {
        Ok(outcome) => outcome,
        // raised as every panic of the core is: a RateKeeperError
        Err(panic) => return errors::guard(py, || std::panic::resume_unwind(panic)),
    };
    match outcome {
        Ok(replayed) => report(py, &replayed),
        Err(ReplayError::Stopped) => Err(raised
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or_else(|| PyOSError::new_err("the replay was stopped"))),
        Err(ReplayError::NoFormat { lines }) => {
            let dict = PyDict::new(py);
            dict.set_item("format", py.None())?;
            dict.set_item("head_lines", lines)?;
            Ok(dict)
        }
        Err(ReplayError::Config(err)) => Err(errors::to_py(py, err)),
        Err(read @ ReplayError::Read(_)) => Err(PyOSError::new_err(read.to_string())),
    }
}

/// The counts of a replay, as a dict.
fn report<'py>(py: Python<'py>, replayed: &Replayed) -> PyResult<Bound<'py, PyDict>> {
    let tally = &replayed.tally;
    let dict = PyDict::new(py);
    dict.set_item("format", replayed.format.name())?;
    dict.set_item("gzip", replayed.gzip)?;
    dict.set_item("lines", replayed.lines)?;
    dict.set_item("requests", tally.requests)?;
    dict.set_item("unkeyed_lines", tally.unkeyed)?;
    dict.set_item("late_lines", replayed.late)?;
    dict.set_item("bad_lines", replayed.bad)?;
    let examples = PyList::empty(py);
    for bad in &replayed.bad_examples {
        let example = PyDict::new(py);
        example.set_item("line", bad.line)?;
        example.set_item("reason", &bad.reason)?;
        example.set_item("text", &bad.text)?;
        examples.append(example)?;
    }
    dict.set_item("bad_line_examples", examples)?;
    let finite = |t: f64| t.is_finite().then_some(t);
    dict.set_item("first_time", finite(tally.first_time))?;
    dict.set_item("last_time", finite(tally.last_time))?;
    dict.set_item("users", tally.users())?;
    dict.set_item("user_periods", tally.user_periods)?;
    let seconds = |ms: u64| ms as f64 / 1000.0;
    let windows: Vec<f64> = tally.windows_ms.iter().map(|&ms| seconds(ms)).collect();
    dict.set_item("windows", windows)?;
    dict.set_item("peaks", &replayed.peaks)?;
    let candidates = PyList::empty(py);
    for candidate in &tally.candidates {
        let entry = PyDict::new(py);
        entry.set_item("rules", candidate.rules.to_string())?;
        let rules: Vec<(u64, f64)> = candidate
            .rules
            .rules()
            .iter()
            .map(|r| (r.limit, seconds(r.window_ms)))
            .collect();
        entry.set_item("rule_list", rules)?;
        entry.set_item("denied_requests", candidate.denied)?;
        entry.set_item("users_affected", candidate.users_affected)?;
        entry.set_item("user_periods_affected", candidate.user_periods_affected)?;
        candidates.append(entry)?;
    }
    dict.set_item("candidates", candidates)?;
    dict.set_item("reorder_seconds", REORDER_SECONDS)?;
    dict.set_item("peak_limit", PEAK_LIMIT)?;
    Ok(dict)
}
