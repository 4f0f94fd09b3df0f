"""``hf-attn analyze RUN_DIR --battery faithfulness --output-dir OUT``: the faithfulness table of
:mod:`hf_attn.batteries.faithfulness` for a model folder, on one split of its data.

A ``transformers`` classifier folder (``config.json`` of a transformers model, trained by
``hf-attn train --base-model`` or elsewhere) is loaded with
:func:`hf_attn.adapters.transformer_attention.load_transformer_classifier` and its data with
:func:`hf_attn.batteries.data.load_analysis_data` (the folder's run.json, or
``--dataset``); one of the papers' BiLSTM / CNN / Average folders with the jw battery's loader.
Either way the adapter is :func:`hf_attn.adapters.adapter_for` and the battery sees only the
adapter contract. ``--faith-rationales`` names a data set with human rationales (the bundled
``sst_rationales``, or a local ``eraser:FOLDER``, ``hatexplain:FILE``, ``label-studio:FILE``): the
texts of its split are analysed and the table gains the plausibility columns, the token / IOU F1's
k fraction taken from its train split as ERASER does (plus ``faithfulness_plausibility.png``). Writes ``OUT/results.json`` + ``OUT/attributions.npz`` + ``OUT/faithfulness.md``
+ ``OUT/faithfulness.png`` (each atomically); a finished ``results.json`` of the same request is
returned as is. The table is computed shard by shard (:mod:`hf_attn.batteries.faithfulness.shards`):
under ``accelerate launch`` / ``torchrun`` the shards are split between the processes, finished
shards are cached in ``OUT/cache`` so a killed run resumes, and the main process writes.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace

from hf_attn.batteries.jw.common import MAX_LENGTH_OPTION, length_for, max_length_setting
from hf_attn.core.arguments import count, positive_int
from hf_attn.core.settings_cli import add_settings_options, data_option, option, settings_from_namespace
from hf_attn.runs import Battery, register_battery
from hf_attn.batteries.faithfulness import FaithfulnessResult, FaithfulnessSettings


PREFIX = "faith"


def load_rationale_data(spec: str):
    """A :class:`hf_attn.data.rationales.RationaleDataset` from ``--faith-rationales``: a bundled name
    (``hf_attn.datasets.RATIONALE_DATASETS``) or ``FORMAT:PATH`` with FORMAT ``eraser``,
    ``hatexplain`` or ``label-studio``."""
    import hf_attn.datasets as data

    loaders = {"eraser": data.load_eraser, "hatexplain": data.load_hatexplain, "label-studio": data.load_label_studio}
    if spec in data.RATIONALE_DATASETS:
        return data.load(spec)
    kind, sep, path = str(spec).partition(":")
    if not sep or kind not in loaders or not path:
        raise ValueError(f"--faith-rationales {spec!r}: give {' or '.join(data.RATIONALE_DATASETS)}, or "
                         f"FORMAT:PATH with FORMAT one of {', '.join(loaders)} (e.g. eraser:data/movies)")
    return loaders[kind](path)


def _input_digests(settings: FaithfulnessRunSettings) -> dict:
    """SHA-256 of the local files the request reads by path (``--faith-attributions``, the rationale
    files of ``FORMAT:PATH``; a folder: every file in it), so that changed contents are a new request."""
    from hf_attn.core.io import file_sha256

    def digest(path: str) -> str | None:
        if os.path.isfile(path):
            return file_sha256(path)
        if os.path.isdir(path):
            import hashlib

            h = hashlib.sha256()
            for root, _, files in sorted(os.walk(path)):
                for name in sorted(files):
                    full = os.path.join(root, name)
                    h.update(os.path.relpath(full, path).encode() + b"\0" + file_sha256(full).encode())
            return h.hexdigest()
        return None

    out = {}
    if settings.attributions is not None:
        out["attributions"] = digest(settings.attributions)
    if settings.rationales is not None and ":" in settings.rationales:
        out["rationales"] = digest(settings.rationales.partition(":")[2])
    return out


def _given_name(name: str) -> str:
    from hf_attn.batteries.faithfulness import METHODS

    return f"given_{name}" if name in METHODS else name


def load_attributions_file(path: str, count: int) -> dict:
    """``{name: per text its scores}`` of the first ``count`` texts from ``--faith-attributions``: JSON
    ``{name: [[…], …]}`` or an ``.npz`` holding ``NAME__values`` (every text's scores concatenated) and
    ``lengths`` (the table's ``attributions.npz``, whose rows named like the table's methods come back
    as ``given_<method>``; read without pickles); one-line errors name the file."""
    import numpy as np

    if not os.path.isfile(path):
        raise ValueError(f"--faith-attributions {path}: no such file")
    if path.endswith(".npz"):
        try:
            with np.load(path, allow_pickle=False) as data:
                if "lengths" not in data.files:
                    raise ValueError(f"--faith-attributions {path}: an .npz needs 'lengths' (the scores per text) "
                                     "beside NAME__values")
                lengths = np.asarray(data["lengths"], dtype=np.int64)
                cuts = np.cumsum(lengths)[:-1]
                # a table's own rows come back as given_<method> (the table's method names are its own rows')
                rows = {_given_name(k[: -len("__values")]): np.split(np.asarray(data[k], dtype=float), cuts)
                        for k in data.files if k.endswith("__values") and k != "content__values"}
                if any(int(lengths.sum()) != data[k].size for k in data.files if k.endswith("__values")):
                    raise ValueError(f"--faith-attributions {path}: the lengths do not add up to the values")
        except (OSError, ValueError, EOFError) as error:
            if str(error).startswith("--faith-attributions"):
                raise
            raise ValueError(f"--faith-attributions {path}: not a readable .npz ({error})") from None
    else:
        try:
            with open(path, encoding="utf-8") as f:
                rows = json.load(f)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"--faith-attributions {path}: not a JSON file ({error})") from None
        if not isinstance(rows, dict):
            raise ValueError(f"--faith-attributions {path}: expected a JSON object {{name: [scores per text]}}")
    if not rows:
        raise ValueError(f"--faith-attributions {path}: no rows of scores")
    out = {}
    for name, per_text in rows.items():
        if not isinstance(per_text, list) or len(per_text) < count:
            size = len(per_text) if isinstance(per_text, list) else "no list of"
            raise ValueError(f"--faith-attributions {path}: row {name!r} has {size} score arrays for the {count} "
                             "texts analysed")
        out[name] = [np.asarray(r, dtype=float) if isinstance(r, np.ndarray) else r for r in per_text[:count]]
    return out


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
    # --max-length, shared with the J&W battery: N tokens, "window" (the model's own limit) or None (512 tokens)
    max_length: int | str | None = field(default=None, metadata=MAX_LENGTH_OPTION)
    rationales: str | None = field(default=None, metadata=option(
        "human rationales to score plausibility against: sst_rationales (bundled), or eraser:FOLDER, "
        "hatexplain:FILE, label-studio:FILE; the texts of their split are analysed (default: none, no plausibility "
        "columns)"))
    attributions: str | None = field(default=None, metadata=option(
        "scores computed elsewhere to put on the table: a JSON file {name: [scores of text 0, …]} or an .npz in the "
        "layout of the table's attributions.npz (NAME__values + lengths); one array per text of the split, in order "
        "(the first --faith-max-instances are used)"))
    attributions_level: str = field(default="token", metadata=option(
        "what the given scores cover: the model's tokens (with or without its special tokens) or the whitespace "
        "words", choices=("token", "word")))
    shard_sentences: int = field(default=64, metadata=option(
        "texts per shard: the table is computed shard by shard, the shards split between the processes of "
        "`accelerate launch` / torchrun and cached for resuming (the same shards, and results, for any number of "
        "processes)", type=count(1, limit="tokens")))
    use_cache: bool = field(default=True, metadata=option("do not cache finished shards for resuming",
                                                          flag="no-cache", negate=True))
    progress: bool = field(default=True, metadata=option(command="quiet", negate=True))
    table: FaithfulnessSettings = field(default_factory=FaithfulnessSettings)

    def __post_init__(self):
        object.__setattr__(self, "max_length", max_length_setting(self.max_length, "max_length"))
        if isinstance(self.shard_sentences, bool) or not isinstance(self.shard_sentences, int) or self.shard_sentences < 1:
            raise ValueError(f"shard_sentences must be a positive int, got {self.shard_sentences!r}")
        if self.max_instances is not None and (not isinstance(self.max_instances, int) or self.max_instances < 1):
            raise ValueError(f"max_instances must be a positive int or None, got {self.max_instances!r}")


@dataclass
class AnalysedTexts:
    """What the battery analyses: the ``adapter``, the ``texts`` with their gold ``labels``, the data
    set's ``name``, and with ``--faith-rationales`` the human ``rationales`` (one 0/1 array per text)
    and the train split's share of marked words (``k_fraction``; None without a train split)."""

    adapter: object
    texts: list
    labels: list
    name: str
    rationales: list | None = None
    k_fraction: float | None = None


def _rationale_texts(model_dir: str, settings: FaithfulnessRunSettings):
    """``(model, tokenizer, texts, labels, name, rationales, k_fraction)`` from ``--faith-rationales``."""
    from hf_attn.batteries.data import load_classifier
    from hf_attn.batteries.faithfulness.plausibility import k_fraction_of

    given = [f for f in ("dataset", "text_column", "label_column") if getattr(settings, f) is not None]
    if given:
        raise ValueError(f"--{given[0].replace('_', '-')} and --faith-rationales both name the texts; give one")
    data = load_rationale_data(settings.rationales)
    try:
        examples = data.examples(settings.split)
    except KeyError as error:
        raise ValueError(f"--faith-rationales {settings.rationales}: {error.args[0]}") from None
    model, tokenizer = load_classifier(model_dir)
    classes = int(getattr(model.config, "num_labels", 0) or 0)
    if classes and classes != data.num_labels:
        raise ValueError(f"{model_dir} has {classes} classes but {data.name} has {data.num_labels} "
                         f"({', '.join(data.label_names)}): its rationales explain other labels")
    k_fraction = k_fraction_of(data.rationales("train")) if "train" in data.splits else None
    return (model, tokenizer, list(examples.texts), list(examples.labels), data.name,
            [r.copy() for r in examples.rationales], k_fraction)


def load_texts_and_adapter(model_dir: str, settings: FaithfulnessRunSettings) -> AnalysedTexts:
    """The model's adapter and the texts to analyse (module docstring), the first
    ``max_instances``."""
    from hf_attn.adapters import adapter_for
    from hf_attn.batteries.data import load_classifier_and_data

    rationales = k_fraction = None
    if settings.rationales is not None:
        model, tokenizer, texts, labels, name, rationales, k_fraction = _rationale_texts(model_dir, settings)
    else:
        model, tokenizer, texts, labels, _, name, _ = load_classifier_and_data(
            model_dir, settings.split, settings.dataset, settings.text_column, settings.label_column,
            needed_by="the faithfulness table")
    heads = settings.heads if settings.heads == "mean" else int(settings.heads)
    try:
        limit = {} if settings.max_length is None else {"max_length": length_for(model, settings.max_length)}
        adapter = adapter_for(model, tokenizer, layer=settings.layer, heads=heads, device=settings.device, **limit)
    except ModuleNotFoundError as error:  # the papers' models need hf_attn.adapters.hf_attn_model
        raise ValueError(f"{model_dir}: no adapter for {type(model).__name__} in this installation ({error})") from None
    cut = slice(settings.max_instances)
    return AnalysedTexts(adapter, list(texts)[cut], list(labels)[cut], name,
                         None if rationales is None else rationales[cut], k_fraction)


def run_faithfulness_battery(model_dir: str, output_dir: str, settings: FaithfulnessRunSettings) -> dict:
    """Run the table for ``model_dir`` into ``output_dir`` (module docstring); returns results.json's
    content."""
    path = os.path.join(output_dir, "results.json")
    request = json.loads(json.dumps(asdict(settings), default=str))
    request.pop("progress", None)
    digests = _input_digests(settings)  # files read by path: other contents, another request
    if digests:
        request["input_sha256"] = digests
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            previous = json.load(f)
        if previous.get("request") == request:
            return previous
    analysed = load_texts_and_adapter(model_dir, settings)
    table = settings.table
    if analysed.rationales is not None and table.rationale_k_fraction is None and analysed.k_fraction is not None:
        table = replace(table, rationale_k_fraction=analysed.k_fraction)  # ERASER: k from the train rationales
    from hf_attn.batteries.faithfulness.shards import run_faithfulness_sharded
    from hf_attn.batteries.jw.common import weights_checksum
    from hf_attn.core.sharding import cache_key, is_main_process

    os.makedirs(output_dir, exist_ok=True)
    cache_dir = os.path.join(output_dir, "cache") if settings.use_cache else None
    key = cache_key(request, weights_checksum(analysed.adapter.model), analysed.texts,
                    None if analysed.rationales is None else [r.tolist() for r in analysed.rationales])
    given = (None if settings.attributions is None
             else load_attributions_file(settings.attributions, len(analysed.texts)))
    if given is not None:  # the scores are part of what the shards compute from
        from hf_attn.core.io import file_sha256

        key = cache_key(key, file_sha256(settings.attributions))
    k_source = None
    if analysed.rationales is not None and settings.table.rationale_k_fraction is None and analysed.k_fraction is not None:
        k_source = f"the train split of {analysed.name} (ERASER fixes k per data set from its human rationales)"
    result, sharding = run_faithfulness_sharded(
        analysed.adapter, analysed.texts, table, progress=settings.progress, rationales=analysed.rationales,
        shard_sentences=settings.shard_sentences, cache_dir=cache_dir, key=key, attributions=given,
        attributions_level=settings.attributions_level, k_source=k_source)
    if not is_main_process():  # `accelerate launch`: every process has the whole table; one writes
        return {"analysis": "faithfulness", "main_process": False}
    result.model |= {"model_dir": os.path.abspath(model_dir) if os.path.isdir(model_dir) else model_dir,
                     "dataset": analysed.name, "split": settings.split}
    result.save(output_dir)
    result.plot(os.path.join(output_dir, "faithfulness.png"))
    figures = {"figure": "faithfulness.png"}
    if analysed.rationales is not None:
        if result.two_axes():
            result.plot_axes(os.path.join(output_dir, "faithfulness_plausibility.png"))
            figures["plausibility_figure"] = "faithfulness_plausibility.png"
        else:  # the table still has its plausibility columns
            figures["plausibility_figure"] = None
            figures["plausibility_figure_note"] = ("not drawn: it needs the comprehensiveness and auprc columns and "
                                                   "the random floor among the methods")
    from hf_attn.core.io import write_json_atomic

    with open(path, encoding="utf-8") as f:
        payload = json.load(f)
    payload |= {"analysis": "faithfulness", "request": request, **figures, "sentence": result.sentence(),
                "processes": sharding["processes"], "sharding": sharding}
    write_json_atomic(path, payload)
    if cache_dir:  # finished: the shards are only needed to resume
        import shutil

        shutil.rmtree(cache_dir, ignore_errors=True)
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

__all__ = ["AnalysedTexts", "FaithfulnessResult", "FaithfulnessRunSettings", "load_rationale_data", "load_texts_and_adapter",
           "run_faithfulness_battery"]
