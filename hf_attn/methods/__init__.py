"""Explanation methods as plain tensor functions, one method per module (in the style of captum):
explicit arguments, shapes in every docstring, no settings objects and no I/O. The batteries in
:mod:`hf_attn.runs` walk a dataset in batches and call these.

- :mod:`~hf_attn.methods.gradient`: gradient × input importance with α detached
  (Jain & Wallace 2019, §4.1, Alg. 1; pairs: appendix B) — ``gradient_importance``,
  ``pair_gradient_importance``.
- :mod:`~hf_attn.methods.leave_one_out`: the LOO-TVD Δŷ_t = TVD(ŷ(x₋t), ŷ(x)) (J&W §4.1, Alg. 1) —
  ``leave_one_out`` (exact Average / one-layer BiLSTM shortcuts), ``deletion_batch``,
  ``pair_leave_one_out``.
- :mod:`~hf_attn.methods.permutation`: TVD of the output under permuted attention (J&W §4.2.1,
  Alg. 2) — ``random_permutations``, ``permutation_tvd``, ``pair_permutation_tvd``.
- :mod:`~hf_attn.methods.adversary`: k adversarial attention distributions and the ε-max JSD
  (J&W §4.2.2, Alg. 3, Eq. 1–2) — ``adversarial_attention``, ``pair_adversarial_attention``,
  ``adversary_objective``, ``best_feasible_adversary``.
- :mod:`~hf_attn.methods.integrated_gradients`: integrated gradients on the embeddings
  (Sundararajan et al. 2017, Eq. 1, §3) — ``integrated_gradients``, ``integrated_gradients_importance``.
- :mod:`~hf_attn.methods.eraser`: comprehensiveness, sufficiency and AOPC (DeYoung et al. 2020,
  §4) — ``eraser_scores``, ``aopc``, ``summarize_eraser``, ``rank_tokens``, ``erasure_variants``.

One-token texts: :mod:`~hf_attn.methods.one_token`, what every method and faithfulness metric gives a
text of one token (defined, needs the model's empty input, or undefined) and why — the one rule
``Explainer.explain``, ``Explainer.attributions``, the ERASER battery and the faithfulness table consult.

Helpers: :mod:`~hf_attn.models.masks` (real and attended tokens), :mod:`~hf_attn.methods.pair_query`
(a pair model with its hypothesis query fixed), :mod:`~hf_attn.methods.inputs` (checks of padded
token batches). Batching lives in :mod:`hf_attn.core.batching`.

Importing this package imports nothing else; import the method modules themselves.
"""
