"""Every way a command can fail ends in one line and the right exit code: 2 for bad input, 1
for a policy bug or a bug in vsched (a panic in the core, a worker that died), 130 for
Ctrl-C. The API raises `ScenarioError`, `PolicyError` or `InternalError`, never a
`PanicException`, `UnicodeEncodeError` or `RecursionError`."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

import vsched
from vsched import _core
from vsched.cli import parse_size
from vsched.runs import JobFailed, RunSettings, Store, apply_overrides, make_jobs, run_jobs

from helpers import SLOW_SCENARIO, TINY_SCENARIO, CliResult

Cli = Callable[..., CliResult]

INTERNAL = "internal error (a vsched bug, please report): "
# Where `_core._panic_for_tests` panics: the message ends with this location.
PANIC_LOCATION = r" at crates/vsched-py/src/lib\.rs:\d+"


def one_line(result: CliResult, exit_code: int) -> str:
    """The message of a failed command: the exit code, no traceback, one `error: ` line."""
    assert result.exit_code == exit_code, result
    assert "Traceback" not in result.stderr
    assert len(result.stderr_lines) == 1, result.stderr
    assert result.stderr_lines[0].startswith("error: "), result.stderr
    return result.stderr_lines[0][len("error: ") :]


def panic(message: str) -> None:
    """A real panic in the Rust core, under the same guard as every call into it."""
    _core._panic_for_tests(message)


def tiny_file(tmp_path: Path, text: str = TINY_SCENARIO, name: str = "tiny.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# Panics in the core


def test_a_panic_raises_internal_error_with_its_message_and_location_on_one_line() -> None:
    with pytest.raises(vsched.InternalError) as raised:
        panic("left != right\n  left: 1\n right: 2")
    assert re.fullmatch(
        re.escape(INTERNAL + "left != right left: 1 right: 2") + PANIC_LOCATION, str(raised.value)
    )
    assert isinstance(raised.value, RuntimeError)
    assert vsched.InternalError.__module__ == "vsched"
    # It crosses process boundaries (the Ray backend pickles what a task raises).
    copy = pickle.loads(pickle.dumps(raised.value))
    assert type(copy) is vsched.InternalError and str(copy) == str(raised.value)


def test_the_guard_leaves_the_core_usable_and_quiet(capfd: pytest.CaptureFixture[str]) -> None:
    for _ in range(3):
        with pytest.raises(vsched.InternalError):
            panic("again")
    assert vsched.run(TINY_SCENARIO, reps=1)["runs"][0]["events"] > 0
    # The panic hook recorded the panics instead of printing "thread panicked at ...".
    assert capfd.readouterr().err == ""


CFS_OVERFLOW = TINY_SCENARIO.replace(
    'name = "credit"', 'name = "cfs"\nmin_granularity_us = 4611686018427387904'
)


def test_the_issues_panicking_input_is_now_refused_naming_the_field(cli: Cli, tmp_path: Path) -> None:
    """The hardening issue's reproducer: µs to ns overflowed to 0, then a division by zero;
    the parameter's range now refuses it at validation, in every command."""
    expected = "scheduler.min_granularity_us: expected an integer in 100..=1000000, got 4611686018427387904"
    scenario = tiny_file(tmp_path, CFS_OVERFLOW)
    for command in ("run", "validate"):
        assert one_line(cli(command, scenario), 2) == expected
    message = one_line(
        cli(
            "sweep",
            tiny_file(tmp_path),
            "--policy",
            "cfs",
            "--set",
            "scheduler.min_granularity_us=1000,4611686018427387904",
            "--out",
            tmp_path / "out",
        ),
        2,
    )
    assert "scheduler.min_granularity_us: expected an integer in 100..=1000000" in message


def test_run_with_a_panicking_core_is_one_line_and_exit_1(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_core, "run", lambda *args, **kwargs: panic("simulated bug"))
    message = one_line(cli("run", tiny_file(tmp_path)), 1)
    assert re.fullmatch(re.escape(INTERNAL + "simulated bug") + PANIC_LOCATION, message)
    with pytest.raises(vsched.InternalError):
        vsched.run(TINY_SCENARIO)


