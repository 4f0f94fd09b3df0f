"""The faithfulness table's rows and columns (every attribution method with its paper, every metric,
which way is better, what leaves a cell undefined) and :class:`FaithfulnessSettings`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from hf_attn.core.arguments import count
from hf_attn.core.measure_names import LOO_DROP
from hf_attn.core.naopc import DEFAULT_BEAM_WIDTH, EXACT_LIMIT
from hf_attn.core.settings_cli import option
from hf_attn.core.numpy_measures import check_number, check_seed, check_whole
from hf_attn.methods.eraser import DEFAULT_FRACTIONS
from hf_attn.methods.ig_baselines import BASELINES as IG_BASELINES
from hf_attn.methods.integrated_gradients import RULES as IG_RULES

# name: (description with the paper, needs transformer internals)
METHODS = {
    "attention": ("raw attention α of the query row(s), adapter's layer/heads (Jain & Wallace 2019 §2)", False),
    "rollout": ("attention rollout (Abnar & Zuidema 2020 §3)", False),
    "attention_flow": ("attention flow, max-flow on the attention graph (Abnar & Zuidema 2020 §3)", True),
    "attention_norm": ("‖Σ_h α f(x)‖, explained layer (Kobayashi et al. 2020 §3)", True),
    "alti": ("ALTI contributions rolled out (Ferrando et al. 2022)", True),
    "value_zeroing": ("value zeroing rolled out (Mohebbi et al. 2023)", True),
    "alti_logit": ("ALTI-Logit: the attention blocks' updates of the explained class's logit per token, carried to "
                   "the input by ALTI, signed (Ferrando et al. 2023); pre-LN decoders, opt-in", True),
    "saliency": ("‖∂ŷ_c/∂e_t‖₂ (Simonyan et al. 2014; Li et al. 2016)", False),
    "gradient_x_input": ("Σ_d e ∂ŷ_c/∂e, signed (Shrikumar et al. 2016)", False),
    "integrated_gradients": ("integrated gradients, signed, zero-embedding baseline (Sundararajan et al. 2017)",
                             False),
    "leave_one_out": ("LOO-drop: ŷ_c(x) − ŷ_c(x₋t), the predicted class's probability drop, token deleted "
                      "(Li et al. 2016 §3, Eq. 1; not J&W's LOO-TVD)", False),
    "kernel_shap": ("Kernel SHAP via captum (Lundberg & Lee 2017), optional extra", False),
    "deeplift": ("DeepLift rescale rule via captum where its hooks reach (Shrikumar et al. 2017), optional extra",
                 False),
    "attnlrp": ("AttnLRP: the logit z_c decomposed by LRP, gradient × input under its rules (uniform on the "
                "attention matmuls and gates, softmax by Prop. 3.1, identity on norms and activations; Achtibat et "
                "al. 2024), signed, opt-in", False),
    "cp_lrp": ("CP-LRP: gradient × input of z_c with attention probabilities and the norms' factors held constant "
               "(Ali et al. 2022), signed, opt-in", False),
    "random": ("uniform random scores, seeded by each sentence's own tokens (the floor)", False),
}
ATTENTION_FAMILY = ("attention", "rollout", "attention_flow", "attention_norm", "alti", "value_zeroing", "alti_logit")
# methods run only when named: ALTI-Logit applies to pre-LN decoders alone (a default table of an encoder
# would carry one more skipped row), and the committed records were made without it; AttnLRP and CP-LRP
# likewise (the records predate them)
OPT_IN_METHODS = ("alti_logit", "attnlrp", "cp_lrp")
DEFAULT_METHODS = tuple(m for m in METHODS if m not in OPT_IN_METHODS)
METRICS = ("comprehensiveness", "sufficiency", "soft_comprehensiveness", "soft_sufficiency",
           "naopc_comprehensiveness", "naopc_sufficiency", "tau_loo", "agreement")
# the second axis: agreement with a human rationale per word (ERASER's token-level metrics,
# hf_attn.core.plausibility), columns only when the table is given rationales
PLAUSIBILITY_METRICS = ("auprc", "token_f1", "iou_f1")
COLUMNS = METRICS + PLAUSIBILITY_METRICS
HIGHER_IS_BETTER = {"comprehensiveness": True, "sufficiency": False, "soft_comprehensiveness": True,
                    "soft_sufficiency": True, "naopc_comprehensiveness": True, "naopc_sufficiency": False,
                    "tau_loo": True, "agreement": True, "auprc": True, "token_f1": True, "iou_f1": True}
UNDEFINED = {
    "comprehensiveness": "no tokens to delete", "sufficiency": "no tokens to delete",
    "soft_comprehensiveness": "ŷ(x) ≤ ŷ(null input): the normaliser 1 − S(x, ŷ, 0) is 0",
    "soft_sufficiency": "ŷ(x) ≤ ŷ(null input): the normaliser 1 − S(x, ŷ, 0) is 0",
    "naopc_comprehensiveness": "AOPC_min = AOPC_max (one token, or no deletion moves ŷ)",
    "naopc_sufficiency": "AOPC_min = AOPC_max (one token, or no deletion moves ŷ)",
    "tau_loo": "fewer than 2 tokens or constant scores (of the method or of the LOO-drop)",
    "agreement": "fewer than 2 tokens or constant scores",
    "auprc": "the human rationale marks no word", "token_f1": "the human rationale marks no word",
    "iou_f1": "the human rationale marks no word"}
# the printed names of a row or column whose key alone could be read as another measure: the
# leave_one_out row and the tau_loo column are the LOO-drop, never J&W's LOO-TVD
# (hf_attn.core.measure_names)
METHOD_LABELS = {"leave_one_out": f"leave_one_out ({LOO_DROP})"}
METRIC_LABELS = {"tau_loo": f"tau_loo (τ with {LOO_DROP})", "auprc": "plausibility AUPRC",
                 "token_f1": "plausibility token F1", "iou_f1": "plausibility IOU F1"}
SOFT_VARIANTS = ("reference", "embedding")
# the count settings and their kind of upper bound (hf_attn.core.numpy_measures.COUNT_LIMITS)
COUNT_SETTINGS = {"flow_max_tokens": "tokens", "ig_steps": "ig_nodes", "ig_max_steps": "ig_nodes", "soft_draws": "draws",
                  "soft_max_draws": "draws", "shap_samples": "shap_samples", "batch_tokens": "token_budget",
                  "naopc_beam": "beam_width", "naopc_beam_max": "tokens", "naopc_every_k_max": "tokens"}
NAOPC_PERTURBATIONS = ("delete", "mask")


def names_list(text: str) -> tuple[str, ...]:
    """``--faith-methods attention,rollout``: names separated by commas or spaces."""
    return tuple(str(text).replace(",", " ").split())


def numbers_list(text: str) -> tuple[float, ...]:
    """``--faith-fractions 0.1,0.5``: numbers separated by commas or spaces."""
    try:
        return tuple(float(x) for x in str(text).replace(",", " ").split())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _zero_is_none(value, flag: str):
    """``--faith-ig-target 0``: no target (exactly --faith-ig-steps nodes)."""
    return value or None


@dataclass(frozen=True)
class FaithfulnessSettings:
    """What :func:`run_faithfulness` computes (module docstring).

    ``methods``: names from :data:`METHODS`; ``metrics``: the columns (a subset of :data:`METRICS`;
    ``tau_loo``, τ with the LOO-drop, exists only when ``leave_one_out`` is among the methods);
    ``fractions``: ERASER bins.

    Integrated gradients: ``ig_steps`` Gauss–Legendre nodes to start from; with ``ig_target``
    (default 0.01) each sentence's nodes are refined until its completeness gap
    |Σ_t IG_t − (f(x) − f(x'))| is within ``ig_target`` · |f(x) − f(x')| or ``ig_max_steps`` is
    reached (the sentences that miss it are counted); ``ig_target=None``: exactly ``ig_steps`` nodes.
    ``ig_rule`` "gauss-kronrod" (default: nested) refines first with the (2n+1)-point Kronrod rule,
    which reuses the n Gauss nodes' gradients (n + 1 new nodes), then doubles the Gauss–Legendre
    nodes (4n, 8n, …); "gauss-legendre" doubles from the start (2n new nodes; the rule of the
    records made before the nested default); "trapezoid" and "riemann-right" double those rules'
    intervals. ``gradient_target``: f of saliency, gradient × input and IG,
    ``"probability"`` ŷ_c (default) or ``"logit"`` z_c (ferret's and inseq's choice);
    ``ig_baseline``: ``"zero"``, ``"pad"`` (the pad token's embedding) or ``"mean"`` (the mean input
    embedding): where the zero baseline sits at the singular point of the model's first normalisation
    (Llama, Qwen2, Mistral, ModernBERT) no node count meets the target; the result says so per model
    and offers ``"mean"`` (:mod:`hf_attn.methods.ig_baselines`).

    Soft metrics: ``soft_variant`` ``"reference"`` (default: Zhao & Aletras's code — the mask on the
    embedding layer's output, the null input every id 0, scores clipped to [0, 1]) or
    ``"embedding"`` (the mask on the word embeddings, the null input the text's embeddings zeroed,
    no clipping). Per sentence and method: its Bernoulli masks drawn from a seed of its tokens,
    ``seed`` and the method; ``soft_draws`` of them, doubled while the Monte-Carlo standard error of
    that sentence's own mean (sd / √draws, Soft-NC or Soft-NS) exceeds ``soft_stderr``, up to
    ``soft_max_draws``; so a sentence's values and draws are those it has alone. Defaults: a
    sentence's standard error ≤ 0.05 (at most 0.0025 of Monte-Carlo variance, small beside the
    spread of soft values across sentences, and a cell's mean over n sentences within 0.05 / √n,
    0.01 from 25 sentences on); 160 draws always reach it for the clipped values (sd ≤ ½, so
    sd / √160 < 0.05); start from 10 (the choice and its cost: ``docs/faithfulness.md``).

    NAOPC (Edin et al. 2024): ``naopc_beam`` the beam width (default 5, the authors' width:
    :data:`hf_attn.core.naopc.DEFAULT_BEAM_WIDTH`; 0: no NAOPC columns); bounds exact for
    sentences of at most ``naopc_exact_max`` tokens (2^n forwards), by beam search up to
    ``naopc_beam_max`` tokens, beyond that the extremes over the table's own orderings (every
    method's, both directions) — each sentence's method is recorded; sentences over
    ``naopc_every_k_max`` tokens average that many evenly spaced k's instead of every k (an
    approximation, counted); ``naopc_perturbation``
    ``"delete"`` (default) or ``"mask"`` (the tokenizer's mask token, as the authors' code).

    ``flow_normalise``: attention flow divided per output row by its sum over the input tokens (the
    authors' code; default) or raw; ``flow_max_tokens``: attention flow is refused on a longer text
    (:func:`hf_attn.methods.attention_flow.check_flow_length`, with the estimated cost), undefined
    on that text with the reason. ``shap_samples``: Kernel SHAP coalitions; ``batch_tokens``:
    padded tokens per method batch; ``seed``: the random floor and the soft draws; ``confidence``:
    of the intervals and the significance level (1 − confidence) of the paired tests."""

    # ``metadata=option(...)``: the field's ``hf-attn analyze --faith-*`` option (hf_attn.core.settings_cli)
    methods: tuple[str, ...] = field(default=DEFAULT_METHODS, metadata=option(
        f"subset of {', '.join(METHODS)}", type=names_list, type_text="comma-separated names",
        default_text=f"all but {', '.join(OPT_IN_METHODS)}"))
    fractions: tuple[float, ...] = field(default=DEFAULT_FRACTIONS, metadata=option(
        "ERASER bins", type=numbers_list, type_text="comma-separated numbers in (0, 1]"))
    ig_steps: int = field(default=16, metadata=option(
        "integrated gradients' Gauss–Legendre nodes to start from", type=count(1, limit="ig_nodes")))
    ig_rule: str = field(default="gauss-kronrod", metadata=option(
        "integrated gradients' quadrature: gauss-kronrod refines a sentence with the Kronrod extension of its Gauss "
        "nodes (reused), then doubles; gauss-legendre doubles from the start; trapezoid, riemann-right",
        choices=IG_RULES))
    ig_target: float | None = field(default=0.01, metadata=option(
        "nodes refined per sentence (nested rule) until |completeness gap| ≤ this share of |f(x) − f(x')| (0: exactly "
        "--faith-ig-steps nodes)", type=float, convert=_zero_is_none))
    ig_max_steps: int = field(default=256, metadata=option("the most nodes per sentence",
                                                           type=count(1, limit="ig_nodes")))
    soft_variant: str = field(default="reference", metadata=option(
        "reference: the authors' code (embedding-layer output masked, null input ids 0, clipped); embedding: word "
        "embeddings masked, unclipped", choices=SOFT_VARIANTS))
    soft_draws: int = field(default=10, metadata=option("Bernoulli draws per sentence and method to start from",
                                                        type=count(1, limit="draws")))
    soft_max_draws: int = field(default=160, metadata=option(
        "each sentence's draws are doubled up to this while the Monte-Carlo standard error of its own mean is "
        "above soft_stderr (0.05)", type=count(1, limit="draws")))
    soft_stderr: float = 0.05
    naopc_beam: int = field(default=DEFAULT_BEAM_WIDTH, metadata=option(
        "NAOPC beam width (the authors' width; 0: no normalised AOPC)", type=count(0, limit="beam_width")))
    naopc_exact_max: int = field(default=10, metadata=option(
        "exact NAOPC bounds up to this many tokens (2^n forwards)", type=count(0, EXACT_LIMIT)))
    naopc_beam_max: int = field(default=32, metadata=option(
        "beam-searched bounds up to this many tokens, the table's orderings beyond", type=count(0, limit="tokens")))
    naopc_every_k_max: int = field(default=64, metadata=option(
        "AOPC over every k up to this many tokens, an even grid of that many k's beyond",
        type=count(2, limit="tokens")))
    naopc_perturbation: str = field(default="delete", metadata=option(
        "NAOPC deletes tokens or replaces them by the mask token", choices=NAOPC_PERTURBATIONS))
    flow_normalise: bool = True
    flow_max_tokens: int = field(default=512, metadata=option(
        "attention flow refuses a text with more tokens (one max-flow per token, cost ∝ layers · tokens³: the "
        "refusal states the estimate); the text's flow is then undefined, with the reason",
        type=count(1, limit="tokens")))
    shap_samples: int = field(default=64, metadata=option("Kernel SHAP coalitions per sentence",
                                                          type=count(1, limit="shap_samples")))
    batch_tokens: int = field(default=1024, metadata=option("padded tokens per method batch",
                                                            type=count(1, limit="token_budget")))
    seed: int = field(default=0, metadata=option(command="seed"))
    confidence: float = 0.95
    metrics: tuple[str, ...] = field(default=COLUMNS, metadata=option(
        f"subset of {', '.join(COLUMNS)} (the last three: plausibility, only with rationales)", type=names_list,
        type_text="comma-separated names", default_text="all"))
    rationale_k_fraction: float | None = field(default=None, metadata=option(
        "plausibility token / IOU F1: each text's top int(this × words) words are its hard rationale (default: the "
        "rationales' mean share of marked words; the battery uses the rationale data's train split, as ERASER)",
        type=float))
    gradient_target: str = field(default="probability", metadata=option(
        "f of saliency, gradient × input and integrated gradients: ŷ_c or z_c", choices=("probability", "logit")))
    ig_baseline: str = field(default="zero", metadata=option(
        "the text's embeddings start from 0, the pad token's or the mean input embedding (where 0 is the singular "
        "point of the model's first normalisation, as on Llama, the result says so and offers mean)",
        choices=IG_BASELINES))

    def __post_init__(self):
        for name in ("methods", "fractions", "metrics"):
            value = getattr(self, name)
            if not isinstance(value, (tuple, list)):
                raise ValueError(f"{name} must be a tuple, got {value!r}")
            if len(set(value)) != len(value):
                raise ValueError(f"{name} lists an item twice: {list(value)}")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not self.methods:
            raise ValueError(f"methods must be a non-empty subset of {list(METHODS)}, got {list(self.methods)}")
        if not self.fractions:
            raise ValueError(f"fractions must be a non-empty list of numbers in (0, 1], got {self.fractions!r}")
        for i, f in enumerate(self.fractions):
            check_number(f"fractions[{i}]", f, 0, 1, low_open=True)
        # every count within its upper bound, with the reason (hf_attn.core.numpy_measures.COUNT_LIMITS)
        # (the normalised ints are kept: a NumPy integer is accepted and stored as an int)
        for name, limit in COUNT_SETTINGS.items():
            object.__setattr__(self, name, check_whole(name, getattr(self, name), 2 if name == "naopc_every_k_max"
                                                       else 0 if name.startswith("naopc") else 1, limit=limit))
        object.__setattr__(self, "naopc_exact_max", check_whole("naopc_exact_max", self.naopc_exact_max, 0))
        object.__setattr__(self, "seed", check_seed(self.seed))
        if max(self.naopc_exact_max, self.naopc_beam_max) > self.naopc_every_k_max:
            raise ValueError(f"naopc_exact_max and naopc_beam_max must be ≤ naopc_every_k_max "
                             f"({self.naopc_every_k_max}): their bounds are over every k")
        from hf_attn.core.naopc import EXACT_LIMIT

        if self.naopc_exact_max > EXACT_LIMIT:
            raise ValueError(f"naopc_exact_max must be ≤ {EXACT_LIMIT} (2^n forwards per sentence), got "
                             f"{self.naopc_exact_max}")
        if self.ig_max_steps < self.ig_steps:
            raise ValueError(f"ig_max_steps ({self.ig_max_steps}) must be ≥ ig_steps ({self.ig_steps})")
        if self.soft_max_draws < self.soft_draws:
            raise ValueError(f"soft_max_draws ({self.soft_max_draws}) must be ≥ soft_draws ({self.soft_draws})")
        for name in ("ig_target", "soft_stderr", "confidence"):  # ig_target None: a fixed node count
            if name != "ig_target" or self.ig_target is not None:
                check_number(name, getattr(self, name), 0, 1, low_open=True, high_open=True)
        unknown = [m for m in self.metrics if m not in COLUMNS]
        if unknown or not self.metrics:
            raise ValueError(f"metrics must be a non-empty subset of {list(COLUMNS)}, got {list(self.metrics)}")
        if self.rationale_k_fraction is not None:
            check_number("rationale_k_fraction", self.rationale_k_fraction, 0, 1)
        choices = {"gradient_target": ("probability", "logit"), "ig_baseline": IG_BASELINES, "ig_rule": IG_RULES,
                   "soft_variant": SOFT_VARIANTS, "naopc_perturbation": NAOPC_PERTURBATIONS}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {list(allowed)}, got {getattr(self, name)!r}")
        if not isinstance(self.flow_normalise, bool):
            raise ValueError(f"flow_normalise must be True or False, got {self.flow_normalise!r}")
