"""Normalised AOPC (Edin, Motzfeldt, Christensen, Ruotsalo, Maaløe & Maistro 2024, "Normalized AOPC:
Fixing Misleading Faithfulness Metrics for Feature Attribution Explainability", ACL, §3) summarised
over a dataset with a 95 % interval. Model-free (NumPy and SciPy): ``normalised_aopc`` and its
bounds check come from ``_hf_attn_measures.py``, shipped beside this script (the copy of
``hf_attn.core.numpy_measures``, the code ``hf_attn.core.faithfulness.normalised_aopc`` runs); the
bounds themselves come from ``hf_attn.core.naopc`` (exact by dynamic programming, or beam search)."""

import datasets
import evaluate
# (every top-level import is listed so that evaluate checks it is installed)
import numpy
import scipy.stats

from ._hf_attn_measures import normalised_aopc, report_undefined

_DESCRIPTION = """AOPC values are not comparable across inputs or models: how far the probability can
drop depends on the instance. NAOPC rescales an instance's AOPC by the lowest and highest AOPC of
any ordering of its tokens: NAOPC = (AOPC - AOPC_min) / (AOPC_max - AOPC_min). Edin et al.'s AOPC
averages the drop over every k = 1..N tokens deleted. For comprehensiveness (tokens deleted in
descending order of importance) higher is better; for sufficiency (ascending order) lower is better,
as the authors report both. Instances whose bounds are equal are undefined (left out, counted). An
AOPC outside its bounds is an error: the bounds are the extremes over every ordering, the
attribution's ordering among them; one past a bound by float32 rounding (a few units in the last
place, computed along another path) is clipped onto it."""

_KWARGS = """
Args:
    aopc: per instance, the AOPC of the attribution's ordering.
    aopc_min, aopc_max: per instance, the lowest and highest AOPC of any ordering (aopc_min <= aopc <= aopc_max,
        up to float32 rounding).
    confidence: of the interval (default 0.95).
Returns:
    naopc (mean over the defined instances), naopc_low / naopc_high (Student-t interval),
    num_instances, num_undefined, undefined ({name: why} for every value that is None).
"""

_CITATION = """@inproceedings{edin-etal-2024-normalized,
  title = {Normalized {AOPC}: Fixing Misleading Faithfulness Metrics for Feature Attribution Explainability},
  author = {Edin, Joakim and Motzfeldt, Andreas Geert and Christensen, Casper L. and Ruotsalo, Tuukka and
            Maal{\\o}e, Lars and Maistro, Maria},
  booktitle = {Proceedings of the 62nd Annual Meeting of the Association for Computational Linguistics
               (Volume 1: Long Papers)}, pages = {1715--1730}, year = {2024}}"""


def normalised(aopc, low, high):
    value, low, high = (numpy.asarray(x, dtype=numpy.float64) for x in (aopc, low, high))
    if not (value.shape == low.shape == high.shape) or value.ndim != 1 or len(value) == 0:
        raise ValueError("aopc, aopc_min and aopc_max must be equally long non-empty lists")
    for name, arr in (("aopc", value), ("aopc_min", low), ("aopc_max", high)):
        if not numpy.isfinite(arr).all():
            raise ValueError(f"{name} contains NaN or inf")
    return normalised_aopc(value, low, high)


def summarize_naopc(aopc, aopc_min, aopc_max, confidence=0.95):
    if not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    values = normalised(aopc, aopc_min, aopc_max)
    finite = values[numpy.isfinite(values)]
    mean = float(finite.mean()) if len(finite) else float("nan")
    half = (float(scipy.stats.t.ppf(0.5 + confidence / 2, len(finite) - 1) * finite.std(ddof=1)
                  / numpy.sqrt(len(finite))) if len(finite) > 1 else float("nan"))
    equal = "AOPC_min = AOPC_max (one token, or no deletion moves the prediction)"
    reasons = {"naopc": f"no instance is defined: every instance has {equal}",
               "naopc_low": f"an interval needs 2 defined instances, {len(finite)} given "
                            f"(the others have {equal})",
               "naopc_high": f"an interval needs 2 defined instances, {len(finite)} given "
                             f"(the others have {equal})"}
    return report_undefined({"naopc": mean, "naopc_low": mean - half, "naopc_high": mean + half,
                             "num_instances": int(len(values)), "num_undefined": int((~numpy.isfinite(values)).sum())},
                            reasons)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class NormalizedAopc(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS,
            features=datasets.Features({"aopc": datasets.Value("float64"), "aopc_min": datasets.Value("float64"),
                                        "aopc_max": datasets.Value("float64")}),
            reference_urls=["https://aclanthology.org/2024.acl-long.1/", "https://arxiv.org/abs/2408.08137"])

    def _compute(self, aopc, aopc_min, aopc_max, confidence=0.95):
        return summarize_naopc(aopc, aopc_min, aopc_max, confidence)
