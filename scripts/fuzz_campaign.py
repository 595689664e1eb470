#!/usr/bin/env python3
"""Fuzz campaign: many generated scenarios through vsched, each outcome classified.

    python scripts/fuzz_campaign.py --cases 100000 --jobs 2 --out fuzz/campaign

Case i of seed s is generated alone (tests/python/scenario_gen.py, `RandomSource.of(s, i)`),
so a case can be replayed (`--replay I`) and an interrupted campaign resumed: rerunning the
same command skips the cases already in OUT/results.jsonl. See docs/hardening.md.

Each case runs in a worker process, in-process through the core (`vsched._core`):
validate, then run (reps 1) twice to check determinism and the report's invariants. Every
`--cli-every`-th case also goes through the command line (`vsched validate FILE`, `vsched
run FILE --reps 1 --json`), whose exit codes, stderr and JSON must agree with the in-process
results. A worker that dies (abort, signal) or stops answering is replaced and its case
classified (crash_signal, timeout).

Outcomes: ok (valid and ran), refused (exit 2), policy_error (exit 1: a policy bug), and
the bad ones: traceback, panic, multi_line_error, timeout, crash_signal, nondeterministic,
invariant_broken, validate_run_disagree, cli_api_mismatch, bad_exit_code. Bad outcomes and
policy errors are grouped by signature (the message with numbers and names blurred); the
first case of each signature is reduced (line by line, as long as the signature stays) and
saved as OUT/repro/<outcome>-<hash>.toml with what the command line printed for it.
OUT/summary.json has the counts, throughput and the signatures.
"""

from __future__ import annotations

import argparse
import base64
import collections
import contextlib
import hashlib
import json
import os
import re
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))

import report_checks  # noqa: E402
import scenario_gen  # noqa: E402

OK_OUTCOMES = ("ok", "refused")
BAD_OUTCOMES = (
    "traceback",
    "panic",
    "multi_line_error",
    "timeout",
    "crash_signal",
    "nondeterministic",
    "invariant_broken",
    "validate_run_disagree",
    "cli_api_mismatch",
    "bad_exit_code",
)
# Policy errors are the promised exit 1, but each is a policy bug: kept with reproducers.
SAVED_OUTCOMES = (*BAD_OUTCOMES, "policy_error")


def blur(message: str) -> str:
    """A message with its particulars blurred, so that one bug gives one signature: after
    the stage ("validate: ", "vsched run: "...), field paths, names, numbers and lists of
    choices become placeholders."""
    stage, sep, rest = message.partition(": ")
    if not sep:
        stage, rest = "", message
    # A message starts with its field path: "vm[1].workload.iterations: ...", "host: ..."
    text = re.sub(r"(^|')([a-z_]+|[^\s'\":]*[.\[\\][^\s'\":]*): ", r"\1PATH: ", rest)
    text = re.sub(r'"[^"]*"', '"S"', text)
    text = re.sub(r"`[^`]*`", "`S`", text)
    text = re.sub(r"expected one of [^;'\"]*", "expected one of ...", text)
    text = re.sub(r"0x[0-9a-f]+", "N", text)
    text = re.sub(r"\d+(\.\d+)?(e[+-]?\d+)?", "N", text)
    return (stage + sep + " ".join(text.split()))[:160].rstrip("'\". ")


# ---------------------------------------------------------------------------------------
# Worker: evaluates cases, one JSON line per answer


class CaseTimeout(Exception):
    pass


class Verdict(Exception):
    """The first property a case breaks ends its evaluation."""

    def __init__(self, outcome: str, detail: str) -> None:
        super().__init__(detail)
        self.outcome = outcome
        self.detail = detail


