//! Scenario text in, `vsched::validate_scenario` over it: TOML parsing, the typed structure,
//! every range check, and the policy and workloads built once (as validation does).
//!
//! Asserted: no panic (libFuzzer reports one as a crash), no abort, no timeout, and an
//! error is one non-empty line: no line break of any kind (what Python's `str.splitlines`
//! splits on, as the API's `ScenarioError` carries the message unchanged).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The command line and the Python API hand the core UTF-8 text only.
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Err(error) = vsched::validate_scenario(text, 0) {
        let message = error.to_string();
        assert!(!message.trim().is_empty(), "empty error message");
        let breaks = ['\n', '\r', '\x0b', '\x0c', '\x1c', '\x1d', '\x1e', '\u{85}', '\u{2028}', '\u{2029}'];
        assert!(!message.contains(breaks), "error of several lines: {message:?}");
    }
});
