//! `vsched bench`: the simulator's speed on the standard scenario (scenarios/bench.toml),
//! beside the bare event loop's on this machine (`vsched_engine::bare_loop`).
//!
//! Speed is measured, never asserted (docs/performance.md has the figures and commands).
//! `copies` replicates the scenario's VMs (not the driver domain) to see how the cost of an
//! event grows with the number of vCPUs: 1 copy is 32 guest vCPUs on 8 pCPUs, 8 copies 256.

use serde_json::json;

use crate::{parse, run_error, scenario, Error, BENCH_SCENARIO};

/// The most copies of the benchmark's VMs `vsched bench --copies` builds: 64 × 32 vCPUs.
pub const MAX_BENCH_COPIES: u32 = 64;

/// A scenario's text with its `[[vm]]` tables repeated `copies` times, the copies' names
/// suffixed `-2`, `-3`, ... A text that is not TOML, or has no `[[vm]]` tables, comes back
/// as it is for `parse` to name what is wrong with it.
fn replicated(text: &str, copies: u32) -> Result<String, Error> {
    if copies == 1 {
        return Ok(text.to_owned());
    }
    let Ok(mut table) = text.parse::<toml::Table>() else { return Ok(text.to_owned()) };
    let Some(toml::Value::Array(vms)) = table.get("vm").cloned() else { return Ok(text.to_owned()) };
    let mut all = vms.clone();
    for copy in 2..=copies {
        for vm in &vms {
            let mut vm = vm.clone();
            if let Some(toml::Value::String(name)) = vm.get_mut("name") {
                name.push_str(&format!("-{copy}"));
            }
            all.push(vm);
        }
    }
    table.insert("vm".into(), toml::Value::Array(all));
    toml::to_string(&table).map_err(|e| Error::Scenario(format!("--copies: {e}")))
}

/// `copies` in range, or the error naming the option.
fn check_copies(copies: u32) -> Result<(), Error> {
    if (1..=MAX_BENCH_COPIES).contains(&copies) {
        Ok(())
    } else {
        Err(Error::Scenario(format!("--copies: expected an integer in 1..={MAX_BENCH_COPIES}, got {copies}")))
    }
}

/// Runs the standard benchmark scenario (optionally with another simulated length, and its
/// VMs repeated `copies` times) once, then the bare event loop for as many events at the
/// simulator's mean queue length, and reports both speeds.
pub fn bench_json(sim_s: Option<f64>, copies: u32) -> Result<String, Error> {
    bench_json_with(sim_s, copies, &mut || true)
}

/// The bare loop as [`vsched_engine::bare_loop::run`], stopped when `keep_going` says so.
fn bare_loop(events: u64, queue_len: f64, keep_going: &mut dyn FnMut() -> bool) -> Result<f64, Error> {
    let took = vsched_engine::bare_loop::run_until(events, queue_len.round() as usize, keep_going);
    Ok(took.ok_or(Error::Interrupted)?.as_secs_f64().max(1e-9))
}

/// As [`bench_json`], calling `keep_going` every few thousand events of the run and every
/// million of the bare loop: returning `false` stops the benchmark ([`Error::Interrupted`]).
pub fn bench_json_with(sim_s: Option<f64>, copies: u32, keep_going: &mut dyn FnMut() -> bool) -> Result<String, Error> {
    check_copies(copies)?;
    let mut scenario = parse(&replicated(BENCH_SCENARIO, copies)?)?;
    if let Some(s) = sim_s {
        let max = scenario::MAX_HORIZON_S;
        if !(s.is_finite() && s > 0.0 && s <= max) {
            return Err(Error::Scenario(format!(
                "--sim-s: expected a number of seconds in (0, {max}], got {}",
                vsched_model::number(s)
            )));
        }
        scenario.horizon = vsched_engine::secs_to_ns(s);
    }
    let mut sim = scenario.build(scenario.seed);
    let started = std::time::Instant::now();
    let metrics =
        sim.run(scenario.horizon, scenario.until, &mut |_| keep_going()).map_err(|e| run_error(&scenario, e))?;
    let wall = started.elapsed().as_secs_f64().max(1e-9);
    let queue_len = sim.event_queue_mean_len();
    let bare_wall = bare_loop(metrics.events, queue_len, keep_going)?;
    let events_per_s = metrics.events as f64 / wall;
    let bare_events_per_s = metrics.events as f64 / bare_wall;
    Ok(json!({
        "scenario": scenario.name,
        "copies": copies,
        "pcpus": scenario.host.pcpus,
        "vcpus": scenario.vms.iter().map(|v| v.vcpus).sum::<usize>(),
        "sim_s": metrics.sim_s,
        "events": metrics.events,
        "wall_s": wall,
        "events_per_s": events_per_s,
        "ns_per_event": 1e9 / events_per_s,
        "sim_s_per_wall_s": metrics.sim_s / wall,
        "queue_len_mean": queue_len,
        "skipped_pops": sim.skipped_pops(),
        "bare_loop_events_per_s": bare_events_per_s,
        "vs_bare_loop": events_per_s / bare_events_per_s,
    })
    .to_string())
}

