"""Bad input and faults end in a correct result, a refusal, or a one-line error naming the file, line
or argument (exit code 2) — never in a silently wrong result, a lost analysis or a leaked path."""

from __future__ import annotations

import json
import re
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY = ["--embeddings", "random", "--embedding-dim", "16", "--hidden-size", "8", "--epochs", "1", "--quiet",
        "--threads", "1"]
QUICK_JW = ["--jw-permutations", "3", "--jw-adversaries", "1", "--jw-steps", "2", "--quiet", "--threads", "1"]


def cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """``hf-attn ARGV`` in this process: (exit code, stdout, stderr); argparse's exit counts as a code."""
    from hf_attn.cli import main

    try:
        code = main([str(a) for a in argv])
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def toy_rows(n: int = 60) -> list[tuple[str, int]]:
    rng = np.random.default_rng(0)
    positive, negative, filler = "good great fine lovely".split(), "bad awful poor dull".split(), "the movie a plot".split()
    rows = []
    for i in range(n):
        words = list(rng.choice(positive if i % 2 else negative, 3)) + list(rng.choice(filler, 2))
        rows.append((" ".join(words), i % 2))
    return rows


def write_csv(path: Path, rows, header=("text", "label")) -> Path:
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> Path:
    """A tiny model trained by ``hf-attn train`` on a 60-row CSV given as a relative path."""
    from hf_attn.cli import main

    root = tmp_path_factory.mktemp("toy")
    write_csv(root / "toy.csv", toy_rows())
    here = os.getcwd()
    os.chdir(root)
    try:
        assert main(["train", "--dataset", "toy.csv", "--output-dir", "runs/toy", *TINY]) == 0
    finally:
        os.chdir(here)
    return root / "runs" / "toy"


# ----------------------------------------------------------------------------------------------
# counts and limits, checked where they are parsed, for every battery alike


@pytest.mark.parametrize("argv, flag", [
    (["analyze", "M", "--battery", "jw", "--jw-max-instances", "0"], "--jw-max-instances"),
    (["analyze", "M", "--battery", "jw", "--jw-max-instances", "-5"], "--jw-max-instances"),
    (["analyze", "M", "--battery", "jw", "--jw-steps", "-1"], "--jw-steps"),
    (["analyze", "M", "--battery", "jw", "--jw-lr", "nan"], "--jw-lr"),
    (["analyze", "M", "--battery", "wp", "--wp-max-instances", "0"], "--wp-max-instances"),
    (["analyze", "M", "--battery", "wp", "--wp-num-seeds", "-1"], "--wp-num-seeds"),
    (["analyze", "M", "--battery", "ts", "--ts-adversary-limit", "0"], "--ts-adversary-limit"),
    (["analyze", "M", "--battery", "ts", "--ts-permutation-draws", "0"], "--ts-permutation-draws"),
    (["eraser", "M", "--max-instances", "0"], "--max-instances"),
    (["eraser", "M", "--max-instances", "-5"], "--max-instances"),
    (["eraser", "M", "--ig-steps", "0"], "--ig-steps"),
    (["train-grid", "--seeds", "0"], "--seeds"),
    (["train-seeds", "M", "--num-seeds", "-2"], "--num-seeds"),
    (["ts-report", "M", "--adversary-limit", "0"], "--adversary-limit"),
    (["reproduce", "--bert-instances", "0"], "--bert-instances"),
    (["train", "--hidden-size", "10000000"], "--hidden-size"),
    (["train", "--num-layers", "100000"], "--num-layers"),
    (["train", "--embedding-dim", "0"], "--embedding-dim"),
    (["train", "--learning-rate", "inf"], "--learning-rate"),
])
def test_counts_and_limits_are_refused_where_parsed(argv, flag, tmp_path, capsys):
    out = tmp_path / "out"
    code, _, err = cli([*argv, "--output-dir", out], capsys)
    assert code == 2
    line = one_line_error(err)
    assert f"argument {flag}" in line and "Traceback" not in line, line
    assert not out.exists()


@pytest.mark.parametrize("battery, settings", [("jw", {"max_instances": 0}), ("jw", {"max_instances": -5}),
                                               ("wp", {"max_instances": 0}), ("ts", {"adversary_limit": 0})])
