"""Soft normalised comprehensiveness and sufficiency (Zhao & Aletras 2023, "Incorporating
Attribution Importance for Improving Faithfulness Metrics", ACL, §3) summarised over a dataset,
with 95 % intervals over the instances and over the seeds of the soft masks. Model-free (NumPy and
SciPy only): the same formulas as ``hf_attn.core.faithfulness``; an undefined value is None with its
reason (``report_undefined`` of ``_hf_attn_measures.py``, shipped beside this script)."""

import datasets
import evaluate
# (every top-level import is listed so that evaluate checks it is installed)
import numpy
import scipy.stats

from ._hf_attn_measures import report_undefined

_DESCRIPTION = """Soft-NC and Soft-NS of a per-token attribution. Instead of deleting the top-k tokens,
each element of token t's vector at the embedding layer's output is kept with probability s_t
(Soft-NS; s_t the attribution min-max normalised to [0, 1] over the instance) or 1 - s_t (Soft-NC),
so every token's importance counts. With y(x) the probability of the predicted class for the full
input, y(0) for the null input (every input id 0, as the authors' code), S(x, x') = 1 - max(0, y(x) - y(x')):
Soft-NS = (S(x, x') - S(x, 0)) / (1 - S(x, 0)) and Soft-NC = max(0, y(x) - y(x'')) / (1 - S(x, 0)),
each clipped to [0, 1] per draw as the authors' code does. Both: higher = more faithful. Instances
with y(x) <= y(0) are undefined (left out, counted)."""

_KWARGS = """
Args:
    full_probability: per instance, y(x) in [0, 1].
    null_probability: per instance, y(0) in [0, 1].
    soft_removed_probability: per instance, a list of y(x'') (one per draw of the soft mask).
    soft_kept_probability: per instance, a list of y(x') (one per draw, the same number).
    confidence: of the intervals (default 0.95).
    clip: clip each draw's value to [0, 1] (default True, as the authors' code; False: the ratio as
        printed, unbounded when y(0) is almost as confident as y(x)).
Returns:
    soft_comprehensiveness, soft_sufficiency (means over instances of the seed-mean), their
    *_low / *_high (Student-t interval over instances) and *_seed_low / *_seed_high (over the seed
    means), num_instances, num_undefined, num_seeds, undefined ({name: why} for every value that is
    None).
"""

_CITATION = """@inproceedings{zhao-aletras-2023-incorporating,
  title = {Incorporating Attribution Importance for Improving Faithfulness Metrics},
  author = {Zhao, Zhixue and Aletras, Nikolaos},
  booktitle = {Proceedings of ACL 2023}, year = {2023}, pages = {4732--4745}}"""


def _probabilities(values, name):
    arr = numpy.asarray(values, dtype=numpy.float64)
    if not numpy.isfinite(arr).all() or (arr < 0).any() or (arr > 1).any():
        raise ValueError(f"{name} must be probabilities in [0, 1]")
    return arr


def mean_ci(values, confidence=0.95):
    """Mean of the finite values and its Student-t interval: (mean, low, high, n)."""
    arr = numpy.asarray(values, dtype=numpy.float64).ravel()
    arr = arr[numpy.isfinite(arr)]
    if len(arr) == 0:
        return float("nan"), float("nan"), float("nan"), 0
    mean = float(arr.mean())
    if len(arr) < 2:
        return mean, float("nan"), float("nan"), 1
    half = float(scipy.stats.t.ppf(0.5 + confidence / 2, len(arr) - 1) * arr.std(ddof=1) / numpy.sqrt(len(arr)))
    return mean, mean - half, mean + half, len(arr)


