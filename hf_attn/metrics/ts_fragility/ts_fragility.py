"""Tutek & Šnajder 2020 Table 1 (fragility of attention): F1 with trained, uniform and randomly
permuted attention, from per-instance decoder outputs. Thin wrapper over
``hf_attn.analysis.ts.fragility_from_token_logits``."""

import datasets
import evaluate
from hf_attn import validation
from hf_attn.analysis.ts import fragility_from_token_logits

_DESCRIPTION = """F1 (percent) with the trained attention and the signed change in F1 when the attention
is replaced by the uniform distribution over the real tokens or by a random permutation of itself
(T&Š §4.1). Uses the linearity of the decoder: logits(α) = Σ_t α_t · token_logits_t (T&Š Eq. 9)."""

_KWARGS = """
Args:
    token_logits: per instance, a (tokens, K) list: the raw decoder units on each h_t alone
        (``model.token_logits(hidden)``; K = 1 for binary models).
    attentions: per instance, the trained attention (tokens,) (sums to 1).
    references: gold class ids.
    seed: seed of the random permutations.
    permutation_draws: permutations per instance (F1 averaged over draws).
Returns:
    f1_trained, f1_uniform, f1_permuted, delta_uniform, delta_permuted (percent), instances.
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
        validation.check_same_count(token_logits=token_logits, attentions=attentions, references=references)
        validation.check_finite("token_logits", token_logits)
        validation.check_distributions("attentions", attentions)
        validation.check_same_shapes("token_logits", token_logits, "attentions", attentions, axis=0)
        return fragility_from_token_logits(token_logits, attentions, references, seed=seed,
                                           permutation_draws=permutation_draws)