def test_python_api_refuses_the_same_limits(battery, settings, tmp_path):
    from hf_attn.runs import get_battery, run_battery

    settings = get_battery(battery).settings_class(**settings)
    with pytest.raises(ValueError, match="must be a whole number >= 1"):
        run_battery(battery, str(tmp_path / "no-model"), str(tmp_path / "out"), settings)
    assert not (tmp_path / "out").exists()


def test_absurd_model_sizes_are_refused_before_any_folder_exists(tmp_path):
    from hf_attn.training.engine import TrainSettings, train

    with pytest.raises(ValueError, match=r"hidden_size \(--hidden-size\) must be between 1 and 8192"):
        train(TrainSettings(hidden_size=10_000_000), str(tmp_path / "a"))
    with pytest.raises(ValueError, match=r"num_layers \(--num-layers\) must be between 1 and 64"):
        train(TrainSettings(num_layers=100_000), str(tmp_path / "b"))
    with pytest.raises(ValueError, match="GiB for its weights, gradients and optimiser state"):
        train(TrainSettings(hidden_size=8192, num_layers=64), str(tmp_path / "c"))
    assert list(tmp_path.iterdir()) == []


def test_jw_max_instances_analyses_exactly_that_many(toy_run, tmp_path, capsys):
    code, _, err = cli(["analyze", toy_run, "--battery", "jw", "--output-dir", tmp_path / "jw",
                        "--jw-max-instances", "5", *QUICK_JW], capsys)
    assert code == 0, err
    rows = (tmp_path / "jw" / "instances.jsonl").read_text().splitlines()
    assert len(rows) == 5


# ----------------------------------------------------------------------------------------------
# damaged cache entries


def test_damaged_cache_shard_is_reported_discarded_and_recomputed(tmp_path, caplog):
    from hf_attn.core.sharding import run_sharded, shard_path

    shards = [np.arange(3), np.arange(3, 6)]
    computed = []

    def compute(number, indices):
        computed.append(number)
        return {"x": indices * 2.0, "ragged": [np.ones(i + 1) for i in indices]}

    cache = str(tmp_path / "cache")
    first = run_sharded(shards, compute, cache_dir=cache, key="k", accelerator=None, progress=False)
    for damage in ("truncate", "flip"):
        path = shard_path(cache, "k", 1)
        data = Path(path).read_bytes()
        Path(path).write_bytes(data[: len(data) // 2] if damage == "truncate"
                               else data[:40] + bytes(b ^ 0xFF for b in data[40:80]) + data[80:])
        computed.clear()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="hf_attn.core.sharding"):
            again = run_sharded(shards, compute, cache_dir=cache, key="k", accelerator=None, progress=False)
        assert computed == [1], damage
        messages = [r.getMessage() for r in caplog.records]
        assert len(messages) == 1 and path in messages[0] and "damaged" in messages[0]
        assert "\n" not in messages[0]
        for a, b in zip(first, again):
            np.testing.assert_array_equal(a["x"], b["x"])
            assert all(np.array_equal(u, v) for u, v in zip(a["ragged"], b["ragged"]))


# ----------------------------------------------------------------------------------------------
# files that are not JSON, bounded messages, strict JSON on stdout


