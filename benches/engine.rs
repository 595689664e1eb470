//! `cargo bench -p vsched [-- SIM_S [COPIES]]`: simulator speed on the standard scenario
//! (scenarios/bench.toml), its VMs repeated COPIES times, beside the bare event loop. The
//! same measurement as `vsched bench --sim-s SIM_S --copies COPIES`; record results in
//! docs/performance.md.

fn main() {
    let numbers: Vec<f64> = std::env::args().skip(1).filter_map(|a| a.parse::<f64>().ok()).collect();
    let sim_s = numbers.first().copied();
    let copies = numbers.get(1).map_or(1, |&c| c as u32);
    match vsched::bench_json(sim_s, copies) {
        Ok(report) => println!("{report}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
