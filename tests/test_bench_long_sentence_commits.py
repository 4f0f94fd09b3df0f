"""scripts/bench/long_sentence_commits.py: the speed-ups are the first commit's seconds over each
commit's (hand-computed), per stage and per method; outputs made already are combined with
--runs, each run's commit resolved by git; bad arguments are refused in one line."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    path = ROOT / "scripts" / "bench" / "long_sentence_commits.py"
    spec = importlib.util.spec_from_file_location("bench_long_sentence_commits", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(seconds, naopc, soft, loo, vz):
    return {"tokens": 510, "seconds": seconds, "naopc_seconds": naopc, "soft_seconds": soft,
            "methods_seconds": {"leave_one_out": loo, "value_zeroing": vz, "random": 0.001}}


def test_speedups_are_the_first_commits_seconds_over_each():
    rows = _script().combine([_row(800.0, 160.0, 280.0, 100.0, 160.0), _row(400.0, 80.0, 70.0, 50.0, 64.0)])
    assert rows[0]["speedup_vs_first"] == 1.0
    assert rows[1]["speedup_vs_first"] == 2.0
    assert rows[1]["naopc_speedup_vs_first"] == 2.0 and rows[1]["soft_speedup_vs_first"] == 4.0
    assert rows[1]["methods_speedup_vs_first"] == {"leave_one_out": 2.0, "value_zeroing": 2.5}  # not the 1 ms floor


def test_outputs_made_already_are_combined_with_their_commits(tmp_path, monkeypatch):
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    paths = []
    for name, row in (("a", _row(600.0, 120.0, 200.0, 90.0, 100.0)), ("b", _row(300.0, 60.0, 100.0, 45.0, 50.0))):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"rows": [row], "machine": {"load_average": [1.0, 1.0, 1.0]}, "date": "2026-11-29"}))
        paths.append(path)
    out = tmp_path / "record.json"
    monkeypatch.chdir(ROOT)
    assert _script().main(["--runs", f"HEAD={paths[0]}", f"HEAD={paths[1]}", "--write", str(out)]) == 0
    record = json.loads(out.read_text())
    assert [r["commit"] for r in record["rows"]] == [head, head] and record["combined_from_runs"]
    assert record["rows"][1]["speedup_vs_first"] == 2.0
    assert str(tmp_path) not in json.dumps(record)  # no local path in the record


@pytest.mark.parametrize("argv, message", [([], "give --commits"), (["--commits", "HEAD", "--runs", "HEAD=x"], "not both"),
                                           (["--runs", "HEAD"], "not COMMIT=PATH"),
                                           (["--goal", "0", "--commits", "HEAD"], "--goal must be a positive"),
                                           (["--goal", "inf", "--commits", "HEAD"], "--goal must be a positive"),
                                           (["--runs", "HEAD=x", "--count-flops"], "combined as they are")])
def test_bad_arguments_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as error:
        _script().main(argv)
    assert error.value.code == 2 and message in capsys.readouterr().err


def test_a_run_without_the_length_or_an_unknown_commit_is_refused_in_one_line(tmp_path, capsys):
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"rows": [{"tokens": 256, "seconds": 1.0}], "machine": {"load_average": [1, 1, 1]},
                                "date": "2026-11-29"}))
    for runs, message in (([f"HEAD={path}"], "no single row of 510 tokens (it holds [256])"),
                          ([f"no-such-commit={path}"], "git rev-parse --short no-such-commit")):
        with pytest.raises(SystemExit) as error:
            _script().main(["--runs", *runs, "--write", str(tmp_path / "out.json")])
        err = capsys.readouterr().err.strip().splitlines()
        assert error.value.code == 2 and len(err) == 1 and message in err[0], err


def test_the_goal_says_whether_it_is_met_and_what_bounds_it():
    script = _script()
    first, last = _row(900.0, 160.0, 280.0, 100.0, 160.0), _row(400.0, 120.0, 70.0, 80.0, 60.0)
    first["commit"], last["commit"] = "aaa", "bbb"
    last |= {"gflop": {"naopc": 9600.0, "leave_one_out": 6000.0, "random": 0.0, "erasure": 400.0},
             "gflop_total": 30000.0, "peak": {"gflops": 95.0}}
    goal = script.goal(script.combine([first, last]), 3.0)
    assert goal["value"] == 2.25 and not goal["met"] and goal["needed_seconds"] == 300.0
    assert goal["seconds_at_peak"] == pytest.approx(30000 / 95)
    # 3 × 900 s needs 30000 GFLOP in 300 s: 100 GFLOP/s, above the 95 GFLOP/s peak
    assert goal["bound"].startswith("FLOPs: 3.0× aaa needs 100 GFLOP/s at bbb's 30000 GFLOP, 105 %")
    # the stages with seconds, the slowest first (erasure has no seconds of its own, random none worth reading)
    assert [(s["stage"], s["gflops"]) for s in goal["stages"]] == [("naopc", 80.0), ("leave_one_out", 75.0)]
    assert script.goal(script.combine([first, _row(250.0, 1, 1, 1, 1) | {"commit": "ccc"}]), 3.0)["met"]
    unbounded = script.goal(script.combine([first, _row(400.0, 1, 1, 1, 1) | {"commit": "ccc"}]), 3.0)
    assert not unbounded["met"] and "bound" not in unbounded  # no FLOPs counted: nothing to say


def test_count_flops_is_refused_before_any_run_for_a_commit_that_cannot(capsys, monkeypatch):
    script = _script()
    monkeypatch.setattr(script, "run_commit", lambda *a, **k: pytest.fail("ran a commit before refusing"))
    with pytest.raises(SystemExit) as error:  # 3f0b7de's script predates --count-flops
        script.main(["--commits", "HEAD", "3f0b7de", "--count-flops"])
    err = capsys.readouterr().err.strip().splitlines()
    assert error.value.code == 2 and len(err) == 1 and "3f0b7de's scripts/benchmark_long_sentence.py cannot count" in err[0]


def test_count_flops_goes_to_the_last_commit_only_and_into_the_command(tmp_path, monkeypatch):
    script, calls = _script(), []

    def fake_run(commit, model_dir, length, output, count_flops=False):
        calls.append((commit, count_flops))
        row = _row(800.0 if not calls[1:] else 400.0, 1.0, 1.0, 1.0, 1.0)
        made = {"rows": [row | ({"gflop": {"naopc": 1.0}, "gflop_total": 1.0} if count_flops else {})],
                "machine": {"load_average": [1, 1, 1]}, "date": "2026-11-29"}
        made |= {"peak": {"gflops": 100.0}} if count_flops else {}
        Path(output).write_text(json.dumps(made))

    monkeypatch.setattr(script, "run_commit", fake_run)
    monkeypatch.chdir(ROOT)
    out = tmp_path / "record.json"
    assert script.main(["--commits", "HEAD~1", "HEAD", "--count-flops", "--write", str(out)]) == 0
    assert calls == [("HEAD~1", False), ("HEAD", True)]
    record = json.loads(out.read_text())
    assert record["command"].endswith("--count-flops") and "--goal 3" in record["command"]
    assert record["goal"]["value"] == 2.0 and not record["goal"]["met"] and record["goal"]["gflop"] == 1.0
