#!/usr/bin/env python3
"""The store trial: two writers on one `--out`, killed at random, lose and double no run.

    python scripts/store_trial.py --kills 20 --out store-trial

Two writer slots each run the same `vsched sweep ... --jobs 2 --out OUT/sweep` and start it
again whenever it ends, until the sweep completes after `--kills` kills. While one writer
holds the store's lock the other is refused (exit 2, one line); the writer holding it is
killed with SIGKILL after a random 0.2 to 1.2 s (its workers die with it), and sometimes the
one still starting. Between kills, when no writer holds the lock, the trial takes it itself
and damages the store as a kill during a write, or an older vsched writing beside another,
would: a line cut short and a run stored twice; the next writer compacts them away.

Every 20 ms the trial reads the store, as any reader may without the lock, and notes every
run stored in a whole line; when a writer exits 0, every run must be stored at that moment.
At the end: every run ever seen stored is still there (nothing lost), each once (nothing
doubled), all the sweep's runs are there, and a last run of the same command finds them all
stored and writes results.parquet with each run once. Prints a
summary (`--json`: as JSON) and exits 0 if all of that holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# About 30 ms a run on one core: a kill finds runs in flight, and a slot's turn stores a few.
SCENARIO = """\
name = "store-trial"
[host]
pcpus = 2
[scheduler]
name = "credit"
[[vm]]
name = "locker"
vcpus = 3
[vm.workload]
kind = "spinlock"
iterations = 3000
[run]
horizon_s = 100
"""
POLL_S = 0.02
BUSY = "is in use"


@dataclass
class Slot:
    """One writer: its process, when it started, and when it is to be killed."""

    name: str
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    holding_since: float | None = None
    kill_after: float = 0.0
    restart_at: float = 0.0
    log: list[str] = field(default_factory=list)


def store_keys(store: Path) -> list[str]:
    """The keys of the whole lines of `store` (a reader's view: no lock)."""
    try:
        data = store.read_bytes()
    except FileNotFoundError:
        return []
    keys = []
    for raw in data.split(b"\n")[:-1]:
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("key"), str):
            keys.append(value["key"])
    return keys


def lock_holder(lock: Path) -> int | None:
    try:
        text = lock.read_text().strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def replaced_store(pid: int, store: Path) -> list[str]:
    """The keys in the store file process `pid` appends to, if another process has replaced
    that file (it shows as deleted in /proc): runs the writer counts as stored that the store
    does not hold. Empty if it appends to the store itself."""
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    for descriptor in descriptors:
        try:
            if os.readlink(f"/proc/{pid}/fd/{descriptor}") == f"{store} (deleted)":
                with open(f"/proc/{pid}/fd/{descriptor}", "rb") as file:
                    return [
                        k
                        for k in (
                            json.loads(line).get("key")
                            for line in file.read().split(b"\n")[:-1]
                            if line.startswith(b"{")
                        )
                        if isinstance(k, str)
                    ]
        except (OSError, ValueError):
            continue
    return []


def damage(store: Path, lock: Path) -> str | None:
    """Take the store's lock if it is free, and append a run stored twice and a line cut
    short; the key stored twice, or None if a writer holds the lock."""
    if not store.exists():
        return None
    descriptor = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        lines = store.read_bytes().split(b"\n")[:-1] if store.exists() else []
        runs = []  # the lines that hold a run (not a line cut short earlier)
        for line in lines:
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and isinstance(value.get("key"), str):
                runs.append((line, value["key"]))
        if not runs:
            return None
        twice, key = random.choice(runs)
        with store.open("ab") as file:
            file.write(twice + b"\n" + b'{"key": "cut-short", "scen')
        # A later append must not continue the cut line: a writer compacts it on opening.
        with store.open("ab") as file:
            file.write(b"\n")
        return str(key)
    finally:
        os.close(descriptor)