def soft_scores(full, null, removed, kept, clip=True):
    """(Soft-NC, Soft-NS) arrays of shape (seeds, instances), NaN where y(x) <= y(0)."""
    denominator = numpy.maximum(0.0, full - null)
    defined = denominator > 1e-12
    safe = numpy.where(defined, denominator, 1.0)
    nc = numpy.where(defined, numpy.maximum(0.0, full - removed) / safe, numpy.nan)
    ns = numpy.where(defined, ((1 - numpy.maximum(0.0, full - kept)) - (1 - denominator)) / safe, numpy.nan)
    if clip:
        nc, ns = numpy.clip(nc, 0, 1), numpy.clip(ns, 0, 1)
    return nc, ns


def summarize_soft(full_probability, null_probability, soft_removed_probability, soft_kept_probability,
                   confidence=0.95, clip=True):
    full = _probabilities(full_probability, "full_probability")
    null = _probabilities(null_probability, "null_probability")
    if full.ndim != 1 or len(full) == 0 or null.shape != full.shape:
        raise ValueError("full_probability and null_probability must be equally long non-empty lists")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    try:
        removed = _probabilities(soft_removed_probability, "soft_removed_probability").T  # (seeds, N)
        kept = _probabilities(soft_kept_probability, "soft_kept_probability").T
    except ValueError as error:
        if "probabilities" in str(error):
            raise
        raise ValueError("soft_removed_probability and soft_kept_probability need the same number of seeds per "
                         "instance") from None
    if removed.shape != kept.shape or removed.ndim != 2 or removed.shape[1] != len(full):
        raise ValueError("soft_removed_probability and soft_kept_probability need one list of seeds per instance, "
                         "the same number of seeds each")
    nc, ns = soft_scores(full, null, removed, kept, bool(clip))
    out = {}
    for name, values in (("soft_comprehensiveness", nc), ("soft_sufficiency", ns)):
        with numpy.errstate(invalid="ignore"):
            per_instance = numpy.array([numpy.nan if not numpy.isfinite(c).any() else numpy.nanmean(c)
                                        for c in values.T])
            per_seed = numpy.array([numpy.nan if not numpy.isfinite(r).any() else numpy.nanmean(r) for r in values])
        mean, low, high, n = mean_ci(per_instance, confidence)
        _, seed_low, seed_high, _ = mean_ci(per_seed, confidence)
        out |= {name: mean, f"{name}_low": low, f"{name}_high": high, f"{name}_seed_low": seed_low,
                f"{name}_seed_high": seed_high}
    undefined = int((~(full - null > 1e-12)).sum())
    out |= {"num_instances": int(len(full)), "num_undefined": undefined, "num_seeds": int(removed.shape[0])}
    why = "y(x) <= y(0): the normaliser 1 - S(x, 0) is 0"
    defined = len(full) - undefined
    reasons = {}
    for name in ("soft_comprehensiveness", "soft_sufficiency"):
        reasons |= {name: f"no instance is defined (every instance has {why})",
                    f"{name}_low": f"an interval needs 2 defined instances, {defined} given (the others have {why})",
                    f"{name}_high": f"an interval needs 2 defined instances, {defined} given (the others have {why})",
                    f"{name}_seed_low": f"an interval over seeds needs 2 seeds with a defined mean, "
                                        f"{removed.shape[0] if defined else 0} given",
                    f"{name}_seed_high": f"an interval over seeds needs 2 seeds with a defined mean, "
                                         f"{removed.shape[0] if defined else 0} given"}
    return report_undefined(out, reasons)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class SoftFaithfulness(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS,
            features=datasets.Features({
                "full_probability": datasets.Value("float64"), "null_probability": datasets.Value("float64"),
                "soft_removed_probability": datasets.Sequence(datasets.Value("float64")),
                "soft_kept_probability": datasets.Sequence(datasets.Value("float64"))}),
            reference_urls=["https://aclanthology.org/2023.acl-long.261/"])

    def _compute(self, full_probability, null_probability, soft_removed_probability, soft_kept_probability,
                 confidence=0.95, clip=True):
        return summarize_soft(full_probability, null_probability, soft_removed_probability, soft_kept_probability,
                              confidence, clip)
