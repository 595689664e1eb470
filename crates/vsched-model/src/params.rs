//! Named parameters of policies and workloads, with defaults, docs and typed access.
//!
//! A policy or workload declares its parameters as a `&'static [ParamSpec]`; the scenario
//! loader hands it a [`Params`] holding what the user wrote, already checked against the
//! specs (no unknown key, every value of the declared type and within its declared
//! [`ParamRange`]), so typed getters cannot fail and arithmetic on the values cannot overflow.

use std::collections::BTreeMap;
use std::fmt;

/// A parameter value as written in a scenario file.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Bool(_) => "a boolean",
            Value::Str(_) => "a string",
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => f.write_str(&number(*x)),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// A number as an error message shows what the user wrote: plain in the usual range,
/// in exponent form when very large or very small (`1e300`, not 301 digits).
pub fn number(x: f64) -> String {
    if x != 0.0 && x.is_finite() && !(1e-5..1e16).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// The declaration of one parameter.
#[derive(Debug, Clone, Copy)]
pub struct ParamSpec {
    pub name: &'static str,
    pub default: ParamDefault,
    /// The values that make sense, from the parameter's meaning (a slice between a
    /// microsecond and seconds, a lock count a guest could have); every integer or number
    /// parameter has one, so that the products and casts built on it cannot wrap.
    pub range: ParamRange,
    pub doc: &'static str,
}

/// The accepted values of a parameter, both bounds included.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamRange {
    /// Booleans and strings (strings are checked against their choices by the policy).
    Any,
    Int {
        min: i64,
        max: i64,
    },
    /// Finite numbers only: NaN and the infinities never fall in a range.
    Float {
        min: f64,
        max: f64,
    },
}

impl ParamRange {
    /// Whether `value` lies in the range (a value of the wrong kind never does).
    pub fn contains(&self, value: &Value) -> bool {
        match (self, value) {
            (ParamRange::Any, _) => true,
            (ParamRange::Int { min, max }, Value::Int(v)) => (min..=max).contains(&v),
            (ParamRange::Float { min, max }, Value::Float(v)) => v.is_finite() && *min <= *v && *v <= *max,
            _ => false,
        }
    }

    /// The range as an error message states it.
    fn describe(&self) -> String {
        match self {
            ParamRange::Any => "any value".to_string(),
            ParamRange::Int { min, max } => format!("an integer in {min}..={max}"),
            ParamRange::Float { min, max } => format!("a finite number in [{min}, {max}]"),
        }
    }
}

/// `a` then `b` as one list, at compile time: a policy built on another declares the base's
/// parameters and its own (`N` must be `a.len() + b.len()`).
pub const fn concat_params<const N: usize>(a: &[ParamSpec], b: &[ParamSpec]) -> [ParamSpec; N] {
    assert!(a.len() + b.len() == N, "N must be the total length");
    let mut out = [ParamSpec { name: "", default: ParamDefault::Bool(false), range: ParamRange::Any, doc: "" }; N];
    let mut i = 0;
    while i < a.len() {
        out[i] = a[i];
        i += 1;
    }
    while i < N {
        out[i] = b[i - a.len()];
        i += 1;
    }
    out
}

/// A default value; `&'static` so specs can live in constants.
#[derive(Debug, Clone, Copy)]
pub enum ParamDefault {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(&'static str),
}

impl ParamDefault {
    pub fn to_value(self) -> Value {
        match self {
            ParamDefault::Int(i) => Value::Int(i),
            ParamDefault::Float(x) => Value::Float(x),
            ParamDefault::Bool(b) => Value::Bool(b),
            ParamDefault::Str(s) => Value::Str(s.to_string()),
        }
    }
}

/// Bad input: the dotted path of the offending field and what was expected.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError { path: path.into(), message: message.into() }
    }
}

impl fmt::Display for ConfigError {
    /// One line, always: a control character or line separator from the input (a quoted
    /// TOML key may hold one) is shown escaped (`\n`, `\u{2028}`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.path.is_empty() {
            write_one_line(f, &self.path)?;
            f.write_str(": ")?;
        }
        write_one_line(f, &self.message)
    }
}