# ---------------------------------------------------------------------------------------------
# A run of a sweep that fails: one line naming the run, in the main process or in a worker

FORK = multiprocessing.get_start_method() == "fork"


def abort() -> None:
    import faulthandler
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
    # pytest's faulthandler writes to a copy of the terminal's stderr taken before capture,
    # which a forked worker inherits: point the dump at this process's file descriptor 2 (the
    # test's captured stderr) so that the intended crash stays in the captured output.
    faulthandler.enable(file=2)
    os.abort()


def raise_policy_error() -> None:
    raise vsched.PolicyError("vCPU 3 picked twice")


def raise_scenario_error() -> None:
    raise vsched.ScenarioError("run.horizon_s: too long for the budget")


def raise_zero_division() -> None:
    raise ZeroDivisionError("division by zero")


# (id, what the core does on the failing point, exit code, how the message ends)
WORKER_FAILURES = [
    (
        "panic",
        lambda: panic("simulated bug"),
        1,
        re.escape("failed: " + INTERNAL + "simulated bug") + PANIC_LOCATION,
    ),
    (
        "policy error",
        raise_policy_error,
        1,
        re.escape("failed: policy failure (a bug in the policy, not in the scenario): vCPU 3 picked twice"),
    ),
    ("scenario error", raise_scenario_error, 2, re.escape(": run.horizon_s: too long for the budget")),
    (
        "python exception",
        raise_zero_division,
        1,
        re.escape("failed: internal error: ZeroDivisionError: division by zero"),
    ),
    (
        "abort",
        abort,
        1,
        re.escape("failed: its worker process died (SIGABRT): a crash of vsched, please report"),
    ),
]


