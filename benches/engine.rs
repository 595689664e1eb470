//! `cargo bench -p vsched [-- SIM_S [COPIES]]`: simulator speed on the standard scenario
//! (scenarios/bench.toml), its VMs repeated COPIES times, beside the bare event loop. The
//! same measurement as `vsched bench --sim-s SIM_S --copies COPIES`; record results in
//! docs/performance.md.
//!
//! `cargo bench -p vsched -- --file SCENARIO [--runs N]`: the wall-clock time of one run of
//! any scenario file, run N times (10 by default) with its own seed: median, minimum and
//! maximum. For scenarios that run in milliseconds, such as the SimPy peer's kernel-mode one.
//!
//! `cargo bench -p vsched -- --draws N`: the time of one draw of a jittered compute time
//! (`Dur::Jitter`: Box-Muller with libm's `log` and `cos`), the guests' commonest random
//! draw, over 5 rounds of N draws: median and minimum. A floor under any scenario whose
//! events each need such a draw, since its random sequence must stay the same.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let report = match (args.iter().position(|a| a == "--file"), args.iter().position(|a| a == "--draws")) {
        (Some(at), _) => bench_file(&args, at),
        (None, Some(at)) => bench_draws(&args, at),
        (None, None) => {
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

/// `--file PATH [--runs N]`, the path at `args[at + 1]`.
fn bench_file(args: &[String], at: usize) -> Result<String, String> {
    let path = args.get(at + 1).ok_or("--file: expected the path of a scenario file")?;
    let text = std::fs::read_to_string(path).map_err(|e| format!("--file: {path}: {e}"))?;
    let runs = match args.iter().position(|a| a == "--runs") {
        Some(r) => {
            let value = args.get(r + 1).map_or("", String::as_str);
            value.parse::<u32>().map_err(|_| format!("--runs: expected an integer, got {value:?}"))?
        }
        None => 10,
    };
    vsched::bench_file_json(&text, runs).map_err(|e| e.to_string())
}

/// `--draws N`, the count at `args[at + 1]`: nanoseconds per `Dur::Jitter` draw with the SimPy
/// peer's spinlock parameters (50 µs, coefficient of variation 0.2) from a stream as the
/// simulator seeds them.
fn bench_draws(args: &[String], at: usize) -> Result<String, String> {
    const ROUNDS: usize = 5;
    let value = args.get(at + 1).map_or("", String::as_str);
    let draws = match value.parse::<u64>() {
        Ok(n) if (1..=1_000_000_000).contains(&n) => n,
        _ => return Err(format!("--draws: expected an integer in 1..=1000000000, got {value:?}")),
    };
    let jitter = vsched_model::guest::Dur::Jitter { mean: 50_000, cv: 0.2 };
    let mut rng = vsched_engine::RngStreams::new(1).stream(0);
    let mut per_draw_ns: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let started = std::time::Instant::now();
            let mut sum: u64 = 0;
            for _ in 0..draws {
                sum = sum.wrapping_add(jitter.sample(&mut rng));
            }
            std::hint::black_box(sum);
            started.elapsed().as_secs_f64() * 1e9 / draws as f64
        })
        .collect();
    per_draw_ns.sort_by(f64::total_cmp);
    Ok(format!(
        r#"{{"draws":{draws},"rounds":{ROUNDS},"ns_per_draw_median":{},"ns_per_draw_min":{}}}"#,
        per_draw_ns[ROUNDS / 2],
        per_draw_ns[0]
    ))
}
