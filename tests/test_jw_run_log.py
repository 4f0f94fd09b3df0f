"""``hf-attn analyze --battery jw`` says what it found on every model: the result summary is printed
(unless ``--quiet``) on a transformers classifier as on the papers' BiLSTM, and the output folder's
``hf-attn.log`` holds the run's steps and that summary, quiet or not."""

from __future__ import annotations

import json

import pytest

from architectures import TEXTS, tiny_classifier


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    model, tokenizer = tiny_classifier("bert")
    root = tmp_path_factory.mktemp("bert")
    model.save_pretrained(root / "tiny")
    tokenizer.save_pretrained(root / "tiny")
    data = root / "data"
    data.mkdir()
    for split in ("train", "validation", "test"):
        (data / f"{split}.jsonl").write_text("".join(json.dumps({"text": t, "label": i % 2}) + "\n"
                                                     for i, t in enumerate(TEXTS)))
    return root / "tiny", data


SMALL = ["--jw-permutations", "4", "--jw-adversaries", "2", "--jw-steps", "3", "--threads", "1"]


@pytest.mark.parametrize("quiet", [False, True])
def test_transformer_jw_prints_and_logs_its_summary(bert_folder, tmp_path, capsys, quiet):
    from hf_attn.cli import main

    folder, data = bert_folder
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["analyze", str(folder), "--battery", "jw", "--dataset", str(data), "--output-dir", str(out), *SMALL,
                 *(["--quiet"] if quiet else [])]) == 0
    printed = capsys.readouterr().out
    assert ("J&W battery:" in printed) is not quiet
    if not quiet:
        assert "τ(attention, gradient)" in printed and f"{len(TEXTS)} instances" in printed
    log = (out / "hf-attn.log").read_text()
    assert f"{len(TEXTS)} texts of" in log and "battery done in" in log
    assert "J&W battery:" in log and "τ(attention, gradient)" in log


def test_papers_model_jw_logs_its_summary(trained_model_dir, tmp_path, capsys):
    from hf_attn.cli import main

    out = tmp_path / "out"
    assert main(["analyze", trained_model_dir, "--battery", "jw", "--output-dir", str(out), "--jw-max-instances", "3",
                 *SMALL]) == 0
    assert "J&W battery:" in capsys.readouterr().out
    log = (out / "hf-attn.log").read_text()
    assert "3 texts of" in log and "battery done in" in log and "J&W battery:" in log
