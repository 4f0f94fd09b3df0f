"""``hf-attn analyze RUN_DIR --battery faithfulness --output-dir OUT``: the faithfulness table of
:mod:`hf_attn.batteries.faithfulness` for a model folder, on one split of its data.

A ``transformers`` classifier folder (``config.json`` of a transformers model, trained by
``hf-attn train --base-model`` or elsewhere) is loaded with
:func:`hf_attn.adapters.transformer_attention.load_transformer_classifier` and its data with
:func:`hf_attn.batteries.data.load_analysis_data` (the folder's run.json, or
``--dataset``); one of the papers' BiLSTM / CNN / Average folders with the jw battery's loader.
Either way the adapter is :func:`hf_attn.adapters.adapter_for` and the battery sees only the
adapter contract. Writes ``OUT/results.json`` + ``OUT/attributions.npz`` + ``OUT/faithfulness.md``
+ ``OUT/faithfulness.png`` (each atomically); a finished ``results.json`` of the same request is
returned as is.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields

from hf_attn.runs import Battery, register_battery
from hf_attn.batteries.faithfulness import METHODS, METRICS, FaithfulnessResult, FaithfulnessSettings, run_faithfulness


@dataclass(frozen=True)
class FaithfulnessRunSettings:
    """The battery's request: the data (``split``, ``max_instances`` first texts, ``dataset`` /
    columns for folders without run.json), the explained attention (``layer``, ``heads``), the
    ``device`` and the table's own :class:`FaithfulnessSettings`."""

    split: str = "test"
    max_instances: int | None = 200
    dataset: str | None = None
    text_column: str | None = None
    label_column: str | None = None
    layer: int = -1
    heads: str | int = "mean"
    device: str = "auto"
    progress: bool = True
    table: FaithfulnessSettings = field(default_factory=FaithfulnessSettings)

    def __post_init__(self):
        if self.max_instances is not None and (not isinstance(self.max_instances, int) or self.max_instances < 1):
            raise ValueError(f"max_instances must be a positive int or None, got {self.max_instances!r}")


def load_texts_and_adapter(model_dir: str, settings: FaithfulnessRunSettings):
    """``(adapter, texts, labels, dataset name)`` for ``model_dir`` (module docstring)."""
    from hf_attn.adapters import adapter_for
    from hf_attn.batteries.data import load_classifier_and_data

    model, tokenizer, texts, labels, _, name, _ = load_classifier_and_data(
        model_dir, settings.split, settings.dataset, settings.text_column, settings.label_column,
        needed_by="the faithfulness table")
    heads = settings.heads if settings.heads == "mean" else int(settings.heads)
    try:
        adapter = adapter_for(model, tokenizer, layer=settings.layer, heads=heads, device=settings.device)
    except ModuleNotFoundError as error:  # the papers' models need hf_attn.adapters.hf_attn_model
        raise ValueError(f"{model_dir}: no adapter for {type(model).__name__} in this installation ({error})") from None
    if settings.max_instances:
        texts, labels = list(texts)[: settings.max_instances], list(labels)[: settings.max_instances]
    return adapter, list(texts), list(labels), name


def run_faithfulness_battery(model_dir: str, output_dir: str, settings: FaithfulnessRunSettings) -> dict:
    """Run the table for ``model_dir`` into ``output_dir`` (module docstring); returns results.json's
    content."""
    path = os.path.join(output_dir, "results.json")
    request = json.loads(json.dumps(asdict(settings), default=str))
    request.pop("progress", None)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            previous = json.load(f)
        if previous.get("request") == request:
            return previous
    adapter, texts, labels, name = load_texts_and_adapter(model_dir, settings)
    result = run_faithfulness(adapter, texts, settings.table, progress=settings.progress)
    result.model |= {"model_dir": os.path.abspath(model_dir) if os.path.isdir(model_dir) else model_dir,
                     "dataset": name, "split": settings.split}
    result.save(output_dir)
    result.plot(os.path.join(output_dir, "faithfulness.png"))
    from hf_attn.core.io import write_json_atomic

    with open(path, encoding="utf-8") as f:
        payload = json.load(f)
    payload |= {"analysis": "faithfulness", "request": request, "figure": "faithfulness.png",
                "sentence": result.sentence()}
    write_json_atomic(path, payload)
    if settings.progress:
        print(result.summary())
    return payload


def _tuple_of(kind):
    return lambda text: tuple(kind(x) for x in str(text).replace(",", " ").split())


