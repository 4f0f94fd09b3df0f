"""The architecture sweep: every ``model_type`` of the installed transformers'
sequence-classification mapping, as a tiny random classifier (no download), through
``Explainer(model, tokenizer)`` (the adapter's probe), ``.jw(6 texts)`` and ``.attributions(2 texts)``
with every method but the captum ones.

    python scripts/architecture_sweep.py [--record docs/benchmarks/architecture_sweep.json]
                                         [--types bert,bart,...] [--timeout 240]
    python scripts/architecture_sweep.py --docs [--record ...]   # rewrite docs/engine.md's matrix
    python scripts/architecture_sweep.py --types falcon,gptj --merge   # replace those rows of the record

Each model is built from its default config shrunk generically (2 layers, hidden 32, 2 heads, a
vocabulary of 64, dropout 0, ``initializer_range`` 0.5 so that a dead intervention shows), with a
short table of per-architecture fixes (:data:`CONFIG_FIXES`), and a tiny word-level tokenizer
(``tests/architectures.py``). Every model runs in its own forked process with a time limit, so one
crash or hang costs one row, not the sweep.

Per architecture the record holds: ``built`` (or ``build_error``), ``model_class``, ``verdict``
(``runs``: the adapter was built, so its one-hot probe moved the logits, and the battery and every
attribution method ran or declined in one line; ``refused``: refused at ``Explainer(...)`` with
one line, kept in ``reason``; ``error``: a raw exception, kept in ``error``), the layers, heads,
query rows, padding and fast path found, and the methods that apply or were declined (with why).

The loading path too: each model is saved with ``save_pretrained`` before anything touches it and
loaded back through ``Explainer.from_pretrained`` (:func:`from_folder`). ``loads_from_folder`` is
True when the folder explains two texts with the in-memory model's probabilities and attention
and the same description, False with ``load_error`` otherwise; a model refused in memory must be
refused in one line from its folder too (``folder_refused``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import shutil
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

DEFAULT_RECORD = os.path.join(ROOT, "docs", "benchmarks", "architecture_sweep.json")
ENGINE_DOC = os.path.join(ROOT, "docs", "engine.md")
JW_TEXTS = ["the good movies", "not very fun acting , but a great story", "dull",
            "a boring film and a dull plot", "very good acting", "the story is gripping and wonderfully acted"]
CAPTUM_METHODS = ("kernel_shap", "deeplift")
JW_SETTINGS = {"num_permutations": 8, "k": 2, "steps": 10}
ATTRIBUTION_SETTINGS = {"ig_steps": 8}

VOCAB = 64
HIDDEN = 32
HEADS = 2
LAYERS = 2
FFN = 64

# generic shrinking: every attribute of a config (and of its sub-configs) with one of these names
SHRINK = {
    **{name: LAYERS for name in ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers",
                                  "decoder_layers", "num_decoder_layers", "num_encoder_layers")},
    **{name: HIDDEN for name in ("hidden_size", "d_model", "n_embd", "dim", "embedding_size", "embed_dim",
                                  "word_embed_proj_dim")},
    **{name: HEADS for name in ("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
                                 "decoder_attention_heads", "num_key_value_heads", "n_head_kv", "num_kv_heads",
                                 "multi_query_group_num")},
    **{name: FFN for name in ("intermediate_size", "ffn_dim", "d_ff", "hidden_dim", "n_inner", "encoder_ffn_dim",
                               "decoder_ffn_dim", "moe_intermediate_size", "shared_expert_intermediate_size",
                               "expert_intermediate_size", "ffn_hidden_size")},
    "pooler_hidden_size": HIDDEN, "rotary_dim": 8, "coordinate_size": 6, "shape_size": 4,
    "head_dim": HIDDEN // HEADS, "query_pre_attn_scalar": HIDDEN // HEADS, "cross_attention_hidden_size": HIDDEN, "d_kv": HIDDEN // HEADS, "kv_channels": HIDDEN // HEADS,
    "max_position_embeddings": 128, "n_positions": 128, "n_ctx": 128, "max_seq_len": 128,
    **{name: 4 for name in ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")},
    **{name: 2 for name in ("num_experts_per_tok", "moe_topk", "top_k")},
    **{name: 1 for name in ("n_group", "topk_group", "num_expert_group")},
    **{name: 0.0 for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout",
                               "activation_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop",
                               "classifier_dropout", "classifier_dropout_prob", "summary_first_dropout",
                               "seq_classif_dropout", "dropout_rate", "attn_dropout", "ffn_dropout", "pooler_dropout",
                               "classif_dropout", "resid_dropout", "emb_dropout", "embed_dropout", "attention_dropout_prob",
                               "hidden_dropout_rate")},
}

# multi-head latent attention (DeepSeek-style): the rotary part is head_dim wide
_MLA = {"kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "qk_head_dim": 16,
        "v_head_dim": 16, "head_dim": 8}

# per-architecture fixes applied after the generic shrinking: attribute → value
CONFIG_FIXES: dict[str, dict] = {
    "reformer": {"axial_pos_shape": [8, 16], "axial_pos_embds_dim": [16, 16], "attn_layers": ["local", "local"],
                 "local_attn_chunk_length": 16, "lsh_attn_chunk_length": 16, "is_decoder": False},
    "funnel": {"block_sizes": [1, 1], "block_repeats": [1, 1], "num_decoder_layers": 1, "d_head": 16,
               "d_inner": FFN},
    "xlnet": {"d_head": 16, "d_inner": FFN},
    "transfo-xl": {"d_head": 16},
    "canine": {"downsampling_rate": 2, "num_hash_buckets": 64, "num_hash_functions": 2, "local_transformer_stride": 8},
    "perceiver": {"d_latents": HIDDEN, "num_latents": 8, "num_blocks": 1, "num_self_attends_per_block": 1,
                  "num_self_attention_heads": HEADS, "num_cross_attention_heads": 1, "qk_channels": HIDDEN,
                  "v_channels": HIDDEN},
    "longformer": {"attention_window": [8, 8]},
    # block-sparse attention has no probability matrix to intervene on; the full one is hooked
    "big_bird": {"attention_type": "original_full"},
    "bigbird_pegasus": {"attention_type": "block_sparse", "block_size": 2, "num_random_blocks": 2},
    "led": {"attention_window": [8, 8]},
    "squeezebert": {"q_groups": 2, "k_groups": 2, "v_groups": 2, "post_attention_groups": 2,
                    "intermediate_groups": 2, "output_groups": 2},
    "convbert": {"head_ratio": 1, "conv_kernel_size": 3},
    "deberta-v2": {"position_buckets": 16, "max_relative_positions": 32},
    "deberta": {"max_relative_positions": 32},
    "jamba": {"attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2, "expert_layer_offset": 1,
              "mamba_d_state": 4, "mamba_dt_rank": 4, "use_mamba_kernels": False},
    "mobilebert": {"embedding_size": 32, "intra_bottleneck_size": 32, "true_hidden_size": 32,
                   "num_feedforward_networks": 1, "initializer_range": 0.05},
    "zamba": {"layers_block_type": ["hybrid", "hybrid"], "attn_layer_period": 2, "attn_layer_offset": 1, "mamba_d_state": 4, "mamba_dt_rank": 4,
              "use_mamba_kernels": False, "attention_hidden_size": 2 * HIDDEN, "attention_head_dim": 2 * HIDDEN // HEADS},
    # "linear_attention" is the Mamba layer ("mamba", its older name, is refused by save_pretrained)
    "zamba2": {"layers_block_type": ["linear_attention", "hybrid"], "mamba_d_state": 4, "mamba_headdim": 8, "n_mamba_heads": 8, "use_mamba_kernels": False,
               "attention_hidden_size": 2 * HIDDEN, "attention_head_dim": 2 * HIDDEN // HEADS,
               "hybrid_layer_ids": [1], "use_mem_rope": False},
    "minimax": {"layer_types": ["full_attention", "full_attention"]},
    "qwen3_next": {"layer_types": ["linear_attention", "full_attention"], "linear_num_value_heads": 2,
                   "linear_num_key_heads": 2, "linear_key_head_dim": 8, "linear_value_head_dim": 8},
    "deepseek_v2": {**_MLA, "q_lora_rank": None, "first_k_dense_replace": 1, "n_shared_experts": 1, "n_group": 1,
                    "topk_group": 1},
    "deepseek_v3": {**_MLA, "first_k_dense_replace": 1, "n_shared_experts": 1, "n_group": 1,
                    "topk_group": 1},
    "minicpm3": _MLA, "axk1": _MLA, "axk2": _MLA,
    # half of Mistral 4's head_dim is rotary (partial_rotary_factor 0.5)
    "mistral4": {**_MLA, "head_dim": 16, "first_k_dense_replace": 1, "n_shared_experts": 1},
    # its default config names no rotary parameters per layer type
    "cohere_compass_text": {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
    "gpt_oss": {"layer_types": ["full_attention", "full_attention"]},
    "tapas": {"type_vocab_sizes": [3, 8, 8, 8, 8, 8, 8]},
    "layoutlmv2": {"max_2d_position_embeddings": 64},
    # six box embeddings of hidden_size // 6 each, a layout stream hidden_size // channel_shrink_ratio wide
    "lilt": {"hidden_size": 48},
    "ctrl": {"n_embd": HIDDEN},
    # one global and one local layer (the default pattern is 24 layers long: save_pretrained refuses it)
    "gpt_neo": {"attention_types": [[["global", "local"], 1]], "attention_layers": ["global", "local"]},
}


def _set_everywhere(config, values: dict, seen=None) -> None:
    """``values`` on ``config`` and, recursively, on its sub-configs (``text_config``, ``encoder``…),
    for the attributes the config already has."""
    from transformers import PretrainedConfig

    seen = set() if seen is None else seen
    if id(config) in seen:
        return
    seen.add(id(config))
    for name, value in values.items():
        if name in config.__dict__ or hasattr(type(config), name):
            for candidate in (value, 0) if value == 0.0 and isinstance(value, float) else (value,):
                try:  # a strictly typed field may take an int dropout only
                    setattr(config, name, candidate)
                    break
                except Exception:  # noqa: BLE001 - a read-only or validated field keeps its default
                    continue
    for name, sub in list(config.__dict__.items()):
        if isinstance(sub, PretrainedConfig):
            _set_everywhere(sub, values, seen)


def _configs(config, seen=None) -> list:
    """``config`` and its sub-configs (``text_config``, ``encoder``…), recursively."""
    from transformers import PretrainedConfig

    seen = set() if seen is None else seen
    if id(config) in seen:
        return []
    seen.add(id(config))
    found = [config]
    for sub in list(config.__dict__.values()):
        if isinstance(sub, PretrainedConfig):
            found += _configs(sub, seen)
    return found


def tiny_config(model_type: str, vocab_size: int, special: dict):
    """The default config of ``model_type`` shrunk (module docstring) with ids of ``special`` tokens."""
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type)
    values = dict(SHRINK)
    values |= {"vocab_size": vocab_size, "initializer_range": 0.5, "init_std": 0.5, "num_labels": 3, "use_cache": False,
               "type_vocab_size": 2}
    values |= special
    # layer patterns of hybrid models: keep as many as there are layers
    _set_everywhere(config, values)
    for sub in _configs(config):  # every per-layer pattern (layer_types, mlp_layer_types…), nested configs too
        for name, layer_types in list(sub.__dict__.items()):
            if name == "layer_types" or name.endswith("_layer_types"):
                if isinstance(layer_types, (list, tuple)) and len(layer_types) != LAYERS:
                    # the last ones: hybrids (linear attention, Mamba) end their pattern on a full-attention layer
                    setattr(sub, name, list(layer_types[-LAYERS:]) if len(layer_types) >= LAYERS
                            else list(layer_types) * LAYERS)
    _set_everywhere(config, CONFIG_FIXES.get(model_type, {}))
    for name, value in special.items():  # token ids on the top config even where it declares none
        setattr(config, name, value)
    config.num_labels = 3
    if getattr(config, "id2label", None) is not None:
        config.id2label = {i: f"LABEL_{i}" for i in range(3)}
        config.label2id = {v: k for k, v in config.id2label.items()}
    return config


def build(model_type: str, seed: int = 0, **overrides):
    """``(model, tokenizer)``: the tiny random classifier of ``model_type`` (eval, float32, eager);
    ``overrides``: config attributes set last."""
    import torch
    from architectures import word_tokenizer
    from transformers import AutoModelForSequenceClassification

    tokenizer = word_tokenizer("cls")
    vocab = tokenizer.get_vocab()
    special = {"pad_token_id": vocab["[PAD]"], "bos_token_id": vocab["[CLS]"], "eos_token_id": vocab["[SEP]"],
               "sep_token_id": vocab["[SEP]"], "cls_token_id": vocab["[CLS]"], "decoder_start_token_id": vocab["[CLS]"],
               "mask_token_id": vocab["[MASK]"], "unk_token_id": vocab["[UNK]"]}
    tokenizer.eos_token = "[SEP]"
    tokenizer.bos_token = "[CLS]"
    config = tiny_config(model_type, VOCAB, special)
    for name, value in overrides.items():
        setattr(config, name, value)
    torch.manual_seed(seed)
    try:
        model = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    except (ValueError, TypeError) as error:
        if "attn_implementation" not in str(error) and "eager" not in str(error):
            raise
        model = AutoModelForSequenceClassification.from_config(config)
    if hasattr(model, "set_default_language"):  # X-MOD: one language adapter must be chosen
        model.set_default_language(next(iter(getattr(config, "languages", None) or ["en_XX"])))
    return model.eval(), tokenizer


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300] if text else ''}"


def _saved(model, tokenizer, folder: str) -> str | None:
    """``save_pretrained`` of the model and tokenizer into ``folder`` (before any explainer touches
    the model); the error in one line, or None."""
    try:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    except Exception as error:  # noqa: BLE001 - a config transformers will not write is a finding
        return _joined(error)
    return None


def _joined(error: BaseException) -> str:
    """The error's lines joined (validation errors give the reason on their second line)."""
    return f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"


