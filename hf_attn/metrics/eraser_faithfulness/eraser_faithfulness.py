"""ERASER comprehensiveness / sufficiency / AOPC (DeYoung et al. 2020, §4) summarised over a
dataset. Model-free: takes per-instance, per-bin scores computed by
``hf_attn.faithfulness.eraser_scores``. Thin wrapper over ``summarize_eraser`` of
``_hf_attn_measures.py``, shipped beside this script: the copy of
``hf_attn.faithfulness.summarize_eraser``, so the module runs without hf_attn."""

import datasets
import evaluate
# (every top-level import is listed so that evaluate checks it is installed)
import numpy

from ._hf_attn_measures import DEFAULT_FRACTIONS, report_undefined, summarize_eraser

_DESCRIPTION = """ERASER faithfulness of a per-token importance ranking (attention, gradient,
leave-one-out, integrated gradients, ...). Per instance and bin k (a fraction of its tokens):
comprehensiveness = p_c(x) - p_c(x without its top-k tokens), sufficiency = p_c(x) - p_c(top-k
tokens only), c the class predicted for the full input, tokens removed (not masked). AOPC is the
mean over the bins (ERASER code; `include_zero_bin=True` divides by |B|+1 as the paper's printed
formula). High comprehensiveness and low sufficiency = a faithful ranking."""

_KWARGS = """
Args:
    comprehensiveness: per instance, a list with one score per bin (probability differences in
        [-1, 1]; NaN or None = undefined: the instance is left out of the aggregates and counted in
        `undefined`; inf is refused).
    sufficiency: per instance, a list with one score per bin (same range).
    fractions: the bins (default [0.01, 0.05, 0.1, 0.2, 0.5]), each in (0, 1]; the score lists
        need one value per bin. Anything else raises ValueError naming the argument.
    include_zero_bin: AOPC normaliser |B|+1 instead of |B| (default False).
Returns:
    comprehensiveness_aopc, sufficiency_aopc (means of the per-instance AOPC) with their standard
    errors (*_aopc_stderr; None for one instance), comprehensiveness and sufficiency (per-bin
    means), fractions, num_instances, comprehensiveness_n / sufficiency_n (the instances the
    aggregates cover, when some are left out), undefined ({name: why} for every value that is None
    and every score with instances left out).
"""

_CITATION = """@inproceedings{deyoung-etal-2020-eraser,
  title = {{ERASER}: A Benchmark to Evaluate Rationalized {NLP} Models},
  author = {DeYoung, Jay and Jain, Sarthak and Rajani, Nazneen Fatema and Lehman, Eric and
            Xiong, Caiming and Socher, Richard and Wallace, Byron C.},
  booktitle = {Proceedings of ACL 2020},
  year = {2020}, pages = {4443--4458}}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class EraserFaithfulness(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS,
            features=datasets.Features({
                "comprehensiveness": datasets.Sequence(datasets.Value("float64")),
                "sufficiency": datasets.Sequence(datasets.Value("float64"))}),
            reference_urls=["https://aclanthology.org/2020.acl-main.408/",
                            "https://github.com/jayded/eraserbenchmark"])

    def _compute(self, comprehensiveness, sufficiency, fractions=None, include_zero_bin=False):
        fractions = list(DEFAULT_FRACTIONS) if fractions is None else list(fractions)
        out = summarize_eraser(comprehensiveness, sufficiency, fractions, bool(include_zero_bin))
        left_out = out.pop("undefined_instances", {})
        reasons = {}
        for name in ("comprehensiveness", "sufficiency"):
            covered = out.get(f"{name}_n", out["num_instances"])
            if covered < 2:  # one instance has no spread: its standard error is undefined, not 0
                out[f"{name}_aopc_stderr"] = float("nan")
            reasons[f"{name}_aopc_stderr"] = f"a standard error needs 2 instances, {covered} given"
            reasons[f"{name}_aopc"] = reasons[f"{name}[]"] = f"every instance's {name} has an undefined bin"
        result = report_undefined(out, reasons)
        for name, positions in left_out.items():  # left out of the aggregates: counted, with the reason
            shown = ", ".join(str(i) for i in positions[:10]) + (", …" if len(positions) > 10 else "")
            result["undefined"][f"{name} instances"] = (
                f"{len(positions)} of {out['num_instances']} instance(s) have an undefined bin (NaN or None, e.g. "
                f"a one-token text on a model without an empty input) and are left out of the aggregates "
                f"(positions {shown})")
        return result
