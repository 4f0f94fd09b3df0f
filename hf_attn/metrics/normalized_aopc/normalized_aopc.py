"""Normalised AOPC (Edin, Motzfeldt, Christensen, Maistro, Hansen & Ruder 2024, "Normalized AOPC:
Fixing Misleading Faithfulness Metrics for Feature Attribution Explainability", ACL, §3) summarised
over a dataset with a 95 % interval. Model-free and self-contained (NumPy and SciPy only): the
same formula as ``hf_attn.core.faithfulness.normalised_aopc``."""

import datasets
import evaluate
import numpy
import scipy.stats

_DESCRIPTION = """AOPC values are not comparable across inputs or models: how far the probability can
drop depends on the instance. NAOPC rescales an instance's AOPC by the AOPC of the best and the
worst ordering of its tokens: NAOPC = (AOPC - AOPC_min) / (AOPC_max - AOPC_min), so 1 = the best
ordering and 0 = the worst. For a metric where lower is better (sufficiency) pass
higher_is_better=False: (AOPC_max - AOPC) / (AOPC_max - AOPC_min). Instances whose bounds are equal
are undefined (left out, counted). Bounds from a search (beam search, as Edin et al. sec. 4) may
leave values slightly outside [0, 1]; they are not clipped."""

_KWARGS = """
Args:
    aopc: per instance, the AOPC of the attribution's ordering.
    aopc_min, aopc_max: per instance, the lowest and highest AOPC of any ordering (aopc_min <= aopc_max).
    higher_is_better: True (comprehensiveness, default) or False (sufficiency).
    confidence: of the interval (default 0.95).
Returns:
    naopc (mean over the defined instances), naopc_low / naopc_high (Student-t interval),
    num_instances, num_undefined.
"""

_CITATION = """@inproceedings{edin-etal-2024-normalized,
  title = {Normalized {AOPC}: Fixing Misleading Faithfulness Metrics for Feature Attribution Explainability},
  author = {Edin, Joakim and Motzfeldt, Andreas Geert and Christensen, Casper L. and Maistro, Maria and
            Hansen, Lars and Ruder, Sebastian},
  booktitle = {Proceedings of ACL 2024}, year = {2024}}"""


def normalised(aopc, low, high, higher_is_better=True):
    value, low, high = (numpy.asarray(x, dtype=numpy.float64) for x in (aopc, low, high))
    if not (value.shape == low.shape == high.shape) or value.ndim != 1 or len(value) == 0:
        raise ValueError("aopc, aopc_min and aopc_max must be equally long non-empty lists")
    for name, arr in (("aopc", value), ("aopc_min", low), ("aopc_max", high)):
        if not numpy.isfinite(arr).all():
            raise ValueError(f"{name} contains NaN or inf")
    if (low > high + 1e-12).any():
        raise ValueError("aopc_min must not exceed aopc_max")
    span = high - low
    defined = span > 1e-12
    safe = numpy.where(defined, span, 1.0)
    out = (value - low) / safe if higher_is_better else (high - value) / safe
    return numpy.where(defined, out, numpy.nan)


def summarize_naopc(aopc, aopc_min, aopc_max, higher_is_better=True, confidence=0.95):
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    values = normalised(aopc, aopc_min, aopc_max, bool(higher_is_better))
    finite = values[numpy.isfinite(values)]
    mean = float(finite.mean()) if len(finite) else float("nan")
    half = (float(scipy.stats.t.ppf(0.5 + confidence / 2, len(finite) - 1) * finite.std(ddof=1)
                  / numpy.sqrt(len(finite))) if len(finite) > 1 else float("nan"))
    return {"naopc": mean, "naopc_low": mean - half, "naopc_high": mean + half, "num_instances": int(len(values)),
            "num_undefined": int((~numpy.isfinite(values)).sum())}


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class NormalizedAopc(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS,
            features=datasets.Features({"aopc": datasets.Value("float64"), "aopc_min": datasets.Value("float64"),
                                        "aopc_max": datasets.Value("float64")}),
            reference_urls=["https://aclanthology.org/2024.acl-long.1/", "https://arxiv.org/abs/2408.08137"])

    def _compute(self, aopc, aopc_min, aopc_max, higher_is_better=True, confidence=0.95):
        return summarize_naopc(aopc, aopc_min, aopc_max, higher_is_better, confidence)
