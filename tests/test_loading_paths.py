"""Every loading path of the architectures the engine claims: a tiny classifier of each kind (encoders,
decoders, encoder–decoders, families hooked in their own modules, and the modelling files that pick
their attention class from their own table: Falcon, GPT-Neo, GPT-J) saved with ``save_pretrained``
and loaded back through ``Explainer.from_pretrained``, ``hf-attn explain`` and the Space's loader
must explain a sentence exactly as the in-memory model does (the reference). The models are the
architecture sweep's (``scripts/architecture_sweep.py``), which runs the same check on every
architecture of the mapping."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import architecture_sweep as sweep  # noqa: E402

TEXT = "the story is gripping and wonderfully acted"
SETTINGS = dict(num_permutations=3, k=1, adversary_steps=3, seed=0)  # the adversary and permutations too
ARCHITECTURES = ["bert", "distilbert", "modernbert",  # encoders
                 "gpt2", "llama", "qwen2",  # decoders (transformers rebuilds a Qwen2 folder's tokenizer)
                 "bart", "t5",  # encoder–decoders
                 "deberta-v2", "bloom",  # attention computed in their own modules (hooked)
                 "falcon", "gpt_neo", "gptj"]  # attention class looked up in their own table


def _saved(model_type: str, folder):
    """The sweep's tiny classifier of ``model_type``, saved to ``folder`` before anything touches it."""
    model, tokenizer = sweep.build(model_type)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model, tokenizer


def _same(got, reference) -> None:
    np.testing.assert_array_equal(got.tokens, reference.tokens)
    for name in ("probabilities", "attention", "gradient", "loo", "rollout", "permutation_tvd", "adversaries_tvd"):
        np.testing.assert_allclose(getattr(got, name), getattr(reference, name), rtol=0, atol=1e-6, err_msg=name)


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread: with several, a kernel may sum in another order for two copies of the same
    weights (seen: 5e-5 on a gradient of these peaky tiny models), which would hide nothing but
    would need a tolerance far above what loading itself may change (nothing)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("model_type", ARCHITECTURES)
def test_a_saved_classifier_explains_alike_through_every_loading_path(model_type, tmp_path, capsys):
    from hf_attn import Explainer
    from hf_attn.app.space import ModelPolicy, explain_sentence, load_model
    from hf_attn.cli import main

    folder = tmp_path / model_type
    model, tokenizer = _saved(model_type, folder)
    memory = Explainer(model, tokenizer, device="cpu")
    reference = memory.explain([TEXT], ig=False, **SETTINGS)

    # (a) the library
    loaded = Explainer.from_pretrained(str(folder), device="cpu")
    assert loaded.describe() | {"name": ""} == memory.describe() | {"name": ""}
    assert loaded.describe()["precision"] == loaded.describe()["weights_dtype"] == "float32"
    _same(loaded.explain([TEXT], ig=False, **SETTINGS)[0], reference[0])

    # (b) the command line: the same printed summary, numbers included
    capsys.readouterr()
    assert main(["explain", str(folder), TEXT, "--device", "cpu", "--ig-steps", "2", "--permutations", "3",
                 "--k", "1", "--adversary-steps", "3"]) == 0
    printed = capsys.readouterr().out
    expected = memory.explain([TEXT], ig_steps=2, **SETTINGS).summary()
    assert expected.strip() in printed
    assert "Traceback" not in printed

    # (c) the Space: its loader under a policy that offers the folder, then its main view
    space_model, space_tokenizer = load_model(str(folder), ModelPolicy((str(folder),)))
    shown = explain_sentence(space_model, space_tokenizer, TEXT, num_permutations=3, k=1, steps=3, seed=0)
    _same(shown, reference[0])


def test_the_folder_of_an_architecture_refused_in_memory_is_refused_alike(tmp_path):
    """FNet has no attention: refused in one line from memory and from its folder, never a raw error."""
    from hf_attn import Explainer
    from hf_attn.adapters.base import UnsupportedModelError

    model, tokenizer = _saved("fnet", tmp_path / "fnet")
    with pytest.raises(UnsupportedModelError) as memory:
        Explainer(model, tokenizer, device="cpu")
    with pytest.raises(UnsupportedModelError) as folder:
        Explainer.from_pretrained(str(tmp_path / "fnet"), device="cpu")
    assert str(folder.value) == str(memory.value) and len(str(folder.value).splitlines()) == 1
    assert "no attention at all" in str(folder.value)