def failing_on(marker: str, failure: Callable[[], None], monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `_core.run` fail as `failure` does for a scenario text containing `marker` (worker
    processes are forked from this one, so they inherit the patch)."""
    real_run = _core.run

    def run(text: str, *args: Any, **kwargs: Any) -> str:
        if marker in text:
            failure()
        return real_run(text, *args, **kwargs)

    monkeypatch.setattr(_core, "run", run)


@pytest.mark.parametrize(
    ("jobs", "failure", "exit_code", "ending"),
    # With one job the runs are in this process, which an abort would end.
    [(jobs, *case[1:]) for case in WORKER_FAILURES for jobs in (1, 2) if (jobs, case[0]) != (1, "abort")],
    ids=[
        f"{case[0]}, -j {jobs}"
        for case in WORKER_FAILURES
        for jobs in (1, 2)
        if (jobs, case[0]) != (1, "abort")
    ],
)
def test_a_failed_run_of_a_sweep_is_one_line_naming_it(
    cli: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    jobs: int,
    failure: Callable[[], None],
    exit_code: int,
    ending: str,
) -> None:
    if jobs > 1 and not FORK:
        pytest.skip("the workers must inherit the patched core (fork)")
    failing_on("tslice_ms = 30", failure, monkeypatch)
    scenario = tiny_file(tmp_path)
    out = tmp_path / "out"
    result = cli("sweep", scenario, "--set", "scheduler.tslice_ms=10,30", "--out", out, "-j", jobs)
    message = one_line(result, exit_code)
    job = make_jobs(str(scenario), TINY_SCENARIO, None, [("scheduler.tslice_ms", 30)], [1])[0]
    assert re.fullmatch(
        re.escape(f"run {scenario} with scheduler.tslice_ms=30, seed 1 (key {job.key})") + " ?" + ending,
        message,
    ), message
    # What finished before the failure is kept; the failed run is not stored.
    with Store(out / "runs.jsonl") as store:
        assert job.key not in store.rows


@pytest.mark.skipif(not FORK, reason="the workers must inherit the patched core (fork)")
def test_a_worker_killed_by_the_os_is_named_with_its_signal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_on("tslice_ms = 30", lambda: os.kill(os.getpid(), signal.SIGKILL), monkeypatch)
    jobs = [
        job
        for tslice in (10, 30)
        for job in make_jobs("tiny", TINY_SCENARIO, "credit", [("scheduler.tslice_ms", tslice)], [7])
    ]
    with Store(tmp_path / "runs.jsonl") as store, pytest.raises(JobFailed) as raised:
        run_jobs(jobs, store, workers=2)
    assert str(raised.value) == (
        f"run tiny with scheduler.tslice_ms=30, policy credit, seed 7 (key {jobs[1].key}) failed: "
        "its worker process was killed (SIGKILL; by the out-of-memory killer?)"
    )
    assert raised.value.exit_code == 1
    assert pickle.loads(pickle.dumps(raised.value)).exit_code == 1


# ---------------------------------------------------------------------------------------------
# Workers die with the sweep


def children(pid: int) -> list[int]:
    """Ids of the processes whose parent is `pid` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(status.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for a parent to reap it does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux") or not FORK, reason="reads /proc; forked workers")
def test_workers_die_when_the_sweep_is_killed(tmp_path: Path) -> None:
    scenario = tiny_file(tmp_path, SLOW_SCENARIO, "slow.toml")
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "vsched", "sweep", str(scenario),
        "--set", "vm.locker.workload.cs_us=5,10,20,40", "--reps", "8", "-j", "2", "--out", str(out),
    ]  # fmt: skip
    sweep = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        store = out / "runs.jsonl"
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while time.monotonic() < deadline and sweep.poll() is None:
            workers = children(sweep.pid)
            if len(workers) == 2 and store.exists() and store.read_bytes().count(b"\n") >= 1:
                break
            time.sleep(0.02)
        assert len(workers) == 2 and sweep.poll() is None, "the sweep did not get going"
    finally:
        sweep.kill()
        sweep.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(alive(pid) for pid in workers):
        time.sleep(0.05)
    survivors = [pid for pid in workers if alive(pid)]
    for pid in survivors:  # do not leave them behind even when the test fails
        os.kill(pid, signal.SIGKILL)
    assert survivors == []


# ---------------------------------------------------------------------------------------------
# Values nested beyond reason


def test_a_sweep_value_nested_5000_deep_is_refused(cli: Cli, tmp_path: Path) -> None:
    deep = "[" * 5000 + "]" * 5000
    message = one_line(
        cli("sweep", tiny_file(tmp_path), "--set", f"host.pcpus={deep}", "--out", tmp_path / "o"), 2
    )
    assert message == "host.pcpus: expected a value with arrays and tables nested at most 32 levels deep"
    # Deep enough for the core's JSON reader to refuse, shallow enough for Python's parser.
    message = one_line(cli("sweep", tiny_file(tmp_path), "--set", f"host.pcpus={'[' * 200}{']' * 200}"), 2)
    assert message == "host.pcpus: expected a value with arrays and tables nested at most 32 levels deep"


def test_an_override_nested_5000_deep_is_refused_by_the_api() -> None:
    value: list[Any] = []
    for _ in range(5000):
        value = [value]
    with pytest.raises(
        vsched.ScenarioError, match=r"^vm\.\*\.vcpus: expected a value .* at most 32 levels deep$"
    ):
        apply_overrides(TINY_SCENARIO, [("vm.*.vcpus", value)])


def test_a_scenario_nested_5000_deep_is_refused(cli: Cli, tmp_path: Path) -> None:
    scenario = tiny_file(tmp_path, TINY_SCENARIO + "deep = " + "[" * 5000 + "]" * 5000 + "\n")
    for command in ("run", "validate"):
        assert "recursion limit" in one_line(cli(command, scenario), 2)


# ---------------------------------------------------------------------------------------------
# Reading a scenario file


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_an_endless_scenario_file_is_refused(cli: Cli) -> None:
    for command in ("validate", "run"):
        assert one_line(cli(command, "/dev/zero"), 2) == (
            "/dev/zero: not a regular file, and more than the 16 MiB limit on a scenario file was read "
            "from it without reaching its end"
        )
    with pytest.raises(vsched.ScenarioError, match="16 MiB"):
        vsched.validate(Path("/dev/zero"))


def test_a_scenario_file_above_16_mib_is_refused(cli: Cli, tmp_path: Path) -> None:
    scenario = tmp_path / "huge.toml"
    with scenario.open("wb") as file:
        file.truncate(16 * 1024 * 1024 + 1)  # sparse: nothing is written
    assert one_line(cli("validate", scenario), 2) == (
        f"{scenario}: 16777217 bytes, larger than the 16 MiB limit on a scenario file"
    )


def test_a_scenario_file_of_16_mib_is_read(tmp_path: Path) -> None:
    scenario = tmp_path / "padded.toml"
    scenario.write_bytes(TINY_SCENARIO.encode() + b"#" * (16 * 1024 * 1024 - len(TINY_SCENARIO)))
    vsched.validate(scenario)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
def test_a_scenario_from_a_pipe_is_read(cli: Cli, tmp_path: Path) -> None:
    """Not a regular file, but it ends: read like a file."""
    pipe = tmp_path / "scenario.pipe"
    os.mkfifo(pipe)
    writer = threading.Thread(target=pipe.write_text, args=(TINY_SCENARIO,))
    writer.start()
    result = cli("validate", pipe)
    writer.join()
    assert result.exit_code == 0 and " ".join(result.stdout.split()) == f"{pipe}: valid"


def test_a_scenario_file_that_is_not_utf8_is_named_with_its_line(cli: Cli, tmp_path: Path) -> None:
    scenario = tmp_path / "latin1.toml"
    scenario.write_bytes(TINY_SCENARIO.replace('"hog"', '"h\xf6g"').encode("latin-1"))
    line = next(n for n, text in enumerate(TINY_SCENARIO.splitlines(), 1) if '"hog"' in text)
    offset = TINY_SCENARIO.index('"hog"') + 2
    assert (
        one_line(cli("validate", scenario), 2) == f"{scenario}: not UTF-8 text (line {line}, byte {offset})"
    )


# ---------------------------------------------------------------------------------------------
# Text the core cannot take, given to the API


@pytest.mark.parametrize("call", [vsched.run, vsched.validate, vsched.run_json])
def test_a_lone_surrogate_in_the_text_is_a_scenario_error(call: Callable[[str], Any]) -> None:
    text = TINY_SCENARIO.replace('name = "hog"', 'name = "h\ud800g"')
    line = next(n for n, text in enumerate(TINY_SCENARIO.splitlines(), 1) if text == 'name = "hog"')
    with pytest.raises(vsched.ScenarioError) as raised:
        call(text)
    assert str(raised.value) == (
        f"line {line}, column 10: a lone surrogate U+D800, which is not a character (expected UTF-8 text)"
    )


@pytest.mark.parametrize("call", [vsched.run, vsched.validate, vsched.run_json])
def test_a_nul_in_the_text_is_a_scenario_error(call: Callable[[str], Any]) -> None:
    with pytest.raises(vsched.ScenarioError) as raised:
        call(TINY_SCENARIO.replace("pcpus = 2", "pcpus = 2\0"))
    assert str(raised.value) == "line 4, column 10: a NUL character, which TOML does not allow"


@pytest.mark.parametrize("scenario", ["tiny.toml\0", "name = 'x'\0", "tiny\udcff\ud800.toml"])
def test_a_one_line_string_that_cannot_be_a_path_is_a_scenario_error(scenario: str) -> None:
    with pytest.raises(vsched.ScenarioError, match="^scenario: not a usable file path"):
        vsched.validate(scenario)


@pytest.mark.parametrize("trace", ["trace\0.json", "trace\ud800.json"])
def test_a_trace_path_that_cannot_be_a_file_name_is_a_scenario_error(trace: str) -> None:
    with pytest.raises(vsched.ScenarioError, match="^trace: not a usable file path"):
        vsched.run(TINY_SCENARIO, trace=trace)


def test_a_nul_in_a_scenario_file_is_named_with_its_file_line_and_column(cli: Cli, tmp_path: Path) -> None:
    scenario = tiny_file(tmp_path, TINY_SCENARIO.replace("pcpus = 2", "pcpus = \0 2"))
    assert one_line(cli("validate", scenario), 2) == (
        f"{scenario}: line 4, column 9: a NUL character, which TOML does not allow"
    )


def test_a_policy_or_override_key_with_a_lone_surrogate_is_a_scenario_error() -> None:
    with pytest.raises(vsched.ScenarioError, match="^policy: column 3: a lone surrogate U\\+DCFF"):
        vsched.run(TINY_SCENARIO, policy="rr\udcff")
    with pytest.raises(vsched.ScenarioError, match="^key: column 4: a lone surrogate U\\+D800"):
        apply_overrides(TINY_SCENARIO, [("vm.\ud800", 1)])


# ---------------------------------------------------------------------------------------------
# The last resort, Ctrl-C and files that cannot be written


def test_an_unexpected_exception_is_one_line_and_exit_1(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(vsched, "validate", broken)
    monkeypatch.delenv("VSCHED_DEBUG", raising=False)
    result = cli("validate", tiny_file(tmp_path))
    assert one_line(result, 1) == "internal error: ZeroDivisionError: float division by zero"

    monkeypatch.setenv("VSCHED_DEBUG", "1")
    result = cli("validate", tiny_file(tmp_path))
    assert result.exit_code == 1
    assert result.stderr_lines[0] == "Traceback (most recent call last):"
    assert result.stderr_lines[-1] == "error: internal error: ZeroDivisionError: float division by zero"


def test_a_base_exception_such_as_pyo3s_panic_exception_is_one_line(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class PanicException(BaseException):
        pass

    def broken(*args: object, **kwargs: object) -> None:
        raise PanicException("index out of bounds")

    monkeypatch.setattr(vsched, "run_json", broken)
    monkeypatch.delenv("VSCHED_DEBUG", raising=False)
    assert (
        one_line(cli("run", tiny_file(tmp_path)), 1) == "internal error: PanicException: index out of bounds"
    )


def cpu_seconds(pid: int) -> float:
    """User and system time of process `pid` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_during_a_run_exits_130_with_one_line(tmp_path: Path) -> None:
    scenario = tiny_file(tmp_path, SLOW_SCENARIO, "slow.toml")
    run = subprocess.Popen(
        [sys.executable, "-m", "vsched", "run", str(scenario), "--reps", "200"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Well into the simulation (imports take a fraction of this), however loaded the machine.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and run.poll() is None and cpu_seconds(run.pid) < 2:
        time.sleep(0.05)
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=30)
    assert (run.returncode, out, err) == (130, "", "interrupted\n")


def test_an_out_directory_that_cannot_be_made_is_one_line(cli: Cli, tmp_path: Path) -> None:
    scenario = tiny_file(tmp_path)
    inside_a_file = scenario / "results"
    assert one_line(cli("run", scenario, "--out", inside_a_file), 2) == (
        f"--out: Not a directory: '{inside_a_file}'"
    )
    assert one_line(cli("sweep", scenario, "--out", inside_a_file), 2) == (
        f"--out: Not a directory: '{inside_a_file}'"
    )


def test_a_trace_into_a_missing_directory_is_one_line(cli: Cli, tmp_path: Path) -> None:
    trace = tmp_path / "missing" / "trace.json"
    message = one_line(cli("run", tiny_file(tmp_path), "--trace", trace), 2)
    assert message.startswith(f"--trace: {trace}: No such file or directory")


# ---------------------------------------------------------------------------------------------
# --check and --max-memory


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("4096", 4096),
        ("512B", 512),
        ("8G", 8 << 30),
        ("8g", 8 << 30),
        ("512M", 512 << 20),
        ("64k", 64 << 10),
        ("2T", 2 << 40),
        ("1.5GiB", 3 << 29),
        ("1.5G", 3 << 29),
        ("0.5MiB", 1 << 19),
        (".5K", 512),
        ("2GB", 2_000_000_000),
        ("3 MB", 3_000_000),
        ("20000000T", None),
        ("18446744073709551615", 2**64 - 1),
    ],
)
def test_sizes(text: str, size: int | None) -> None:
    if size is None:
        with pytest.raises(Exception, match="--max-memory: expected a size from 1 byte"):
            parse_size(text)
    else:
        assert parse_size(text) == size


@pytest.mark.parametrize(
    "text", ["", "G", "8X", "-1G", "1e9", "8 G B", "0", "0.0001", "1,5G", "18446744073709551616"]
)
def test_a_bad_size_is_named_on_every_command(cli: Cli, tmp_path: Path, text: str) -> None:
    scenario = tiny_file(tmp_path)
    for args in (
        ("run", scenario),
        ("validate", scenario),
        ("sweep", scenario, "--out", tmp_path / "out"),
        ("reproduce", "seed000", "--out", tmp_path / "repro"),
    ):
        message = one_line(cli(*args, "--max-memory", text), 2)
        assert message.startswith("--max-memory: expected a size"), message
        assert f"'{text}'" in message
    assert not (tmp_path / "out").exists() and not (tmp_path / "repro").exists()


def recording(monkeypatch: pytest.MonkeyPatch, name: str) -> list[dict[str, Any]]:
    """Record the keyword arguments of each call to `_core.<name>` (which still runs)."""
    calls: list[dict[str, Any]] = []
    real = getattr(_core, name)

    def record(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(_core, name, record)
    return calls


def test_check_and_max_memory_reach_the_core_from_run_and_validate(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = tiny_file(tmp_path)
    runs = recording(monkeypatch, "run")
    validations = recording(monkeypatch, "validate")
    assert cli("run", scenario, "--check", "--max-memory", "1.5GiB", "--json").exit_code == 0
    assert cli("run", scenario, "--json").exit_code == 0
    assert cli("validate", scenario, "--max-memory", "512M").exit_code == 0
    assert [(c["check"], c["max_memory"]) for c in runs] == [(True, 3 << 29), (False, 0)]
    assert [c["max_memory"] for c in validations] == [512 << 20]
    vsched.run(TINY_SCENARIO, check=True, max_memory=1 << 30)
    vsched.validate(TINY_SCENARIO, max_memory=1 << 31)
    assert (runs[-1]["check"], runs[-1]["max_memory"], validations[-1]["max_memory"]) == (
        True,
        1 << 30,
        1 << 31,
    )


@pytest.mark.parametrize("value", [-1, 2**64, True, 1.5, "8G"])
def test_a_bad_max_memory_is_a_scenario_error_in_the_api(value: Any) -> None:
    with pytest.raises(vsched.ScenarioError, match="^max_memory: expected"):
        vsched.validate(TINY_SCENARIO, max_memory=value)


@pytest.mark.parametrize("jobs", [1, 2])
def test_check_and_max_memory_reach_every_run_of_a_sweep(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    if jobs > 1 and not FORK:
        pytest.skip("the workers must inherit the patched core (fork)")
    seen = tmp_path / "seen"
    seen.mkdir()
    real_run = _core.run

    def run(*args: Any, **kwargs: Any) -> str:
        # Written to a file: a worker process cannot append to this process's list.
        (seen / f"{os.getpid()}-{time.monotonic_ns()}").write_text(
            f"{kwargs['check']} {kwargs['max_memory']}"
        )
        return real_run(*args, **kwargs)

    monkeypatch.setattr(_core, "run", run)
    validations = recording(monkeypatch, "validate")
    result = cli(
        "sweep", tiny_file(tmp_path), "--set", "scheduler.tslice_ms=10,30", "--reps", "2",
        "--check", "--max-memory", "2G", "-j", jobs, "--out", tmp_path / "out",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert sorted(path.read_text() for path in seen.iterdir()) == [f"True {2 << 30}"] * 4
    # Each point is validated as the sweep is planned, and again for its memory estimate when
    # runs go in parallel (python/vsched/parallel_memory.py): always with the budget given.
    assert [c["max_memory"] for c in validations] == [2 << 30] * (2 if jobs == 1 else 4)


def test_check_and_max_memory_reach_the_runs_of_a_reproduction(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import vsched.runs

    settings: list[RunSettings | None] = []

    def run_jobs(*args: Any, **kwargs: Any) -> None:
        settings.append(kwargs.get("settings"))
        raise KeyboardInterrupt  # stop there: this test is about what would have run

    monkeypatch.setattr(vsched.runs, "run_jobs", run_jobs)
    result = cli("reproduce", "seed000", "--quick", "--check", "--max-memory", "3G", "--out", tmp_path / "r")
    assert result.exit_code == 130
    assert settings == [RunSettings(check=True, max_memory=3 << 30)]