@pytest.mark.parametrize("name", ["run.json", "config.json"])
def test_a_file_that_is_not_json_is_named(toy_run, tmp_path, name, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(toy_run, broken)
    (broken / name).write_text("this is not JSON\n")
    code, _, err = cli(["analyze", broken, "--battery", "jw", "--output-dir", tmp_path / "out", *QUICK_JW], capsys)
    assert code == 2
    line = one_line_error(err)
    assert f"{broken / name} is not valid JSON" in line, line
    assert not (tmp_path / "out").exists()


def test_error_messages_are_bounded(tmp_path, capsys):
    wide = tmp_path / "wide.csv"
    columns = [f"column_{i}" for i in range(100_000)]  # a 1.1 MB header without the text column
    write_csv(wide, [["x"] * len(columns)], header=columns)
    assert wide.stat().st_size > 1_000_000
    code, _, err = cli(["train", "--dataset", wide, "--output-dir", tmp_path / "out", *TINY], capsys)
    assert code == 2
    line = one_line_error(err)
    assert len(line) < 1200 and "(100000 in all)" in line and "'column_0'" in line, line[:300]

    many = tmp_path / "many"
    many.mkdir()
    write_csv(many / "train.csv", [(f"text {i}", f"class{i}") for i in range(5000)])
    write_csv(many / "dev.csv", [("text", "class1")])
    write_csv(many / "test.csv", [("text", "unseen")])
    code, _, err = cli(["train", "--dataset", many, "--output-dir", tmp_path / "out2", *TINY], capsys)
    assert code == 2
    line = one_line_error(err)
    assert len(line) < 1200 and "(5000 in all)" in line and "'unseen' is not in the label set" in line, line[:300]


def test_training_stdout_is_strict_json(monkeypatch, tmp_path, capsys):
    from hf_attn.training import engine

    monkeypatch.setattr(engine, "train", lambda *a, **k: {"test_accuracy": 0.5, "test_roc_auc": float("nan"),
                                                          "train_seconds": 1.0, "train_tokens_per_second": None})
    code, out, _ = cli(["train", "--output-dir", tmp_path / "o", "--json", *TINY], capsys)
    assert code == 0 and "NaN" not in out
    assert json.loads(out)["test_roc_auc"] is None


def test_training_stdout_is_one_json_document(tmp_path, capsys):
    data = write_csv(tmp_path / "d.csv", toy_rows(40))
    for quiet in ([], ["--quiet"]):
        argv = ["train", "--dataset", data, "--output-dir", tmp_path / f"run{len(quiet)}", "--json", *TINY]
        code, out, err = cli([a for a in argv if a != "--quiet"] + quiet, capsys)
        assert code == 0, err
        assert set(json.loads(out)) >= {"test_accuracy", "train_tokens_per_second"}  # nothing else on stdout


# ----------------------------------------------------------------------------------------------
# labels


@pytest.mark.parametrize("fmt", ["csv-nan", "jsonl-mixed"])
def test_label_columns_mixing_ids_and_names_are_refused_naming_lines(fmt, tmp_path, capsys):
    rows = toy_rows(40)
    if fmt == "csv-nan":
        data = write_csv(tmp_path / "d.csv", [*rows[:30], ("a lonely row", "NaN"), *rows[30:]])
        expected = "line 32: 'NaN'"
    else:
        data = tmp_path / "d.jsonl"
        records = [{"text": t, "label": y} for t, y in rows] + [{"text": "later row", "label": "pos"},
                                                                 {"text": "another", "label": "neg"}]
        data.write_text("".join(json.dumps(r) + "\n" for r in records))
        expected = "line 41: 'pos', line 42: 'neg'"
    code, _, err = cli(["train", "--dataset", data, "--output-dir", tmp_path / "out", *TINY], capsys)
    assert code == 2
    line = one_line_error(err)
    assert "mixes class ids and class names" in line and expected in line and str(data) in line, line
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------------------------
# local paths


def test_dataset_path_is_stored_relative_to_the_run_folder(toy_run, tmp_path, monkeypatch, capsys):
    run = json.loads((toy_run / "run.json").read_text())
    assert run["settings"]["dataset"] == "../../toy.csv"  # typed as "toy.csv" in toy_run's parent
    monkeypatch.chdir(tmp_path)  # elsewhere: the recorded path still finds the data
    code, _, err = cli(["analyze", toy_run, "--battery", "jw", "--output-dir", "jw", "--jw-max-instances", "3",
                        *QUICK_JW], capsys)
    assert code == 0, err
    # the same command again with the path typed differently resumes (same settings), not refused
    monkeypatch.chdir(toy_run.parent.parent)
    code, _, err = cli(["train", "--dataset", str(toy_run.parent.parent / "toy.csv"), "--output-dir",
                        "runs/toy", *TINY], capsys)
    assert code == 0, err


@pytest.mark.parametrize("text", [
    "file:///home/alice/private/data.csv", "file://localhost/srv/x.csv", "alice@build-box:/srv/data/x.csv",
    "bob@10.0.0.2:data/clients.csv", r"\\fileserver\share\clients 2026\x.csv",
    "../home/alice/private/acme_clients_2026.csv", "/home/alice/my data/acme clients.csv",
    "/home/alice/my data/sub dir/x.csv", r"C:\Users\Alice Smith\data\x.csv", "~/my data/x.csv",
])
def test_scrubber_removes_every_form_of_local_path(text, tmp_path):
    from hf_attn.hub import push as hub

    scrub = hub._PathScrubber(tmp_path / "run")
    for wrapped in (text, f"read {text} then stop", f"({text})"):
        for result in (scrub.text(wrapped), scrub.value(wrapped)):
            assert hub.LOCAL_PATH in result, (wrapped, result)
            assert not any(part in result for part in ("alice", "Alice", "fileserver", "build-box", "10.0.0.2",
                                                       "clients", "home", "srv")), (wrapped, result)


def test_scrubber_keeps_urls_and_maps_file_uris_inside_the_run(tmp_path):
    from hf_attn.hub import push as hub

    scrub = hub._PathScrubber(tmp_path / "run")
    for text in ("https://user@host:8080/x", "mail alice@example.com", "1/2 and a / b", "tokens/s"):
        assert scrub.text(text) == text
    assert scrub.text(f"file://{tmp_path}/run/analysis/jw/results.json") == "analysis/jw/results.json"


def test_pushed_run_json_has_no_local_dataset_path(toy_run, tmp_path):
    from hf_attn.hub.push import LOCAL_PATH, build_model_folder

    out = build_model_folder(toy_run, tmp_path / "out", "me/model")
    settings = json.loads((out / "run.json").read_text())["settings"]
    assert settings["dataset"] == LOCAL_PATH
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".md", ".txt", ".csv"):
            text = path.read_text(encoding="utf-8")
            assert "../toy.csv" not in text and str(tmp_path) not in text, path  # the file's name may appear