fn write_one_line(f: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    for c in text.chars() {
        if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
            write!(f, "{}", c.escape_default())?;
        } else {
            fmt::Write::write_char(f, c)?;
        }
    }
    Ok(())
}

/// Checked parameters: what the user wrote merged over the declared defaults.
#[derive(Debug, Clone)]
pub struct Params {
    path: String,
    values: BTreeMap<&'static str, Value>,
    /// The names the user wrote (the others hold their declared defaults).
    given: Vec<&'static str>,
}

impl Params {
    /// Checks `given` against `specs` and fills in defaults. `path` is where these
    /// parameters sit in the scenario (e.g. `vm[1].workload`), used in error messages.
    pub fn check(
        path: &str,
        specs: &'static [ParamSpec],
        given: &BTreeMap<String, Value>,
    ) -> Result<Params, ConfigError> {
        let mut values = BTreeMap::new();
        let mut given_names = Vec::new();
        for spec in specs {
            values.insert(spec.name, spec.default.to_value());
        }
        for (key, value) in given {
            let Some(spec) = specs.iter().find(|s| s.name == key) else {
                let known: Vec<&str> = specs.iter().map(|s| s.name).collect();
                let expected = if known.is_empty() {
                    "no parameters are accepted here".to_string()
                } else {
                    format!("expected one of {}", known.join(", "))
                };
                return Err(ConfigError::new(format!("{path}.{key}"), format!("unknown key; {expected}")));
            };
            let value = match (spec.default, value) {
                (ParamDefault::Int(_), Value::Int(_))
                | (ParamDefault::Float(_), Value::Float(_))
                | (ParamDefault::Bool(_), Value::Bool(_))
                | (ParamDefault::Str(_), Value::Str(_)) => value.clone(),
                // An integer is a fine number.
                (ParamDefault::Float(_), Value::Int(i)) => Value::Float(*i as f64),
                (default, other) => {
                    return Err(ConfigError::new(
                        format!("{path}.{key}"),
                        format!("expected {}, got {} {other}", default.to_value().kind(), other.kind()),
                    ))
                }
            };
            if !spec.range.contains(&value) {
                return Err(ConfigError::new(
                    format!("{path}.{key}"),
                    format!("expected {}, got {value}", spec.range.describe()),
                ));
            }
            values.insert(spec.name, value);
            given_names.push(spec.name);
        }
        Ok(Params { path: path.to_string(), values, given: given_names })
    }

    fn field(&self, name: &str) -> String {
        format!("{}.{name}", self.path)
    }

    fn get(&self, name: &str) -> &Value {
        self.values.get(name).unwrap_or_else(|| panic!("parameter {name} was not declared"))
    }

    /// Whether the scenario gave `name` (else it holds its declared default).
    pub fn is_given(&self, name: &str) -> bool {
        self.given.contains(&name)
    }

    /// Integer `name` as the scenario gives it, else `default`: for a parameter whose default
    /// depends on another one (Credit's `ratelimit_us` on `xen_version`).
    pub fn int_or(&self, name: &str, default: i64) -> i64 {
        if self.given.contains(&name) {
            self.int(name)
        } else {
            default
        }
    }

    /// Boolean `name` as the scenario gives it, else `default` (see [`Params::int_or`]).
    pub fn bool_or(&self, name: &str, default: bool) -> bool {
        if self.given.contains(&name) {
            self.bool(name)
        } else {
            default
        }
    }

    pub fn int(&self, name: &str) -> i64 {
        match self.get(name) {
            Value::Int(i) => *i,
            other => panic!("parameter {name} is {other:?}, not an integer"),
        }
    }

    pub fn float(&self, name: &str) -> f64 {
        match self.get(name) {
            Value::Float(x) => *x,
            Value::Int(i) => *i as f64,
            other => panic!("parameter {name} is {other:?}, not a number"),
        }
    }