/// The most repetitions [`bench_file_json`] runs.
pub const MAX_BENCH_RUNS: u32 = 100_000;

/// Runs the scenario `toml_text` `runs` times with its own seed (every run the same, so its
/// time is the only thing that varies) and reports the wall-clock time of a run: its median,
/// minimum and maximum, and the median's events per second. For scenarios too short to time
/// in one run (a few milliseconds), where a single `vsched run` measures mostly noise.
/// `copies` repeats the scenario's VMs as `bench_json` does the standard scenario's.
///
/// Each run is followed by the bare event loop for as many events at the run's mean queue
/// length (as [`bench_json`] does), so that a file's figure has the same yardstick as the
/// standard scenario's: `vs_bare_loop` is the ratio of the two medians.
pub fn bench_file_json(toml_text: &str, runs: u32, copies: u32) -> Result<String, Error> {
    bench_file_json_with(toml_text, runs, copies, &mut || true)
}

/// As [`bench_file_json`], stopped when `keep_going` says so, as [`bench_json_with`] is.
pub fn bench_file_json_with(
    toml_text: &str,
    runs: u32,
    copies: u32,
    keep_going: &mut dyn FnMut() -> bool,
) -> Result<String, Error> {
    if !(1..=MAX_BENCH_RUNS).contains(&runs) {
        return Err(Error::Scenario(format!("--runs: expected an integer in 1..={MAX_BENCH_RUNS}, got {runs}")));
    }
    check_copies(copies)?;
    let scenario = parse(&replicated(toml_text, copies)?)?;
    let mut walls = Vec::with_capacity(runs as usize);
    let mut bare_walls = Vec::with_capacity(runs as usize);
    let mut first = None;
    for _ in 0..runs {
        // Also between runs: a run of a small scenario may end before its first check.
        if !keep_going() {
            return Err(Error::Interrupted);
        }
        let mut sim = scenario.build(scenario.seed);
        let started = std::time::Instant::now();
        let metrics =
            sim.run(scenario.horizon, scenario.until, &mut |_| keep_going()).map_err(|e| run_error(&scenario, e))?;
        walls.push(started.elapsed().as_secs_f64().max(1e-9));
        let (events, queue_len, _) =
            *first.get_or_insert((metrics.events, sim.event_queue_mean_len(), sim.skipped_pops()));
        debug_assert_eq!(events, metrics.events, "a run with the same seed handled other events");
        bare_walls.push(bare_loop(events, queue_len, keep_going)?);
    }
    let median = median_of(&mut walls);
    let bare_median = median_of(&mut bare_walls);
    let (events, queue_len, skipped_pops) = first.expect("at least one run");
    let per_event = |wall: f64| wall * 1e9 / events.max(1) as f64;
    Ok(json!({
        "scenario": scenario.name,
        "runs": runs,
        "copies": copies,
        "vcpus": scenario.vms.iter().map(|v| v.vcpus).sum::<usize>(),
        "events": events,
        "wall_s_median": median,
        "wall_s_min": walls[0],
        "wall_s_max": walls[walls.len() - 1],
        "ns_per_event": per_event(median),
        "sim_s_per_wall_s": vsched_engine::ns_to_secs(scenario.horizon) / median,
        "queue_len_mean": queue_len,
        "skipped_pops": skipped_pops,
        "bare_loop_ns_per_event": per_event(bare_median),
        "vs_bare_loop": bare_median / median,
    })
    .to_string())
}

/// The most draws [`bench_draws_json`] times in one round.
pub const MAX_BENCH_DRAWS: u64 = 1_000_000_000;

/// Times `draws` draws of a jittered compute time (`Dur::Jitter`: Box-Muller, the result of
/// libm's `log` and `cos` computed faster, `vsched_model::jitter`), the guests' commonest
/// random draw, with the SimPy peer's spinlock parameters (50 µs, coefficient of variation
/// 0.2) from a stream seeded as the simulator seeds them, over 5 rounds; reports nanoseconds
/// per draw, median and minimum. A floor under any scenario whose events each need such a
/// draw, since its random sequence must stay the same.
pub fn bench_draws_json(draws: u64) -> Result<String, Error> {
    const ROUNDS: usize = 5;
    if !(1..=MAX_BENCH_DRAWS).contains(&draws) {
        return Err(Error::Scenario(format!("--draws: expected an integer in 1..={MAX_BENCH_DRAWS}, got {draws}")));
    }
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
    let median = median_of(&mut per_draw_ns);
    Ok(json!({
        "draws": draws,
        "rounds": ROUNDS,
        "ns_per_draw_median": median,
        "ns_per_draw_min": per_draw_ns[0],
    })
    .to_string())
}