@pytest.mark.parametrize("model", ["/abs/path/run", "./runs/x", "../runs/x", "~/runs/x", "file:///srv/run",
                                   r"\\server\share\run", "me/model name", "a/b/c"])
def test_push_space_writes_hub_ids_only(model, tmp_path, capsys):
    out = tmp_path / "space"
    code, _, err = cli(["push-space", "--repo-id", "me/explorer", "--model", model, "--to-dir", out], capsys)
    assert code == 2
    assert "must be Hub model ids" in one_line_error(err)
    assert not out.exists()


def test_push_space_refuses_an_existing_local_folder(tmp_path, monkeypatch, capsys):
    (tmp_path / "me" / "run").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(["push-space", "--repo-id", "me/explorer", "--model", "me/run", "--to-dir", "space"], capsys)
    assert code == 2 and "must be Hub model ids" in one_line_error(err)


# ----------------------------------------------------------------------------------------------
# weights: missing, unexpected or non-finite tensors


def _damaged_weights(toy_run: Path, folder: Path, damage: str) -> Path:
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(toy_run, folder)
    tensors = load_file(folder / "model.safetensors")
    if damage == "missing":
        del tensors["decoder.weight"]
    elif damage == "unexpected":
        tensors["extra.weight"] = torch.zeros(2, 2)
    elif damage == "nan":
        tensors = {name: torch.full_like(t, float("nan")) for name, t in tensors.items()}
    else:
        tensors["attention.v.weight"][0, 0] = float("inf")
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


DAMAGES = {"missing": "lacks tensor(s) decoder.weight", "unexpected": "holds tensor(s) extra.weight",
           "nan": "attention.proj.bias (", "inf": "attention.v.weight (1 of"}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damaged_weights_are_refused_naming_the_tensor(damage, toy_run, tmp_path, capsys):
    from hf_attn.app.space import ExplainError, ModelPolicy, load_model
    from hf_attn.models.loading import ModelFolderError, load_model_folder

    folder = _damaged_weights(toy_run, tmp_path / damage, damage)
    code, _, err = cli(["analyze", folder, "--battery", "jw", "--output-dir", tmp_path / "out", *QUICK_JW], capsys)
    assert code == 2 and DAMAGES[damage] in one_line_error(err)
    assert not (tmp_path / "out").exists()
    with pytest.raises(ModelFolderError, match=re.escape(DAMAGES[damage])):  # Python API
        load_model_folder(folder)
    with pytest.raises(ExplainError, match=re.escape(DAMAGES[damage])):  # the Space
        load_model(str(folder), ModelPolicy((str(folder),)))


