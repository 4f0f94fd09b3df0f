"""Model folders and texts that used to give a silent wrong answer or a raw traceback are refused
in one line with the reason, by the library, the command line (exit code 2) and the Space's loader:
a folder without tokenizer files, a truncated weights file, a text with no tokens of its own, a
path to a file, ``dtype=``; typed special-token strings are read as text; the ERASER evaluate
module takes the undefined bins ``hf-attn eraser`` writes."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
import torch

from architectures import tiny_classifier

TEXT = "the story is gripping and wonderfully acted"


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    model, tokenizer = tiny_classifier("bert")
    folder = tmp_path_factory.mktemp("bert") / "bert"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _one_line(error) -> str:
    message = str(error)
    assert len(message.splitlines()) == 1, message
    return message


def _refused_everywhere(folder, pattern, capsys):
    """The library, the command line and the Space's loader refuse ``folder`` naming ``pattern``."""
    from hf_attn import Explainer
    from hf_attn.app.space import ExplainError, load_model
    from hf_attn.cli import main

    with pytest.raises(ValueError, match=pattern) as library:
        Explainer.from_pretrained(str(folder), device="cpu")
    _one_line(library.value)
    with pytest.raises(ExplainError, match=pattern):
        load_model(str(folder))
    capsys.readouterr()
    assert main(["explain", str(folder), "the good movie", "--device", "cpu"]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert pattern.split("|")[0].replace("\\", "") in captured.err


def test_a_folder_without_tokenizer_files_is_refused(bert_folder, tmp_path, capsys):
    folder = tmp_path / "no-tokenizer"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(bert_folder / name, folder / name)
    _refused_everywhere(folder, "tokenizer files are missing", capsys)


def test_a_tokenizer_of_only_special_tokens_is_refused(tmp_path):
    from transformers import AutoTokenizer

    from hf_attn.adapters.transformer_attention import check_tokenizer_fits

    model, _ = tiny_classifier("bert")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]) + "\n")
    empty = AutoTokenizer.from_pretrained(str(tmp_path))
    with pytest.raises(ValueError, match="only its 5 special token"):
        check_tokenizer_fits(model, empty, "M")


def test_a_truncated_weights_file_is_refused_naming_it(bert_folder, tmp_path, capsys):
    folder = tmp_path / "truncated"
    shutil.copytree(bert_folder, folder)
    data = (bert_folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[:3000])
    _refused_everywhere(folder, "model.safetensors cannot be read", capsys)


def test_hf_attn_folder_loader_refuses_a_truncated_weights_file(bert_folder, tmp_path):
    from hf_attn.models.loading import ModelFolderError, load_model_folder

    folder = tmp_path / "hf_attn"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "hf_attn"}))
    shutil.copy(bert_folder / "tokenizer.json", folder / "tokenizer.json")
    (folder / "model.safetensors").write_bytes((bert_folder / "model.safetensors").read_bytes()[:3000])
    with pytest.raises(ModelFolderError, match="model.safetensors cannot be read") as error:
        load_model_folder(folder)
    _one_line(error.value)


@pytest.mark.parametrize("name", ["dtype", "torch_dtype"])
def test_dtype_is_refused_before_anything_is_loaded(name, monkeypatch, bert_folder):
    from hf_attn import Explainer
    from hf_attn.adapters import transformer_attention

    def never(*args, **kwargs):
        raise AssertionError("loaded before the refusal")

    monkeypatch.setattr(transformer_attention, "resolve_base_model", never)
    with pytest.raises(ValueError, match=f"pass precision=.*not {name}"):
        Explainer.from_pretrained(str(bert_folder), **{name: torch.float16})


def test_a_path_to_a_file_is_not_a_model_folder(bert_folder):
    from hf_attn import Explainer

    with pytest.raises(ValueError, match="is a file, not a model folder") as error:
        Explainer.from_pretrained(str(bert_folder / "config.json"))
    assert str(bert_folder) in str(error.value)


@pytest.mark.parametrize("architecture", ["bert", "llama"])
@pytest.mark.parametrize("text", ["\u0301", "\ue000", "\ufe0f"])
def test_a_text_without_tokens_of_its_own_is_refused_by_explain(architecture, text):
    from hf_attn import Explainer

    explainer = Explainer(*tiny_classifier(architecture), device="cpu")
    if explainer.adapter.tokenize([text])[1][0] and any(w is not None for w in explainer.adapter.tokenize([text])[1][0]):
        pytest.skip("this tokenizer reads the character as a token")
    with pytest.raises(ValueError, match="no tokens of its own"):
        explainer.explain(text, ig=False, adversary=False, num_permutations=0)


