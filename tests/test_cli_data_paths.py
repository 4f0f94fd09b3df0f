"""The data a transformers classifier is analysed on, through the command line (``hf-attn analyze``,
``hf-attn eraser``): the data's integer labels are the model's class ids (never renumbered by sort
order; one outside the model's classes is refused with its file and line), a line of only invisible
characters is refused like a whitespace-only one, ``--faith-max-instances 0`` is refused where it is
parsed, and captum's feature-mask warnings do not flood the terminal."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from architectures import TEXTS, saved_classifier, tiny_classifier


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    folder, _ = saved_classifier("bert", tmp_path_factory.mktemp("cli_data"))
    return folder


def _write(path, rows):
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def _exit_code(args) -> int:
    from hf_attn.cli import main

    try:
        return main(args)
    except SystemExit as done:  # argparse refuses a value with exit code 2
        return done.code


def _predictions(folder, texts) -> list[int]:
    from hf_attn.batteries.data import load_classifier

    model, tokenizer = load_classifier(str(folder))
    with torch.no_grad():
        return [int(model(**tokenizer(text, return_tensors="pt")).logits.argmax(-1)) for text in texts]


def test_integer_labels_are_the_models_class_ids(bert, tmp_path):
    texts, labels = TEXTS[:3], [0, 2, 2]
    data = _write(tmp_path / "d.jsonl", [{"text": t, "label": y} for t, y in zip(texts, labels)])
    expected = sum(p == y for p, y in zip(_predictions(bert, texts), labels)) / 3

    out = tmp_path / "jw"
    assert _exit_code(["analyze", str(bert), "--battery", "jw", "--dataset", str(data), "--jw-steps", "2",
                       "--jw-permutations", "2", "--output-dir", str(out), "--quiet"]) == 0
    rows = [json.loads(line) for line in (out / "instances.jsonl").read_text().splitlines()]
    assert [row["label"] for row in rows] == labels  # kept as they are, not renumbered 0, 1, 1
    results = json.loads((out / "results.json").read_text())
    assert results["label_names"] == ["LABEL_0", "LABEL_1", "LABEL_2"]  # the model's classes
    assert results["summary"]["accuracy"] == pytest.approx(expected)

    out = tmp_path / "eraser"
    assert _exit_code(["eraser", str(bert), "--dataset", str(data), "--ig-steps", "2", "--output-dir", str(out),
                       "--quiet"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["label_names"] == ["LABEL_0", "LABEL_1", "LABEL_2"]
    assert results["accuracy"] == pytest.approx(expected)


def test_the_papers_reviewer_case_has_two_thirds_accuracy(bert, tmp_path):
    """Labels chosen from the model's own predictions (one of three wrong): accuracy is 2/3 exactly
    when the ids are kept, whatever ids the model predicts."""
    texts = TEXTS[:3]
    predicted = _predictions(bert, texts)
    labels = [predicted[0], predicted[1], (predicted[2] + 1) % 3]
    data = _write(tmp_path / "d.jsonl", [{"text": t, "label": y} for t, y in zip(texts, labels)])
    out = tmp_path / "eraser"
    assert _exit_code(["eraser", str(bert), "--dataset", str(data), "--ig-steps", "2", "--output-dir", str(out),
                       "--quiet"]) == 0
    assert json.loads((out / "results.json").read_text())["accuracy"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("command", ["analyze", "eraser"])
def test_label_outside_the_models_classes_is_refused_with_its_line(bert, tmp_path, capsys, command):
    data = _write(tmp_path / "d7.jsonl", [{"text": TEXTS[0], "label": 0}, {"text": TEXTS[1], "label": 7}])
    args = (["analyze", str(bert), "--battery", "jw", "--jw-steps", "2", "--jw-permutations", "2"]
            if command == "analyze" else ["eraser", str(bert), "--ig-steps", "2"])
    out = tmp_path / "out"
    assert _exit_code([*args, "--dataset", str(data), "--output-dir", str(out), "--quiet"]) == 2
    message = capsys.readouterr().err
    assert "d7.jsonl, line 2" in message and "7" in message and "[0, 3)" in message
    assert not (out / "results.json").exists()


def test_faith_max_instances_zero_is_refused_where_parsed(bert, tmp_path, capsys):
    for value in ("0", "-3"):
        assert _exit_code(["analyze", str(bert), "--battery", "faithfulness", "--faith-max-instances", value,
                           "--output-dir", str(tmp_path / "out"), "--quiet"]) == 2
        assert "--faith-max-instances" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["\u200b\u200b", "\ufeff", " \u200d\u2060 "])
def test_a_line_of_invisible_characters_is_refused_with_its_line(bert, tmp_path, capsys, text):
    data = _write(tmp_path / "zw.jsonl", [{"text": TEXTS[0], "label": 0}, {"text": text, "label": 1}])
    assert _exit_code(["eraser", str(bert), "--dataset", str(data), "--ig-steps", "2",
                       "--output-dir", str(tmp_path / "out"), "--quiet"]) == 2
    message = capsys.readouterr().err
    assert "zw.jsonl, line 2" in message and "invisible" in message


def test_invisible_only_text_is_refused_by_the_csv_loader_too(tmp_path):
    from hf_attn.batteries.data import load_analysis_data
    from hf_attn.data.tasks import DataError

    data = tmp_path / "d.csv"
    data.write_text("text,label\ngood,0\n\u200b,1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"d\.csv, line 3"):
        load_analysis_data("unused", str(data))


def test_no_captum_feature_mask_warnings():
    """A tokenizer without special tokens (every position is a feature) made captum warn about the
    feature mask once per text; the warning is silenced where hf_attn calls captum."""
    pytest.importorskip("captum")
    from hf_attn.adapters import adapter_for
    from hf_attn.batteries.faithfulness import FaithfulnessSettings, run_faithfulness

    model, tokenizer = tiny_classifier("gpt2")
    adapter = adapter_for(model, tokenizer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_faithfulness(adapter, TEXTS[:3], FaithfulnessSettings(methods=("kernel_shap", "random"), shap_samples=8),
                         progress=False)
    assert not [w for w in caught if "feature mask" in str(w.message).lower()]


def test_wp_data_keeps_the_models_class_ids(tmp_path):
    """The W&P battery of a transformers classifier reads its data the same way: integer labels are
    the model's class ids (0 and 2 stay 0 and 2 on a 3-class model, not 0 and 1), one outside is
    refused with its row."""
    from hf_attn.batteries.wp.transformer import TransformerWPSettings
    from hf_attn.data.tasks import DataError, load_task
    from hf_attn.runs.wp_transformer import _transformer_data

    model, _ = tiny_classifier("bert")
    assert model.config.num_labels == 3

    def task_of(name, labels):
        rows = [{"text": TEXTS[i % len(TEXTS)], "label": y} for i, y in enumerate(labels)]
        path = _write(tmp_path / name, rows)
        return load_task(str(path)), TransformerWPSettings(dataset=str(path), split="test")

    task, settings = task_of("d.jsonl", [0, 2] * 20)
    texts, labels, _, _, names = _transformer_data(model, settings, None, None, None, task, None)
    gold = [task.label_names[int(y)] for y in task.splits["test"]["label"]]  # the file's own labels
    assert [int(y) for y in labels] == [int(g) for g in gold] and set(gold) == {"0", "2"}
    assert names == ["LABEL_0", "LABEL_1", "LABEL_2"]
    task, settings = task_of("bad.jsonl", [0, 7] * 20)
    with pytest.raises(DataError, match="outside the model's 3 classes"):
        _transformer_data(model, settings, None, None, None, task, None)
