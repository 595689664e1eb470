//! A policy named with its parameters, as `--policy` takes it: `credit(xen_version=4.1)`,
//! `rr(slice_us=3000)`, `examples/policies/round_robin.py:RoundRobin(slice_us=3000)`.
//!
//! The parentheses hold `KEY=VALUE` pairs separated by commas, each VALUE read as a `--set`
//! value is (TOML: `10`, `2.5`, `true`, `"4.1"`; a bare word is a string, so `xen_version=4.1`
//! is the float 4.1 and `xen_version=current` the string "current"). They become the
//! `[scheduler]` table's keys beside `name`, checked as the scenario's own would be. Call
//! syntax rather than `name:key=value` because a Python policy's name has a `:` of its own, and
//! commas between parameters stay apart from the commas between a sweep's policies (which
//! split outside parentheses only).

use vsched_model::ConfigError;

/// A policy name and the `[scheduler]` keys given with it.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySpec {
    pub name: String,
    pub params: toml::Table,
}

/// Where the parameters of `spec` start: the first `(` whose prefix is a whole policy name (a
/// registered name, or `FILE.py:CLASS` whose class part is an identifier), so a parenthesis
/// inside a file's path is not taken for one.
fn params_start(spec: &str) -> Option<usize> {
    spec.match_indices('(').map(|(i, _)| i).find(|&i| {
        let last = spec[..i].rsplit(':').next().unwrap_or("");
        !last.is_empty() && last.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    })
}

/// The pieces of `inner` between commas that are not inside quotes, brackets or braces.
fn split_top_level(inner: &str) -> Vec<&str> {
    let (mut depth, mut quote, mut start, mut parts) = (0i32, None, 0, Vec::new());
    for (i, c) in inner.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[' | '{' | '(') => depth += 1,
            (None, ']' | '}' | ')') => depth -= 1,
            (None, ',') if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
}

/// A value as `--set` reads it: TOML, or else the bare word as a string.
pub fn value_of(text: &str) -> toml::Value {
    match toml::from_str::<toml::Table>(&format!("v = {text}")) {
        Ok(mut table) => table.remove("v").unwrap_or_else(|| toml::Value::String(text.to_owned())),
        Err(_) => toml::Value::String(text.to_owned()),
    }
}

/// `spec` read as `NAME` or `NAME(KEY=VALUE, ...)`; errors name `field` (`--policy`).
pub fn parse(spec: &str, field: &str) -> Result<PolicySpec, ConfigError> {
    let spec = spec.trim();
    let bad = |why: String| {
        ConfigError::new(
            field,
            format!("{why}; expected NAME or NAME(KEY=VALUE, ...), e.g. credit(tslice_ms=10, xen_version=\"4.1\")"),
        )
    };
    let Some(open) = params_start(spec) else {
        return Ok(PolicySpec { name: spec.to_owned(), params: toml::Table::new() });
    };
    let Some(inner) = spec[open + 1..].strip_suffix(')') else {
        return Err(bad(format!("{spec:?} does not end with ')'")));
    };
    let mut params = toml::Table::new();
    if !inner.trim().is_empty() {
        for pair in split_top_level(inner) {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(bad(format!("{:?} is not KEY=VALUE", pair.trim())));
            };
            let (key, value) = (key.trim(), value.trim());
            if key.is_empty() || value.is_empty() || key == "name" {
                return Err(bad(format!("{:?} is not KEY=VALUE with a parameter's KEY", pair.trim())));
            }
            if params.insert(key.to_owned(), value_of(value)).is_some() {
                return Err(bad(format!("parameter {key} is given twice")));
            }
        }
    }
    Ok(PolicySpec { name: spec[..open].trim().to_owned(), params })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(spec: &str) -> PolicySpec {
        parse(spec, "--policy").unwrap_or_else(|e| panic!("refused: {e}"))
    }

    #[test]
    fn a_bare_name_has_no_parameters() {
        assert_eq!(parsed("kvm-dy"), PolicySpec { name: "kvm-dy".into(), params: toml::Table::new() });
        assert_eq!(parsed("my dir/p.py:Mine").name, "my dir/p.py:Mine");
    }

    #[test]
    fn parameters_are_read_as_set_values() {
        let spec = parsed("credit(tslice_ms=10, xen_version=\"4.1\", boost=true, mode=strict)");
        assert_eq!(spec.name, "credit");
        assert_eq!(spec.params["tslice_ms"], toml::Value::Integer(10));
        assert_eq!(spec.params["xen_version"], toml::Value::String("4.1".into()));
        assert_eq!(spec.params["boost"], toml::Value::Boolean(true));
        assert_eq!(spec.params["mode"], toml::Value::String("strict".into()));
        assert!(parsed("rr()").params.is_empty());
    }

    #[test]
    fn a_python_policy_takes_parameters_and_keeps_parentheses_of_its_path() {
        let spec = parsed("a (copy)/p.py:Mine(slice_us=3000, label=\"x,y\", weights=[1, 2])");
        assert_eq!(spec.name, "a (copy)/p.py:Mine");
        assert_eq!(spec.params["slice_us"], toml::Value::Integer(3000));
        assert_eq!(spec.params["label"], toml::Value::String("x,y".into()));
        assert_eq!(spec.params.len(), 3);
    }

    #[test]
    fn malformed_parameters_name_the_option() {
        let e = |spec: &str| parse(spec, "--policy").map(|_| ()).unwrap_err().to_string();
        assert!(e("credit(tslice_ms=10").starts_with("--policy: \"credit(tslice_ms=10\" does not end with ')'"));
        assert!(e("credit(tslice_ms)").starts_with("--policy: \"tslice_ms\" is not KEY=VALUE;"));
        assert!(e("credit(a=1, a=2)").starts_with("--policy: parameter a is given twice;"));
        assert!(e("credit(name=rr)").contains("is not KEY=VALUE with a parameter's KEY"));
    }
}
