//! Scenario overrides: `--policy` and dotted-key `--set` values applied to a scenario's TOML
//! before it is parsed.
//!
//! This is the one place the rules live. `vsched run --policy` reaches them through
//! [`Scenario::parse_with_policy`](crate::Scenario::parse_with_policy); `vsched sweep` and the
//! reproduction catalog through the Python binding, which hands over values as JSON text
//! ([`value_from_json_text`]).
//!
//! The rules:
//! - a policy replaces the whole `[scheduler]` table by `{name = policy}` (its parameters at
//!   their defaults, or those it names: `credit(tslice_ms=10)`, see [`crate::policy_spec`]),
//!   before the overrides, so `scheduler.*` overrides still apply;
//! - an override key is a dotted path: `scheduler.tslice_ms`, `vm.web.vcpus`. In a table a
//!   part names a key (a missing table on the way is created, so optional sections such as
//!   `[network]` can be set); in an array a part selects the element whose `name` is that
//!   part, else the element at that index, or every element for `*`;
//! - the last part is set in a table, whatever was there.

use vsched_model::ConfigError;

use crate::external::is_external_name;
use crate::scenario::parse_toml;

/// What a value may be, for error messages.
const VALUE_KINDS: &str = "a number, string, boolean, array or table";

fn err(path: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::new(path, message)
}

/// `text` (a scenario's TOML) with `[scheduler]` replaced by `policy` when given, then each
/// dotted key of `overrides` set to its value, in order. With neither, `text` is returned as
/// it is (comments included); otherwise the document is written anew, without comments.
pub fn apply_overrides(
    text: &str,
    policy: Option<&str>,
    overrides: &[(String, toml::Value)],
) -> Result<String, ConfigError> {
    if policy.is_none() && overrides.is_empty() {
        return Ok(text.to_owned());
    }
    let mut document = parse_toml(text)?;
    apply(&mut document, policy, overrides)?;
    toml::to_string(&document).map_err(|e| err("", format!("cannot write the scenario back as TOML: {e}")))
}

/// [`apply_overrides`] on a parsed document.
pub fn apply(
    document: &mut toml::Table,
    policy: Option<&str>,
    overrides: &[(String, toml::Value)],
) -> Result<(), ConfigError> {
    if let Some(spec) = policy {
        let crate::policy_spec::PolicySpec { name, params } = crate::policy_spec::parse(spec, "--policy")?;
        // An external policy (a Python class) is checked when the scenario is parsed.
        if vsched_policies::find(&name).is_none() && !is_external_name(&name) {
            let known = vsched_policies::names().join(", ");
            return Err(err(
                "--policy",
                format!(
                    "unknown policy {name:?}; expected one of {known}, or a Python policy as path/to/file.py:ClassName"
                ),
            ));
        }
        let mut scheduler = params;
        scheduler.insert("name".into(), toml::Value::String(name));
        document.insert("scheduler".into(), toml::Value::Table(scheduler));
    }
    for (key, value) in overrides {
        let parts: Vec<&str> = key.split('.').collect();
        if key.is_empty() {
            // Nothing to name the error by.
            return Err(err("", "an override key is empty; expected a dotted key such as scheduler.tslice_ms"));
        }
        if parts.iter().any(|part| part.is_empty()) {
            return Err(err(key, "expected a dotted key such as scheduler.tslice_ms"));
        }
        set_in_table(document, &parts, value, key)?;
    }
    Ok(())
}

/// Sets `parts` (not empty) below `table`, for override `key`.
fn set_in_table(table: &mut toml::Table, parts: &[&str], value: &toml::Value, key: &str) -> Result<(), ConfigError> {
    let (part, rest) = match parts.split_first() {
        Some(split) => split,
        None => return Ok(()),
    };
    if rest.is_empty() {
        table.insert((*part).to_owned(), value.clone());
        return Ok(());
    }
    let child = table.entry(*part).or_insert_with(|| toml::Value::Table(toml::Table::new()));
    set_below(child, part, rest, value, key)
}

/// Sets `parts` (not empty) below `node`, which part `reached_by` of `key` led to.
fn set_below(
    node: &mut toml::Value,
    reached_by: &str,
    parts: &[&str],
    value: &toml::Value,
    key: &str,
) -> Result<(), ConfigError> {
    match node {
        toml::Value::Table(table) => set_in_table(table, parts, value, key),
        toml::Value::Array(elements) => {
            let (part, rest) = match parts.split_first() {
                Some(split) if !split.1.is_empty() => split,
                // The key ends at the array itself: there is no key to set in it.
                _ => {
                    return Err(err(
                        key,
                        format!(
                            "expected a key inside a table, '{reached_by}' is an array \
                             (select its elements by name, index or *)"
                        ),
                    ))
                }
            };
            for element in select(elements, part, key)? {
                set_below(element, part, rest, value, key)?;
            }
            Ok(())
        }
        _ => Err(err(key, format!("expected a key inside a table, '{reached_by}' is not one"))),
    }
}

