"""Agreement of two per-token attributions of the same inputs: Kendall tau-b per instance (with
leave-one-out as the reference: "tau with LOO", Jain & Wallace 2019 sec. 4.1, whose leave-one-out
is the LOO-TVD; hf_attn's faithfulness table uses the LOO-drop, the predicted class's probability
drop) and top-k feature agreement (Krishna et al. 2022, "The Disagreement Problem in Explainable Machine Learning",
sec. 3.1), means with 95 % intervals. Model-free (NumPy and SciPy only): the same numbers as
``hf_attn.core.faithfulness.rank_agreement`` / ``top_k_agreement``; an undefined value is None with
its reason (``report_undefined`` of ``_hf_attn_measures.py``, shipped beside this script)."""

import datasets
import evaluate
# (every top-level import is listed so that evaluate checks it is installed)
import numpy
import scipy.stats

from ._hf_attn_measures import report_undefined

_DESCRIPTION = """How similarly two explanation methods rank the tokens of each input (e.g. captum's
Kernel SHAP against hf_attn's leave-one-out drop, LOO-drop). Per instance: Kendall tau-b between the two score
lists (ties handled as tau-b; undefined for fewer than 2 tokens or a constant list, left out and
counted) and the top-k agreement |top-k(a) & top-k(b)| / k with k = ceil(fraction * n), ties broken
by position (earlier first)."""

_KWARGS = """
Args:
    attributions: per instance, a list of scores (one per token).
    references: per instance, a list of scores of the same length (the other method).
    top_k_fraction: k as a fraction of the tokens (default 0.2), in (0, 1].
    confidence: of the intervals (default 0.95).
Returns:
    kendall_tau, kendall_tau_low, kendall_tau_high, top_k_agreement, top_k_agreement_low,
    top_k_agreement_high, num_instances, num_undefined, undefined ({name: why} for every value that
    is None).
"""

_CITATION = """@inproceedings{jain-wallace-2019-attention,
  title = {Attention is not Explanation}, author = {Jain, Sarthak and Wallace, Byron C.},
  booktitle = {Proceedings of NAACL 2019}, year = {2019}, pages = {3543--3556}}
@article{krishna2022disagreement,
  title = {The Disagreement Problem in Explainable Machine Learning: A Practitioner's Perspective},
  author = {Krishna, Satyapriya and Han, Tessa and Gu, Alex and Pombra, Javin and Jabbari, Shahin and
            Wu, Steven and Lakkaraju, Himabindu}, journal = {arXiv:2202.01602}, year = {2022}}"""


def kendall_tau_b(a, b):
    """Kendall tau-b of two equally long score lists (NaN when undefined)."""
    a, b = numpy.asarray(a, dtype=numpy.float64), numpy.asarray(b, dtype=numpy.float64)
    if len(a) < 2:
        return float("nan")
    upper = numpy.triu(numpy.ones((len(a), len(a)), dtype=bool), 1)
    sa, sb = numpy.sign(a[:, None] - a[None, :])[upper], numpy.sign(b[:, None] - b[None, :])[upper]
    pairs_a, pairs_b = (sa != 0).sum(), (sb != 0).sum()
    if pairs_a == 0 or pairs_b == 0:
        return float("nan")
    return float(numpy.clip((sa * sb).sum() / numpy.sqrt(pairs_a * pairs_b), -1, 1))


def top_k(a, b, fraction):
    n = len(a)
    k = int(min(n, max(1, numpy.ceil(round(n * fraction, 9)))))
    first = set(numpy.argsort(-numpy.asarray(a, dtype=numpy.float64), kind="stable")[:k].tolist())
    second = set(numpy.argsort(-numpy.asarray(b, dtype=numpy.float64), kind="stable")[:k].tolist())
    return len(first & second) / k


def mean_ci(values, confidence):
    arr = numpy.asarray(values, dtype=numpy.float64)
    arr = arr[numpy.isfinite(arr)]
    if len(arr) == 0:
        return float("nan"), float("nan"), float("nan")
    mean = float(arr.mean())
    if len(arr) < 2:
        return mean, float("nan"), float("nan")
    half = float(scipy.stats.t.ppf(0.5 + confidence / 2, len(arr) - 1) * arr.std(ddof=1) / numpy.sqrt(len(arr)))
    return mean, mean - half, mean + half


def summarize_agreement(attributions, references, top_k_fraction=0.2, confidence=0.95):
    if not 0 < top_k_fraction <= 1:
        raise ValueError(f"top_k_fraction must be in (0, 1], got {top_k_fraction!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if len(attributions) != len(references) or len(attributions) == 0:
        raise ValueError("attributions and references must be equally long non-empty lists of instances")
    taus, tops = [], []
    for i, (a, b) in enumerate(zip(attributions, references)):
        if len(a) != len(b) or len(a) == 0:
            raise ValueError(f"instance {i}: attributions and references need the same non-zero number of tokens, "
                             f"got {len(a)} and {len(b)}")
        if not (numpy.isfinite(numpy.asarray(a, dtype=float)).all() and numpy.isfinite(numpy.asarray(b, dtype=float)).all()):
            raise ValueError(f"instance {i}: attributions or references contain NaN or inf")
        taus.append(kendall_tau_b(a, b))
        tops.append(top_k(a, b, top_k_fraction))
    tau, tau_low, tau_high = mean_ci(taus, confidence)
    top, top_low, top_high = mean_ci(tops, confidence)
    defined = int(numpy.isfinite(taus).sum())
    why_tau = "Kendall tau is undefined for fewer than 2 tokens or a constant score list"
    interval = "an interval needs 2 instances with a defined value, {} given"
    reasons = {"kendall_tau": f"no instance has a defined tau ({why_tau})",
               "kendall_tau_low": interval.format(defined) + f" ({why_tau})",
               "kendall_tau_high": interval.format(defined) + f" ({why_tau})",
               "top_k_agreement_low": interval.format(len(tops)),
               "top_k_agreement_high": interval.format(len(tops))}
    return report_undefined({"kendall_tau": tau, "kendall_tau_low": tau_low, "kendall_tau_high": tau_high,
                             "top_k_agreement": top, "top_k_agreement_low": top_low,
                             "top_k_agreement_high": top_high, "num_instances": len(taus),
                             "num_undefined": int(numpy.isnan(taus).sum())}, reasons)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class AttributionAgreement(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS,
            features=datasets.Features({"attributions": datasets.Sequence(datasets.Value("float64")),
                                        "references": datasets.Sequence(datasets.Value("float64"))}),
            reference_urls=["https://aclanthology.org/N19-1357/", "https://arxiv.org/abs/2202.01602"])

    def _compute(self, attributions, references, top_k_fraction=0.2, confidence=0.95):
        return summarize_agreement(attributions, references, top_k_fraction, confidence)