FOLDER_TOLERANCE = 1e-5  # the loaded model's probabilities and attention against the in-memory one's
FOLDER_SAME = ("num_layers", "num_heads", "query", "padding", "explained_module", "attention_seam", "precision",
               "weights_dtype")


def from_folder(folder: str, save_error: str | None, explainer=None) -> dict:
    """The loading path: ``Explainer.from_pretrained(folder)`` (float32, the CPU) of the saved model.
    With the in-memory ``explainer``: ``loads_from_folder`` is True when it loads and explains the
    first two texts with the same probabilities and attention (within :data:`FOLDER_TOLERANCE`) and
    the same description; otherwise ``load_error`` says why. Without (a model refused in memory):
    ``folder_refused`` is True when the folder is refused in one line too, ``load_error`` otherwise."""
    from hf_attn import Explainer
    from hf_attn.adapters.base import UnsupportedModelError

    if save_error:
        return {"loads_from_folder": False, "load_error": f"save_pretrained: {save_error}"}
    start = time.perf_counter()
    try:
        loaded = Explainer.from_pretrained(folder, device="cpu")
    except UnsupportedModelError as error:
        if explainer is None and len(str(error).strip().splitlines()) == 1:
            return {"folder_refused": True, "folder_seconds": round(time.perf_counter() - start, 3)}
        return {"loads_from_folder" if explainer is not None else "folder_refused": False,
                "load_error": _joined(error)}
    except Exception as error:  # noqa: BLE001 - exactly what this check exists to find
        return {"loads_from_folder" if explainer is not None else "folder_refused": False,
                "load_error": _joined(error)}
    if explainer is None:
        return {"folder_refused": False, "load_error": "refused in memory but explained from its folder"}
    try:
        settings = dict(ig=False, adversary=False, num_permutations=0)
        here, there = explainer.explain(JW_TEXTS[:2], **settings), loaded.explain(JW_TEXTS[:2], **settings)
    except Exception as error:  # noqa: BLE001
        return {"loads_from_folder": False, "load_error": f"explain: {_joined(error)}"}
    import numpy as np

    row = {"folder_seconds": round(time.perf_counter() - start, 3)}
    if [a.tokens for a in here] != [b.tokens for b in there]:
        return row | {"loads_from_folder": False, "load_error": "the loaded tokenizer splits the texts differently: "
                      f"{there[0].tokens} instead of {here[0].tokens}"}
    diff = max(float(np.max(np.abs(np.asarray(getattr(a, name)) - np.asarray(getattr(b, name)))))
               for a, b in zip(here, there) for name in ("probabilities", "attention"))
    row["folder_max_abs_diff"] = diff
    differs = [k for k in FOLDER_SAME if here.model.get(k) != there.model.get(k)]
    if differs:
        return row | {"loads_from_folder": False, "load_error": f"the loaded model is described differently: {differs}"}
    if not diff <= FOLDER_TOLERANCE:
        return row | {"loads_from_folder": False,
                      "load_error": f"the loaded model's probabilities or attention differ by {diff:.3g}"}
    return row | {"loads_from_folder": True}


