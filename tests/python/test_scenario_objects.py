"""`vsched.Scenario`: scenarios built as Python data, checked as files are, and accepted
wherever a scenario is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy
import pytest

import vsched

from helpers import TINY_SCENARIO, without_wall_clock

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def tiny() -> vsched.Scenario:
    """TINY_SCENARIO written as Python data."""
    return vsched.Scenario(
        name="tiny",
        host={"pcpus": 2, "dom0_vcpus": 0},
        scheduler={"name": "credit"},
        vm=[
            {
                "name": "locker",
                "vcpus": 2,
                "workload": {"kind": "spinlock", "iterations": 200, "compute_us": 50, "cs_us": 10},
            },
            {"name": "hog", "vcpus": 2, "workload": {"kind": "cpu_hog"}},
        ],
        run={"horizon_s": 0.5, "seed": 3},
    )


def test_a_scenario_from_data_runs_as_its_toml_text_does() -> None:
    from_data = vsched.run(tiny(), reps=2)
    from_text = vsched.run(TINY_SCENARIO, reps=2)
    assert without_wall_clock(from_data) == without_wall_clock(from_text)
    # A plain dict is a scenario too.
    assert without_wall_clock(vsched.run(dict(tiny()), reps=2)) == without_wall_clock(from_text)


def test_a_scenario_read_from_a_file_renders_to_the_same_run() -> None:
    path = SCENARIOS / "lhp-demo.toml"
    scenario = vsched.Scenario.from_file(path)
    assert scenario["vm"][0]["workload"]["lock_kind"] == "ticket"
    assert scenario == vsched.Scenario.from_toml(path.read_text())
    assert vsched.Scenario.from_toml(scenario.to_toml()) == scenario
    assert without_wall_clock(vsched.run(scenario, reps=1)) == without_wall_clock(vsched.run(path, reps=1))


def test_changes_to_a_scenario_reach_the_run_and_not_the_data_it_came_from() -> None:
    template = {"host": {"pcpus": 2}, "vm": [{"name": "hog", "vcpus": 1, "workload": {"kind": "cpu_hog"}}]}
    scenario = vsched.Scenario(template, name="changed", scheduler={"name": "rr"}, run={"horizon_s": 0.1})
    scenario["host"]["pcpus"] = 3
    scenario["vm"].append({"name": "other", "vcpus": 2, "workload": {"kind": "cpu_hog"}})
    report = vsched.run(scenario)
    assert (report["scenario"], report["pcpus"]) == ("changed", 3)
    assert [vm["name"] for vm in report["runs"][0]["vms"]] == ["hog", "other"]
    assert template == {
        "host": {"pcpus": 2},
        "vm": [{"name": "hog", "vcpus": 1, "workload": {"kind": "cpu_hog"}}],
    }
    copied = scenario.copy()
    copied["host"]["pcpus"] = 1
    assert isinstance(copied, vsched.Scenario) and scenario["host"]["pcpus"] == 3


def test_with_overrides_applies_dotted_keys_and_a_policy_as_a_sweep_does() -> None:
    changed = tiny().with_overrides({"vm.hog.vcpus": 1, "scheduler.slice_us": 500}, policy="rr")
    assert changed["scheduler"] == {"name": "rr", "slice_us": 500}
    assert [vm["vcpus"] for vm in changed["vm"]] == [2, 1]
    assert vsched.run(changed)["policy"] == "rr"


def test_numbers_of_numpy_are_plain_numbers() -> None:
    scenario = tiny()
    scenario["host"]["pcpus"] = numpy.int64(2)
    scenario["run"]["horizon_s"] = numpy.float32(0.5)
    assert "pcpus = 2\n" in scenario.to_toml() and "horizon_s = 0.5\n" in scenario.to_toml()
    scenario.validate()


def at(path: str, value: Any) -> vsched.Scenario:
    """TINY_SCENARIO's data with `value` put at `path`, one of the paths used below."""
    scenario = tiny()
    if path == "host.pcpus":
        scenario["host"]["pcpus"] = value
    elif path == "vm[0].workload.iterations":
        scenario["vm"][0]["workload"]["iterations"] = value
    elif path == "vm[1].vcpus":
        scenario["vm"][1]["vcpus"] = value
    elif path == "run":
        scenario["run"] = value
    return scenario


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("host.pcpus", None, "host.pcpus: expected a number, string, boolean, array or table, got None"),
        (
            "vm[0].workload.iterations",
            float("nan"),
            "vm[0].workload.iterations: expected a finite number, got nan",
        ),
        (
            "vm[0].workload.iterations",
            float("-inf"),
            "vm[0].workload.iterations: expected a finite number, got -inf",
        ),
        (
            "vm[1].vcpus",
            2**64,
            "vm[1].vcpus: expected an integer from -9223372036854775808 to 9223372036854775807 "
            "(TOML's limit), got 18446744073709551616",
        ),
        ("vm[1].vcpus", {2}, "vm[1].vcpus: expected a number, string, boolean, array or table, got set"),
        ("run", {1: 2}, "run: expected string keys, got the key 1 (int)"),
        ("host.pcpus", "\ud800", "host.pcpus: expected text, got a string holding a lone surrogate"),
    ],
)
def test_a_value_toml_cannot_hold_is_named_by_its_path(path: str, value: Any, message: str) -> None:
    scenario = at(path, value)
    for attempt in (scenario.to_toml, scenario.validate, lambda: vsched.run(scenario)):
        with pytest.raises(vsched.ScenarioError) as raised:
            attempt()
        assert str(raised.value) == message


def test_data_nested_without_end_is_refused_in_one_line() -> None:
    scenario = tiny()
    scenario["run"]["loop"] = scenario["run"]
    with pytest.raises(
        vsched.ScenarioError, match=r"^run\.loop\.loop.*: expected tables and arrays nested at most"
    ):
        scenario.to_toml()
    with pytest.raises(vsched.ScenarioError, match="^scenario: expected a table"):
        vsched.scenario.scenario_toml([1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("path", "value"),
    [("vm[0].workload.iterations", -1), ("vm[0].workload.iterations", "many"), ("vm[1].vcpus", -1)],
)
def test_an_invalid_value_gets_the_error_a_file_would(path: str, value: Any, tmp_path: Path) -> None:
    scenario = at(path, value)
    file = tmp_path / "s.toml"
    file.write_text(scenario.to_toml())
    with pytest.raises(vsched.ScenarioError) as from_file:
        vsched.validate(file)
    with pytest.raises(vsched.ScenarioError) as from_data:
        scenario.validate()
    assert str(from_data.value) == str(from_file.value)
    assert str(from_data.value).startswith(f"{path}: ")


def test_malformed_toml_is_reported_as_the_core_reports_it() -> None:
    with pytest.raises(vsched.ScenarioError) as raised:
        vsched.Scenario.from_toml("[host\npcpus = 2\n")
    with pytest.raises(vsched.ScenarioError) as core:
        vsched.validate("[host\npcpus = 2\n")
    assert str(raised.value) == str(core.value)
    assert str(raised.value).startswith("malformed TOML at line 1, column 6")


def test_a_report_is_still_the_dict_of_the_json_report() -> None:
    report = vsched.run(tiny(), reps=1)
    assert isinstance(report, dict) and isinstance(report, vsched.Report)
    assert json.loads(json.dumps(report)) == report
    assert report["runs"][0]["vms"][0]["name"] == "locker"