def call(function: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", value), ("scenario" | "policy", message), ("panic", message), ("timeout", message)
    or ("exception", "Type: message")."""
    import vsched

    try:
        return "ok", function()
    except vsched.ScenarioError as error:
        return "scenario", str(error)
    except vsched.PolicyError as error:
        return "policy", str(error)
    except CaseTimeout as error:
        return "timeout", str(error)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as error:  # pyo3_runtime.PanicException derives from BaseException
        if type(error).__name__ == "PanicException":
            return "panic", str(error)
        return "exception", f"{type(error).__name__}: {error}"


class Worker:
    def __init__(self, timeout: float, mem_mb: int, send: Callable[[dict[str, Any]], None]) -> None:
        self.timeout = timeout
        self.mem_mb = mem_mb
        self.send = send
        self.tmp = Path(tempfile.mkdtemp(prefix="vsched-fuzz-"))

    def stage(self, name: str) -> None:
        self.send({"stage": name})

    def progress_deadline(self) -> Callable[[int, int, float, float], None]:
        started = time.monotonic()

        def check(rep: int, reps: int, sim_s: float, horizon_s: float) -> None:
            if time.monotonic() - started > self.timeout:
                # Slow (a big scenario) or stalled (next to no simulated time: a livelock)?
                pace = "stalled" if sim_s < 0.1 * horizon_s else "slow"
                raise CaseTimeout(
                    f"run still going after {self.timeout:g} s, {pace} "
                    f"(simulated {sim_s:.3f}/{horizon_s:g} s)"
                )

        return check

    def evaluate(self, data: bytes, cli: bool) -> tuple[str, str]:
        try:
            self.check(data, cli)
        except Verdict as verdict:
            return verdict.outcome, verdict.detail
        raise AssertionError("check() ends with a verdict")

    def check_error(self, where: str, kind: str, message: str) -> None:
        """Raise the verdict for an in-process result that is neither success nor a clean error."""
        if kind == "panic":
            raise Verdict("panic", f"{where}: PanicException: {message}")
        if kind == "exception":
            raise Verdict("traceback", f"{where}: unexpected exception {message}")
        if kind == "timeout":
            raise Verdict("timeout", f"{where}: {message}")
        if kind in ("scenario", "policy"):
            problem = report_checks.error_line_problem(message)
            if problem is not None:
                outcome = problem if problem in ("panic", "traceback") else "multi_line_error"
                raise Verdict(outcome, f"{where}: {problem}: {message!r:.300}")

    def check(self, data: bytes, cli: bool) -> None:
        import vsched
        from vsched import _core

        text = data.decode("utf-8", errors="replace")
        utf8 = text.encode("utf-8") == data
        path = self.tmp / "case.toml"
        path.write_bytes(data)
        self.stage("validate")
        if not utf8:
            validated = call(lambda: vsched.validate(path))
        elif "\n" in text:
            validated = call(lambda: vsched.validate(text))
        else:  # one line of text would be taken for a path: the core takes it as text
            validated = call(lambda: _core.validate(text))
        self.check_error("validate", *validated)
        if not utf8:
            if validated[0] != "scenario":
                raise Verdict("validate_run_disagree", f"non-UTF-8 file: validate gave {validated[0]}")
            ran: tuple[str, Any] = validated
        else:
            self.stage("run")
            ran = call(lambda: _core.run(text, reps=1, progress=self.progress_deadline()))
            self.check_error("run", *ran)
        if validated[0] == "ok" and ran[0] != "ok" and ran[0] != "policy":
            raise Verdict("validate_run_disagree", f"valid, but run: {ran[1]!r:.300}")
        if validated[0] != "ok" and ran[0] != "scenario":
            raise Verdict("validate_run_disagree", f"validate: {validated[1]!r:.200}, but run gave {ran[0]}")
        report_text = ran[1] if ran[0] == "ok" else None
        if report_text is not None:
            try:
                report = json.loads(report_text)
            except ValueError as error:
                raise Verdict("invariant_broken", f"report is not JSON: {error}") from None
            problems = report_checks.report_problems(report, reps=1)
            if problems:
                raise Verdict("invariant_broken", f"{problems[0]} (+{len(problems) - 1} more)")
            self.stage("rerun")
            again = call(lambda: _core.run(text, reps=1, progress=self.progress_deadline()))
            self.check_error("second run", *again)
            if again[0] != "ok":
                raise Verdict("nondeterministic", f"second run: {again[0]}: {again[1]!r:.200}")
            if report_checks.canonical(again[1]) != report_checks.canonical(report_text):
                raise Verdict(
                    "nondeterministic", f"second run differs: {first_difference(report_text, again[1])}"
                )
        if cli:
            self.check_cli(path, validated[0], ran[0], report_text)
        if ran[0] == "policy":
            raise Verdict("policy_error", f"run: {ran[1]}")
        raise Verdict("ok" if ran[0] == "ok" else "refused", "")

    def cli(self, *args: str) -> tuple[int, str, str]:
        self.stage("cli " + args[0])
        limit = self.mem_mb << 20

        def limit_memory() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        command = [sys.executable, "-m", "vsched", *args]
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                timeout=self.timeout * 2 + 5,
                preexec_fn=limit_memory if self.mem_mb else None,
            )
        except subprocess.TimeoutExpired:
            raise Verdict("timeout", f"vsched {args[0]}: no exit after {self.timeout * 2 + 5:g} s") from None
        stdout = done.stdout.decode("utf-8", errors="replace")
        stderr = done.stderr.decode("utf-8", errors="replace")
        if done.returncode < 0:
            name = signal.Signals(-done.returncode).name
            raise Verdict("crash_signal", f"vsched {args[0]}: killed by {name}: {tail(stderr)}")
        if done.returncode not in (0, 1, 2):
            raise Verdict("bad_exit_code", f"vsched {args[0]}: exit {done.returncode}: {tail(stderr)}")
        if done.returncode != 0:
            problem = report_checks.error_line_problem(stderr)
            if problem is not None:
                outcome = problem if problem in ("panic", "traceback") else "multi_line_error"
                raise Verdict(outcome, f"vsched {args[0]}: exit {done.returncode}, {problem}: {tail(stderr)}")
        return done.returncode, stdout, stderr

    def check_cli(self, path: Path, validated: str, ran: str, report_text: str | None) -> None:
        code, _, stderr = self.cli("validate", str(path))
        if code != {"ok": 0, "scenario": 2}[validated]:
            raise Verdict(
                "cli_api_mismatch",
                f"vsched validate exit {code}, in-process {validated}: {stderr.strip():.200}",
            )
        code, stdout, stderr = self.cli("run", str(path), "--reps", "1", "--json")
        if validated == "ok" and code == 2:
            raise Verdict(
                "validate_run_disagree", f"vsched validate: valid, vsched run: {stderr.strip():.200}"
            )
        if code != {"ok": 0, "scenario": 2, "policy": 1}[ran]:
            raise Verdict(
                "cli_api_mismatch", f"vsched run exit {code}, in-process {ran}: {stderr.strip():.200}"
            )
        if report_text is not None:
            try:
                same = report_checks.canonical(stdout) == report_checks.canonical(report_text)
            except ValueError:
                raise Verdict(
                    "invariant_broken", f"vsched run --json printed no JSON: {stdout[:200]!r}"
                ) from None
            if not same:
                raise Verdict(
                    "nondeterministic",
                    f"CLI and in-process reports differ: {first_difference(report_text, stdout)}",
                )


BACKTRACE_LINE = re.compile(r"^\s+(\d+: |at )|^stack backtrace:|^note: .*backtrace")


def without_backtrace(stderr: str) -> str:
    """stderr without the frames of a Rust backtrace (printed under RUST_BACKTRACE=1)."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not BACKTRACE_LINE.match(line))


def tail(stderr: str) -> str:
    """The last lines of a dead process's stderr, backtrace left out, as one line."""
    lines = [line for line in without_backtrace(stderr).splitlines() if line.strip()]
    return " | ".join(lines[-3:])[:400]


def first_difference(a: str, b: str) -> str:
    """The first differing leaf of two reports, as a path."""

    def walk(x: Any, y: Any, path: str) -> str | None:
        if isinstance(x, dict) and isinstance(y, dict):
            for key in sorted(set(x) | set(y)):
                if key in report_checks.WALL_CLOCK_FIELDS:
                    continue
                found = walk(x.get(key), y.get(key), f"{path}.{key}")
                if found:
                    return found
            return None
        if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (u, v) in enumerate(zip(x, y)):
                found = walk(u, v, f"{path}[{i}]")
                if found:
                    return found
            return None
        return None if x == y else f"{path}: {x!r:.60} vs {y!r:.60}"

    return walk(json.loads(a), json.loads(b), "") or "?"


def worker_main(args: argparse.Namespace) -> None:
    # The protocol goes over the original stdout; anything else printed goes to stderr.
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    if args.mem_mb:
        limit = args.mem_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    def send(message: dict[str, Any]) -> None:
        channel.write(json.dumps(message) + "\n")

    worker = Worker(args.timeout, args.mem_mb, send)
    scenario_gen.registry()
    send({"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        started = time.monotonic()
        if "data" in request:
            data, kind, notes = base64.b64decode(request["data"]), "given", []
        else:
            case = scenario_gen.generate(scenario_gen.RandomSource.of(args.seed, request["id"]))
            data, kind, notes = case.data, case.kind, case.notes
        try:
            outcome, detail = worker.evaluate(data, request.get("cli", False))
        except Exception:
            outcome, detail = "traceback", "campaign worker: " + traceback.format_exc().splitlines()[-1]
        send(
            {
                "id": request["id"],
                "outcome": outcome,
                "detail": detail[:1000],
                "kind": kind,
                "notes": notes,
                "ms": round((time.monotonic() - started) * 1000, 1),
            }
        )


# ---------------------------------------------------------------------------------------
# Parent: hands out cases, watches workers, records results


class WorkerProcess:
    def __init__(self, slot: int, args: argparse.Namespace) -> None:
        self.slot = slot
        self.log_path = Path(args.out) / f"worker-{slot}.stderr"
        self.log = open(self.log_path, "ab")  # noqa: SIM115 (open while the worker lives)
        command = [
            sys.executable,
            __file__,
            "--worker",
            "--seed",
            str(args.seed),
            "--timeout",
            str(args.timeout),
            "--mem-mb",
            str(args.mem_mb),
        ]
        # Its own process group, so that a hung worker is killed with its CLI children.
        self.process: subprocess.Popen[bytes] = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, start_new_session=True
        )
        assert self.process.stdout is not None and self.process.stdin is not None
        self.fd = self.process.stdout.fileno()
        self.buffer = b""
        self.request: dict[str, Any] | None = None
        self.deadline = time.monotonic() + 120  # time to import vsched
        self.stage = "start"
        self.log_offset = self.log_path.stat().st_size
        self.grace = args.timeout * 3 + 10  # per stage: a CLI run may take twice the timeout

    def send(self, request: dict[str, Any]) -> None:
        self.request = request
        self.deadline = time.monotonic() + self.grace
        self.stage = "queued"
        self.log_offset = self.log_path.stat().st_size
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()

    def read_messages(self) -> tuple[list[dict[str, Any]], bool]:
        """Messages available now, and whether the worker closed its end (died)."""
        chunk = os.read(self.fd, 65536)
        self.buffer += chunk
        messages = []
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            messages.append(json.loads(line))
        return messages, not chunk

    def stderr_since_request(self) -> str:
        self.log.flush()
        with open(self.log_path, "rb") as log:
            log.seek(self.log_offset)
            return log.read().decode("utf-8", errors="replace")

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.log.close()


class Campaign:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "repro").mkdir(exist_ok=True)
        self.results_path = self.out / "results.jsonl"
        self.results: dict[Any, dict[str, Any]] = {}
        if self.results_path.exists():
            for line in self.results_path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue  # a line cut short by a kill
                    self.results[record["id"]] = record
        self.results_file = open(self.results_path, "a", encoding="utf-8")  # noqa: SIM115 (open for the whole campaign)
        self.workers: list[WorkerProcess] = []
        self.answers: dict[Any, dict[str, Any]] = {}
        self.started = time.monotonic()
        self.done_here = 0
        self.startup_deaths = 0

    # -- workers

    def start_worker(self, slot: int) -> WorkerProcess:
        worker = WorkerProcess(slot, self.args)
        if slot < len(self.workers):
            self.workers[slot] = worker
        else:
            self.workers.append(worker)
        return worker

    def handle_death(self, worker: WorkerProcess, why: str) -> None:
        request = worker.request
        if request is None:
            self.startup_deaths += 1
            if self.startup_deaths > 3:
                sys.exit(f"workers die on start; see {worker.log_path}")
        stderr = worker.stderr_since_request()
        code = worker.process.poll()
        worker.kill()
        if request is not None:
            if why == "timeout":
                outcome = "timeout"
                detail = f"no answer within {worker.grace:g} s, in stage {worker.stage}"
            else:
                code = worker.process.returncode
                name = signal.Signals(-code).name if code is not None and code < 0 else f"exit {code}"
                outcome = "crash_signal"
                detail = f"worker died ({name}) in stage {worker.stage}: {tail(stderr)}"
            self.answers[request["id"]] = {
                "id": request["id"],
                "outcome": outcome,
                "detail": detail,
                "kind": "?",
                "notes": [],
            }
        self.start_worker(worker.slot)

    def evaluate_all(self, requests: list[dict[str, Any]]) -> None:
        """Evaluate every request, `--jobs` at a time; answers land in self.answers."""
        queue = collections.deque(requests)
        while queue or any(w.request is not None for w in self.workers):
            for worker in self.workers:
                if worker.request is None and worker.stage == "ready" and queue:
                    worker.send(queue.popleft())
            now = time.monotonic()
            timeout = max(0.0, min(w.deadline for w in self.workers) - now)
            ready, _, _ = select.select([w.fd for w in self.workers], [], [], min(timeout, 5.0))
            for worker in list(self.workers):
                if worker.fd in ready:
                    messages, closed = worker.read_messages()
                    for message in messages:
                        if "stage" in message:
                            worker.stage = message["stage"]
                            worker.deadline = time.monotonic() + worker.grace
                        elif message.get("ready"):
                            worker.stage = "ready"
                            worker.deadline = float("inf")
                        else:
                            self.answers[message["id"]] = message
                            worker.request = None
                            worker.stage = "ready"
                            worker.deadline = float("inf")
                    if closed:
                        self.handle_death(worker, "died")
                elif time.monotonic() > worker.deadline:
                    self.handle_death(worker, "timeout")
            self.on_answers()

    def on_answers(self) -> None:
        pass

    # -- the campaign

    def run(self) -> None:
        args = self.args
        todo = [i for i in range(args.start, args.start + args.cases) if i not in self.results]
        print(
            f"{len(self.results)} cases already done in {self.results_path}, {len(todo)} to go, "
            f"{args.jobs} worker(s), seed {args.seed}",
            flush=True,
        )
        for slot in range(args.jobs):
            self.start_worker(slot)
        last_report = time.monotonic()
        batch = 200 * args.jobs
        for start in range(0, len(todo), batch):
            requests = [
                {"id": i, "cli": args.cli_every > 0 and i % args.cli_every == 0}
                for i in todo[start : start + batch]
            ]
            self.evaluate_all(requests)
            for request in requests:
                record = self.answers.pop(request["id"])
                record["cli"] = request["cli"]
                if record.get("kind") == "?":  # the worker died: describe the case from the generator
                    case = scenario_gen.generate(scenario_gen.RandomSource.of(args.seed, request["id"]))
                    record["kind"], record["notes"] = case.kind, case.notes
                self.results[request["id"]] = record
                self.results_file.write(json.dumps(record) + "\n")
                self.done_here += 1
            self.results_file.flush()
            if time.monotonic() - last_report > 30 or start + batch >= len(todo):
                last_report = time.monotonic()
                self.write_summary(final=False)
                self.print_progress(len(todo))
        self.write_summary(final=False)
        if not args.no_reduce:
            self.save_reproducers()
        for worker in self.workers:
            worker.kill()
        summary = self.write_summary(final=True)
        print(json.dumps(summary["outcomes"], indent=1))
        print(f"summary: {self.out / 'summary.json'}")

    def print_progress(self, total: int) -> None:
        elapsed = time.monotonic() - self.started
        counts = collections.Counter(r["outcome"] for r in self.results.values())
        rate = self.done_here / elapsed if elapsed else 0.0
        print(
            f"[{elapsed:7.0f} s] {self.done_here}/{total} this session, {rate:.1f} cases/s; "
            + ", ".join(f"{k} {v}" for k, v in counts.most_common()),
            flush=True,
        )

    def signatures(self) -> dict[str, dict[str, dict[str, Any]]]:
        groups: dict[str, dict[str, dict[str, Any]]] = collections.defaultdict(dict)
        for record in sorted(self.results.values(), key=lambda r: r["id"]):
            if record["outcome"] not in SAVED_OUTCOMES:
                continue
            signature = blur(record["detail"])
            entry = groups[record["outcome"]].setdefault(
                signature,
                {
                    "count": 0,
                    "first_case": record["id"],
                    "detail": record["detail"],
                    "notes": record.get("notes"),
                },
            )
            entry["count"] += 1
        return groups

    def write_summary(self, final: bool) -> dict[str, Any]:
        elapsed = time.monotonic() - self.started
        records = list(self.results.values())
        by_kind: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        for record in records:
            by_kind[record.get("kind", "?")][record["outcome"]] += 1
        times = sorted(r.get("ms", 0.0) for r in records if "ms" in r)
        groups = self.signatures()
        repro_index = self.repro_index()
        for outcome, signatures in groups.items():
            for signature, entry in signatures.items():
                entry["repro"] = repro_index.get(f"{outcome}|{signature}")
        summary = {
            "seed": self.args.seed,
            "cases": len(records),
            "this_session": {
                "cases": self.done_here,
                "elapsed_s": round(elapsed, 1),
                "cases_per_s": round(self.done_here / elapsed, 2) if elapsed else None,
                "jobs": self.args.jobs,
            },
            "timeout_s": self.args.timeout,
            "cli_every": self.args.cli_every,
            "cli_cases": sum(1 for r in records if r.get("cli")),
            "case_ms": {
                "median": times[len(times) // 2] if times else None,
                "p99": times[int(len(times) * 0.99)] if times else None,
                "max": times[-1] if times else None,
            },
            "outcomes": dict(collections.Counter(r["outcome"] for r in records).most_common()),
            "by_kind": {kind: dict(counter.most_common()) for kind, counter in sorted(by_kind.items())},
            "signatures": {outcome: groups[outcome] for outcome in SAVED_OUTCOMES if outcome in groups},
            "final": final,
        }
        tmp = self.out / "summary.json.tmp"
        tmp.write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")
        tmp.replace(self.out / "summary.json")
        return summary

    # -- reproducers

    def repro_index(self) -> dict[str, str]:
        path = self.out / "repro" / "index.json"
        index: dict[str, str] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        return index

    def evaluate_text(self, data: bytes, cli: bool) -> dict[str, Any]:
        key = "given-" + hashlib.sha1(data + bytes([cli])).hexdigest()
        self.evaluate_all([{"id": key, "data": base64.b64encode(data).decode(), "cli": cli}])
        return self.answers.pop(key)

    def reduce(self, data: bytes, outcome: str, signature: str, cli: bool) -> bytes:
        """Drop whole tables, then chunks of lines, then single lines, as long as the case keeps
        its outcome and signature."""
        budget = self.args.reduce_budget if outcome != "timeout" else max(4, self.args.reduce_budget // 20)

        def same(candidate: list[bytes]) -> bool:
            nonlocal budget
            budget -= 1
            answer = self.evaluate_text(b"\n".join(candidate), cli)
            return answer["outcome"] == outcome and blur(answer["detail"]) == signature

        lines = data.split(b"\n")
        # Tables: a header line and the lines up to the next header, the last table first.
        headers = [i for i, line in enumerate(lines) if line.lstrip().startswith(b"[")]
        for start, end in reversed(list(zip(headers, [*headers[1:], len(lines)]))):
            if budget <= 0:
                break
            candidate = lines[:start] + lines[end:]
            if candidate and same(candidate):
                lines = candidate
        chunk = max(1, len(lines) // 2)
        while chunk >= 1 and budget > 0:
            i = 0
            while i < len(lines) and budget > 0:
                candidate = lines[:i] + lines[i + chunk :]
                if candidate and same(candidate):
                    lines = candidate
                else:
                    i += chunk
            chunk //= 2
        return b"\n".join(lines)

    def save_reproducers(self) -> None:
        index = self.repro_index()
        for outcome, signatures in self.signatures().items():
            for signature, entry in signatures.items():
                key = f"{outcome}|{signature}"
                if key in index:
                    continue
                record = self.results[entry["first_case"]]
                case = scenario_gen.generate(
                    scenario_gen.RandomSource.of(self.args.seed, entry["first_case"])
                )
                cli = bool(record.get("cli"))
                print(f"reducing case {entry['first_case']} ({outcome}: {signature[:80]})", flush=True)
                reduced = self.reduce(case.data, outcome, signature, cli)
                name = f"{outcome}-{hashlib.sha1(key.encode()).hexdigest()[:10]}"
                toml_path = self.out / "repro" / f"{name}.toml"
                toml_path.write_bytes(reduced)
                info = {
                    "outcome": outcome,
                    "signature": signature,
                    "count": entry["count"],
                    "first_case": entry["first_case"],
                    "seed": self.args.seed,
                    "case_notes": case.notes,
                    "original_bytes": len(case.data),
                    "reduced_bytes": len(reduced),
                    "in_process": self.evaluate_text(reduced, cli),
                    "cli": cli_transcript(toml_path, self.args.timeout),
                }
                (self.out / "repro" / f"{name}.json").write_text(
                    json.dumps(info, indent=1, ensure_ascii=False), encoding="utf-8"
                )
                index[key] = str(toml_path.relative_to(self.out))
                (self.out / "repro" / "index.json").write_text(
                    json.dumps(index, indent=1, ensure_ascii=False), encoding="utf-8"
                )


def cli_transcript(path: Path, timeout: float) -> list[dict[str, Any]]:
    """What `vsched validate` and `vsched run --reps 1 --json` print for a file."""
    transcript = []
    for args in (["validate", str(path)], ["run", str(path), "--reps", "1", "--json"]):
        try:
            done = subprocess.run(
                [sys.executable, "-m", "vsched", *args], capture_output=True, timeout=timeout * 2 + 5
            )
            transcript.append(
                {
                    "command": "vsched " + " ".join(args),
                    "exit": done.returncode,
                    "stdout": done.stdout.decode("utf-8", errors="replace")[:300],
                    "stderr": without_backtrace(done.stderr.decode("utf-8", errors="replace"))[-2000:],
                }
            )
        except subprocess.TimeoutExpired:
            transcript.append(
                {
                    "command": "vsched " + " ".join(args),
                    "exit": None,
                    "stderr": f"timeout after {timeout * 2 + 5} s",
                }
            )
    return transcript


def replay(args: argparse.Namespace) -> None:
    """Print case I as generated, and its outcome."""
    case = scenario_gen.generate(scenario_gen.RandomSource.of(args.seed, args.replay))
    sys.stdout.buffer.write(case.data)
    print(f"\n# kind: {case.kind}; notes: {case.notes}", file=sys.stderr)
    worker = Worker(args.timeout, args.mem_mb, lambda message: None)
    outcome, detail = worker.evaluate(case.data, cli=True)
    print(f"# outcome: {outcome}: {detail}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=10_000, help="cases to run (default 10000)")
    parser.add_argument("--start", type=int, default=0, help="index of the first case (default 0)")
    parser.add_argument("--seed", type=int, default=1, help="campaign seed (default 1)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="seconds per run before it counts as a timeout (default 10)",
    )
    parser.add_argument(
        "--cli-every",
        type=int,
        default=100,
        help="every Nth case also through the CLI; 0 = never (default 100)",
    )
    parser.add_argument(
        "--mem-mb",
        type=int,
        default=6144,
        help="address-space limit per worker and CLI process, MiB; 0 = none (default 6144)",
    )
    parser.add_argument(
        "--out", default=str(REPO / "fuzz" / "campaign"), help="output directory (default fuzz/campaign)"
    )
    parser.add_argument(
        "--reduce-budget", type=int, default=300, help="evaluations to shrink each reproducer (default 300)"
    )
    parser.add_argument("--no-reduce", action="store_true", help="save no reproducers (summary only)")
    parser.add_argument("--replay", type=int, metavar="I", help="print case I and its outcome, then exit")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main(args)
    elif args.replay is not None:
        replay(args)
    else:
        Campaign(args).run()


if __name__ == "__main__":
    main()