/// Sorts `walls` and returns their median (the upper one of an even count).
pub(crate) fn median_of(walls: &mut [f64]) -> f64 {
    walls.sort_by(f64::total_cmp);
    walls[walls.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_repeat_the_guest_vms_under_new_names() {
        let text = replicated(BENCH_SCENARIO, 3).unwrap();
        let scenario = parse(&text).unwrap();
        let guests: Vec<&str> = scenario.vms.iter().map(|v| v.name.as_str()).filter(|&n| n != "dom0").collect();
        assert_eq!(guests.len(), 12, "{guests:?}");
        assert!(guests.contains(&"spin") && guests.contains(&"spin-2") && guests.contains(&"hog2-3"), "{guests:?}");
    }

    #[test]
    fn a_file_s_vms_are_repeated_and_a_file_without_vms_is_left_to_the_parser() {
        let text = BENCH_SCENARIO.replace("horizon_s = 60", "horizon_s = 0.01");
        let report: serde_json::Value = serde_json::from_str(&bench_file_json(&text, 1, 2).unwrap()).unwrap();
        assert_eq!((report["copies"].as_u64(), report["vcpus"].as_u64()), (Some(2), Some(72)), "{report}");
        assert_eq!(replicated("not = [toml", 2).unwrap(), "not = [toml");
        assert!(bench_file_json("not = [toml", 1, 2).is_err());
    }

    #[test]
    fn a_file_runs_as_often_as_asked_and_runs_out_of_range_name_the_option() {
        let text = BENCH_SCENARIO.replace("horizon_s = 60", "horizon_s = 0.01");
        assert_ne!(text, BENCH_SCENARIO, "the benchmark's horizon line moved");
        let report: serde_json::Value = serde_json::from_str(&bench_file_json(&text, 3, 1).unwrap()).unwrap();
        assert_eq!(report["runs"], 3);
        assert!(report["events"].as_u64().unwrap() > 0, "{report}");
        let (min, median, max) = (
            report["wall_s_min"].as_f64().unwrap(),
            report["wall_s_median"].as_f64().unwrap(),
            report["wall_s_max"].as_f64().unwrap(),
        );
        assert!(0.0 < min && min <= median && median <= max, "{report}");
        assert!(report["queue_len_mean"].as_f64().unwrap() >= 1.0, "{report}");
        assert!(report["bare_loop_ns_per_event"].as_f64().unwrap() > 0.0, "{report}");
        let ratio = report["bare_loop_ns_per_event"].as_f64().unwrap() / report["ns_per_event"].as_f64().unwrap();
        assert!((report["vs_bare_loop"].as_f64().unwrap() - ratio).abs() < 1e-9 * ratio, "{report}");
        for runs in [0, MAX_BENCH_RUNS + 1] {
            let e = bench_file_json(&text, runs, 1).unwrap_err().to_string();
            assert!(e.starts_with("--runs: expected an integer in 1..=100000"), "{e}");
        }
    }

    #[test]
    fn draws_are_timed_and_counts_out_of_range_name_the_option() {
        let report: serde_json::Value = serde_json::from_str(&bench_draws_json(1000).unwrap()).unwrap();
        assert_eq!(report["draws"], 1000);
        let (min, median) =
            (report["ns_per_draw_min"].as_f64().unwrap(), report["ns_per_draw_median"].as_f64().unwrap());
        assert!(0.0 < min && min <= median, "{report}");
        for draws in [0, MAX_BENCH_DRAWS + 1] {
            let e = bench_draws_json(draws).unwrap_err().to_string();
            assert!(e.starts_with("--draws: expected an integer in 1..=1000000000"), "{e}");
        }
    }

    #[test]
    fn a_benchmark_told_to_stop_is_interrupted() {
        // A standard benchmark of 1000 simulated seconds would take minutes: it asks whether to
        // go on every few thousand events, and stops at the first no.
        let e = bench_json_with(Some(1000.0), 1, &mut || false).unwrap_err();
        assert!(matches!(e, Error::Interrupted), "{e}");
        // A file's runs: asked before each run too (a small scenario may never reach a check).
        let tiny = BENCH_SCENARIO.replace("horizon_s = 60", "horizon_s = 0.0001");
        let mut asked = 0;
        let e = bench_file_json_with(&tiny, MAX_BENCH_RUNS, 1, &mut || {
            asked += 1;
            asked < 5
        })
        .unwrap_err();
        assert!(matches!(e, Error::Interrupted), "{e}");
        assert_eq!(asked, 5);
    }

    #[test]
    fn copies_out_of_range_name_the_option() {
        for copies in [0, MAX_BENCH_COPIES + 1] {
            let e = bench_json(Some(0.001), copies).unwrap_err().to_string();
            assert!(e.starts_with("--copies: expected an integer in 1..=64"), "{e}");
            let e = bench_file_json(BENCH_SCENARIO, 1, copies).unwrap_err().to_string();
            assert!(e.starts_with("--copies: expected an integer in 1..=64"), "{e}");
        }
    }
}
