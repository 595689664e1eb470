fn main() {
    let path = std::env::args().nth(1).unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let out =
        vsched::run_scenario_json(&text, &vsched::RunOptions::default(), &mut |_| {}).unwrap();
    println!("{out}");
}