# ----------------------------------------------------------------------------------------------
# the Space's Markdown


def test_label_names_with_markup_reach_the_space_as_text(toy_run, tmp_path):
    from hf_attn.app.space import explain_sentence, load_model
    from hf_attn.explanation.render import markdown_text, summary_markdown

    folder = tmp_path / "markup"
    shutil.copytree(toy_run, folder)
    config = json.loads((folder / "config.json").read_text())
    evil = "<script>alert(1)</script>**bold**"
    config["id2label"] = {"0": evil, "1": evil}
    config["label2id"] = {evil: 0}
    (folder / "config.json").write_text(json.dumps(config))
    model, tokenizer = load_model(str(folder))
    summary = summary_markdown(explain_sentence(model, tokenizer, "a good movie", steps=2))
    assert "<script>" not in summary and "**bold**" not in summary
    assert "&lt;script&gt;alert\\(1\\)&lt;/script&gt;\\*\\*bold\\*\\*" in summary
    assert markdown_text("tester/lstm-sst") == "tester/lstm-sst"


# ----------------------------------------------------------------------------------------------
# one analysis per output folder


def _listing(folder: Path) -> dict[str, bytes]:
    from hf_attn.core.io import LOCK_NAME

    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != LOCK_NAME}


def test_a_finished_analysis_is_never_replaced_silently(toy_run, tmp_path, capsys):
    out = tmp_path / "jw"
    first = ["analyze", toy_run, "--battery", "jw", "--output-dir", out, "--jw-max-instances", "6", *QUICK_JW]
    assert cli(first, capsys)[0] == 0
    before = _listing(out)
    assert len((out / "instances.jsonl").read_text().splitlines()) == 6

    # other settings: refused, naming the setting; nothing touched
    code, _, err = cli([*first[:-len(QUICK_JW) - 1], "4", *QUICK_JW], capsys)
    assert code == 2
    line = one_line_error(err)
    assert "holds a jw analysis with other settings (settings.max_instances: 6 → 4)" in line and "--overwrite" in line
    # another battery into the same folder: refused
    code, _, err = cli(["analyze", toy_run, "--battery", "ts", "--output-dir", out, "--quiet", "--ts-skip-mi",
                        "--ts-skip-adversary", "--threads", "1"], capsys)
    assert code == 2 and "holds a jw analysis (battery: 'jw' → 'ts')" in one_line_error(err)
    assert _listing(out) == before

    # the same analysis again: repeated in place (same results)
    assert cli(first, capsys)[0] == 0
    again, earlier = (json.loads(text)["summary"] for text in ((out / "results.json").read_text(), before["results.json"]))
    again.pop("seconds"), earlier.pop("seconds")
    assert again == earlier

    # --overwrite replaces the whole analysis: nothing of the jw battery is left beside the ts results
    code, _, err = cli(["analyze", toy_run, "--battery", "ts", "--output-dir", out, "--quiet", "--ts-skip-mi",
                        "--ts-skip-adversary", "--threads", "1", "--overwrite"], capsys)
    assert code == 0, err
    names = set(_listing(out))
    assert "instances.jsonl" not in names and not any(n.startswith("fig") for n in names), names
    assert json.loads((out / "results.json").read_text())["battery"] == "ts"


def test_eraser_keeps_one_analysis_per_folder_too(toy_run, tmp_path, capsys):
    out = tmp_path / "jw"
    assert cli(["analyze", toy_run, "--battery", "jw", "--output-dir", out, "--jw-max-instances", "3", *QUICK_JW],
               capsys)[0] == 0
    code, _, err = cli(["eraser", toy_run, "--output-dir", out, "--max-instances", "3", "--quiet", "--threads", "1"],
                       capsys)
    assert code == 2 and "holds a jw analysis (battery: 'jw' → 'eraser')" in one_line_error(err)
    assert json.loads((out / "results.json").read_text())["battery"] == "jw"


