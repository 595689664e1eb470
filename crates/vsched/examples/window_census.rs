//! Events per lookahead window of one scenario, for docs/parallel.md:
//!
//! ```sh
//! cargo run --release -p vsched --features window-census --example window_census -- \
//!     FILE [--policy NAME] [--lookahead-us 10,20,50] [--cores 8,16,32,64]
//! ```
//!
//! Runs FILE once with its own seed and horizon and prints the census as JSON
//! (`vsched_model::sim::Simulation::enable_window_census`).

use vsched::Scenario;

fn main() {
    match census(&std::env::args().skip(1).collect::<Vec<_>>()) {
        Ok(report) => println!("{report}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}

fn census(args: &[String]) -> Result<String, String> {
    let path = args.first().filter(|a| !a.starts_with("--")).ok_or("expected the path of a scenario file first")?;
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
    let list = |name: &str, default: &str| -> Result<Vec<u64>, String> {
        let text = value(name).map_or(default, String::as_str);
        text.split(',')
            .map(|x| x.parse::<u64>().ok().filter(|&n| n > 0))
            .collect::<Option<Vec<_>>>()
            .ok_or(format!("{name}: expected positive integers separated by commas, got {text:?}"))
    };
    let lookaheads: Vec<u64> = list("--lookahead-us", "10")?.iter().map(|us| us * 1_000).collect();
    let cores: Vec<usize> = list("--cores", "8,16,32,64")?.iter().map(|&p| p as usize).collect();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let policy = value("--policy").map(String::as_str);
    let scenario = Scenario::parse_with_policy(&text, policy).map_err(|e| e.to_string())?;
    let mut sim = scenario.build(scenario.seed);
    sim.enable_window_census(&lookaheads, &cores);
    let started = std::time::Instant::now();
    let metrics = sim.run(scenario.horizon, scenario.until, &mut |_| true).map_err(|e| e.to_string())?;
    let wall_s = started.elapsed().as_secs_f64();
    let mut report = sim.window_census().expect("the census was enabled");
    report["scenario"] = scenario.name.clone().into();
    report["simulated_s"] = metrics.sim_s.into();
    report["run_events"] = metrics.events.into();
    report["wall_s"] = wall_s.into();
    Ok(report.to_string())
}
