//! Reading single values of a scenario file. Every error is one line that starts with the
//! field's path (`vm[1].weight: expected ...`), the promise `vsched` makes for bad input.

use std::collections::BTreeMap;

use vsched_model::{ConfigError, Time, Value, VmType};

use super::MAX_REPS;

/// A one-line error at `path`.
pub(crate) fn err(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::new(path, message)
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

/// A scalar TOML value as a parameter value; tables and arrays are refused.
fn to_value(path: &str, v: &toml::Value) -> Result<Value, ConfigError> {
    Ok(match v {
        toml::Value::Integer(i) => Value::Int(*i),
        toml::Value::Float(x) => Value::Float(*x),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::String(s) => Value::Str(s.clone()),
        other => return Err(err(path, format!("expected a number, string or boolean, got {}", other.type_str()))),
    })
}

/// The free-form parameters of a table (`[scheduler]`, `[vm.workload]`), each checked to be
/// a scalar; which keys a policy or workload takes is its own check (`Params::check`).
pub(super) fn to_params(
    path: &str,
    raw: &BTreeMap<String, toml::Value>,
) -> Result<BTreeMap<String, Value>, ConfigError> {
    raw.iter().map(|(k, v)| Ok((k.clone(), to_value(&format!("{path}.{k}"), v)?))).collect()
}

/// The longest cost or latency a `*_us` key may give: a second, far above any machine cost
/// or network latency, and small enough that sums of them cannot overflow simulated time.
const MAX_MICROS: f64 = 1e6;

/// A number of microseconds in `[0, MAX_MICROS]`, as nanoseconds.
pub(crate) fn micros(path: &str, v: Option<f64>, default: Time) -> Result<Time, ConfigError> {
    match v {
        None => Ok(default),
        Some(x) if x.is_finite() && (0.0..=MAX_MICROS).contains(&x) => Ok((x * 1_000.0).round() as Time),
        Some(x) => Err(err(
            path,
            format!("expected a number of microseconds in [0, {MAX_MICROS}], got {}", vsched_model::number(x)),
        )),
    }
}

/// Scenario text as a TOML table, or a one-line error naming the line and column.
pub(crate) fn parse_toml(text: &str) -> Result<toml::Table, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let (line, col) = e.span().map_or((0, 0), |s| line_col(text, s.start));
        // toml's messages may span lines (expected-token lists); keep our one-line promise.
        let message = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
        err("", format!("malformed TOML at line {line}, column {col}: {message}"))
    })
}

/// A VM's `type`: `HIT` (high-throughput) or `CON` (concurrent), the hybrid framework's classes.
pub(super) fn parse_type(path: &str, s: &str) -> Result<VmType, ConfigError> {
    match s {
        "HIT" => Ok(VmType::Hit),
        "CON" => Ok(VmType::Con),
        other => Err(err(path, format!("expected \"HIT\" or \"CON\", got {other:?}"))),
    }
}

/// Repetitions must be at least one and at most [`MAX_REPS`].
pub fn check_reps(path: &str, reps: u32) -> Result<(), ConfigError> {
    if reps == 0 || reps > MAX_REPS {
        return Err(err(path, format!("expected an integer in 1..={MAX_REPS}, got {reps}")));
    }
    Ok(())
}
