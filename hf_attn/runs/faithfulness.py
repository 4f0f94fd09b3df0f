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

from hf_attn.core.arguments import positive_int
from hf_attn.core.settings_cli import add_settings_options, data_option, option, settings_from_namespace
from hf_attn.runs import Battery, register_battery
from hf_attn.batteries.faithfulness import METHODS, METRICS, FaithfulnessResult, FaithfulnessSettings, run_faithfulness


PREFIX = "faith"


def _heads(value, flag: str) -> str:
    from hf_attn.batteries.jw.common import heads_option

    return heads_option(value, flag)


@dataclass(frozen=True)
class FaithfulnessRunSettings:
    """The battery's request: the data (``split``, ``max_instances`` first texts, ``dataset`` /
    columns for folders without run.json), the explained attention (``layer``, ``heads``), the
    ``device`` and the table's own :class:`FaithfulnessSettings`."""

    # ``metadata=option(...)``: the field's ``hf-attn analyze --faith-*`` option (hf_attn.core.settings_cli)
    split: str = field(default="test", metadata=option(command="split"))
    max_instances: int | None = field(default=200, metadata=option(
        "the first N texts of the split (a number at least the split's size: all)", type=positive_int))
    dataset: str | None = field(default=None, metadata=data_option("dataset"))
    text_column: str | None = field(default=None, metadata=data_option("text_column"))
    label_column: str | None = field(default=None, metadata=data_option("label_column"))
    layer: int = field(default=-1, metadata=option("the explained attention layer (-1: the last)", type=int))
    heads: str | int = field(default="mean", metadata=option("'mean' or one head index", convert=_heads))
    device: str = field(default="auto", metadata=option("where the table runs", choices=("auto", "cpu", "cuda", "mps")))
    progress: bool = field(default=True, metadata=option(command="quiet", negate=True))
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


def add_options(parser) -> None:
    """The ``--faith-*`` options of ``hf-attn analyze``, generated from :class:`FaithfulnessRunSettings`
    and its :class:`FaithfulnessSettings` (:func:`hf_attn.core.settings_cli.add_settings_options`)."""
    add_settings_options(parser, FaithfulnessRunSettings, PREFIX,
                         "faithfulness battery (attribution methods × faithfulness metrics)",
                         "settings file section: faithfulness")


def settings_from_args(args) -> FaithfulnessRunSettings:
    """The parsed ``hf-attn analyze`` namespace → :class:`FaithfulnessRunSettings`."""
    return settings_from_namespace(FaithfulnessRunSettings, args, PREFIX)


register_battery(Battery("faithfulness", settings_class=FaithfulnessRunSettings, add_options=add_options,
                         settings_from_args=settings_from_args, run=run_faithfulness_battery, prefix=PREFIX))

__all__ = ["FaithfulnessResult", "FaithfulnessRunSettings", "load_texts_and_adapter", "run_faithfulness_battery"]