def add_options(parser) -> None:
    """The ``--faith-*`` flags of ``hf-attn analyze`` (defaults from :class:`FaithfulnessRunSettings`)."""
    from hf_attn.batteries.jw.common import add_data_options
    from hf_attn.core.arguments import count, positive_int
    from hf_attn.core.naopc import EXACT_LIMIT

    g = parser.add_argument_group("faithfulness battery (attribution methods × faithfulness metrics)")
    table = FaithfulnessSettings()
    g.add_argument("--faith-methods", type=_tuple_of(str), default=table.methods,
                   help=f"comma-separated subset of {', '.join(METHODS)} (default: all)")
    g.add_argument("--faith-fractions", type=_tuple_of(float), default=table.fractions,
                   help="ERASER bins (default 0.01,0.05,0.1,0.2,0.5)")
    g.add_argument("--faith-ig-steps", type=count(1, limit="ig_nodes"), default=table.ig_steps,
                   help="integrated gradients' Gauss–Legendre nodes to start from (default %(default)s)")
    g.add_argument("--faith-ig-target", type=float, default=table.ig_target,
                   help="nodes doubled per sentence until |completeness gap| ≤ this share of |f(x) − f(x')| "
                        "(default %(default)s; 0: exactly --faith-ig-steps nodes)")
    g.add_argument("--faith-ig-max-steps", type=count(1, limit="ig_nodes"), default=table.ig_max_steps,
                   help="the most nodes per sentence (default %(default)s)")
    g.add_argument("--faith-ig-baseline", choices=["zero", "pad", "mean"], default=table.ig_baseline,
                   help="the text's embeddings start from 0, the pad token's or the mean input embedding (default "
                        "%(default)s; where 0 is the singular point of the model's first normalisation, as on "
                        "Llama, the result says so and offers mean)")
    g.add_argument("--faith-gradient-target", choices=["probability", "logit"], default=table.gradient_target,
                   help="f of saliency, gradient × input and integrated gradients: ŷ_c or z_c (default %(default)s)")
    g.add_argument("--faith-metrics", type=_tuple_of(str), default=table.metrics,
                   help=f"comma-separated subset of {', '.join(METRICS)} (default: all)")
    g.add_argument("--faith-soft-variant", choices=["reference", "embedding"], default=table.soft_variant,
                   help="reference: the authors' code (embedding-layer output masked, null input ids 0, clipped); "
                        "embedding: word embeddings masked, unclipped (default %(default)s)")
    g.add_argument("--faith-soft-draws", type=count(1, limit="draws"), default=table.soft_draws,
                   help="Bernoulli draws per sentence and method to start from (default %(default)s)")
    g.add_argument("--faith-soft-max-draws", type=count(1, limit="draws"), default=table.soft_max_draws,
                   help="each sentence's draws are doubled up to this while the Monte-Carlo standard error of "
                        f"its own mean is above {table.soft_stderr:g} (default %(default)s)")
    g.add_argument("--faith-naopc-beam", type=count(0, limit="beam_width"), default=table.naopc_beam,
                   help="NAOPC beam width (default %(default)s, the authors' width; 0: no normalised AOPC)")
    g.add_argument("--faith-naopc-exact-max", type=count(0, EXACT_LIMIT), default=table.naopc_exact_max,
                   help="exact NAOPC bounds up to this many tokens (2^n forwards; default %(default)s)")
    g.add_argument("--faith-naopc-beam-max", type=count(0, limit="tokens"), default=table.naopc_beam_max,
                   help="beam-searched bounds up to this many tokens, the table's orderings beyond (default %(default)s)")
    g.add_argument("--faith-naopc-every-k-max", type=count(2, limit="tokens"), default=table.naopc_every_k_max,
                   help="AOPC over every k up to this many tokens, an even grid of that many k's beyond "
                        "(default %(default)s)")
    g.add_argument("--faith-naopc-perturbation", choices=["delete", "mask"], default=table.naopc_perturbation,
                   help="NAOPC deletes tokens or replaces them by the mask token (default %(default)s)")
    g.add_argument("--faith-shap-samples", type=count(1, limit="shap_samples"), default=table.shap_samples)
    g.add_argument("--faith-batch-tokens", type=count(1, limit="token_budget"), default=table.batch_tokens)
    g.add_argument("--faith-max-instances", type=positive_int, default=FaithfulnessRunSettings.max_instances,
                   help="the first N texts of the split (default %(default)s; a number at least the split's size: all)")
    g.add_argument("--faith-layer", type=int, default=-1, help="the explained attention layer (default: last)")
    g.add_argument("--faith-heads", default="mean", help="'mean' or one head index")
    g.add_argument("--faith-device", default="auto", choices=["auto", "cpu", "cuda", "mps"])
    add_data_options(g)


def settings_from_args(args) -> FaithfulnessRunSettings:
    from hf_attn.batteries.jw.common import heads_option

    table = FaithfulnessSettings(methods=tuple(args.faith_methods), fractions=tuple(args.faith_fractions),
                                 ig_steps=args.faith_ig_steps, ig_target=args.faith_ig_target or None,
                                 ig_max_steps=args.faith_ig_max_steps, soft_variant=args.faith_soft_variant,
                                 soft_draws=args.faith_soft_draws, soft_max_draws=args.faith_soft_max_draws,
                                 naopc_beam=args.faith_naopc_beam, naopc_exact_max=args.faith_naopc_exact_max,
                                 naopc_beam_max=args.faith_naopc_beam_max,
                                 naopc_every_k_max=args.faith_naopc_every_k_max,
                                 naopc_perturbation=args.faith_naopc_perturbation,
                                 shap_samples=args.faith_shap_samples, batch_tokens=args.faith_batch_tokens,
                                 seed=args.seed, metrics=tuple(args.faith_metrics),
                                 gradient_target=args.faith_gradient_target, ig_baseline=args.faith_ig_baseline)
    heads = heads_option(args.faith_heads, "--faith-heads")
    return FaithfulnessRunSettings(split=args.split, max_instances=args.faith_max_instances,
                                   dataset=args.dataset, text_column=args.text_column, label_column=args.label_column,
                                   layer=args.faith_layer, heads=heads, device=args.faith_device,
                                   progress=not args.quiet, table=table)


register_battery(Battery("faithfulness", settings_class=FaithfulnessRunSettings, add_options=add_options,
                         settings_from_args=settings_from_args, run=run_faithfulness_battery))

__all__ = ["FaithfulnessResult", "FaithfulnessRunSettings", "load_texts_and_adapter", "run_faithfulness_battery"]
