"""A new user's first hour, each with its check: the README's own-data commands run as written; ``train``
says how it split the data; class names (string labels, ``--label-names``) reach ``config.id2label``
and what the commands print; a Hub id without the network fails in about a second with what would
work instead (a cached one still loads); third-party warnings go to ``hf-attn.log``, not the
console; the README's Python blocks run; every ``--help`` pointer leads somewhere; a mistyped model
folder is named with its closest sibling before anything is written."""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO_ROOT), "MPLBACKEND": "Agg"}
TINY = ["--embeddings", "random", "--embedding-dim", "8", "--hidden-size", "4", "--epochs", "1", "--threads", "1"]


def _readme_section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def _code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.M | re.S)


def _write_csv(path: Path, rows) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def sst_rows(small_sst) -> list[tuple[str, int]]:
    """60 SST sentences, 30 of each class, alternating (a 70/10/20 cut holds both classes in train)."""
    train = small_sst.splits["train"]
    by_class = {0: [], 1: []}
    for text, label in zip(train["text"], train["label"]):
        if len(by_class[label]) < 30:
            by_class[label].append(text)
    return [(text, label) for pair in zip(by_class[0], by_class[1]) for text, label in zip(pair, (0, 1))]


def _hf_attn(*args, cwd, env=None, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hf_attn.cli", *args], cwd=cwd, env=env or OFFLINE,
                          capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------------ a. the README's own-data commands
@pytest.mark.slow  # about 20 s on two cores: three commands, each importing torch, a GloVe training, the battery
def test_the_readmes_own_data_commands_run_as_written(sst_rows, tmp_path):
    """The bash block of the README's Training section, line by line (``hf-attn`` as ``python -m
    hf_attn.cli``), on a 60-row ``my.csv`` with word labels: it trains, analyses and explains, and
    every printed class is a name."""
    block = _code_blocks(_readme_section("Training"), "bash")[0]
    commands = [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]
    assert [c[:2] for c in commands] == [["hf-attn", "train"], ["hf-attn", "analyze"], ["hf-attn", "explain"]]
    assert "--dataset" in commands[0] and commands[0][commands[0].index("--dataset") + 1] == "my.csv"
    _write_csv(tmp_path / "my.csv", [(text, ("neg", "pos")[label]) for text, label in sst_rows])
    outputs = []
    for command in commands:
        result = _hf_attn(*command[1:], cwd=tmp_path)
        assert result.returncode == 0, (command, result.stderr[-3000:])
        outputs.append(result.stdout)
    # 60 rows: round(0.7 · 60) = 42 train, round(0.1 · 60) = 6 dev, the other 12 test
    assert "split of my.csv (seed 0): 42 train / 6 dev / 12 test; classes neg, pos" in outputs[0].splitlines()
    config = json.loads((tmp_path / "runs" / "mine" / "config.json").read_text())
    assert config["id2label"] == {"0": "neg", "1": "pos"} and config["label2id"] == {"neg": 0, "pos": 1}
    assert (tmp_path / "runs" / "mine" / "jw" / "results.json").is_file()
    assert re.search(r"^\s+neg\s", outputs[1], re.M) and re.search(r"^\s+pos\s", outputs[1], re.M)
    assert re.search(r"^prediction: (neg|pos) \(neg 0\.\d{4}, pos 0\.\d{4}\)$", outputs[2], re.M), outputs[2]


# ------------------------------------------------------------------ b, c. the split and the class names
def test_split_line_and_record():
    from hf_attn.data.classes import split_line

    assert (split_line("my.csv", "seed 0", {"train": 700, "validation": 100, "test": 200}, ["neg", "pos"])
            == "split of my.csv (seed 0): 700 train / 100 dev / 200 test; classes neg, pos")
    assert split_line("sst", "given", {"train": 6920, "validation": 872, "test": 1821}) == \
        "split of sst (given): 6920 train / 872 dev / 1821 test"


def test_loaders_say_how_they_split(tmp_path, data_folder):
    from hf_attn.data.classes import split_record
    from hf_attn.data.tasks import load_task

    path = _write_csv(tmp_path / "ten.csv", [(f"text {i}", i % 2) for i in range(10)])
    # 10 rows: round(7.0) = 7 train, round(1.0) = 1 dev, 2 test
    assert split_record(load_task(str(path), seed=3)) == {"split": "seed 3",
                                                          "split_sizes": {"train": 7, "validation": 1, "test": 2}}
    assert split_record(load_task("sst")) == {"split": "given",
                                              "split_sizes": {"train": 6920, "validation": 872, "test": 1821}}
    assert split_record(load_task(data_folder))["split"] == "given"


def test_label_names_name_integer_classes_only(tmp_path):
    from hf_attn.data.classes import parse_label_names
    from hf_attn.data.tasks import DataError, load_task

    numeric = _write_csv(tmp_path / "num.csv", [(f"text {i}", (0, 2)[i % 2]) for i in range(20)])
    words = _write_csv(tmp_path / "words.csv", [(f"text {i}", ("pos", "neg")[i % 2]) for i in range(20)])
    assert load_task(str(words)).label_names == ["neg", "pos"]  # sorted, whatever the file's order
    assert load_task(str(numeric)).label_names == ["0", "2"]
    task = load_task(str(numeric), label_names=["low", "high"])  # in the order of the sorted ids: 0 → low, 2 → high
    assert task.label_names == ["low", "high"]
    assert task.splits["train"]["label"] == load_task(str(numeric)).splits["train"]["label"]
    assert parse_label_names(" neg , pos ") == ["neg", "pos"] and parse_label_names("") is None
    with pytest.raises(DataError, match=r"^--label-names gives 3 name\(s\) .* but num\.csv has 2 classes"):
        load_task(str(numeric), label_names=["a", "b", "c"])
    with pytest.raises(DataError, match=r"^--label-names: the labels of words\.csv already have names"):
        load_task(str(words), label_names=["a", "b"])
    with pytest.raises(DataError, match="an empty class name"):
        parse_label_names("neg,,pos")
    with pytest.raises(DataError, match="given more than once"):
        parse_label_names("neg,neg")


def test_class_names_reach_id2label_and_the_printed_outputs(sst_rows, tmp_path, monkeypatch, capsys):
    """Word labels and integer labels named with --label-names: the names are the model's
    id2label / label2id, the train summary's classes and explain's prediction; a wrong count is one
    line naming --label-names, exit 2, and leaves no folder."""
    from hf_attn.cli import main

    monkeypatch.chdir(tmp_path)
    _write_csv(tmp_path / "words.csv", [(text, ("negative", "positive")[label]) for text, label in sst_rows])
    _write_csv(tmp_path / "ids.csv", sst_rows)
    runs = {"words": ["--dataset", "words.csv"], "ids": ["--dataset", "ids.csv", "--label-names", "bad,good"]}
    names = {"words": ["negative", "positive"], "ids": ["bad", "good"]}
    for run, argv in runs.items():
        assert main(["train", *argv, *TINY, "--quiet", "--output-dir", f"runs/{run}"]) == 0
        out = capsys.readouterr().out
        csv_name = argv[1]
        assert f"split of {csv_name} (seed 0): 42 train / 6 dev / 12 test; classes {', '.join(names[run])}" in out
        config = json.loads((tmp_path / "runs" / run / "config.json").read_text())
        assert config["id2label"] == {"0": names[run][0], "1": names[run][1]}
        assert config["label2id"] == {names[run][0]: 0, names[run][1]: 1}
        record = json.loads((tmp_path / "runs" / run / "run.json").read_text())
        assert record["split"] == "seed 0" and record["label_names"] == names[run]
        assert main(["explain", f"runs/{run}", "a gripping film", "--no-adversary", "--permutations", "0",
                     "--ig-steps", "2", "--quiet"]) == 0
        first, second = names[run]
        assert re.search(rf"^prediction: ({first}|{second}) \({first} 0\.\d{{4}}, {second} 0\.\d{{4}}\)$",
                         capsys.readouterr().out, re.M)
    assert main(["train", "--dataset", "ids.csv", "--label-names", "a,b,c", *TINY, "--output-dir", "runs/bad"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("hf-attn train: error: --label-names gives 3 name(s) ('a', 'b', 'c') but ids.csv has 2 classes "
                       "(labels '0', '1'): give one name per class, in the order of the sorted labels")
    assert not (tmp_path / "runs" / "bad").exists() or not os.listdir(tmp_path / "runs" / "bad")


def test_base_model_training_prints_its_split(sst_rows, tmp_path, monkeypatch, capsys):
    """``train --base-model FOLDER`` (a tiny BERT) prints and records the split like the BiLSTM path."""
    from architectures import tiny_config, word_tokenizer
    from transformers import AutoModelForSequenceClassification

    from hf_attn.cli import main

    tokenizer = word_tokenizer("cls")
    config = tiny_config("bert", len(tokenizer))
    config.num_labels = 2  # a two-class head, as the data has
    model = AutoModelForSequenceClassification.from_config(config)
    model.save_pretrained(tmp_path / "tiny-bert")
    tokenizer.save_pretrained(tmp_path / "tiny-bert")
    monkeypatch.chdir(tmp_path)
    _write_csv(tmp_path / "ids.csv", sst_rows)
    assert main(["train", "--base-model", "tiny-bert", "--dataset", "ids.csv", "--label-names", "neg,pos",
                 "--data-seed", "2", "--epochs", "1", "--max-length", "16", "--threads", "1", "--quiet",
                 "--output-dir", "runs/bert"]) == 0
    assert "split of ids.csv (seed 2): 42 train / 6 dev / 12 test; classes neg, pos" in capsys.readouterr().out
    record = json.loads((tmp_path / "runs" / "bert" / "run.json").read_text())
    assert record["split"] == "seed 2" and record["split_sizes"] == {"train": 42, "validation": 6, "test": 12}
    assert json.loads((tmp_path / "runs" / "bert" / "config.json").read_text())["id2label"] == {"0": "neg", "1": "pos"}
    # the analyses (and the W&P battery's data) reload the recorded file, split seed and class names
    from hf_attn.batteries.data import recorded_task
    from hf_attn.runs.wp_transformer import _transformer_data
    from hf_attn.batteries.wp.transformer import TransformerWPSettings

    task = recorded_task("runs/bert")
    assert task.label_names == ["neg", "pos"] and len(task.splits["test"]) == 12
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "runs" / "bert")
    texts, labels, _, _, names = _transformer_data(model, TransformerWPSettings(), record, None, None, None, None,
                                                   "runs/bert")
    assert names == ["neg", "pos"] and texts == list(task.splits["test"]["text"])
    assert labels.tolist() == list(task.splits["test"]["label"])


# ------------------------------------------------------------------ d. a Hub id without the network
PROBE = r"""
import json, os, sys, time
sys.path.insert(0, %(tests)r)
results = {}
def timed(name, call):
    started = time.perf_counter()
    try:
        value = call()
        results[name] = [round(time.perf_counter() - started, 3), "ok", type(value).__name__]
    except Exception as err:
        results[name] = [round(time.perf_counter() - started, 3), type(err).__name__, str(err)]
from hf_attn import Explainer
from hf_attn.batteries.data import load_classifier
from hf_attn.training.transformer import TransformerTrainSettings, train_transformer_classifier
timed("load_classifier", lambda: load_classifier("some-org/some-model"))
timed("explainer", lambda: Explainer.from_pretrained("some-org/some-model"))
timed("train", lambda: train_transformer_classifier(settings=TransformerTrainSettings(base_model="some-org/x"),
                                                    output_dir=%(out)r, progress=False))
timed("cached", lambda: load_classifier("org/tiny")[0])
print(json.dumps(results))
"""


def _fake_hub_cache(cache: Path) -> None:
    """A tiny BERT in a Hub cache folder as huggingface_hub lays it out (``models--org--tiny``)."""
    from architectures import tiny_classifier

    revision = "0123456789abcdef0123456789abcdef01234567"
    snapshot = cache / "models--org--tiny" / "snapshots" / revision
    model, tokenizer = tiny_classifier("bert")
    model.save_pretrained(snapshot)
    tokenizer.save_pretrained(snapshot)
    (cache / "models--org--tiny" / "refs").mkdir()
    (cache / "models--org--tiny" / "refs" / "main").write_text(revision)


@pytest.mark.parametrize("offline", [False, True])
def test_a_hub_id_without_the_network_fails_at_once_with_the_hint(tmp_path, offline):
    """A closed port as the Hub (HF_ENDPOINT=http://127.0.0.1:9, HF_HUB_OFFLINE unset), or
    HF_HUB_OFFLINE=1: the analyses' loader, the Explainer and the fine-tuning each fail within 2 s
    in one line naming a local folder, the offline aliases and HF_HUB_OFFLINE / the cache; a model in
    the Hub cache loads all the same."""
    _fake_hub_cache(tmp_path / "cache")
    env = {k: v for k, v in OFFLINE.items() if k != "HF_HUB_OFFLINE"}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_CACHE=str(tmp_path / "cache"), HF_HUB_ETAG_TIMEOUT="10")
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    code = PROBE % {"tests": str(Path(__file__).parent), "out": str(tmp_path / "out")}
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.strip().splitlines()[-1])
    assert results["cached"][1:] == ["ok", "BertForSequenceClassification"], results["cached"]
    for name in ("load_classifier", "explainer", "train"):
        seconds, kind, message = results[name]
        assert kind == "HubUnreachable" and seconds <= 2.0, (name, results[name])
        assert "\n" not in message and "give a local model folder" in message, message
        assert "an offline alias (minilm-l6, smollm2-135m)" in message and "HF_HUB_OFFLINE" in message
        assert ("HF_HUB_OFFLINE=1 and the model is not in the local Hub cache" if offline else
                "the Hugging Face Hub at http://127.0.0.1:9 cannot be reached (connection refused)") in message
    assert "Retrying" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_the_cli_names_the_hint_for_an_unreachable_hub_id(tmp_path):
    env = {k: v for k, v in OFFLINE.items() if k != "HF_HUB_OFFLINE"}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_CACHE=str(tmp_path / "cache"))
    result = _hf_attn("analyze", "some-org/some-model", "--battery", "jw", cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith(
        "hf-attn analyze: error: some-org/some-model: the Hugging Face Hub at http://127.0.0.1:9 cannot be reached")
    assert not (tmp_path / "some-model-jw").exists()


def test_a_reachable_hub_is_asked_as_before(hub, monkeypatch):
    """With the loopback Hub answering, a Hub id is returned unchanged (transformers then downloads
    or reads the cache as usual); a local folder is never probed."""
    from hf_attn.core import hub_access

    monkeypatch.setattr(hub_access, "_offline", lambda: False)
    monkeypatch.setattr(hub_access, "_endpoint", lambda: hub.endpoint)
    assert hub_access.hub_model_location("someone/model") == "someone/model"
    assert hub_access.unreachable_reason(hub.endpoint) is None
    monkeypatch.setattr(hub_access, "_endpoint", lambda: (_ for _ in ()).throw(AssertionError("probed")))
    assert hub_access.hub_model_location(str(REPO_ROOT)) == str(REPO_ROOT)


def test_the_probe_answers_in_time(monkeypatch):
    """A server that accepts the connection but never answers counts as unreachable after the
    probe's time (not transformers' retries)."""
    import socket

    from hf_attn.core.hub_access import unreachable_reason

    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        started = time.perf_counter()
        reason = unreachable_reason(f"http://127.0.0.1:{silent.getsockname()[1]}", seconds=0.5)
        assert reason is not None and time.perf_counter() - started < 1.5, reason
    assert unreachable_reason("http://127.0.0.1:9") == "connection refused"


# ------------------------------------------------------------------ e. third-party warnings
THIRD_PARTY = '''
import warnings

def noisy():
    for i in range(3):
        warnings.warn(f"third-party notice {i}", UserWarning)
'''


def test_third_party_warnings_go_to_the_log_not_the_console(trained_model_dir, tmp_path, monkeypatch, capsys):
    """During a command, a warning raised in a module outside hf_attn is in OUT/hf-attn.log and not
    on the console; hf_attn's own warning (TruncationWarning) stays on the console (and is logged)."""
    import warnings

    import hf_attn.cli.analyze as analyze
    from hf_attn.adapters.contract import TruncationWarning
    from hf_attn.cli import main

    (tmp_path / "noisy_library.py").write_text(THIRD_PARTY)
    monkeypatch.syspath_prepend(str(tmp_path))
    import noisy_library

    called = []

    def run(args):
        os.makedirs(args.output_dir, exist_ok=True)
        Path(args.output_dir, "results.json").write_text("{}")
        noisy_library.noisy()
        warnings.warn("our own notice", TruncationWarning)
        called.append(args.output_dir)
        return 0

    monkeypatch.setattr(analyze, "_run", run)
    out = str(tmp_path / "out")
    assert main(["analyze", trained_model_dir, "--battery", "jw", "--output-dir", out]) == 0
    assert called == [out]
    captured = capsys.readouterr()
    console = captured.out + captured.err
    assert "third-party notice" not in console
    assert "WARNING hf_attn.warnings: TruncationWarning: our own notice" in captured.err.splitlines()
    log = Path(out, "hf-attn.log").read_text()
    assert [f"third-party notice {i}" in log for i in range(3)] == [True] * 3
    assert "WARNING py.warnings" in log and "UserWarning: third-party notice 0" in log and "our own notice" in log
    assert warnings.showwarning.__module__ == "warnings"  # restored after the command


def test_own_warning_rule():
    from hf_attn.adapters.contract import TruncationWarning
    from hf_attn.core.warning_log import is_own_warning

    assert is_own_warning(TruncationWarning, "/elsewhere/user.py")
    assert is_own_warning(UserWarning, str(REPO_ROOT / "hf_attn" / "explainer.py"))
    assert not is_own_warning(UserWarning, "/site-packages/captum/attr/_core/deep_lift.py")


# ------------------------------------------------------------------ f. the README's Python blocks
def test_the_readmes_python_blocks_run(trained_model_dir, tmp_path):
    """Every ```python block of the README, in order, in one fresh interpreter, in a folder where
    ``runs/sst-lstm`` is a trained BiLSTM. Changed to run here: the quick start's 100 test sentences
    are 3 (the same calls on fewer rows), and the Hub quick start's repos are their local
    counterparts (``USER/sst-lstm`` → the run folder, ``USER/jw_correlation`` → the module folder:
    ``from_pretrained`` and ``evaluate.load`` read a folder as they read a downloaded repo)."""
    blocks = _code_blocks(README.read_text(encoding="utf-8"), "python")
    assert len(blocks) == 2
    shutil.copytree(trained_model_dir, tmp_path / "runs" / "sst-lstm")
    source = "\n".join(blocks)
    assert source.count("[:100]") == 3  # the texts, their labels and their human rationales
    source = source.replace("[:100]", "[:3]")
    source = source.replace('"USER/sst-lstm"', '"runs/sst-lstm"')
    source = source.replace('"USER/jw_correlation"', repr(str(REPO_ROOT / "hf_attn" / "metrics" / "jw_correlation")))
    assert "USER/" not in source
    (tmp_path / "readme_blocks.py").write_text(source + "\nprint('README blocks ran')\n")
    result = subprocess.run([sys.executable, "readme_blocks.py"], cwd=tmp_path, env=OFFLINE, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip().endswith("README blocks ran")
    assert (tmp_path / "out" / "jw" / "results.json").is_file()


# ------------------------------------------------------------------ g. every --help pointer resolves
POINTER = re.compile(r"(?:see )?README(?:, ([A-Z][\w ]*[\w]))?")


def _help_texts() -> list[tuple[str, str]]:
    specs = json.loads((REPO_ROOT / "hf_attn" / "cli_help.json").read_text(encoding="utf-8"))
    texts = []
    for command, spec in specs.items():
        texts += [(command, spec.get(key) or "") for key in ("description", "epilog", "usage")]
        texts += [(f"{command} {'/'.join(a['option_strings']) or a['dest']}", a.get("help") or "")
                  for a in spec["actions"]]
    from hf_attn.cli import DESCRIPTION, EPILOG

    return texts + [("hf-attn", DESCRIPTION), ("hf-attn", EPILOG)]


def test_every_help_pointer_resolves():
    """A help text that says "see README, X" points at a heading "X" of the README, and every
    docs/… or examples/… file it names exists."""
    headings = set(re.findall(r"^#+ (.+?)\s*$", README.read_text(encoding="utf-8"), re.M))
    pointers, broken = 0, []
    for where, text in _help_texts():
        for match in POINTER.finditer(text):
            pointers += 1
            if match.group(1) and match.group(1) not in headings:
                broken.append((where, match.group(0)))
        for path in re.findall(r"\b((?:docs|examples|scripts)/[\w./-]*\w)", text):
            pointers += 1
            if not (REPO_ROOT / path).exists():
                broken.append((where, path))
    assert pointers >= 4 and not broken, broken


# ------------------------------------------------------------------ h. a mistyped model folder
@pytest.mark.parametrize("argv", [["analyze", "runs/typo", "--battery", "jw"], ["eraser", "runs/typo"],
                                  ["explain", "runs/typo", "a sentence"],
                                  ["push", "runs/typo", "--repo-id", "me/model", "--dry-run"]])
def test_a_mistyped_model_folder_names_its_closest_sibling(argv, tmp_path, monkeypatch, capsys):
    from hf_attn.cli import main

    (tmp_path / "runs" / "typ0").mkdir(parents=True)
    (tmp_path / "runs" / "other").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    captured = capsys.readouterr()
    expected = f"hf-attn {argv[0]}: error: no model folder runs/typo; did you mean runs/typ0?"
    assert captured.err.splitlines() == [expected]
    assert "writing to" not in captured.out + captured.err
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["other", "typ0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


def test_which_names_are_local_folders(tmp_path, monkeypatch):
    from hf_attn.runs.folder import missing_model_folder

    (tmp_path / "runs" / "sst-lstm").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert missing_model_folder("runs/sst-lstm") is None  # exists
    assert missing_model_folder("runs/sst-lstn") == "no model folder runs/sst-lstn; did you mean runs/sst-lstm?"
    assert missing_model_folder("runs/zzz") == "no model folder runs/zzz"
    assert missing_model_folder("./nowhere/x") == "no model folder ./nowhere/x (and no folder ./nowhere)"
    assert missing_model_folder("owner/model") is None  # a Hub id: no local folder named owner
    assert missing_model_folder("minilm-l6") is None  # an alias or a one-word Hub id
    assert missing_model_folder("a/b/c") == "no model folder a/b/c (and no folder a/b)"
