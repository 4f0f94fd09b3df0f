"""A wrong folder or data file given to ``hf-attn train / analyze / eraser / explain`` is answered in
one line with exit code 2 before torch, transformers or the command's own module is imported
(hf_attn/cli/preflight.py), in the words the loaders would use later."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hf_attn.cli import preflight

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "datasets", "pandas", "matplotlib", "sklearn", "scipy", "captum")


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("preflight")
    (root / "empty.csv").write_text("")
    (root / "blank.csv").write_text("\n\n")
    (root / "header.csv").write_text("text,label\n")
    (root / "nocol.csv").write_text("sentence,label\nsuch a good film,pos\nawful,neg\n")
    (root / "good.csv").write_text("text,label\nsuch a good film,pos\nawful,neg\n")
    (root / "empty.jsonl").write_text("\n")
    (root / "nolabel.jsonl").write_text(json.dumps({"text": "fine"}) + "\n" + json.dumps({"text": "bad"}) + "\n")
    (root / "pairs.csv").write_text("premise,hypothesis,label\na man,a person,entailment\n")
    (root / "nomodel").mkdir()
    (root / "model").mkdir()
    (root / "model" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    splits = root / "splits"
    splits.mkdir()
    (splits / "train.csv").write_text("text,label\ngood,pos\nbad,neg\n")
    (splits / "dev.csv").write_text("text,label\ngood,pos\n")
    (splits / "test.csv").write_text("review,label\ngood,pos\n")
    (root / "nosplits").mkdir()
    (root / "nosplits" / "train.csv").write_text("text,label\ngood,pos\n")
    return root


# (argv with {C} for the cases folder, the error line's text after "hf-attn COMMAND: error: ")
REFUSED = [
    (["train", "--dataset", "{C}/empty.csv"], "{C}/empty.csv: could not parse: the file is empty (no header line)"),
    (["train", "--dataset", "{C}/blank.csv"], "{C}/blank.csv: could not parse: the file is empty (no header line)"),
    (["train", "--dataset", "{C}/header.csv"], "{C}/header.csv: no rows (only the header line)"),
    (["train", "--dataset", "{C}/nocol.csv"], "{C}/nocol.csv: missing column(s) ['text']; found ['sentence', 'label']"),
    (["train", "--dataset", "{C}/nocol.csv", "--label-column", "stars", "--text-column", "sentence"],
     "{C}/nocol.csv: missing column(s) ['stars']; found ['sentence', 'label']"),
    (["train", "--dataset", "{C}/missing.csv"], "unknown dataset '{C}/missing.csv': no such file or folder {C}/missing.csv"),
    (["train", "--dataset", "{C}/splits"], "{C}/splits/test.csv [test]: missing column(s) ['text']; found ['review', 'label']"),
    (["train", "--dataset", "{C}/nosplits"], "{C}/nosplits: no validation file (validation/dev.csv or .jsonl)"),
    (["train", "--dataset", "{C}/empty.jsonl"], "{C}/empty.jsonl: no rows (the file is empty)"),
    (["analyze", "{C}/nomodel", "--battery", "jw"], "{C}/nomodel has no config.json: not a model folder"),
    (["analyze", "{C}/missing-model", "--battery", "faithfulness"], "no model folder {C}/missing-model"),
    (["analyze", "{C}/model", "--battery", "faithfulness", "--dataset", "{C}/pairs.csv"],
     "{C}/pairs.csv: missing column(s) ['text']; found ['premise', 'hypothesis', 'label']"),
    (["analyze", "{C}/model", "--battery", "jw", "--dataset", "{C}/nolabel.jsonl"],
     "{C}/nolabel.jsonl: missing column(s) ['label']; found ['text']"),
    (["eraser", "{C}/nomodel", "--dataset", "{C}/good.csv"], "{C}/nomodel has no config.json: not a model folder"),
    (["eraser", "{C}/model", "--dataset", "{C}/header.csv"], "{C}/header.csv: no rows (only the header line)"),
    (["explain", "{C}/nomodel", "a text"], "{C}/nomodel has no config.json: not a model folder"),
    (["explain", "{C}/good.csv", "a text"], "{C}/good.csv is a file, not a model folder"),
]


def _filled(value: str, cases: Path) -> str:
    return value.replace("{C}", str(cases))


def _command_line(argv: list[str]) -> tuple[int, list[str], list[str]]:
    """``hf-attn ARGV`` as the console script runs it, in a fresh interpreter → (exit code, stderr
    lines, the heavy libraries it imported)."""
    code = ("import json, sys\n"
            f"sys.argv = ['hf-attn', *{argv!r}]\n"
            "from hf_attn.cli import main\n"
            "try:\n    code = main()\nexcept SystemExit as exit:\n    code = exit.code\n"
            f"print(json.dumps([code, sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT)))
    exit_code, heavy = json.loads(done.stdout.strip().splitlines()[-1])
    return exit_code, done.stderr.strip().splitlines(), heavy


@pytest.mark.parametrize("argv, message", REFUSED, ids=[" ".join(a[:1] + a[2:3]).replace("{C}/", "")
                                                           + f"-{i}" for i, (a, _) in enumerate(REFUSED)])
def test_refused_in_one_line_before_any_heavy_import(cases, tmp_path, argv, message):
    argv = [_filled(word, cases) for word in argv]
    if argv[0] in ("train", "analyze", "eraser"):
        argv += ["--output-dir", str(tmp_path / "out")]
    code, lines, heavy = _command_line(argv)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"hf-attn {argv[0]}: error: " + _filled(message, cases)), lines[0]
    assert heavy == [], f"imported {heavy} before refusing"
    assert not (tmp_path / "out").exists()  # nothing made


def test_the_quick_checks_say_what_the_loaders_say(cases):
    """Where the quick check and the loader refuse the same file, they say the same words."""
    from hf_attn.batteries.data import _whole_file
    from hf_attn.data.tasks import DataError, load_task

    for name in ("empty.csv", "blank.csv", "nocol.csv", "splits", "nosplits", "missing.csv", "nolabel.jsonl"):
        path = str(cases / name)
        quick = preflight.data_problem(path, "text", "label", whole_file=False)
        with pytest.raises((DataError, FileNotFoundError)) as loaded:
            load_task(path)
        assert quick == str(loaded.value), name
    for name in ("nocol.csv", "pairs.csv", "nolabel.jsonl"):  # a single file analysed whole: no pair detection
        path = str(cases / name)
        with pytest.raises(DataError) as loaded:
            _whole_file(path, "text", "label")
        assert preflight.data_problem(path, "text", "label", whole_file=True) == str(loaded.value), name


def test_what_loads_is_not_refused(cases):
    assert preflight.data_problem(str(cases / "good.csv"), "text", "label", whole_file=True) is None
    assert preflight.data_problem(str(cases / "pairs.csv"), "text", "label", whole_file=False) is None  # NLI pairs
    assert preflight.data_problem(str(cases / "nocol.csv"), "sentence", "label", whole_file=False) is None
    for name in ("sst", "imdb", "owner/name", "some_hub_dataset"):  # bundled names and Hub ids: the loader's
        assert preflight.data_problem(name, "text", "label", whole_file=False) is None
    assert preflight.not_a_model_folder(str(cases / "model")) is None
    assert preflight.not_a_model_folder("owner/name") is None


def test_the_quick_check_knows_the_loaders_names():
    from hf_attn.data import tasks

    assert preflight.BUILTIN_DATASETS == tasks.BUILTIN_DATASETS
    assert preflight.FILE_SUFFIXES == tasks._FILE_SUFFIXES
    assert preflight.PAIR_COLUMNS == tuple(tasks.PAIR_COLUMNS)
    for name in ("./x", "../x", "/x", "~/x", "a/b/c", "x.csv", "x.JSONL", "a\\b"):
        assert preflight.looks_like_a_path(name) and tasks._looks_like_path(name), name


def test_a_config_file_naming_the_columns_is_read_before_the_data_is_checked(cases, tmp_path):
    """``--config`` may set --text-column: the quick check then waits for the real parser, which
    reads the file, and does not refuse a file that has that column."""
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"faithfulness": {"text_column": "sentence", "label_column": "stars"}}))
    code, lines, _ = _command_line(["analyze", str(cases / "model"), "--battery", "faithfulness", "--dataset",
                                    str(cases / "nocol.csv"), "--config", str(settings),
                                    "--output-dir", str(tmp_path / "out")])
    assert code == 2 and lines[-1].endswith(f"{cases}/nocol.csv: missing column(s) ['stars']; "
                                            "found ['sentence', 'label']"), lines