def sweep_one(model_type: str) -> dict:
    """One row of the record (module docstring); never raises."""
    folder = tempfile.mkdtemp(prefix=f"sweep-{model_type}-")
    try:
        return _sweep_one(model_type, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _sweep_one(model_type: str, folder: str) -> dict:
    import torch

    torch.set_num_threads(1)
    from hf_attn import Explainer
    from hf_attn.adapters.base import UnsupportedModelError
    from hf_attn.batteries.faithfulness import METHODS

    row: dict = {"model_type": model_type}
    start = time.perf_counter()
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        model, tokenizer = build(model_type)
    except Exception as error:  # noqa: BLE001 - a config the generic shrinking cannot build
        return row | {"built": False, "build_error": _one_line(error), "seconds": time.perf_counter() - start}
    row |= {"built": True, "model_class": type(model).__name__}
    save_error = _saved(model, tokenizer, folder)
    try:
        explainer = Explainer(model, tokenizer, device="cpu")
    except UnsupportedModelError as error:
        lines = str(error).strip().splitlines()
        return row | {"verdict": "refused", "reason": lines[0] if lines else "", "reason_lines": len(lines),
                      "seconds": time.perf_counter() - start} | from_folder(folder, save_error)
    except Exception as error:  # noqa: BLE001 - exactly what the sweep exists to find
        return row | {"verdict": "error", "stage": "Explainer", "error": _one_line(error),
                      "traceback": traceback.format_exc(limit=-3), "seconds": time.perf_counter() - start}
    described = explainer.describe()
    row |= {"layers": described["num_layers"], "heads": described["num_heads"], "query": described["query"],
            "padding": described["padding"], "fast_path": bool(described["fast_path"]),
            "fast_path_reason": described["fast_path_reason"], "fused_attention": bool(described["fused_attention"]),
            "explained": described.get("explained_module"),
            "seam": "hooks" if str(described.get("attention_seam", "")).startswith("hooks") else "interface"}
    try:
        result = explainer.jw(JW_TEXTS, [i % 3 for i in range(len(JW_TEXTS))], **JW_SETTINGS)
        tau = result.summary().get("tau_gradient")
        row["jw"] = "ran"
        row["tau_gradient"] = tau if isinstance(tau, (int, float)) else None
    except Exception as error:  # noqa: BLE001
        return row | {"verdict": "error", "stage": "jw", "error": _one_line(error),
                      "traceback": traceback.format_exc(limit=-3), "seconds": time.perf_counter() - start}
    methods = [m for m in METHODS if m not in CAPTUM_METHODS and m != "random"]
    try:
        attributions = explainer.attributions(JW_TEXTS[:2], methods=methods, **ATTRIBUTION_SETTINGS)
    except Exception as error:  # noqa: BLE001
        return row | {"verdict": "error", "stage": "attributions", "error": _one_line(error),
                      "traceback": traceback.format_exc(limit=-3), "seconds": time.perf_counter() - start}
    finite = all(all(abs(v) < float("inf") and v == v for sentence in attributions.values[m] for v in sentence)
                 for m in attributions.methods)
    row |= {"verdict": "runs", "methods": list(attributions.methods),
            "declined": {m: str(r).splitlines()[0] for m, r in attributions.skipped.items()},
            "finite": finite}
    row |= from_folder(folder, save_error, explainer)
    return row | {"seconds": time.perf_counter() - start}


def _child(model_type: str, connection) -> None:
    try:
        connection.send(sweep_one(model_type))
    except BaseException as error:  # noqa: BLE001
        connection.send({"model_type": model_type, "built": None, "verdict": "error", "stage": "sweep",
                         "error": _one_line(error)})
    finally:
        connection.close()


def sweep(types, timeout: float) -> list[dict]:
    """One forked process per type (time limit ``timeout`` seconds each); rows in order."""
    import torch
    import transformers  # noqa: F401 - imported once in the parent, shared by the forked children

    import hf_attn.explainer  # noqa: F401

    torch.set_num_threads(1)
    context = multiprocessing.get_context("fork")
    rows = []
    for model_type in types:
        receive, send = context.Pipe(duplex=False)
        process = context.Process(target=_child, args=(model_type, send), daemon=True)
        start = time.perf_counter()
        process.start()
        send.close()
        row = None
        if receive.poll(timeout):
            try:
                row = receive.recv()
            except EOFError:
                row = None
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()
        if row is None:
            cause = (f"did not finish within {timeout:.0f} s" if time.perf_counter() - start >= timeout
                     else f"the process died (exit code {process.exitcode})")
            row = {"model_type": model_type, "built": None, "verdict": "error", "stage": "sweep", "error": cause}
        rows.append(row)
        print(f"{model_type:24s} {row.get('verdict') or ('not built' if row.get('built') is False else '?'):8s} "
              f"{(row.get('reason') or row.get('error') or row.get('build_error') or '')[:110]}", flush=True)
    return rows


def merged(path: str, new: dict, order) -> dict:
    """The record at ``path`` with the rows of ``new`` in place of its rows of the same model types
    (in the mapping's ``order``), its totals recomputed and its ``seconds`` the sum of the rows'."""
    if new["transformers"] != _read(path)["transformers"]:
        raise SystemExit(f"{path} was recorded with transformers {_read(path)['transformers']}, this run with "
                         f"{new['transformers']}: run the whole sweep instead of merging")
    old = _read(path)
    rows = {r["model_type"]: r for r in old["rows"]} | {r["model_type"]: r for r in new["rows"]}
    ordered = [rows[t] for t in order if t in rows] + [r for t, r in rows.items() if t not in order]
    return old | {"rows": ordered, "totals": totals(ordered),
                  "seconds": round(sum(r.get("seconds", 0.0) for r in ordered), 1)}


def _read(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def totals(rows) -> dict:
    built = [r for r in rows if r.get("built")]
    count = {v: sum(r.get("verdict") == v for r in built) for v in ("runs", "refused", "error")}
    checked = [r for r in built if r.get("verdict") == "runs" and "loads_from_folder" in r]
    return {"types": len(rows), "built": len(built), **count,
            "runs_share_of_built": round(count["runs"] / len(built), 4) if built else None,
            "folder_checked": len(checked), "loads_from_folder": sum(r["loads_from_folder"] is True for r in checked)}


# ------------------------------------------------------------------------------------------------
# docs/engine.md's matrix, generated from the record

BEGIN = "<!-- architecture-sweep: begin (generated by scripts/architecture_sweep.py --docs) -->"
END = "<!-- architecture-sweep: end -->"


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def matrix_markdown(record: dict) -> str:
    rows = sorted(record["rows"], key=lambda r: r["model_type"])
    t = record["totals"]
    lines = [BEGIN, "",
             f"`transformers {record['transformers']}`: {t['types']}<!-- archsweep: totals.types --> `model_type`s in "
             f"the sequence-classification mapping, **{t['built']}**<!-- archsweep: totals.built --> built as tiny "
             f"random classifiers, **{t['runs']}**<!-- archsweep: totals.runs --> run with a live intervention "
             f"({100 * t['runs_share_of_built']:.0f} %<!-- archsweep: totals.runs_share_of_built ×100 --> of those "
             f"built), {t['refused']}<!-- archsweep: totals.refused --> refused in one line, "
             f"{t['error']}<!-- archsweep: totals.error --> raw errors.", "",
             "| architecture | class | verdict | seam | explained attention (layer -1) | query rows | fast path | methods |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r.get("built"):
            continue
        verdict = r.get("verdict")
        if verdict == "runs":
            declined = sorted(r.get("declined", {}))
            methods = "all" if not declined else "all but " + ", ".join(declined)
            lines.append(f"| {r['model_type']} | {r['model_class']} | runs | {r.get('seam', '')} | "
                         f"`{r.get('explained') or ''}` | {r['query']} | {'yes' if r['fast_path'] else 'no'} | {methods} |")
        elif verdict == "refused":
            lines.append(f"| {r['model_type']} | {r['model_class']} | refused: `{_escape(r['reason'])}` | | | | | |")
        else:
            lines.append(f"| {r['model_type']} | {r.get('model_class', '')} | error ({r.get('stage')}): "
                         f"`{_escape(r.get('error', ''))}` | | | | | |")
    unbuilt = [r for r in rows if not r.get("built")]
    if unbuilt:
        lines += ["", "Not built by the sweep's generic tiny config (so not counted): " + "; ".join(
            f"{r['model_type']} (`{_escape((r.get('build_error') or r.get('error') or '')[:90])}`)" for r in unbuilt) + "."]
    declined_reasons = {}
    for r in rows:
        for method, reason in r.get("declined", {}).items():
            declined_reasons.setdefault(method, reason)
    if declined_reasons:
        lines += ["", "Methods declined on some architectures, with the first reason given:", ""]
        lines += [f"- `{m}`: `{_escape(reason)}`" for m, reason in sorted(declined_reasons.items())]
    lines += ["", END]
    return "\n".join(lines)


def write_docs(record: dict, path: str = ENGINE_DOC) -> None:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    block = matrix_markdown(record)
    if BEGIN in text:
        text = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _: block, text, flags=re.S)
    else:
        raise SystemExit(f"{path} has no {BEGIN!r} marker: add it where the matrix belongs")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", default=DEFAULT_RECORD)
    parser.add_argument("--types", default=None, help="comma-separated model_types (default: the whole mapping)")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per architecture")
    parser.add_argument("--docs", action="store_true", help="only rewrite docs/engine.md's matrix from the record")
    parser.add_argument("--merge", action="store_true",
                        help="with --types: replace those rows of the existing record (totals recomputed, "
                             "'seconds' the sum of the rows'), keep the others")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.docs:
        with open(args.record, encoding="utf-8") as f:
            write_docs(json.load(f))
        return 0
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES

    everything = list(MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES)
    types = everything if args.types is None else [t.strip() for t in args.types.split(",") if t.strip()]
    unknown = [t for t in types if t not in everything]
    if unknown:
        raise SystemExit(f"not in the sequence-classification mapping: {unknown}")
    start = time.perf_counter()
    rows = sweep(types, args.timeout)
    record = {"transformers": transformers.__version__, "texts": {"jw": len(JW_TEXTS), "attributions": 2},
              "jw_settings": JW_SETTINGS, "attribution_settings": ATTRIBUTION_SETTINGS,
              "left_out_methods": list(CAPTUM_METHODS), "seconds": round(time.perf_counter() - start, 1),
              "totals": totals(rows), "rows": rows}
    for row in rows:
        row.pop("traceback", None) if row.get("verdict") != "error" else None
    if args.merge:
        record = merged(args.record, record, everything)
    if args.record:
        with open(args.record, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
    print(json.dumps(record["totals"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