def test_the_loader_builds_eager_then_switches_where_the_interface_is_used(tmp_path):
    """Falcon's modelling file looks its attention class up in its own table, which has no entry for
    hf_attn's attention: built eager and left so (the adapter hooks it); BERT goes through
    transformers' interface and is switched to the intervention attention."""
    from hf_attn.adapters.interface import ATTN_IMPLEMENTATION
    from hf_attn.adapters.transformer_attention import load_transformer_classifier

    for model_type, expected in (("falcon", "eager"), ("bert", ATTN_IMPLEMENTATION)):
        _saved(model_type, tmp_path / model_type)
        model, _ = load_transformer_classifier(str(tmp_path / model_type))
        assert model.config._attn_implementation == expected, model_type


def test_the_tokenizer_is_the_one_saved_with_the_model(tmp_path):
    """transformers' AutoTokenizer rebuilds the tokenizer of a Qwen2 folder as Qwen2's own class from
    the vocabulary, whatever tokenizer was saved: here it drops every word of a WordPiece tokenizer.
    The loader keeps the tokenizer.json saved with the model."""
    from transformers import AutoTokenizer

    from hf_attn.adapters.transformer_attention import load_transformer_classifier

    _, tokenizer = _saved("qwen2", tmp_path)
    ids = tokenizer(TEXT)["input_ids"]
    assert len(ids) == len(TEXT.split()) + 2  # [CLS], one piece per word, [SEP]
    assert AutoTokenizer.from_pretrained(tmp_path)(TEXT)["input_ids"] != ids  # what transformers gives
    _, loaded = load_transformer_classifier(str(tmp_path))
    assert loaded(TEXT)["input_ids"] == ids and loaded.pad_token_id == tokenizer.pad_token_id
    _, bert = _saved("bert", tmp_path / "bert")  # agreeing tokenizers are kept as transformers loads them
    assert type(load_transformer_classifier(str(tmp_path / "bert"))[1]) is type(AutoTokenizer.from_pretrained(
        tmp_path / "bert"))


def test_the_sweep_records_the_loading_path(tmp_path):
    """The sweep's per-architecture check of the loading path: True for a model that loads back and
    explains alike, the reason otherwise (here: a folder whose weights were swapped after saving)."""
    from hf_attn import Explainer

    model, tokenizer = _saved("gpt_neo", tmp_path / "neo")
    row = sweep.from_folder(str(tmp_path / "neo"), None, Explainer(model, tokenizer, device="cpu"))
    assert row["loads_from_folder"] is True and row["folder_max_abs_diff"] == 0.0
    other, _ = sweep.build("gpt_neo", seed=1)
    other.save_pretrained(tmp_path / "neo")  # different weights under the same name
    row = sweep.from_folder(str(tmp_path / "neo"), None, Explainer(model, tokenizer, device="cpu"))
    assert row["loads_from_folder"] is False and "differ by" in row["load_error"]
    assert sweep.from_folder(str(tmp_path), "ValueError: bad config", None) == {
        "loads_from_folder": False, "load_error": "save_pretrained: ValueError: bad config"}


def test_a_folder_transformers_cannot_build_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    """Whatever a modelling file raises while it is built from a folder, the library, the command line
    and the Space answer in one line naming the folder and the error, never with a traceback."""
    import transformers

    from hf_attn import Explainer
    from hf_attn.app.space import ExplainError, ModelPolicy, load_model
    from hf_attn.cli import main

    _saved("bert", tmp_path / "bert")

    def broken(*args, **kwargs):
        raise KeyError("hf_attn_intervention")

    monkeypatch.setattr(transformers.BertForSequenceClassification, "__init__", broken)
    folder = str(tmp_path / "bert")
    with pytest.raises(ValueError, match=r"transformers could not build its classifier \(KeyError: "
                                         r"'hf_attn_intervention'\)") as refused:
        Explainer.from_pretrained(folder, device="cpu")
    assert str(refused.value).startswith(folder) and "\n" not in str(refused.value)
    capsys.readouterr()
    assert main(["explain", folder, TEXT, "--device", "cpu"]) != 0
    captured = capsys.readouterr()
    assert "could not build its classifier" in captured.err and "Traceback" not in captured.err + captured.out
    with pytest.raises(ExplainError, match="could not build its classifier"):
        load_model(folder, ModelPolicy((folder,)))
