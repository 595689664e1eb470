//! `cargo bench -p vsched`: simulator speed on the standard scenario (scenarios/bench.toml).
//! The same measurement as `vsched bench`; record results in docs/performance.md.

fn main() {
    let sim_s = std::env::args().skip(1).find_map(|a| a.parse::<f64>().ok());
    match vsched::bench_json(sim_s, 1) {
        Ok(report) => println!("{report}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
