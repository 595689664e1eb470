//! `cargo bench -p vsched [-- SIM_S [COPIES]]`: simulator speed on the standard scenario
//! (scenarios/bench.toml), its VMs repeated COPIES times, beside the bare event loop. The
//! same measurement as `vsched bench --sim-s SIM_S --copies COPIES`; record results in
//! docs/performance.md.
//!
//! `cargo bench -p vsched -- --file SCENARIO [--runs N] [--copies C]`: the wall-clock time of
//! one run of any scenario file, its VMs repeated C times, run N times (10 by default) with
//! its own seed: median, minimum and maximum. For scenarios that run in milliseconds, such as
//! the SimPy peer's kernel-mode one.
//!
//! `cargo bench -p vsched -- --scale [--runs N]`: the scale comparisons of `vsched bench
//! --scale` (`vsched::bench_scale_json`); `-- --scale-scenario NAME` prints the TOML of one of
//! their scenarios, to time or profile it on its own with `--file`.
//!
//! `cargo bench -p vsched -- --draws N`: nanoseconds per jittered compute draw, the guests'
//! commonest random draw, over 5 rounds of N draws (`vsched::bench_draws_json`).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let flag = |name: &str| args.iter().position(|a| a == name);
    let report = match (flag("--file"), flag("--draws"), flag("--scale"), flag("--scale-scenario")) {
        (Some(at), ..) => bench_file(&args, at),
        (None, Some(at), ..) => bench_draws(&args, at),
        (None, None, Some(_), _) => {
            option(&args, "--runs", 3).and_then(|runs| vsched::bench_scale_json(runs).map_err(|e| e.to_string()))
        }
        (None, None, None, Some(at)) => {
            let name = args.get(at + 1).map_or("", String::as_str);
            vsched::scale_scenario_toml(name).map_err(|e| e.to_string())
        }
        (None, None, None, None) => {
            let numbers: Vec<f64> = args.iter().filter_map(|a| a.parse::<f64>().ok()).collect();
            let sim_s = numbers.first().copied();
            let copies = numbers.get(1).map_or(1, |&c| c as u32);
            vsched::bench_json(sim_s, copies).map_err(|e| e.to_string())
        }
    };
    match report {
        Ok(report) => println!("{report}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}

/// `--file PATH [--runs N] [--copies C]`, the path at `args[at + 1]`.
fn bench_file(args: &[String], at: usize) -> Result<String, String> {
    let path = args.get(at + 1).ok_or("--file: expected the path of a scenario file")?;
    let text = std::fs::read_to_string(path).map_err(|e| format!("--file: {path}: {e}"))?;
    let runs = option(args, "--runs", 10)?;
    let copies = option(args, "--copies", 1)?;
    vsched::bench_file_json(&text, runs, copies).map_err(|e| e.to_string())
}

/// The integer after `name` in `args`, or `default` when `name` is absent.
fn option(args: &[String], name: &str, default: u32) -> Result<u32, String> {
    match args.iter().position(|a| a == name) {
        Some(r) => {
            let value = args.get(r + 1).map_or("", String::as_str);
            value.parse::<u32>().map_err(|_| format!("{name}: expected an integer, got {value:?}"))
        }
        None => Ok(default),
    }
}

/// `--draws N`, the count at `args[at + 1]`.
fn bench_draws(args: &[String], at: usize) -> Result<String, String> {
    let value = args.get(at + 1).map_or("", String::as_str);
    let draws = value
        .parse::<u64>()
        .map_err(|_| format!("--draws: expected an integer in 1..={}, got {value:?}", vsched::MAX_BENCH_DRAWS))?;
    vsched::bench_draws_json(draws).map_err(|e| e.to_string())
}