/// The elements of an array that `part` of `key` selects: `*` every one, else the one whose
/// `name` is `part`, else the one at index `part`. A name wins over an index, so a VM named
/// "0" stays reachable by its name.
fn select<'a>(elements: &'a mut [toml::Value], part: &str, key: &str) -> Result<Vec<&'a mut toml::Value>, ConfigError> {
    if part == "*" {
        return Ok(elements.iter_mut().collect());
    }
    let named = |element: &toml::Value| element.get("name").and_then(toml::Value::as_str) == Some(part);
    if let Some(position) = elements.iter().position(named) {
        return Ok(vec![&mut elements[position]]);
    }
    let len = elements.len();
    let index = if part.bytes().all(|b| b.is_ascii_digit()) { part.parse::<usize>().ok() } else { None };
    if let Some(i) = index.filter(|&i| i < len) {
        return Ok(vec![&mut elements[i]]);
    }
    let names: Vec<&str> = elements.iter().filter_map(|e| e.get("name").and_then(toml::Value::as_str)).collect();
    let expected = match (names.is_empty(), len) {
        (true, 0) => "expected *; the array is empty".to_owned(),
        (true, _) => format!("expected * or an index below {len}"),
        (false, _) => format!("expected *, a name among {} or an index below {len}", names.join(", ")),
    };
    Err(err(key, format!("no element '{part}' in this array ({expected})")))
}

/// An override value given as JSON text (how the Python binding passes values) as a TOML
/// value. TOML has no null, and JSON has no NaN or infinities: both are refused.
pub fn value_from_json_text(key: &str, text: &str) -> Result<toml::Value, ConfigError> {
    let json: serde_json::Value = serde_json::from_str(text).map_err(|_| {
        // Python's json.dumps writes these for non-finite floats; no scenario key takes them.
        let message = match text.trim() {
            "NaN" | "Infinity" | "-Infinity" => format!("expected a finite number, got {}", text.trim()),
            other => format!("expected {VALUE_KINDS} as JSON, got {}", one_line(other)),
        };
        err(key, message)
    })?;
    value_from_json(key, &json)
}

/// A JSON value as a TOML value, for override `key`.
pub fn value_from_json(key: &str, json: &serde_json::Value) -> Result<toml::Value, ConfigError> {
    use serde_json::Value as J;
    Ok(match json {
        J::Null => return Err(err(key, format!("expected {VALUE_KINDS}, got null"))),
        J::Bool(b) => toml::Value::Boolean(*b),
        J::String(s) => toml::Value::String(s.clone()),
        J::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => toml::Value::Integer(i),
            (None, Some(u), _) => {
                return Err(err(key, format!("expected an integer up to {} (TOML's limit), got {u}", i64::MAX)))
            }
            (None, None, Some(x)) => toml::Value::Float(x),
            (None, None, None) => return Err(err(key, format!("expected {VALUE_KINDS}, got {n}"))),
        },
        J::Array(elements) => {
            toml::Value::Array(elements.iter().map(|e| value_from_json(key, e)).collect::<Result<_, _>>()?)
        }
        J::Object(entries) => toml::Value::Table(
            entries
                .iter()
                .map(|(k, v)| Ok((k.clone(), value_from_json(key, v)?)))
                .collect::<Result<_, ConfigError>>()?,
        ),
    })
}