def test_the_command_line_refuses_a_text_without_tokens(bert_folder, capsys):
    from hf_attn.cli import main

    capsys.readouterr()
    assert main(["explain", str(bert_folder), "\u0301", "--device", "cpu"]) == 2
    assert "no tokens of its own" in capsys.readouterr().err


@pytest.mark.parametrize("architecture, text", [("bert", "[CLS]"), ("bert", "[PAD]"), ("bert", "[SEP] [MASK]"),
                                                ("llama", "<s>")])
def test_typed_special_token_strings_are_text(architecture, text):
    from hf_attn import Explainer

    model, tokenizer = tiny_classifier(architecture)
    explainer = Explainer(model, tokenizer, device="cpu")
    ids, words = explainer.adapter.tokenize([text])
    typed = {tokenizer.convert_tokens_to_ids(t) for t in text.split()} - {tokenizer.unk_token_id}
    content = [t for t, w in zip(ids[0], words[0]) if w is not None]
    # the typed string is ordinary pieces of the text, never the special token it spells
    assert content and not set(content) & typed
    explained = explainer.explain(text, ig=False, adversary=False, num_permutations=0)[0]
    assert len(explained.tokens) >= 1
    assert all(np.isfinite(explained.loo))


def test_normal_text_is_tokenised_as_before():
    for architecture in ("bert", "llama", "gpt2"):
        model, tokenizer = tiny_classifier(architecture)
        from hf_attn import Explainer

        explainer = Explainer(model, tokenizer, device="cpu")
        ids, words = explainer.adapter.tokenize([TEXT])
        encoded = tokenizer([TEXT])
        assert ids[0] == list(encoded["input_ids"][0])
        assert words[0] == list(encoded.word_ids(0))


def test_eraser_module_takes_undefined_bins():
    import importlib.util
    import pathlib

    import hf_attn

    root = pathlib.Path(hf_attn.__file__).parent / "metrics" / "eraser_faithfulness"
    spec = importlib.util.spec_from_file_location("hf_attn_eraser_measures", root / "_hf_attn_measures.py")
    measures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(measures)
    nan = float("nan")
    comp = [[0.2, 0.2, 0.3, 0.4, 0.5], [nan] * 5, [0.0, 0.1, 0.1, 0.3, 0.6]]
    suff = [[0.3, 0.3, 0.2, 0.1, 0.0], [None] * 5, [0.4, 0.2, 0.2, 0.1, 0.05]]
    out = measures.summarize_eraser(comp, suff)
    defined = measures.summarize_eraser([comp[0], comp[2]], [suff[0], suff[2]])
    assert out["comprehensiveness_aopc"] == pytest.approx(defined["comprehensiveness_aopc"])
    assert out["sufficiency"] == pytest.approx(defined["sufficiency"])
    assert out["comprehensiveness_n"] == out["sufficiency_n"] == 2 and out["num_instances"] == 3
    assert out["undefined_instances"] == {"comprehensiveness": [1], "sufficiency": [1]}
    with pytest.raises(ValueError, match="inf"):
        measures.summarize_eraser([[math.inf] * 5], [[0.1] * 5])
    everything_undefined = measures.summarize_eraser([[nan] * 5], [[0.1] * 5])
    assert math.isnan(everything_undefined["comprehensiveness_aopc"])


def test_eraser_evaluate_module_reports_the_instances_left_out():
    evaluate = pytest.importorskip("evaluate")
    import pathlib

    import hf_attn

    metric = evaluate.load(str(pathlib.Path(hf_attn.__file__).parent / "metrics" / "eraser_faithfulness"))
    out = metric.compute(comprehensiveness=[[0.2, 0.2, 0.3, 0.4, 0.5], [None] * 5, [0.0, 0.1, 0.1, 0.3, 0.6]],
                         sufficiency=[[0.3, 0.3, 0.2, 0.1, 0.0], [None] * 5, [0.4, 0.2, 0.2, 0.1, 0.05]])
    assert out["comprehensiveness_n"] == 2 and out["num_instances"] == 3
    assert "1 of 3" in out["undefined"]["comprehensiveness instances"]
    assert out["comprehensiveness_aopc"] is not None
