"""One faithfulness table: every attribution method (rows) scored by every faithfulness metric
(columns) on one model and one set of texts, with each method's time and peak memory per sentence.

:func:`run_faithfulness` works on any adapter that keeps the adapter contract
(:class:`hf_attn.adapters.base.AttentionAdapter`). Methods that read transformer internals (flow,
attention norm, ALTI, value zeroing) are skipped for models that lack them, with the reason in
:attr:`FaithfulnessResult.skipped` (never silently).

Metrics (:mod:`hf_attn.core.faithfulness`):

- ``comprehensiveness`` ↑ / ``sufficiency`` ↓: ERASER AOPC over the bins ``fractions`` (DeYoung et
  al. 2020, §4): the text's top-k tokens deleted / the only ones kept (special tokens always kept;
  sequences shortened, not masked; ties by position; k = ceil(f·n) in [1, n]);
- ``soft_comprehensiveness`` ↑ / ``soft_sufficiency`` ↑: Soft-NC / Soft-NS (Zhao & Aletras 2023,
  §3) as the authors' code computes them (``casszhao/multilingual-faith``,
  ``src/models/bert_components.py`` and ``src/common_code/metrics.py``): each element of a text
  token's vector at the embedding layer's output kept with the token's min–max-normalised importance
  (sufficiency) or 1 − it (comprehensiveness), normalised by the null input (every input id 0 at
  the sentence's length; a decoder's read at its last token, where its head reads the sentence),
  clipped to [0, 1]. Special tokens are never masked (the authors' code masks them with their own
  normalised score). Each (sentence, method) draws its masks from a seed of the sentence's tokens
  and adds draws (doubling, up to ``soft_max_draws``) until the Monte-Carlo standard error of its
  own mean is within ``soft_stderr``; each cell reports the standard error of its mean and the
  draws per sentence. ``soft_variant="embedding"`` is the other measurement (the word embeddings
  masked, the text's embeddings zeroed as the null input, unclipped and unbounded);
- ``naopc_comprehensiveness`` ↑ / ``naopc_sufficiency`` ↓: normalised AOPC (Edin et al. 2024, §3):
  the AOPC over **every** k = 1..N of deleting the tokens in descending (comprehensiveness) or
  ascending (sufficiency) order of importance, rescaled by the lowest and highest AOPC of any
  ordering. Bounds exact by dynamic programming over subsets for short sentences, by the paper's
  beam search (§4, ranked by the AOPC itself) for longer ones, and for the longest the extremes over
  the table's own orderings; the method of each sentence is in ``metric_details["naopc"]``
  (:mod:`hf_attn.core.naopc`; the authors' code: ``JoakimEdin/naopc``, ``aopc/aopc/methods.py``);
- ``tau_loo`` ↑: Kendall τ-b with the ``leave_one_out`` row, the LOO-drop ŷ_c(x) − ŷ_c(x₋t) (Li et
  al. 2016 §3; the printed label says "τ with LOO-drop"). Not J&W's τ_loo, whose leave-one-out is
  the LOO-TVD TVD(ŷ(x₋t), ŷ(x)) (Jain & Wallace 2019 §4.1; :mod:`hf_attn.core.measure_names`);
- ``agreement``: the mean over the other methods of the mean Kendall τ-b with them (Krishna et al.
  2022's rank agreement); the full matrix is :attr:`FaithfulnessResult.agreement`.

Plausibility, the second axis (only with ``rationales=``, a human rationale per text:
:mod:`~hf_attn.batteries.faithfulness.plausibility`): ``auprc`` ↑, ``token_f1`` ↑ and ``iou_f1`` ↑ of
each method's word scores against the rationale, ERASER's token-level metrics (DeYoung et al. 2020,
``rationale_benchmark/metrics.py``); :meth:`FaithfulnessResult.two_axes` and
:meth:`FaithfulnessResult.plot_axes` set each method's comprehensiveness against its AUPRC, each
decided against the random floor by the paired test.

Every column reports its mean, interval, median, the sentences it covers and those where it is
undefined (``undefined``), and for every method a paired Wilcoxon test against the random floor
(``vs_random``). Rankings let ties share a rank and leave undefined values out.

Per sentence: every per-sentence value — each method's scores (the random floor's drawn from a
seed of the sentence's own tokens, Kernel SHAP's coalitions too), the ERASER and NAOPC AOPCs and
bounds, Soft-NC / Soft-NS with their draws, standard errors and null probability, τ with the
LOO-drop — is a function of the sentence, the model and the settings alone: the same alone, in any
order, in any batch and beside any other texts, up to float32 rounding where a forward shares a
batch with other rows (tests/test_faithfulness_per_sentence.py). What depends on the set of texts
is what summarises it: the cells' means, intervals and paired tests, the agreement matrix.

Sharing: every deletion input (ERASER variants of every method and bin, the NAOPC searches, the
full inputs) is a token tuple scored once (:class:`_ProbabilityCache`): identical inputs across
methods and bins run one forward; ``result.forwards`` counts requested and unique inputs.

Cost: seconds per sentence (wall clock of the method over all batches / sentences) and peak memory
per sentence: for each batch, the peak resident-set size above the level at the batch's start
(psutil, sampled every 5 ms in a thread; on CUDA ``torch.cuda.max_memory_allocated`` above the
start), divided by the batch's sentences and averaged over batches.

The pieces, one module each: :mod:`~hf_attn.batteries.faithfulness.settings` (rows, columns, settings),
:mod:`~hf_attn.batteries.faithfulness.methods` (running the methods),
:mod:`~hf_attn.batteries.faithfulness.inputs` (the texts and the shared probability cache),
:mod:`~hf_attn.batteries.faithfulness.erasure` and :mod:`~hf_attn.batteries.faithfulness.soft` (the columns),
:mod:`~hf_attn.batteries.faithfulness.table` (:func:`run_faithfulness`) and
:mod:`~hf_attn.batteries.faithfulness.result` (:class:`FaithfulnessResult`).
"""

from __future__ import annotations

from hf_attn.batteries.faithfulness.settings import (ATTENTION_FAMILY, COLUMNS,  # noqa: F401 (re-exported)
                                                     DEFAULT_METHODS, HIGHER_IS_BETTER, METHODS, METRICS,
                                                     NAOPC_PERTURBATIONS, PLAUSIBILITY_METRICS,
                                                     SOFT_VARIANTS, UNDEFINED, FaithfulnessSettings)
from hf_attn.batteries.faithfulness.inputs import _Instance  # noqa: F401 (re-exported)
from hf_attn.batteries.faithfulness.methods import (MethodRun, attribution_scores,  # noqa: F401 (re-exported)
                                                    length_groups, run_methods)
from hf_attn.batteries.faithfulness.erasure import erasure_scores, naopc_sizes  # noqa: F401 (re-exported)
from hf_attn.batteries.faithfulness.inputs import _sentence_generator  # noqa: F401 (re-exported)
from hf_attn.batteries.faithfulness.result import FaithfulnessResult  # noqa: F401 (re-exported)
from hf_attn.batteries.faithfulness.table import run_faithfulness  # noqa: F401 (re-exported)

__all__ = ["ATTENTION_FAMILY", "COLUMNS", "DEFAULT_METHODS", "METHODS", "METRICS", "PLAUSIBILITY_METRICS", "FaithfulnessResult", "FaithfulnessSettings",
           "MethodRun", "attribution_scores", "erasure_scores", "length_groups", "run_faithfulness", "run_methods"]
