"""``hf-attn analyze --max-length N|window``: one option cuts the texts of the J&W battery and the
faithfulness table alike; ``window`` keeps every token the model reads."""

import json
import subprocess
import sys

import pytest

from architectures import saved_classifier

LONG = " ".join(["a good film but a dull plot and very fun acting"] * 3)  # 33 words


def _analyze(folder, data, out, battery, *extra):
    command = [sys.executable, "-m", "hf_attn.cli", "analyze", str(folder), "--battery", battery, "--dataset",
               str(data), "--output-dir", str(out), "--quiet", "--threads", "1", *extra]
    return subprocess.run(command, capture_output=True, text=True, env={"HF_HUB_OFFLINE": "1", "PATH": "",
                                                                       "OMP_NUM_THREADS": "1"})


@pytest.mark.slow
def test_max_length_cuts_both_batteries_and_window_keeps_every_token(tmp_path):
    folder, data = saved_classifier("bert", tmp_path)
    data.write_text("".join(json.dumps({"text": t, "label": i % 3}) + "\n"
                            for i, t in enumerate([LONG, "a good film", LONG])))
    lengths, faith_lengths = {}, {}
    for limit in ("8", "window"):
        out = tmp_path / f"jw-{limit}"
        done = _analyze(folder, data, out, "jw", "--max-length", limit, "--jw-steps", "2", "--jw-permutations", "2")
        assert done.returncode == 0, done.stderr
        results = json.loads((out / "results.json").read_text())
        assert results["parameters"]["max_length"] == (8 if limit == "8" else "window")
        rows = [json.loads(line) for line in (out / "instances.jsonl").read_text().splitlines()]
        lengths[limit] = max(len(row["attention"]) for row in rows)  # the content tokens
        out = tmp_path / f"faith-{limit}"
        done = _analyze(folder, data, out, "faithfulness", "--max-length", limit, "--faith-methods",
                        "attention,random", "--faith-metrics", "comprehensiveness")
        assert done.returncode == 0, done.stderr
        table = json.loads((out / "results.json").read_text())
        faith_lengths[limit] = table["model"]["max_length"]
    assert lengths["8"] == 6  # [CLS] + 6 word pieces + [SEP]
    from transformers import AutoTokenizer

    pieces = len(AutoTokenizer.from_pretrained(folder)(LONG, add_special_tokens=False)["input_ids"])
    assert lengths["window"] == pieces > 8  # the whole text (the tiny BERT reads 40 positions)
    assert faith_lengths == {"8": 8, "window": 40}


def test_a_bad_max_length_is_one_line_and_exit_2(tmp_path):
    folder, data = saved_classifier("bert", tmp_path)
    done = _analyze(folder, data, tmp_path / "out", "jw", "--max-length", "many")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "--max-length" in done.stderr