    pub fn bool(&self, name: &str) -> bool {
        match self.get(name) {
            Value::Bool(b) => *b,
            other => panic!("parameter {name} is {other:?}, not a boolean"),
        }
    }

    pub fn str(&self, name: &str) -> &str {
        match self.get(name) {
            Value::Str(s) => s,
            other => panic!("parameter {name} is {other:?}, not a string"),
        }
    }

    /// An error about parameter `name`, located at its path in the scenario.
    pub fn invalid(&self, name: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(self.field(name), message)
    }

    /// A number in `[min, max]`.
    pub fn float_in(&self, name: &str, min: f64, max: f64) -> Result<f64, ConfigError> {
        let v = self.float(name);
        if !(v >= min && v <= max) {
            let range = if max.is_infinite() { format!(">= {min}") } else { format!("in [{min}, {max}]") };
            return Err(ConfigError::new(self.field(name), format!("expected a number {range}, got {}", number(v))));
        }
        Ok(v)
    }

    /// One of a fixed set of strings.
    pub fn choice(&self, name: &str, choices: &[&str]) -> Result<String, ConfigError> {
        let v = self.str(name);
        if !choices.contains(&v) {
            let quoted: Vec<String> = choices.iter().map(|c| format!("{c:?}")).collect();
            return Err(ConfigError::new(
                self.field(name),
                format!("expected one of {}, got {v:?}", quoted.join(", ")),
            ));
        }
        Ok(v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[ParamSpec] = &[
        ParamSpec { name: "n", default: ParamDefault::Int(3), range: ParamRange::Int { min: 1, max: 9 }, doc: "" },
        ParamSpec {
            name: "x",
            default: ParamDefault::Float(0.5),
            range: ParamRange::Float { min: 0.0, max: 2.0 },
            doc: "",
        },
        ParamSpec { name: "kind", default: ParamDefault::Str("a"), range: ParamRange::Any, doc: "" },
    ];

    fn given(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[test]
    fn defaults_fill_in_and_ints_widen_to_floats() {
        let p = Params::check("w", SPECS, &given(&[("x", Value::Int(2))])).unwrap();
        assert_eq!(p.int("n"), 3);
        assert_eq!(p.float("x"), 2.0);
    }

    #[test]
    fn unknown_keys_and_wrong_types_name_the_field() {
        let e = Params::check("vm[0].workload", SPECS, &given(&[("nn", Value::Int(1))])).unwrap_err();
        assert_eq!(e.to_string(), "vm[0].workload.nn: unknown key; expected one of n, x, kind");
        let e = Params::check("w", SPECS, &given(&[("n", Value::Str("3".into()))])).unwrap_err();
        assert_eq!(e.to_string(), "w.n: expected an integer, got a string \"3\"");
        let e = Params::check("w", SPECS, &given(&[("n", Value::Int(10))])).unwrap_err();
        assert_eq!(e.to_string(), "w.n: expected an integer in 1..=9, got 10");
        let e = Params::check("w", SPECS, &given(&[("x", Value::Float(f64::NAN))])).unwrap_err();
        assert_eq!(e.to_string(), "w.x: expected a finite number in [0, 2], got NaN");
        let e = Params::check("w", SPECS, &given(&[("x", Value::Int(3))])).unwrap_err();
        assert_eq!(e.to_string(), "w.x: expected a finite number in [0, 2], got 3");
        let e = Params::check("w", SPECS, &given(&[("a\u{2028}b\nc", Value::Int(1))])).unwrap_err();
        assert!(e.to_string().starts_with("w.a\\u{2028}b\\nc: unknown key"), "{e}");
        let p = Params::check("w", SPECS, &given(&[("kind", Value::Str("c".into()))])).unwrap();
        assert_eq!(
            p.choice("kind", &["a", "b"]).unwrap_err().to_string(),
            "w.kind: expected one of \"a\", \"b\", got \"c\""
        );
    }
}
