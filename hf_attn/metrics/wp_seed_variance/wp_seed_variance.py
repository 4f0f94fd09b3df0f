"""Wiegreffe & Pinter 2019 §3.3 / Fig. 3: variance of attention across random seeds.
Thin wrapper over ``seed_variance_summary`` of ``_hf_attn_measures.py``, shipped beside this
script: the NumPy port of ``hf_attn.batteries.wp.seed_variance_summary``, so the module runs without
hf_attn (and without the Trainer stack ``hf_attn.batteries.wp`` imports)."""

import datasets
import evaluate
# (every top-level import is listed so that evaluate checks it is installed)
import numpy

from ._hf_attn_measures import check_distributions, check_same_count, report_undefined, seed_variance_summary

_DESCRIPTION = """W&P §3.3: models that differ from a base model only in the random seed give the
baseline amount of attention variance that is "normal". Per instance, the metric takes the JSD of
each seed model's attention to the base attention and the TVD of their predictions, and reports the
max (W&P paper) or median (W&P code) over seeds, their means, and the per-class table by max base
attention (the data of W&P Fig. 3)."""

_KWARGS = """
Args:
    base_attention: per instance, the base model's attention over its real tokens (T_i values).
    seed_attentions: per instance, S lists of T_i values (one per seed model).
    base_probabilities: per instance, the base model's class probabilities (C values).
    seed_probabilities: per instance, S lists of C class probabilities.
    labels: per instance, the class used to split the table (W&P: gold label).
    statistic: "max" (default, W&P paper) or "median" (W&P code) over seeds.
Returns:
    statistic, num_seeds, mean_max_jsd, mean_median_jsd, mean_max_tvd, mean_median_tvd,
    jsd / tvd / max_attention (per instance), by_class_and_max_attention, undefined ({name: why}
    for every value that is None).
"""

_CITATION = """@inproceedings{wiegreffe-pinter-2019-attention,
  title = {Attention is not not Explanation},
  author = {Wiegreffe, Sarah and Pinter, Yuval},
  booktitle = {Proceedings of EMNLP-IJCNLP 2019},
  year = {2019}, pages = {11--20}}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class WpSeedVariance(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS,
            features=datasets.Features({
                "base_attention": datasets.Sequence(datasets.Value("float64")),
                "seed_attentions": datasets.Sequence(datasets.Sequence(datasets.Value("float64"))),
                "base_probabilities": datasets.Sequence(datasets.Value("float64")),
                "seed_probabilities": datasets.Sequence(datasets.Sequence(datasets.Value("float64"))),
                "labels": datasets.Value("int64")}),
            reference_urls=["https://aclanthology.org/D19-1002/"])

    def _compute(self, base_attention, seed_attentions, base_probabilities, seed_probabilities, labels,
                 statistic="max"):
        check_same_count(base_attention=base_attention, seed_attentions=seed_attentions,
                                    base_probabilities=base_probabilities, seed_probabilities=seed_probabilities,
                                    labels=labels)
        check_distributions("base_attention", base_attention)
        check_distributions("seed_attentions", seed_attentions)
        check_distributions("base_probabilities", base_probabilities)
        check_distributions("seed_probabilities", seed_probabilities)
        return report_undefined(seed_variance_summary(base_attention, seed_attentions, base_probabilities,
                                                      seed_probabilities, labels, statistic), {
            "by_class_and_max_attention[].*": "no instance of this class has its max base attention in this bin"})