def trial(args: argparse.Namespace) -> dict[str, object]:
    random.seed(args.seed)
    work = Path(args.out).resolve()
    work.mkdir(parents=True, exist_ok=True)
    scenario = work / "trial.toml"
    scenario.write_text(SCENARIO)
    out = work / "sweep"
    store, lock = out / "runs.jsonl", out / "runs.jsonl.lock"
    values = ",".join(str(5 + i) for i in range(args.points))
    command = [
        sys.executable,
        "-m",
        "vsched",
        "sweep",
        str(scenario),
        "--set",
        f"vm.locker.workload.cs_us={values}",
        "--reps",
        str(args.reps),
        "--jobs",
        "2",
        "--out",
        str(out),
    ]
    total = args.points * args.reps
    slots = [Slot("A"), Slot("B")]
    seen: set[str] = set()
    injected: set[str] = set()  # keys the trial itself stored twice
    doubled_now: set[str] = set()  # keys a writer stored twice, seen while the trial ran
    lost_now: set[str] = set()  # keys a writer appended to a store file another had replaced
    counts = Counter(kills=0, kills_of_holder=0, refused=0, completed=0, damaged=0, observations=0)
    problems: list[str] = []
    started = time.monotonic()
    done = False
    while not done:
        if time.monotonic() - started > args.timeout:
            problems.append(f"the trial did not end within {args.timeout} s")
            break
        now = time.monotonic()
        for slot in slots:
            process = slot.process
            if process is None:
                if now >= slot.restart_at:
                    slot.process = subprocess.Popen(
                        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
                    )
                    slot.started = now
                    slot.holding_since = None
                    slot.kill_after = random.uniform(0.2, 1.2)
                continue
            code = process.poll()
            if code is None:
                if slot.holding_since is None and lock_holder(lock) == process.pid:
                    slot.holding_since = now
                holding = slot.holding_since is not None and now - slot.holding_since >= slot.kill_after
                starting = slot.holding_since is None and random.random() < 0.002
                # A writer that takes no lock (an older vsched) is killed after as long.
                unlocked = slot.holding_since is None and now - slot.started >= slot.kill_after + 8.0
                if counts["kills"] < args.kills and (holding or starting or unlocked):
                    process.kill()
                    process.wait()
                    counts["kills"] += 1
                    counts["kills_of_holder"] += holding
                    slot.process = None
                    slot.restart_at = now + random.uniform(0.0, 0.3)
                continue
            err = process.stderr.read().decode(errors="replace") if process.stderr else ""
            slot.process = None
            slot.restart_at = now + random.uniform(0.0, 0.3)
            if code == 2 and BUSY in err and len(err.strip().splitlines()) == 1:
                counts["refused"] += 1
            elif code == 0:
                counts["completed"] += 1
                done = counts["kills"] >= args.kills
                # A writer that ends well has stored every run: none may be missing now.
                stored = len(set(store_keys(store)))
                if stored != total:
                    problems.append(f"writer {slot.name} exited 0 with {stored} of {total} runs stored")
            else:
                problems.append(f"writer {slot.name} exited {code}: {err.strip()[-500:]}")
                done = True
        if counts["kills"] < args.kills and random.random() < args.damage_rate:
            twice = damage(store, lock)
            if twice is not None:
                counts["damaged"] += 1
                injected.add(twice)
        keys = store_keys(store)
        counts["observations"] += 1
        seen.update(keys)
        doubled_now.update(k for k, n in Counter(keys).items() if n > 1 and k not in injected)
        for slot in slots:
            if slot.process is not None:
                appended = set(replaced_store(slot.process.pid, store)) - set(store_keys(store))
                lost_now.update(appended)
        time.sleep(POLL_S)
    for slot in slots:
        if slot.process is not None:
            slot.process.kill()
            slot.process.wait()
    final = store_keys(store)
    last = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    after = store_keys(store)
    lost = sorted(seen - set(after))
    doubled = sorted(k for k, n in Counter(after).items() if n > 1)
    if last.returncode != 0:
        problems.append(f"the last run exited {last.returncode}: {last.stderr.strip()[-500:]}")
    elif f"{total} of {total} runs already stored" not in last.stderr:
        problems.append(f"the last run found the sweep incomplete: {last.stderr.strip()[-300:]}")
    if lost:
        problems.append(f"{len(lost)} stored runs lost, e.g. {lost[0]}")
    if lost_now:
        problems.append(f"{len(lost_now)} runs appended to a store file another writer had replaced")
    if doubled_now:
        problems.append(f"{len(doubled_now)} runs stored twice by the writers while they ran")
    if doubled:
        problems.append(f"{len(doubled)} runs stored twice, e.g. {doubled[0]}")
    if len(set(after)) != total:
        problems.append(f"{len(set(after))} runs stored, expected {total}")
    if last.returncode == 0:
        import pyarrow.parquet as pq

        rows = pq.read_table(out / "results.parquet").column("key").to_pylist()
        if sorted(rows) != sorted(set(after)):
            problems.append("results.parquet does not hold each stored run once")
    return {
        "command": " ".join(command[1:]),
        "runs": total,
        "seconds": round(time.monotonic() - started, 1),
        **counts,
        "seen_stored": len(seen),
        "stored_at_end": len(set(final)),
        "lost": len(lost),
        "lost_while_running": len(lost_now),
        "doubled": len(doubled),
        "doubled_while_running": len(doubled_now),
        "problems": problems,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20, help="writers to kill with SIGKILL (default 20)")
    parser.add_argument("--points", type=int, default=60, help="swept values (default 60)")
    parser.add_argument("--reps", type=int, default=5, help="seeds per value (default 5)")
    parser.add_argument(
        "--damage-rate",
        type=float,
        default=0.01,
        help="chance per poll of damaging the store while it is free (default 0.01)",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the kill times (default 1)")
    parser.add_argument("--timeout", type=float, default=900, help="give up after this many s (default 900)")
    parser.add_argument("--out", default="store-trial", help="work directory (default store-trial)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    result = trial(args)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    sys.exit(1 if result["problems"] else 0)


if __name__ == "__main__":
    main()
