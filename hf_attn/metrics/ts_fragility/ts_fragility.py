"""Tutek & Šnajder 2020 Table 1 (fragility of attention): F1 with trained, uniform and randomly
permuted attention, from per-instance decoder outputs. Thin wrapper over
``fragility_from_token_logits`` of ``_hf_attn_measures.py``, shipped beside this script: the NumPy
port of ``hf_attn.batteries.ts.fragility_from_token_logits`` (the same random permutations for a
seed), so the module runs without hf_attn or torch."""

import datasets
import evaluate
# (every top-level import is listed so that evaluate checks it is installed)
import numpy

from ._hf_attn_measures import (check_class_ids, check_distributions, check_finite, check_same_count,
                                check_same_shapes, check_whole, fragility_from_token_logits, report_undefined)

_DESCRIPTION = """F1 (percent) with the trained attention and the signed change in F1 when the attention
is replaced by the uniform distribution over the real tokens or by a random permutation of itself
(T&Š §4.1). Uses the linearity of the decoder: logits(α) = Σ_t α_t · token_logits_t (T&Š Eq. 9)."""

_KWARGS = """
Args:
    token_logits: per instance, a (tokens, K) list: the raw decoder units on each h_t alone
        (``model.token_logits(hidden)``; K = 1 for binary models).
    attentions: per instance, the trained attention (tokens,) (sums to 1).
    references: gold class ids, in [0, C) (C = 2 when K = 1, else K); others are a ValueError.
    seed: seed of the random permutations (the permutations hf_attn draws with
        ``torch.Generator().manual_seed(seed)``, reproduced without torch).
    permutation_draws: permutations per instance (F1 averaged over draws), a whole number in
        [1, 100000].
Returns:
    f1_trained, f1_uniform, f1_permuted, delta_uniform, delta_permuted (percent), instances,
    undefined ({name: why} for every value that is None: none here, F1 is always defined).
"""

_CITATION = """@inproceedings{tutek-snajder-2020-staying,
  title = {Staying True to Your Word: (How) Can Attention Become Explanation?},
  author = {Tutek, Martin and {\\v{S}}najder, Jan},
  booktitle = {Proceedings of the 5th Workshop on Representation Learning for NLP},
  year = {2020}, pages = {131--142}}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class TsFragility(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS,
            features=datasets.Features({
                "token_logits": datasets.Sequence(datasets.Sequence(datasets.Value("float32"))),
                "attentions": datasets.Sequence(datasets.Value("float32")),
                "references": datasets.Value("int64")}),
            reference_urls=["https://aclanthology.org/2020.repl4nlp-1.17/"])

    def _compute(self, token_logits, attentions, references, seed=0, permutation_draws=10):
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
        check_class_ids("references", references, 2 if units == 1 else units)
        check_whole("permutation_draws", permutation_draws, 1, limit="permutations")
        return report_undefined(fragility_from_token_logits(token_logits, attentions, references, seed=seed,
                                                            permutation_draws=permutation_draws), {})
