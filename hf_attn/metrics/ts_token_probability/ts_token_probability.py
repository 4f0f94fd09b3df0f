"""Tutek & Šnajder 2020 Table 3 (average per-token prediction probability). Thin wrapper over
``token_probability_from_token_logits`` of ``_hf_attn_measures.py``, shipped beside this script: the
NumPy port of ``hf_attn.batteries.ts.token_probability_from_token_logits``, so the module runs
without hf_attn or torch."""

import datasets
import evaluate
# (every top-level import is listed so that evaluate checks it is installed)
import numpy

from ._hf_attn_measures import (check_class_ids, check_distributions, check_finite, check_same_count,
                                check_same_shapes, report_undefined, token_probability_from_token_logits)

_DESCRIPTION = """For every correctly classified instance, the mean over its tokens of the probability of
the predicted class when the decoder sees h_t alone (all attention on t; T&Š §5, Eq. 9), averaged
over those instances. At equal F1, lower means attention weights matter more (more faithful)."""

_KWARGS = """
Args:
    token_logits: per instance, a (tokens, K) list of raw decoder units on each h_t alone
        (K = 1 for binary models: sigmoid logit).
    attentions: per instance, the trained attention (tokens,), used for the model's prediction.
    references: gold class ids, in [0, C) (C = 2 when K = 1, else K); others are a ValueError.
Returns:
    token_probability, correct_instances, instances, undefined ({name: why} for every value that is
    None).
"""

_CITATION = """@inproceedings{tutek-snajder-2020-staying,
  title = {Staying True to Your Word: (How) Can Attention Become Explanation?},
  author = {Tutek, Martin and {\\v{S}}najder, Jan},
  booktitle = {Proceedings of the 5th Workshop on Representation Learning for NLP},
  year = {2020}, pages = {131--142}}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class TsTokenProbability(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS,
            features=datasets.Features({
                "token_logits": datasets.Sequence(datasets.Sequence(datasets.Value("float32"))),
                "attentions": datasets.Sequence(datasets.Value("float32")),
                "references": datasets.Value("int64")}),
            reference_urls=["https://aclanthology.org/2020.repl4nlp-1.17/"])

    def _compute(self, token_logits, attentions, references):
        check_same_count(token_logits=token_logits, attentions=attentions, references=references)
        rows = check_finite("token_logits", token_logits)
        check_distributions("attentions", attentions)
        check_same_shapes("token_logits", token_logits, "attentions", attentions, axis=0)
        units = {r.shape[-1] if r.ndim == 2 else None for r in rows}
        if len(units) != 1 or None in units:
            raise ValueError(f"token_logits must be (tokens, K) per instance with one K for all "
                             f"instances, got K in {sorted(str(u) for u in units)}")
        units = units.pop()
        # K = 1: one sigmoid logit, classes {0, 1}; K > 1: classes 0 … K-1
        references = check_class_ids("references", references, 2 if units == 1 else units)
        return report_undefined(token_probability_from_token_logits(token_logits, attentions, references),
                                {"token_probability": "no instance is classified correctly: the mean is over "
                                                      "correctly classified instances"})
