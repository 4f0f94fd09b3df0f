"""What the single-sequence J&W battery (:mod:`.battery`) and the sentence-pair one (:mod:`.pair`)
share (Jain & Wallace 2019, §4): the settings (:class:`JWSettings` of the analyses,
:class:`JWRunSettings` of one ``hf-attn analyze --battery jw`` run), the per-instance results
(:class:`JWInstances`), one batch's results → per-instance rows, the summary of a finished run
(J&W Table 2, Figs 3–5) and its printed table.

Shapes: N instances, B a batch's instances, T tokens, P permutations, k adversaries, C classes.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field, fields

import numpy as np
import torch

from hf_attn.batteries.jw.summary import adversary_summary, correlation_summary, permutation_summary
from hf_attn.core.arguments import count, finite_float, positive_int
from hf_attn.core.measure_names import LOO_TVD, LOO_TVD_DEFINITION
from hf_attn.core.settings_cli import data_option, option
from hf_attn.core.threads import threads_setting
from hf_attn.methods.adversary import AdversaryResult


def heads_option(value: str, flag: str) -> str:
    """A ``--jw-heads`` / ``--wp-heads`` value: ``"mean"`` or a head index (digits), normalised;
    anything else is a ValueError naming ``flag``."""
    heads = str(value).strip().lower()
    if heads != "mean" and not heads.isdigit():
        raise ValueError(f"{flag} must be 'mean' or a head index, got {value!r}")
    return heads


@dataclass
class JWAlgorithm:
    """The J&W analyses' own parameters (the core of :class:`JWSettings`, shared with the
    sentence-pair battery). Defaults:
    J&W §4 / code."""

    # ``metadata=option(...)``: the field's ``hf-attn analyze --jw-*`` option (hf_attn.core.settings_cli)
    num_permutations: int = field(default=100, metadata=option(
        "permutations per instance (Alg. 2)", flag="permutations", type=count(1, limit="permutations")))
    k: int = field(default=5, metadata=option("adversaries per instance (Alg. 3)", flag="adversaries",
                                              type=count(1, limit="adversaries")))
    lam: float = field(default=500.0, metadata=option("λ of the relaxed Eq. 1", flag="lambda", type=finite_float(0)))
    # --jw-eps not given (None): 0.01, or J&W's QA threshold 0.05 on a QA model (JWRunSettings.eps_given)
    eps: float = field(default=0.01, metadata=option(
        "ε: allowed TVD of an adversary's output", type=finite_float(0), unset=True,
        default_text="0.01; 0.05 on the QA datasets babi1-3 / cnn-qa, as J&W §4.2.2"))
    steps: int = field(default=500, metadata=option("Adam steps of the adversary search",
                                                    type=count(0, limit="steps")))
    lr: float = field(default=0.01, metadata=option("Adam learning rate of the adversary search",
                                                    type=finite_float(0, strictly_above=True)))
    init_scale: float = 3.0
    seed: int = field(default=0, metadata=option(command="seed"))
    alpha: float = 0.05  # significance level of the Kendall τ tests
    # Importances of one instance within this (absolute) distance are tied before Kendall τ:
    # attention, gradient and leave-one-out carry float32 noise of up to ~5e-7, enough to order
    # exact ties (two adjacent identical tokens give the same sentence when either is deleted).
    # 0 ranks the raw values. Why 1e-6: hf_attn.batteries.jw.summary.TIE_TOLERANCE.
    tie_tolerance: float = field(default=1e-6, metadata=option(
        "importances within this absolute distance count as tied in Kendall τ (float32 noise; 0: rank the raw "
        "values)", type=finite_float(0)))

    def __post_init__(self):
        """Every parameter within its bounds, checked where the settings are made (the Python API, the
        CLI's flags and the Space build them): counts are whole numbers >= 1 (``steps`` >= 0) up to
        their upper bounds (:data:`hf_attn.core.numpy_measures.COUNT_LIMITS`, with the reason), the
        seed a whole number, ε, λ, the learning rate and the tie tolerance finite and >= 0 (the rate
        > 0), α in (0, 1)."""
        from hf_attn.core.validation import check_number, check_whole

        from hf_attn.core.validation import check_seed

        # the normalised ints are kept: a NumPy integer is accepted and stored as an int
        self.num_permutations = check_whole("num_permutations", self.num_permutations, limit="permutations")
        self.k = check_whole("k", self.k, limit="adversaries")
        self.steps = check_whole("steps", self.steps, 0, limit="steps")
        self.seed = check_seed(self.seed)
        check_number("eps", self.eps, 0.0)
        check_number("lam", self.lam, 0.0)
        check_number("lr", self.lr, 0.0, low_open=True)
        check_number("init_scale", self.init_scale, 0.0)
        check_number("alpha", self.alpha, 0.0, 1.0, low_open=True, high_open=True)
        check_number("tie_tolerance", self.tie_tolerance, 0.0)

    def algorithm(self) -> dict:
        """These parameters as keyword arguments (to carry them from one settings class to the other)."""
        return {f.name: getattr(self, f.name) for f in fields(JWAlgorithm)}


# a transformer's texts are cut to this many tokens unless ``max_length`` says otherwise (leave-one-out
# grows with the square of the length; long-context models would otherwise take their whole window)
TRANSFORMER_MAX_LENGTH = 512


WINDOW = "window"  # --max-length window: a text keeps as many tokens as the model reads


def length_for(model, max_length: int | str | None) -> int | None:
    """The most tokens a text keeps for ``max_length`` (a ``--max-length`` value): the number given;
    ``"window"``: every token the model reads (None: the adapter's limit is the model's window); None:
    the papers' models' own limit (None) or, for a transformer, :data:`TRANSFORMER_MAX_LENGTH`."""
    if max_length == WINDOW:
        return None
    if max_length is not None:
        return max_length
    return None if getattr(model.config, "model_type", None) == "hf_attn" else TRANSFORMER_MAX_LENGTH


def max_length_setting(value, flag: str = "--max-length") -> int | str | None:
    """A ``--max-length`` value → the setting: ``"window"``, or a whole number ≥ 1 (a ``ValueError``
    naming ``flag`` otherwise); None stays None (the default)."""
    if value is None or value == WINDOW:
        return value
    from hf_attn.core.validation import check_whole

    try:
        number = int(value) if isinstance(value, str) else value
    except ValueError:
        raise ValueError(f"{flag} must be a whole number >= 1 or 'window', got {value!r}") from None
    return check_whole(flag, number, 1, limit="tokens")


# --max-length of hf-attn analyze: one option for the batteries that cut texts (jw, faithfulness)
MAX_LENGTH_OPTION = option("the most tokens a text keeps: N, or 'window' for every token the model reads (the "
                           "model's own limit); longer texts are cut, with a warning", flag="--max-length", shared=True,
                           unset=True, convert=max_length_setting, type_text="int ≥ 1 | window",
                           default_text="512 for transformers models, the papers' models' own limit")


@dataclass
class JWSettings(JWAlgorithm):
    """Parameters of :func:`hf_attn.batteries.jw.battery.run_jw_battery` (recorded in results.json):
    the analyses' (:class:`JWAlgorithm`), which attention is explained, and where and how it runs.
    One settings class for every model the adapter accepts, the papers' included.

    ``layer`` / ``heads``: the explained attention (:class:`hf_attn.adapters.AttentionSpec`; the
    papers' models have one layer and one head: -1 / ``"mean"``); ``divergence_on``: the adversary's
    JSD on the content tokens renormalised (``"content"``) or on the full row (``"row"``);
    ``batch_size``: instances per batch of the forward, gradient, leave-one-out and permutation,
    further bounded by ``token_budget`` padded tokens; ``gradient_token_budget`` bounds the gradient's
    backward (instances per chunk = budget // longest row); ``loo_token_budget`` the deletion
    forwards; ``adversary_batch_size`` instances per adversary batch (B·k rows per step), also
    bounded by ``token_budget`` padded tokens; ``max_length`` cuts texts to that many tokens (None:
    the papers' models' own limit; a transformer's, at most :data:`TRANSFORMER_MAX_LENGTH`); ``num_threads`` torch
    threads while running (None: leave torch's setting); ``device``: ``auto|cpu|cuda|cuda:N|mps``;
    ``precision``: ``float32|bfloat16|float16`` (forwards under autocast; the papers' models run on
    the CPU in float32 and refuse anything else, with the reason)."""

    layer: int = -1
    heads: str | int = "mean"
    divergence_on: str = "content"
    batch_size: int = 64
    adversary_batch_size: int = 256
    token_budget: int = field(default=16384, metadata=option("padded tokens per batch",
                                                             type=count(1, limit="token_budget")))
    gradient_token_budget: int = field(default=16384, metadata=option(
        "padded tokens per gradient forward + backward", type=count(1, limit="token_budget")))
    loo_token_budget: int = field(default=16384, metadata=option(
        "padded tokens per chunk of leave-one-out deletions", type=count(1, limit="token_budget")))
    max_length: int | str | None = field(default=None, metadata=MAX_LENGTH_OPTION)
    # the command's --threads (auto: None, torch's threads as the command set them)
    num_threads: int | None = field(default=None, metadata=option(command="threads", convert=threads_setting))
    device: str = "auto"
    precision: str = "float32"

    def __post_init__(self):
        super().__post_init__()
        self.validate()

    def validate(self) -> None:
        from hf_attn.core.validation import check_whole

        # whole numbers >= 1 up to their upper bounds, with the reason; NumPy integers kept as ints
        for name, limit in (("num_permutations", "permutations"), ("k", "adversaries"),
                            ("batch_size", "batch_size"), ("adversary_batch_size", "batch_size"),
                            ("token_budget", "token_budget"), ("gradient_token_budget", "token_budget"),
                            ("loo_token_budget", "token_budget"), ("max_length", "tokens"),
                            ("num_threads", "threads")):
            value = getattr(self, name)
            if (value is None and name in ("max_length", "num_threads")) or (name == "max_length" and value == WINDOW):
                continue
            setattr(self, name, check_whole(name, value, 1, limit=limit))
        if self.steps < 0 or not self.lr > 0 or self.eps < 0 or self.lam < 0:
            raise ValueError("need steps >= 0, lr > 0, eps >= 0, lam >= 0")
        if not (0 <= self.tie_tolerance < float("inf")):
            raise ValueError(f"tie_tolerance must be a finite number >= 0, got {self.tie_tolerance}")
        if self.divergence_on not in ("content", "row"):
            raise ValueError(f"divergence_on must be 'content' or 'row', got {self.divergence_on!r}")

    @property
    def spec(self):
        from hf_attn.adapters import AttentionSpec

        return AttentionSpec(layer=self.layer, heads=self.heads)

    def adapter(self, model, tokenizer):
        """The adapter these settings describe (layer, heads, device, precision, budget, length)."""
        from hf_attn.adapters import adapter_for

        return adapter_for(model, tokenizer, layer=self.layer, heads=self.heads, device=self.device,
                           precision=self.precision, token_budget=self.token_budget,
                           max_length=self.length_for(model))

    def length_for(self, model) -> int | None:
        """The most tokens a text keeps: ``max_length``, else the papers' models' own limit (None) or, for
        a transformer, :data:`TRANSFORMER_MAX_LENGTH` (its own limit when lower)."""
        return length_for(model, self.max_length)




# --device / --precision of hf-attn analyze: one option for the batteries that take them
DEVICE_OPTION = option("auto | cpu | cuda | cuda:N | mps (auto: a GPU when there is one)", flag="--device",
                       shared=True)
PRECISION_OPTION = option("forward precision of transformers models (the papers' models run in float32)",
                          flag="--precision", shared=True, choices=("float32", "bfloat16", "float16"))


@dataclass
class JWRunSettings:
    """One ``hf-attn analyze DIR --battery jw`` run (single-sequence or sentence-pair model): which
    data, how it is reported, and the analyses' :class:`JWSettings`. Its defaults (and those of
    :class:`JWSettings`) are the command's defaults: the ``--jw-*`` flags take theirs from here.

    ``split``: the split of the model's dataset analysed; ``progress``: progress bars and the printed
    summary (``--quiet`` turns them off); ``max_instances``: only the first N instances (None:
    all; N >= 1); ``use_cache``: cache finished batches in ``OUT/cache`` so a killed run resumes
    (``--jw-no-cache`` turns it off); ``algorithm``: the analyses' parameters (``--seed`` is
    ``algorithm.seed``), recorded as ``parameters`` in results.json."""

    split: str = field(default="test", metadata=option(command="split"))
    progress: bool = field(default=True, metadata=option(command="quiet", negate=True))
    max_instances: int | None = field(default=None, metadata=option("only the first N instances",
                                                                     type=positive_int, default_text="all"))
    use_cache: bool = field(default=True, metadata=option("do not cache batches for resuming", flag="no-cache",
                                                          negate=True))
    algorithm: JWSettings = field(default_factory=JWSettings)
    # transformers classifiers: which attention is explained — the
    # query row(s) the head reads in ``transformer_layer`` (−1: the last), averaged over heads or one
    # head — and the
    # dataset to analyse when the folder has no run.json (a model not trained here, a Hub id).
    transformer_layer: int = field(default=-1, metadata=option(
        "transformers models: the layer whose attention is explained (-1: the last)", flag="layer", type=int))
    transformer_heads: str = field(default="mean", metadata=option(
        "transformers models: 'mean' (average the heads) or one head's index", flag="heads", convert=heads_option))
    # where the analyses run ("auto" | "cpu" | "cuda" | "cuda:N" | "mps") and the forward precision of
    # transformers classifiers ("float32" | "bfloat16" | "float16"; the papers' models run in float32)
    device: str = field(default="auto", metadata=DEVICE_OPTION)
    precision: str = field(default="float32", metadata=PRECISION_OPTION)
    # True when ``--jw-eps`` was typed. Left False with ``algorithm.eps`` at its default (0.01, J&W's
    # classification threshold), a QA model (bAbI, CNN) gets J&W's QA threshold ε = 0.05 (§4.2.2)
    eps_given: bool = False
    dataset: str | None = field(default=None, metadata=data_option("dataset"))
    # the text and label columns of ``dataset`` (a CSV/JSON(L) file or folder, or a Hub dataset id);
    # None: "text" / "label", or the ones recorded in the folder's run.json
    text_column: str | None = field(default=None, metadata=data_option("text_column"))
    label_column: str | None = field(default=None, metadata=data_option("label_column"))


@dataclass
class JWInstances:
    """Per-instance results over a split (N instances; ragged lists hold one array per instance)."""

    input_ids: list = field(default_factory=list)
    labels: np.ndarray | None = None
    probabilities: np.ndarray | None = None  # (N, C)
    predictions: np.ndarray | None = None  # (N,)
    attention: list = field(default_factory=list)  # (L,)
    gradient: list = field(default_factory=list)  # (L,)
    loo: list = field(default_factory=list)  # (L,) LOO-TVD, TVD(ŷ(x₋t), ŷ(x)); NaN for single-token instances
    permutation_tvd: np.ndarray | None = None  # (N, P)
    adversary_attention: list = field(default_factory=list)  # (k, L)
    adversary_probabilities: np.ndarray | None = None  # (N, k, C)
    adversary_tvd: np.ndarray | None = None  # (N, k)
    adversary_jsd: np.ndarray | None = None  # (N, k)
    eps_max_jsd: np.ndarray | None = None  # (N,)
    # Per-instance Kendall τ and its p-value, set by battery_summary: {"attention_gradient":
    # (tau (N,), pvalue (N,)), "attention_loo": …, "gradient_loo": …}; NaN where τ is undefined.
    kendall: dict = field(default_factory=dict)
    # From the adapter driver (hf_attn.batteries.jw.battery): each content token's word id (L,); the
    # specials' share of the explained row (N,); the adversaries' JSD on the full rows (N, k); for a
    # model with several layers the rollout (L,) and every layer's explained row (layers, L), else None.
    word_ids: list = field(default_factory=list)
    special_mass: np.ndarray | None = None
    adversary_jsd_row: np.ndarray | None = None
    rollout: list | None = None
    layer_rows: list | None = None

    @property
    def max_attention(self) -> np.ndarray:
        """Each instance's largest attention weight (0 for an instance without content tokens)."""
        return np.array([float(a.max()) if len(a) else 0.0 for a in self.attention])


def weights_checksum(model) -> float:
    """The sum of every parameter in float64, in ``model.parameters()``'s order (a tied one once):
    part of a batch cache's key (other weights, other key). A parameter that accelerate offloaded (a
    ``meta`` placeholder of a model placed by a device map) is read from its offload map."""
    from hf_attn.adapters.placement import materialised

    seen, total = set(), 0.0
    with torch.no_grad():
        for module in model.modules():
            for name, parameter in module.named_parameters(recurse=False):
                if id(parameter) in seen:
                    continue
                seen.add(id(parameter))
                value = materialised(module, name, model) if parameter.device.type == "meta" else parameter
                total += float(value.double().sum())
    return total


def settings_key(settings: JWSettings, model, lengths: np.ndarray) -> str:
    weights = weights_checksum(model)
    payload = json.dumps({"settings": asdict(settings), "params": weights, "lengths": lengths.tolist()},
                         sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def timer(timings: dict):
    """``timed(name, fn)``: run ``fn()`` and add its wall time to ``timings[name]``."""
    def timed(name, fn):
        start = time.perf_counter()
        value = fn()
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - start
        return value
    return timed


def adversary_options(settings: JWSettings, batch_seed: int) -> dict:
    """Keyword arguments of the (single or pair) adversary for one batch, seeded by the batch."""
    return dict(k=settings.k, lam=settings.lam, eps=settings.eps, steps=settings.steps, lr=settings.lr,
                init_scale=settings.init_scale, generator=torch.Generator().manual_seed(batch_seed + 1))


def batch_rows(mask: torch.Tensor, probabilities, attention, gradient, loo, permutation,
                adversary: AdversaryResult, attended: torch.Tensor | None = None) -> dict:
    """One batch's results → numpy, per-token arrays cut to each row's length (shared by the
    single-sequence and the sentence-pair batteries); with ``attended`` (B, T), to each row's
    attended positions (J&W's markers dropped, as their ``[1:L-1]``)."""
    lengths = mask.sum(1).tolist()

    def cut(values):
        if attended is not None:
            keep = attended.numpy()
            return [v[..., k] for v, k in zip(values.double().numpy(), keep)]
        return [v[..., :n] for v, n in zip(values.double().numpy(), lengths)]

    return {"probabilities": probabilities.double().numpy(), "attention": cut(attention),
            "gradient": cut(gradient), "loo": cut(loo), "permutation_tvd": permutation.double().numpy(),
            "adversary_attention": cut(adversary.attention),
            "adversary_probabilities": adversary.probabilities.double().numpy(),
            "adversary_tvd": adversary.tvd.double().numpy(), "adversary_jsd": adversary.jsd.double().numpy(),
            "eps_max_jsd": adversary.eps_max_jsd.double().numpy()}


def instance_fields(per_row: list[dict]) -> dict:
    """Per-row results (:func:`batch_rows` rows, in instance order) → the analysis fields of
    :class:`JWInstances`: ragged per-token lists, stacked fixed-size arrays."""
    ragged = ("attention", "gradient", "loo", "adversary_attention")
    stacked = ("probabilities", "permutation_tvd", "adversary_probabilities", "adversary_tvd",
               "adversary_jsd", "eps_max_jsd")
    return ({name: [r[name] for r in per_row] for name in ragged}
            | {name: np.stack([r[name] for r in per_row]) for name in stacked})


def battery_summary(instances, lengths: np.ndarray, settings: JWSettings, total: float,
                    timings: dict[str, float]) -> dict:
    """Summary of a finished battery from its per-instance results (sets
    ``instances.predictions``): Table 2 per predicted class (τ of attention vs gradient / LOO-TVD and
    gradient vs LOO-TVD, values within ``settings.tie_tolerance`` tied first), permutation and
    adversary summaries, timings. Shared by the single-sequence and the sentence-pair batteries.

    Instances with fewer than 2 tokens are skipped alike by all five statistics (no τ; a single
    token's permutations and adversaries cannot move its attention, Δŷ = JSD = 0): each block
    counts them in ``skipped``, ``length.single_token`` gives the total."""
    instances.predictions = instances.probabilities.argmax(-1)
    num_classes = instances.probabilities.shape[1]
    predictions, max_attention = instances.predictions, instances.max_attention
    ties = settings.tie_tolerance
    summary = {
        "num_instances": len(lengths), "num_classes": num_classes,
        "length": {"mean": float(lengths.mean()), "max": int(lengths.max()),
                   "single_token": int((lengths < 2).sum())},
        "predicted_class_counts": np.bincount(predictions, minlength=num_classes).tolist(),
        "tau_gradient": correlation_summary(instances.attention, instances.gradient, predictions,
                                            num_classes, settings.alpha, tie_tolerance=ties),
        "tau_loo": correlation_summary(instances.attention, instances.loo, predictions, num_classes,
                                       settings.alpha, tie_tolerance=ties),
        "tau_gradient_loo": correlation_summary(instances.gradient, instances.loo, predictions,
                                                num_classes, settings.alpha, tie_tolerance=ties),
        "permutation": permutation_summary(instances.permutation_tvd, max_attention, predictions,
                                           num_classes, lengths=lengths),
        "adversary": adversary_summary(instances.adversary_tvd, instances.adversary_jsd,
                                       max_attention, predictions, settings.eps, num_classes,
                                       lengths=lengths),
        "seconds": {"total": total, **timings},
    }
    for name, key in (("attention_gradient", "tau_gradient"), ("attention_loo", "tau_loo"),
                      ("gradient_loo", "tau_gradient_loo")):
        block = summary[key]
        valid = np.asarray(block["valid"], dtype=bool)
        instances.kendall[name] = (np.where(valid, block["tau"], np.nan), np.where(valid, block["pvalue"], np.nan))
    # the batched ε-max JSD and the summary's recomputation from (TVD, JSD) must agree
    counted = summary["adversary"]["valid"]
    if not np.allclose(summary["adversary"]["eps_max_jsd"][counted], instances.eps_max_jsd[counted], atol=1e-6):
        raise RuntimeError("inconsistent ε-max JSD between the optimiser and the summary")
    if instances.labels is not None:
        summary["accuracy"] = float((predictions == instances.labels).mean())
    return summary


def instance_analysis_row(instances: JWInstances, i: int) -> dict:
    """Instance ``i``'s results as a JSON-ready dict (shared by the single and pair ``instances.jsonl``)."""
    return {"label": None if instances.labels is None else int(instances.labels[i]),
            "prediction": int(instances.predictions[i]),
            "probabilities": instances.probabilities[i].tolist(),
            "attention": instances.attention[i].tolist(), "gradient": instances.gradient[i].tolist(),
            "loo": [None if not np.isfinite(v) else float(v) for v in instances.loo[i]],
            "permutation_tvd_median": float(np.median(instances.permutation_tvd[i])),
            "adversary_tvd": instances.adversary_tvd[i].tolist(),
            "adversary_jsd": instances.adversary_jsd[i].tolist(),
            "eps_max_jsd": float(instances.eps_max_jsd[i]),
            "adversary_attention": instances.adversary_attention[i].tolist(),
            # J&W Table 2's per-instance statistic (null: fewer than 2 tokens or a constant ranking)
            "kendall_tau": {name: _finite_or_none(tau[i]) for name, (tau, _) in instances.kendall.items()},
            "kendall_pvalue": {name: _finite_or_none(p[i]) for name, (_, p) in instances.kendall.items()}}


def _finite_or_none(value) -> float | None:
    value = float(value)
    return value if np.isfinite(value) else None


def _fmt(value, digits=3):
    return "–" if value is None else f"{value:.{digits}f}"


WIDTH = 100  # the printed summary's lines (a long model folder path excepted)
# classes never predicted are listed up to this many classes (the papers' binary and NLI tasks);
# above it (QA: one class per answer, CNN has hundreds) only the predicted ones are
LIST_EVERY_CLASS_UP_TO = 3
SPLIT_BY_PREDICTED = ("Rows by predicted class: the class the model predicts for the unaltered input (the argmax "
                      "of its output), not the gold label, as J&W Table 2; \"all\" = every instance.")


def _tau_cell(values: dict | None, digits: int) -> str:
    """``0.341±0.21 sig 0.48`` (mean ± std, share with p < α), what of it is there; "–" without a mean."""
    if not values or values.get("mean") is None:
        return "–"
    text = f"{values['mean']:.{digits}f}"
    if values.get("std") is not None:
        text += f"±{values['std']:.2f}"
    if values.get("fraction_significant") is not None:
        text += f" sig {values['fraction_significant']:.2f}"
    return text


def _published_value(published: dict | None, key: str, stat: str, cls: int | None, num_classes: int):
    """One published number: per class (a list of C values) for a class row, a single number for
    the "all" row (``cls`` None); None where J&W give none."""
    value = ((published or {}).get(key) or {}).get(stat) if stat else (published or {}).get(key)
    if isinstance(value, list):
        return value[cls] if cls is not None and len(value) == num_classes else None
    return value if cls is None and isinstance(value, (int, float)) else None


def _wrapped(text: str, indent: str = "  ") -> list[str]:
    import textwrap

    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ")


def format_summary(results: dict) -> str:
    """A short human-readable table of results.json (printed by ``hf-attn analyze DIR --battery jw``):
    per measure one row per predicted class and one for all instances, with n, skipped, our value
    and J&W's published one beside it (:func:`hf_attn.batteries.jw.summary.published_for_model`;
    "–" where J&W published none). Lines are at most :data:`WIDTH` characters (the first, naming
    the model folder, excepted)."""
    from hf_attn.batteries.jw.summary import published_for_model

    s = results["summary"]
    num_classes = s["num_classes"]
    names = list(results.get("label_names") or [])
    names = [str(names[c]) if c < len(names) else str(c) for c in range(num_classes)]
    published, where = published_for_model(results)
    accuracy = ""
    if "accuracy" in s:
        accuracy = f", accuracy {s['accuracy']:.3f}"
        if _published_value(published, "test_accuracy", None, None, num_classes) is not None:
            accuracy += f" (J&W Table 1: {published['test_accuracy']:.2f})"
        elif _published_value(published, "test_micro_f1", None, None, num_classes) is not None:
            accuracy += f" (J&W Table 1: micro-F1 {published['test_micro_f1']:.2f}, = accuracy here)"
    lines = [f"J&W battery: {results['model_dir']} [{results['split']}]",
             f"  {s['num_instances']} instances{accuracy}", *_wrapped(SPLIT_BY_PREDICTED)]
    lines += _wrapped(f"J&W = {where}; – = not published (J&W show the permutation and adversary results as "
                      "figures only)." if published else
                      "J&W: – throughout: J&W published values only for their BiLSTM and Average models with "
                      "additive attention, on their datasets.")
    counts = s.get("predicted_class_counts") or [None] * num_classes
    listed = [c for c in range(num_classes) if num_classes <= LIST_EVERY_CLASS_UP_TO or counts[c] != 0]
    lines.append(f"  {'':22}{'n':>6} {'skipped':>7}  {'ours':<22} J&W")

    def rows(key: str, ours, theirs) -> None:
        blocks = [(names[c], s[key]["per_class"].get(str(c)) or {}, c) for c in listed]
        blocks.append(("all", s[key].get("overall") or {}, None))
        for name, block, cls in blocks:
            lines.append(f"    {name[:20]:<20}{block.get('count', 0):>6} {block.get('skipped', 0):>7}  "
                         f"{ours(block):<22} {theirs(cls)}")

    alpha = s["tau_gradient"].get("alpha", 0.05)
    for key, title in (("tau_gradient", "τ(attention, gradient)"), ("tau_loo", f"τ(attention, {LOO_TVD})"),
                       ("tau_gradient_loo", f"τ(gradient, {LOO_TVD})")):
        if key not in s:
            continue
        lines.append(f"  {title}: mean±std, sig = share with p < {alpha}")
        rows(key, lambda block: _tau_cell(block, 3), lambda cls, key=key: _tau_cell(
            {stat: _published_value(published, key, stat, cls, num_classes)
             for stat in ("mean", "std", "fraction_significant")}, 2))
    lines.append("  permutation Δŷ_med: median over the instances")
    rows("permutation", lambda block: _fmt(block.get("median"), 4), lambda cls: "–")
    lines.append(f"  ε-max JSD (ε={s['adversary']['eps']}): mean, share with a feasible adversary")
    rows("adversary", lambda block: f"{_fmt(block.get('mean'))} feasible {_fmt(block.get('fraction_feasible'), 2)}",
         lambda cls: "–")
    if len(listed) < num_classes:
        lines += _wrapped(f"{num_classes - len(listed)} of the {num_classes} classes never predicted (not listed).")
    lines += _wrapped("seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in s["seconds"].items()))
    lines += _wrapped(LOO_TVD_DEFINITION)
    return "\n".join(lines)
