"""`availproof validate` warns when the file alone tells that the load's timeout cannot fit its longest planned
output (issue 33): on the stream target, whose token rate is its configured one (serve_apps/config.py), in one
line saying what would fit; a warning, not a problem (exit 0). vLLM's rate is only known measured: nothing said."""

from __future__ import annotations

import json
from pathlib import Path

from chaos.commands import cli
from chaos.load import timeout_fit
from chaos.core import validate
from chaos.load.workload import LoadShape
from serve_apps.config import StreamOptions

from .test_utilization import capacity_file, experiment_file  # the same files as there

ROOT = Path(__file__).resolve().parents[2]
STREAM = StreamOptions()


def checked(path: Path, **kw) -> tuple[list[str], list[str]]:
    warned: list[str] = []
    return validate.check_file(path, warn=warned, **kw), warned


def test_the_stream_targets_rate_is_its_configured_one():
    assert timeout_fit.configured_rate("stream") == (STREAM.token_s, STREAM.prefill_s) == (0.02, 0.05)
    assert timeout_fit.configured_rate("llm") is None


def test_long_outputs_that_cannot_finish_on_the_stream_target_are_warned_with_the_numbers(tmp_path, capsys):
    path = experiment_file(tmp_path / "long.json", max_tokens=[400, 500], timeout_s=8)
    longest = timeout_fit.longest_output(LoadShape.from_dict(
        next(e for e in json.loads(path.read_text())["extensions"] if e["name"] == "availproof")["load"]))
    assert 400 <= longest <= 500
    needs = 0.05 + 0.02 * (longest - 1)
    problems, warned = checked(path)
    assert problems == []
    assert warned == [
        f"{path}: warning: load.timeout_s 8 s is too short for the longest planned output ({longest} tokens): at the "
        f"stream target's configured 20.0 ms a token after a 0.05 s first token (serve_apps/config.py StreamOptions) "
        f"it needs {needs:.1f} s; set timeout_s to at least {int(needs) + 1}, or keep outputs within 398 tokens"]
    # a warning, not a problem: validate still says the file is good and exits 0
    assert cli.main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [warned[0], f"ok {path}"]  # the warning printed, before ok


def test_outputs_that_fit_get_no_warning(tmp_path):
    assert checked(ROOT / "experiments" / "replica-kill.json") == ([], [])
    path = experiment_file(tmp_path / "fits.json", max_tokens=[400, 500], timeout_s=11)
    assert checked(path) == ([], [])


def test_an_llm_experiment_gets_no_warning(tmp_path, capsys):
    path = experiment_file(tmp_path / "long.json", max_tokens=[400, 500], timeout_s=8)
    assert checked(path, app="llm") == ([], [])  # vLLM's token rate is only known measured: the baseline judges it
    assert cli.main(["validate", str(path), "--app", "llm"]) == 0  # told by the flag: no warning printed
    assert capsys.readouterr().out.splitlines() == [f"ok {path}"]
    assert cli.main(["validate", str(path)]) == 0 and "warning" in capsys.readouterr().out  # stream assumed
    # the app its capacity file was measured for: llm; a capacity.json records no per-token time
    capacity_file(tmp_path / "llm" / "capacity.json", app="llm")
    on_llm = experiment_file(tmp_path / "llm" / "x.json", max_tokens=[400, 500], timeout_s=8,
                             utilization=0.5, capacity="capacity.json")
    assert checked(on_llm) == ([], [])
    got = timeout_fit.from_file(LoadShape(max_tokens=(400, 500), timeout_s=8), "llm")
    assert got["fits"] is None and "only known measured" in got["why"]


def test_a_stream_capacity_file_gives_the_plan_its_rate_and_the_warning_stays(tmp_path):
    capacity_file(tmp_path / "capacity.json", app="stream")
    path = experiment_file(tmp_path / "x.json", max_tokens=[400, 500], timeout_s=8, utilization=0.5,
                           capacity="capacity.json")
    problems, warned = checked(path)
    assert problems == [] and len(warned) == 1 and "load.timeout_s 8 s is too short" in warned[0]


def trace(path: Path, outputs: list[int]) -> Path:
    rows = [{"timestamp": i * 1000, "input_length": 4, "output_length": o, "hash_ids": [i]}
            for i, o in enumerate(outputs)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_a_trace_whose_lengths_cannot_fit_is_warned(tmp_path):
    # 700 tokens is clipped to the context: the chat route's 512 - 8 (template), the prompt cut to one token first
    long = trace(tmp_path / "long.jsonl", [20, 700, 90])
    path = experiment_file(tmp_path / "traced.json", trace=str(long), timeout_s=10)
    problems, warned = checked(path)
    assert problems == []
    assert warned == [
        f"{path}: warning: load.timeout_s 10 s is too short for the longest planned output (503 tokens): at the "
        "stream target's configured 20.0 ms a token after a 0.05 s first token (serve_apps/config.py StreamOptions) "
        "it needs 10.1 s; set timeout_s to at least 11, or keep outputs within 498 tokens"]
    short = trace(tmp_path / "short.jsonl", [20, 400, 90])
    assert checked(experiment_file(tmp_path / "fits.json", trace=str(short), timeout_s=10)) == ([], [])


def test_a_first_token_later_than_the_timeout_names_no_output_cap():
    line = timeout_fit.too_short(0.04, 10, 0.02, 0.05, "x")
    assert line.endswith("set timeout_s to at least 1") and "keep outputs" not in line