def test_overwrite_never_empties_a_model_folder(toy_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(toy_run, run)
    before = _listing(run)
    code, _, err = cli(["analyze", run, "--battery", "jw", "--output-dir", run, "--overwrite", *QUICK_JW], capsys)
    assert code == 2 and "holds a model" in one_line_error(err)
    assert _listing(run) == before


def test_python_api_claims_the_folder_too(toy_run, tmp_path):
    from hf_attn.runs import run_battery
    from hf_attn.runs.folder import AnalysisFolderMismatch
    from hf_attn.batteries.jw.common import JWRunSettings, JWSettings

    quick = JWSettings(num_permutations=3, k=1, steps=2)
    run_battery("jw", str(toy_run), str(tmp_path / "jw"), JWRunSettings(max_instances=4, progress=False, algorithm=quick))
    with pytest.raises(AnalysisFolderMismatch, match="max_instances: 4 → 5"):
        run_battery("jw", str(toy_run), str(tmp_path / "jw"), JWRunSettings(max_instances=5, progress=False,
                                                                             algorithm=quick))
    run_battery("jw", str(toy_run), str(tmp_path / "jw"), JWRunSettings(max_instances=5, progress=False,
                                                                         algorithm=quick), overwrite=True)
    assert len((tmp_path / "jw" / "instances.jsonl").read_text().splitlines()) == 5


# ----------------------------------------------------------------------------------------------
# training time across a resume


def test_throughput_after_a_resume_counts_the_same_session(small_sst, tmp_path):
    from dataclasses import asdict, replace

    from hf_attn.training.engine import CLOCK_FILE, TrainSettings, train

    out = tmp_path / "run"
    settings = TrainSettings(embeddings="random", embedding_dim=16, hidden_size=8, epochs=2)
    whole = train(settings, str(tmp_path / "whole"), task=small_sst, progress=False)
    # a two-epoch run killed after its first epoch's checkpoint (the learning rate is constant)
    train(replace(settings, epochs=1), str(out), task=small_sst, progress=False, keep_checkpoints=True)
    (first,) = (out / "checkpoints").glob("checkpoint-*")
    for name in ("metrics.json", "run.json"):
        (out / name).unlink()
    request = out / "checkpoints" / "train_request.json"
    request.write_text(json.dumps({**json.loads(request.read_text()), "settings": asdict(settings)}))
    earlier_seconds = json.loads((first / CLOCK_FILE).read_text())["train_seconds"]
    earlier_tokens = json.loads((first / "trainer_state.json").read_text())["num_input_tokens_seen"]
    assert 0 < earlier_tokens < whole["train_tokens"]

    resumed = train(settings, str(out), task=small_sst, progress=False)
    assert resumed["resumed_from"] == first.name and resumed["train_tokens"] == whole["train_tokens"]
    session_seconds = resumed["train_seconds"] - earlier_seconds
    assert resumed["train_seconds"] > earlier_seconds  # the whole run's time, earlier session included
    expected = (resumed["train_tokens"] - earlier_tokens) / session_seconds
    assert resumed["train_tokens_per_second"] == pytest.approx(expected, rel=0.1)
    assert resumed["train_tokens_per_second"] < 0.8 * resumed["train_tokens"] / session_seconds  # not all tokens


# ----------------------------------------------------------------------------------------------
# the invariant, fuzzed: exit 0 with correct results, or exit 2 with one line; never a traceback,
# never a partial folder

from hypothesis import HealthCheck, Phase, given, settings as hypothesis_settings, strategies as st  # noqa: E402

TEXTS = ["good film", "bad plot", "a great movie", "awful , dull", "ünïcödé ✓ ok", 'says "hi", then', "x y z"]
SCHEMES = {"ids": (0, 1), "names": ("neg", "pos"), "floats": (0.0, 1.0), "id strings": ("0", "1")}
CORRUPTIONS = {"empty file": (None, None), "nan label": ("label", "NaN"), "name among ids": ("label", "pos"), "empty text": ("text", ""),
               "blank text": ("text", "  "), "missing label": ("label", None), "half label": ("label", 0.5),
               "third class": ("label", 2)}


def _canonical(label) -> str:
    if isinstance(label, bool):
        return str(label)
    if isinstance(label, float) and label.is_integer():
        return str(int(label))
    return str(label)


def _write_data(folder: Path, fmt: str, header: tuple, rows: list) -> Path:
    if fmt == "csv":
        return write_csv(folder / "data.csv", [["" if v is None else v for v in row] for row in rows], header)
    path = folder / "data.jsonl"
    path.write_text("".join(json.dumps(dict(zip(header, row)), ensure_ascii=False) + "\n" for row in rows),
                    encoding="utf-8")
    return path


def _check_invariant(code: int, err: str, out: Path, command: str) -> None:
    assert "Traceback" not in err
    if code == 0:
        return
    assert code == 2, (code, err)
    line = one_line_error(err)
    assert line.startswith(f"hf-attn {command}: error:"), line
    assert len(line) < 1300
    assert not out.exists(), sorted(p.name for p in out.rglob("*"))  # never a partial folder


@hypothesis_settings(max_examples=14, deadline=None, derandomize=True, phases=[Phase.generate],
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(fmt=st.sampled_from(["csv", "jsonl"]),
       header=st.sampled_from([("text", "label")] * 4 + [("txt", "label"), ("text", "stars")]),
       base=st.lists(st.sampled_from(TEXTS), min_size=10, max_size=30),
       scheme=st.sampled_from(sorted(SCHEMES)),
       corruption=st.sampled_from([None] * 4 + sorted(CORRUPTIONS)), where=st.integers(0, 40),
       bad_option=st.sampled_from([None] * 8 + [("--min-count", "0"), ("--min-count", "x"), ("--max-length", "0"),
                                                ("--max-length", "99999999"), ("--hidden-size", "10000000"),
                                                ("--hidden-size", "0"), ("--batch-size", "-2"),
                                                ("--embedding-dim", "100000")]))
def test_fuzz_train_data_files_and_options(fmt, header, base, scheme, corruption, where, bad_option,
                                           tmp_path_factory, capsys):
    rows = [[text, SCHEMES[scheme][i % 2]] for i, text in enumerate(base)]  # both classes, alternating
    if corruption is not None and rows:
        column, value = CORRUPTIONS[corruption]
        if column is None:
            rows = []
        else:
            rows[where % len(rows)][0 if column == "text" else 1] = value
    folder = tmp_path_factory.mktemp("fuzz-train")
    data = _write_data(folder, fmt, header, rows)
    out = folder / "run"
    argv = ["train", "--json", "--dataset", data, "--output-dir", out, "--embeddings", "random", "--embedding-dim", "8",
            "--epochs", "1", "--quiet", "--threads", "1", "--min-count", "1", "--max-length", "64",
            "--hidden-size", "4", "--batch-size", "8", *(bad_option or ())]
    code, stdout, err = cli(argv, capsys)
    _check_invariant(code, err, out, "train")
    if code == 0:  # correct results: every row in a split, the classes those of the file, never mixed
        run = json.loads((out / "run.json").read_text())
        assert sum(run["split_sizes"].values()) == len(rows)
        names = run["label_names"]
        assert len(names) >= 2 and set(names) <= {_canonical(label) for _, label in rows}
        digits = [name.lstrip("-").isdigit() for name in names]
        assert all(digits) or not any(digits), names
        assert json.loads(stdout)  # strict JSON on stdout
        assert "NaN" not in stdout


@hypothesis_settings(max_examples=8, deadline=None, derandomize=True, phases=[Phase.generate],
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(limit=st.integers(-3, 15), permutations=st.integers(-1, 3), steps=st.integers(-1, 2),
       eps=st.sampled_from(["0.01", "-1", "nan", "0"]))
def test_fuzz_analyze_options(limit, permutations, steps, eps, toy_run, tmp_path_factory, capsys):
    out = tmp_path_factory.mktemp("fuzz-analyze") / "jw"
    argv = ["analyze", toy_run, "--battery", "jw", "--output-dir", out, "--jw-max-instances", limit,
            "--jw-permutations", permutations, "--jw-steps", steps, "--jw-eps", eps, "--jw-adversaries", "1",
            "--quiet", "--threads", "1"]
    code, _, err = cli(argv, capsys)
    _check_invariant(code, err, out, "analyze")
    valid = limit >= 1 and permutations >= 1 and steps >= 0 and eps in ("0.01", "0")
    assert (code == 0) == valid, err
    if code == 0:
        test_size = json.loads((toy_run / "run.json").read_text())["split_sizes"]["test"]
        assert len((out / "instances.jsonl").read_text().splitlines()) == min(limit, test_size)
        results = json.loads((out / "results.json").read_text())
        assert results["summary"]["num_instances"] == min(limit, test_size)
