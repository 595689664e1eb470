//! Embeds the paper scenarios (`scenarios/papers/<paper>/*.toml`) in the extension module, so
//! that `vsched reproduce` finds its catalog in any installation, not only in a checkout.
//! Generates `$OUT_DIR/paper_scenarios.rs`: a sorted table of (path under scenarios/papers,
//! TOML text).

use std::path::{Path, PathBuf};
use std::{env, fs};

fn toml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            toml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "toml") {
            out.push(path);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let papers = manifest.join("../../scenarios/papers");
    // Cargo rescans a directory given here for any change below it.
    println!("cargo:rerun-if-changed={}", papers.display());
    let mut files = Vec::new();
    toml_files(&papers, &mut files);
    files.sort();
    let mut table = String::from("pub static PAPER_SCENARIOS: &[(&str, &str)] = &[\n");
    for file in &files {
        let name = file.strip_prefix(&papers).expect("found below papers").to_string_lossy().replace('\\', "/");
        let absolute = fs::canonicalize(file).expect("a file just listed exists");
        table.push_str(&format!("    ({name:?}, include_str!({:?})),\n", absolute.display().to_string()));
    }
    table.push_str("];\n");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("paper_scenarios.rs");
    fs::write(out, table).expect("OUT_DIR is writable");
}
