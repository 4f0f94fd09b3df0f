"""Wiegreffe & Pinter 2019 §4: divergence of a model-consistent adversary from its base model.
Thin wrapper over ``consistent_adversary_summary`` of ``_hf_attn_measures.py``, shipped beside
this script: the NumPy port of ``hf_attn.batteries.wp.consistent_adversary_summary``, so the module
runs without hf_attn (and without the Trainer stack ``hf_attn.batteries.wp`` imports)."""

import datasets
import evaluate
# (every top-level import is listed so that evaluate checks it is installed)
import numpy

from ._hf_attn_measures import check_distributions, check_same_count, consistent_adversary_summary, report_undefined

_DESCRIPTION = """W&P §4 train ONE adversarial model M_a against a fixed base M_b with
L = TVD(ŷ_a, ŷ_b) − λ·KL(α_a ‖ α_b): the adversary must keep the predictions while moving all of its
attention distributions away, consistently across the data set. Given both models' attention and
class probabilities per instance, the metric reports mean/median JSD(α_a, α_b), TVD(ŷ_a, ŷ_b),
KL(α_a ‖ α_b) (pads masked, exact, never NaN) and the objective (the points of W&P Fig. 5)."""

_KWARGS = """
Args:
    adversary_attention: per instance, M_a's attention over the real tokens (T_i values).
    base_attention: per instance, M_b's attention (the same T_i values).
    adversary_probabilities / base_probabilities: per instance, class probabilities (C values).
    lam: λ of the objective (default 0.001).
Returns:
    lambda, mean_jsd, median_jsd, std_jsd, mean_tvd, median_tvd, std_tvd, mean_kl, objective,
    jsd / tvd / kl per instance, undefined ({name: why} for every value that is None: none here).
"""

_CITATION = """@inproceedings{wiegreffe-pinter-2019-attention,
  title = {Attention is not not Explanation},
  author = {Wiegreffe, Sarah and Pinter, Yuval},
  booktitle = {Proceedings of EMNLP-IJCNLP 2019},
  year = {2019}, pages = {11--20}}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class WpConsistentAdversary(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS,
            features=datasets.Features({
                "adversary_attention": datasets.Sequence(datasets.Value("float64")),
                "base_attention": datasets.Sequence(datasets.Value("float64")),
                "adversary_probabilities": datasets.Sequence(datasets.Value("float64")),
                "base_probabilities": datasets.Sequence(datasets.Value("float64"))}),
            reference_urls=["https://aclanthology.org/D19-1002/"])

    def _compute(self, adversary_attention, base_attention, adversary_probabilities, base_probabilities,
                 lam=0.001):
        check_same_count(adversary_attention=adversary_attention, base_attention=base_attention,
                                    adversary_probabilities=adversary_probabilities,
                                    base_probabilities=base_probabilities)
        check_distributions("adversary_attention", adversary_attention)
        check_distributions("base_attention", base_attention)
        check_distributions("adversary_probabilities", adversary_probabilities)
        check_distributions("base_probabilities", base_probabilities)
        return report_undefined(consistent_adversary_summary(adversary_attention, base_attention,
                                                             adversary_probabilities, base_probabilities, lam), {})