/// `text` on one line, shortened: error messages are one line.
fn one_line(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match joined.char_indices().nth(60) {
        Some((cut, _)) => format!("{}...", &joined[..cut]),
        None => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCENARIO: &str = r#"# a comment
name = "t"
[host]
pcpus = 2
[scheduler]
name = "credit"
tslice_ms = 30
[[vm]]
name = "locker"
vcpus = 2
[vm.workload]
kind = "spinlock"
[[vm]]
name = "hog"
vcpus = 2
[vm.workload]
kind = "cpu_hog"
"#;

    fn set(key: &str, value: toml::Value) -> (String, toml::Value) {
        (key.to_owned(), value)
    }

    fn int(i: i64) -> toml::Value {
        toml::Value::Integer(i)
    }

    fn applied(policy: Option<&str>, overrides: &[(String, toml::Value)]) -> toml::Table {
        let text = apply_overrides(SCENARIO, policy, overrides).unwrap_or_else(|e| panic!("refused: {e}"));
        toml::from_str(&text).unwrap_or_else(|e| panic!("not TOML: {e}\n{text}"))
    }

    fn error(policy: Option<&str>, overrides: &[(String, toml::Value)]) -> String {
        match apply_overrides(SCENARIO, policy, overrides) {
            Ok(text) => panic!("accepted:\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    fn vm<'a>(doc: &'a toml::Table, i: usize, key: &str) -> &'a toml::Value {
        &doc["vm"][i][key]
    }

    #[test]
    fn nothing_to_apply_returns_the_text_as_it_is() {
        assert_eq!(apply_overrides(SCENARIO, None, &[]).as_deref(), Ok(SCENARIO));
        // Not even parsed: the scenario's own parser reports its errors.
        assert_eq!(apply_overrides("[host", None, &[]).as_deref(), Ok("[host"));
    }

    #[test]
    fn a_table_key_is_set_and_the_rest_kept() {
        let doc = applied(None, &[set("scheduler.tslice_ms", int(10)), set("host.pcpus", int(4))]);
        assert_eq!(doc["scheduler"]["tslice_ms"], int(10));
        assert_eq!(doc["scheduler"]["name"].as_str(), Some("credit"));
        assert_eq!(doc["host"]["pcpus"], int(4));
        assert_eq!(doc["name"].as_str(), Some("t"));
    }

    #[test]
    fn an_array_element_is_selected_by_name_index_or_star() {
        let doc = applied(None, &[set("vm.hog.vcpus", int(1)), set("vm.0.weight", int(512))]);
        assert_eq!((vm(&doc, 0, "vcpus"), vm(&doc, 1, "vcpus")), (&int(2), &int(1)));
        assert_eq!(vm(&doc, 0, "weight"), &int(512));
        assert!(doc["vm"][1].get("weight").is_none());
        let doc = applied(None, &[set("vm.*.workload.iterations", int(7))]);
        assert!(doc["vm"].as_array().is_some_and(|vms| vms.iter().all(|v| v["workload"]["iterations"] == int(7))));
        assert_eq!(doc["vm"][1]["workload"]["kind"].as_str(), Some("cpu_hog"));
    }

    #[test]
    fn a_name_wins_over_an_index() {
        let text = SCENARIO.replace("name = \"hog\"", "name = \"0\"");
        let out = apply_overrides(&text, None, &[set("vm.0.vcpus", int(1))]).unwrap_or_else(|e| panic!("{e}"));
        let doc: toml::Table = toml::from_str(&out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((vm(&doc, 0, "vcpus"), vm(&doc, 1, "vcpus")), (&int(2), &int(1)));
    }

    #[test]
    fn missing_tables_on_the_way_are_created() {
        let doc = applied(None, &[set("network.latency_us", toml::Value::Float(5.5))]);
        assert_eq!(doc["network"]["latency_us"], toml::Value::Float(5.5));
        let doc = applied(None, &[set("vm.locker.workload.cs_us", int(20))]);
        assert_eq!(doc["vm"][0]["workload"]["cs_us"], int(20));
    }

    #[test]
    fn a_policy_replaces_the_scheduler_table_before_the_overrides() {
        let doc = applied(Some("rr"), &[set("scheduler.slice_us", int(500))]);
        let mut expected = toml::Table::new();
        expected.insert("name".into(), "rr".into());
        expected.insert("slice_us".into(), int(500));
        assert_eq!(doc["scheduler"], toml::Value::Table(expected));
        // The written text keeps the scheduler a table of its own.
        let text = apply_overrides(SCENARIO, Some("rr"), &[]).unwrap_or_else(|e| panic!("{e}"));
        assert!(text.contains("[scheduler]\nname = \"rr\"\n"), "{text}");
        assert!(!text.contains("tslice_ms") && !text.contains("# a comment"), "{text}");
    }

    #[test]
    fn an_unknown_policy_names_the_option_and_the_valid_policies() {
        let e = error(Some("fifo"), &[]);
        assert!(e.starts_with("--policy: unknown policy \"fifo\"; expected one of rr, credit"), "{e}");
        // The same check as `vsched run --policy`, which goes through the same function.
        let Err(run) = crate::Scenario::parse_with_policy(SCENARIO, Some("fifo")) else { panic!("accepted") };
        assert_eq!(run.to_string(), e);
    }

    #[test]
    fn bad_keys_are_named_with_what_was_expected() {
        assert_eq!(
            error(None, &[set("vm.nobody.vcpus", int(1))]),
            "vm.nobody.vcpus: no element 'nobody' in this array (expected *, a name among locker, hog or an index below 2)"
        );
        assert_eq!(
            error(None, &[set("vm.2.vcpus", int(1))]),
            "vm.2.vcpus: no element '2' in this array (expected *, a name among locker, hog or an index below 2)"
        );
        assert_eq!(
            error(None, &[set("vm.locker", int(1))]),
            "vm.locker: expected a key inside a table, 'vm' is an array (select its elements by name, index or *)"
        );
        assert_eq!(
            error(None, &[set("host.pcpus.x", int(1))]),
            "host.pcpus.x: expected a key inside a table, 'pcpus' is not one"
        );
        assert_eq!(
            error(None, &[set("host.pcpus.x.y", int(1))]),
            "host.pcpus.x.y: expected a key inside a table, 'pcpus' is not one"
        );
        for key in ["host..pcpus", ".host", "host."] {
            assert_eq!(
                error(None, &[set(key, int(1))]),
                format!("{key}: expected a dotted key such as scheduler.tslice_ms")
            );
        }
        assert_eq!(
            error(None, &[set("", int(1))]),
            "an override key is empty; expected a dotted key such as scheduler.tslice_ms"
        );
        let e = error(None, &[set("host.pcpus", int(1)), set("vm.x.vcpus", int(1))]);
        assert!(e.starts_with("vm.x.vcpus: no element 'x'"), "{e}");
    }

    #[test]
    fn arrays_without_names_offer_indices() {
        let text = "hosts = [1, 2]\nempty = []\n";
        let e = apply_overrides(text, None, &[set("hosts.x.y", int(1))]).map_err(|e| e.to_string());
        assert_eq!(e, Err("hosts.x.y: no element 'x' in this array (expected * or an index below 2)".into()));
        let e = apply_overrides(text, None, &[set("hosts.0.y", int(1))]).map_err(|e| e.to_string());
        assert_eq!(e, Err("hosts.0.y: expected a key inside a table, '0' is not one".into()));
        let e = apply_overrides(text, None, &[set("empty.0.y", int(1))]).map_err(|e| e.to_string());
        assert_eq!(e, Err("empty.0.y: no element '0' in this array (expected *; the array is empty)".into()));
        // `*` over no elements sets nothing.
        assert!(apply_overrides(text, None, &[set("empty.*.y", int(1))]).is_ok());
    }

    #[test]
    fn malformed_toml_is_reported_as_the_scenario_parser_does() {
        let e = apply_overrides("[host\n", None, &[set("host.pcpus", int(1))]).map_err(|e| e.to_string());
        assert!(e.as_ref().is_err_and(|e| e.starts_with("malformed TOML at line 1")), "{e:?}");
    }

    #[test]
    fn json_values_become_toml_values() {
        let value = |text: &str| value_from_json_text("k", text).map_err(|e| e.to_string());
        assert_eq!(value("10"), Ok(int(10)));
        assert_eq!(value("2.5"), Ok(toml::Value::Float(2.5)));
        assert_eq!(value("true"), Ok(toml::Value::Boolean(true)));
        assert_eq!(value("\"CON\""), Ok(toml::Value::String("CON".into())));
        assert_eq!(value("[1, 2]"), Ok(toml::Value::Array(vec![int(1), int(2)])));
        let Ok(toml::Value::Table(table)) = value(r#"{"name": "rr"}"#) else { panic!("not a table") };
        assert_eq!(table["name"].as_str(), Some("rr"));
        assert_eq!(value("null"), Err("k: expected a number, string, boolean, array or table, got null".into()));
        assert_eq!(value("[1, null]"), Err("k: expected a number, string, boolean, array or table, got null".into()));
        assert_eq!(value("NaN"), Err("k: expected a finite number, got NaN".into()));
        assert_eq!(value("-Infinity"), Err("k: expected a finite number, got -Infinity".into()));
        assert_eq!(
            value("18446744073709551615"),
            Err("k: expected an integer up to 9223372036854775807 (TOML's limit), got 18446744073709551615".into())
        );
        assert_eq!(
            value("{oops\n}"),
            Err("k: expected a number, string, boolean, array or table as JSON, got {oops }".into())
        );
    }
}
