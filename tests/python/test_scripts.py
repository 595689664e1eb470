"""The measurement scripts in `scripts/`: `peer_compare.py` refuses bad options in one line, and
`bench_interleaved.py`'s arithmetic holds on two stand-in benchmark binaries whose times are
known (the medians and low quartiles ignore a slow spell, the ratios are new over old and 256
vCPUs over 32)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# A stand-in for the benchmark binary: ns per event by measurement (hogs with 1 or 8 copies,
# the standard scenario), doubled on its first call (a slow spell of the machine), and 10 % or
# 20 % slower in the second and third rounds.
FAKE_ENGINE = """#!{python}
import json, sys
from pathlib import Path
calls = Path(__file__).with_suffix(".calls")
n = int(calls.read_text()) if calls.exists() else 0
calls.write_text(str(n + 1))
args = sys.argv[1:]
name = "standard" if "--file" not in args else ("hogs256" if args[-1] == "8" else "hogs32")
ns = {times}[name] * (2 if n == 0 else 1 + 0.1 * ((n // 3) % 3))
print("a line of progress")
print(json.dumps({{"ns_per_event": ns, "vs_bare_loop": {bare}}}))
"""


def fake_engine(path: Path, times: dict[str, float], bare: float) -> Path:
    path.write_text(FAKE_ENGINE.format(python=sys.executable, times=times, bare=bare), encoding="utf-8")
    path.chmod(0o755)
    return path


def test_reports_medians_low_quartiles_and_ratios(tmp_path: Path) -> None:
    old = fake_engine(tmp_path / "old", {"hogs32": 100.0, "hogs256": 115.0, "standard": 200.0}, 0.4)
    new = fake_engine(tmp_path / "new", {"hogs32": 90.0, "hogs256": 99.0, "standard": 180.0}, 0.44)

    process = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_interleaved.py"), str(old), str(new), "--rounds", "4"],
        capture_output=True,
        text=True,
        check=False,
    )

    assert process.returncode == 0, process.stderr
    lines = process.stdout.splitlines()
    # hogs32, old: 200 (slow spell), 110, 120, 100; sorted, the low quartile is the second.
    assert (
        "hogs32    old   115.0 (110.0, 100.0-200.0)  new   103.5 (99.0, 90.0-180.0)  new/old 0.900, 0.900"
        in lines
    )
    assert (
        "standard  old   210.0 (200.0, 200.0-240.0)  new   189.0 (180.0, 180.0-216.0)  new/old 0.900, 0.900"
        in lines
    )
    # hogs256, old: 115, 126.5, 138, 115 (low quartile 115); per round over hogs32: 0.575,
    # then 1.15 three times.
    assert (
        "old: 256 vCPUs over 32, median of per-round ratios 1.150, of low quartiles 1.045; "
        "standard scenario 0.400x the bare loop"
    ) in lines
    assert (
        "new: 256 vCPUs over 32, median of per-round ratios 1.100, of low quartiles 1.000; "
        "standard scenario 0.440x the bare loop"
    ) in lines


def test_names_a_missing_binary(tmp_path: Path) -> None:
    process = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_interleaved.py"), str(tmp_path / "no-such"), "x"],
        capture_output=True,
        text=True,
        check=False,
    )

    assert process.returncode == 2
    assert process.stderr.startswith("error: old: expected a benchmark binary"), process.stderr


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (["--pairs", "0"], "--pairs: expected a whole number of at least 1"),
        (["--peer-dir", "."], "--peer-dir: expected a directory holding rr-peer-user.toml"),
        (["--peer-python", "no/such/python"], "--peer-python: expected a Python with simpy installed"),
    ],
)
def test_peer_compare_names_a_bad_option(tmp_path: Path, arguments: list[str], fragment: str) -> None:
    """`scripts/peer_compare.py` checks its options before it runs anything: one line, exit 2."""
    peer_dir = tmp_path / "peer"
    peer_dir.mkdir()
    for name in ("rr-peer-user.toml", "rr-peer.toml", "rr_simpy.py"):
        (peer_dir / name).write_text("", encoding="utf-8")
    options = {"--peer-dir": str(peer_dir), "--peer-python": sys.executable, "--pairs": "1"}
    for flag, value in zip(arguments[::2], arguments[1::2]):
        options[flag] = value
    command = [sys.executable, str(REPO / "scripts" / "peer_compare.py")]
    for flag, value in options.items():
        command += [flag, value]
    process = subprocess.run(command, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert process.returncode == 2, process.stderr
    assert process.stdout == ""
    assert process.stderr.splitlines() == [process.stderr.strip()], process.stderr
    assert process.stderr.startswith(f"error: {fragment}"), process.stderr
