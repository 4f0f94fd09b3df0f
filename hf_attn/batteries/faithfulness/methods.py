"""The table's rows: each attribution method as a function of the adapter and a batch, run over
length-sorted groups of texts with its time and peak memory per sentence; a method that does not
apply to the model is skipped with the reason."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from hf_attn.adapters.base import UnsupportedModelError
from hf_attn.adapters.interface import InterventionError
from hf_attn.core import deadline
from hf_attn.core.batching import padding_bounded_batches
from hf_attn.methods.one_token import TextRefused
from hf_attn.batteries.faithfulness.settings import METHODS, FaithfulnessSettings
from hf_attn.batteries.faithfulness.inputs import _real_scores, _sentence_generator, _trim


# the methods whose scores explain one class (the gradient family, the erasures, LRP, ALTI-Logit and captum's
# Kernel SHAP and DeepLift): the ones a target class or a contrastive foil applies to; the rest of the
# attention family explains no class
CLASS_METHODS = ("saliency", "gradient_x_input", "integrated_gradients", "leave_one_out", "alti_logit", "attnlrp",
                 "cp_lrp", "kernel_shap", "deeplift")


def _classes(batch, contrast) -> tuple:
    """``(target_class, foil_class)`` tensors for ``batch`` from ``contrast`` = ``(target, foil)`` class
    indices (None: the predicted class / no foil)."""
    target, foil = contrast or (None, None)
    device = batch.input_ids.device
    full = lambda c: None if c is None else torch.full((len(batch),), int(c), dtype=torch.long, device=device)  # noqa: E731
    return full(target), full(foil)


def _method_function(name: str, settings: FaithfulnessSettings, contrast=None):
    from hf_attn.methods import (adapter_integrated_gradients, alti, alti_logit, attention_flow, attention_norm,
                                 deletion, gradient_x_input, raw_attention, rollout, saliency, value_zeroing)

    if name == "random":
        return lambda adapter, batch: _random_scores(batch, settings)
    if name in ("kernel_shap", "deeplift"):  # the optional captum extra
        from hf_attn.methods.captum_attributions import captum_attribution, captum_available, deeplift_attribution

        reason = captum_available()
        if reason:
            raise ImportError(reason)
        if name == "deeplift":
            return lambda adapter, batch: deeplift_attribution(adapter, batch, *_classes(batch, contrast))
        return lambda adapter, batch: captum_attribution(adapter, batch, "kernel_shap", settings.shap_samples,
                                                         seed=settings.seed, target_class=_classes(batch, contrast)[0],
                                                         foil_class=_classes(batch, contrast)[1])
    target = settings.gradient_target
    if name == "integrated_gradients":
        return _IntegratedGradients(settings, contrast)
    if name in ("saliency", "gradient_x_input"):
        function = saliency.saliency if name == "saliency" else gradient_x_input.gradient_x_input
        return lambda adapter, batch: function(adapter, batch, *_classes(batch, contrast)[:1], target=target,
                                               foil_class=_classes(batch, contrast)[1])
    if name in ("attnlrp", "cp_lrp"):  # the explained logit (or the target's minus the foil's)
        return _LRP(name, contrast)
    if name == "alti_logit":  # the explained class's logit (or the target's minus the foil's)
        return lambda adapter, batch: alti_logit.alti_logit(adapter, batch, *_classes(batch, contrast))
    if name == "leave_one_out" and contrast is not None:
        return lambda adapter, batch: deletion.leave_one_out_deletion(adapter, batch, *_classes(batch, contrast))
    return {"attention": raw_attention.raw_attention, "rollout": rollout.rollout_importance,
            "attention_flow": lambda adapter, batch: attention_flow.attention_flow(
                adapter, batch, normalise=settings.flow_normalise, max_tokens=settings.flow_max_tokens),
            "attention_norm": attention_norm.attention_norm,
            "alti": alti.alti, "value_zeroing": value_zeroing.value_zeroing,
            "leave_one_out": deletion.leave_one_out_deletion}[name]


def _random_scores(batch, settings: FaithfulnessSettings) -> torch.Tensor:
    """The random floor ``(B, T)``: uniform scores on each row's real positions, drawn from a
    generator seeded by that row's own tokens and ``settings.seed``
    (:func:`~hf_attn.batteries.faithfulness.inputs._sentence_generator`), so a sentence's scores are
    the same alone, in any batch, in any order and beside any other texts; 0 on pads and special
    tokens."""
    real = batch.attention_mask.bool().cpu()
    ids = batch.input_ids.cpu()
    scores = torch.zeros(ids.shape, dtype=torch.float32)
    for r in range(len(batch)):
        generator = _sentence_generator(settings, "random", ids[r][real[r]].numpy(), "scores", 0)
        scores[r, real[r]] = torch.rand(int(real[r].sum()), generator=generator)
    scores = scores.to(batch.input_ids.device)
    return torch.where(batch.content, scores, torch.zeros((), device=scores.device))


class _IntegratedGradients:
    """The table's integrated gradients: each sentence's nodes refined from ``ig_steps`` until its
    completeness gap is within ``ig_target`` of |f(x) − f(x')| (or ``ig_max_steps``), per batch;
    each sentence's final result is kept for :meth:`completeness`. ``ig_rule="gauss-kronrod"``
    (nested, the default): n = ``ig_steps`` Gauss–Legendre nodes, then for the sentences that miss
    the target the (2n+1)-point Kronrod rule reusing those n gradients (n + 1 new nodes,
    :func:`hf_attn.methods.adapter_integrated_gradients.kronrod_refinement`), then Gauss–Legendre
    with 4n, 8n, … nodes; any other rule doubles its nodes from the start."""

    def __init__(self, settings: FaithfulnessSettings, contrast=None):
        self.settings, self.contrast = settings, contrast
        self.gaps, self.differences, self.steps, self.evaluated = [], [], [], []  # evaluated: gradients per sentence
        self.baseline_problem: str | None = None
        self.probed = False

    def __call__(self, adapter, batch):
        from hf_attn.methods.adapter_integrated_gradients import integrated_gradients_attribution, kronrod_refinement
        from hf_attn.methods.ig_baselines import baseline_problem

        s = self.settings
        if not self.probed:  # per model: does the baseline sit at the first normalisation's singular point?
            self.probed = True
            self.baseline_problem = baseline_problem(adapter, batch, s.ig_baseline)
        steps = s.ig_steps
        target_class, foil_class = _classes(batch, self.contrast)
        # keep the Gauss nodes' contributions for the Kronrod step (none without a target: no refinement)
        nested = s.ig_rule == "gauss-kronrod" and s.ig_target is not None and 2 * steps + 1 <= s.ig_max_steps
        result = integrated_gradients_attribution(adapter, batch, steps, s.ig_rule, target=s.gradient_target,
                                                  baseline=s.ig_baseline, target_class=target_class,
                                                  foil_class=foil_class, node_contributions=nested)
        attributions = result.attributions.clone()
        gap = result.completeness_gap.double().cpu().clone()
        difference = (result.target_input - result.target_baseline).double().cpu().clone()
        used = torch.full((len(batch),), steps)
        evaluated = used.clone()
        gauss, nodes = result.node_contributions, steps  # steps: the Gauss–Legendre level; nodes: the rule's
        # each refinement reuses the first pass's class and f(x), f(x'): no forward of the ends again
        target_class, ends = result.target_class, (result.target_input, result.target_baseline)
        while s.ig_target is not None and nodes < s.ig_max_steps:
            missing = (gap.abs() > s.ig_target * difference.abs()) & (gap.abs() > 1e-9)
            if not bool(missing.any()):
                break
            rows = missing.nonzero().flatten().tolist()
            settings = {"target": s.gradient_target, "baseline": s.ig_baseline,
                        "target_class": target_class[rows],  # the first pass's: never None here
                        "foil_class": None if foil_class is None else foil_class[rows],
                        "ends": tuple(v[torch.tensor(rows, device=v.device)] for v in ends)}
            if gauss is not None:  # n Gauss nodes → K(2n+1): n + 1 new (kept only where 2n + 1 is within the cap)
                again = kronrod_refinement(adapter, batch.select(rows), gauss[rows], **settings)
                gauss, steps, nodes, added = None, 2 * steps, 2 * steps + 1, steps + 1
            else:  # then (or for the other rules from the start) the doubling: 4n, 8n, … nodes from scratch
                gauss, steps = None, min(2 * steps, s.ig_max_steps)
                again = integrated_gradients_attribution(adapter, batch.select(rows), steps, s.ig_rule, **settings)
                nodes = added = steps
            index = torch.tensor(rows)
            attributions[index.to(attributions.device)] = again.attributions.to(attributions.dtype)
            gap[index] = again.completeness_gap.double().cpu()
            difference[index] = (again.target_input - again.target_baseline).double().cpu()
            used[index] = nodes
            evaluated[index] += added
        self.gaps.append(gap.numpy())
        self.differences.append(difference.numpy())
        self.steps.append(used.numpy())
        self.evaluated.append(evaluated.numpy())
        return attributions

    def completeness(self) -> dict:
        """Mean |gap|, mean |f(x) − f(x')|, the share of sentences within 1 % (and within the
        target), the nodes used (mean, max) and the sentences that missed the target at the cap; on a
        model where the baseline sits at its first normalisation's singular point
        (:func:`hf_attn.methods.ig_baselines.baseline_problem`), why the target cannot be met
        (``ig_baseline_problem``) and the baseline that avoids it (``ig_baseline_offered``)."""
        gaps, differences = np.abs(np.concatenate(self.gaps)), np.abs(np.concatenate(self.differences))
        steps = np.concatenate(self.steps)
        s = self.settings
        within = gaps <= np.maximum(0.01 * differences, 1e-9)
        out = {"completeness_gap_mean_abs": float(gaps.mean()), "output_difference_mean_abs": float(differences.mean()),
               "completeness_within_1pct_share": float(np.mean(within)),
               "ig_steps_mean": float(steps.mean()), "ig_steps_max": int(steps.max()),
               # the work: gradients evaluated per sentence (the nested rule's reused nodes counted once)
               "ig_gradients_mean": float(np.concatenate(self.evaluated).mean())}
        if s.ig_target is not None:
            met = gaps <= np.maximum(s.ig_target * differences, 1e-9)
            out |= {"ig_target": s.ig_target, "ig_target_missed": int((~met).sum())}
        if self.baseline_problem:  # this model: the target cannot be met from this baseline, and which can
            from hf_attn.methods.ig_baselines import OFFERED

            out |= {"ig_baseline": s.ig_baseline, "ig_baseline_problem": self.baseline_problem}
            if s.ig_baseline != OFFERED:
                out["ig_baseline_offered"] = OFFERED
        return out


class _LRP:
    """AttnLRP / CP-LRP (:mod:`hf_attn.methods.lrp`) keeping each sentence's conservation ratio
    Σ_t R_t / z_c, keyed by its real token ids, for :meth:`conservation`."""

    def __init__(self, name: str, contrast=None):
        self.name, self.contrast, self.ratios = name, contrast, {}

    def __call__(self, adapter, batch):
        from hf_attn.methods.lrp import RULES, lrp

        result = lrp(adapter, batch, RULES[self.name], *_classes(batch, self.contrast))
        for r, ratio in enumerate(result.ratio.tolist()):
            self.ratios[_row_key(batch, r)] = ratio
        return result.relevance

    def conservation(self, full_batch) -> dict:
        """Per sentence of ``full_batch`` (in its order) Σ_t R_t / z_c, with its mean, median, range and
        the share within 1 % of 1 (the bias terms, added position embeddings and, for AttnLRP, the
        softmax rule's bias term are not conserved)."""
        ratios = np.array([self.ratios.get(_row_key(full_batch, i), np.nan) for i in range(len(full_batch))])
        known = ratios[np.isfinite(ratios)]
        if not len(known):
            return {}
        return {"conservation_ratio_mean": float(known.mean()), "conservation_ratio_median": float(np.median(known)),
                "conservation_ratio_min": float(known.min()), "conservation_ratio_max": float(known.max()),
                "conservation_within_1pct_share": float(np.mean(np.abs(known - 1) <= 0.01)),
                "conservation_ratio_per_sentence": [float(r) for r in ratios]}


def _row_key(batch, r: int) -> bytes:
    return batch.input_ids[r][batch.attention_mask[r].bool()].cpu().numpy().tobytes()


class _SharedGradient:
    """Saliency (‖∂f/∂e_t‖₂) and gradient × input (Σ_d e ∂f/∂e) of a batch from one forward +
    backward: the saliency pass keeps gradient × input's scores per batch (keyed by its token ids),
    the gradient × input pass (``reuse``) reads them."""

    def __init__(self, target: str, store: dict, reuse: bool = False, contrast=None):
        self.target, self.store, self.reuse, self.contrast = target, store, reuse, contrast

    def __call__(self, adapter, batch):
        from hf_attn.methods.gradient_x_input import gradient_times_input
        from hf_attn.methods.saliency import embedding_gradient, saliency_from_gradient

        key = (tuple(batch.input_ids.shape), batch.input_ids.cpu().numpy().tobytes())
        if self.reuse and key in self.store:
            return self.store.pop(key)
        target_class, foil_class = _classes(batch, self.contrast)
        embeddings, grad, _ = embedding_gradient(adapter, batch, target_class, self.target, foil_class)
        times_input = gradient_times_input(batch, embeddings, grad)
        if self.reuse:
            return times_input
        self.store[key] = times_input.detach()
        return saliency_from_gradient(batch, grad)


ROLLOUT_OF_ONE_LAYER = ("one attention layer over a recurrent, convolutional or averaging encoder: its rollout is "
                        "the attention row itself (the attention method)")


def _refusal(adapter, name: str, contrast=None) -> str | None:
    """Why ``name`` is not run on ``adapter`` before trying it (None: try it); ``contrast`` =
    ``(target class, foil class)``: a method that cannot explain the asked class is not run."""
    if name == "rollout" and getattr(adapter, "num_layers", 1) == 1 and not hasattr(adapter, "_model_call"):
        return ROLLOUT_OF_ONE_LAYER
    if contrast is not None and name not in CLASS_METHODS and name != "random":
        target, foil = contrast
        if foil is not None:
            return "explains no class (its scores are the same for every class): no contrastive form"
    return None


def attribution_scores(adapter, batch, method: str, settings: FaithfulnessSettings | None = None) -> torch.Tensor:
    """``(B, T)`` scores of one method of :data:`METHODS` (the battery's rows: each method's paper
    and equation are in its module under :mod:`hf_attn.methods`) on ``batch``, 0 on pads and special
    tokens. ``settings``: the method knobs of :class:`FaithfulnessSettings` (``ig_steps``,
    ``ig_rule``, ``shap_samples``, ``seed``). Raises :class:`UnsupportedModelError` with the reason
    where the method does not apply to the model (the battery's "skipped"), ``ImportError`` with the
    install hint for a captum method without captum, ``ValueError`` for an unknown ``method``."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}, got {method!r}")
    reason = _refusal(adapter, method)
    if reason:
        raise UnsupportedModelError(reason)
    return _method_function(method, settings or FaithfulnessSettings())(adapter, batch)


class _PeakMemory:
    """Peak memory above the level at entry (module docstring: psutil RSS sampled in a thread, or
    CUDA's allocator peak)."""

    def __init__(self, device):
        self.cuda = getattr(device, "type", str(device)) == "cuda"
        self.peak = 0

    def __enter__(self):
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
            self.start = torch.cuda.memory_allocated()
            return self
        import psutil

        self.process = psutil.Process()
        self.start = self.process.memory_info().rss
        self.top = self.start
        self.running = True

        def sample():
            while self.running:
                self.top = max(self.top, self.process.memory_info().rss)
                time.sleep(0.005)
        self.thread = threading.Thread(target=sample, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            self.peak = torch.cuda.max_memory_allocated() - self.start
            return False
        self.running = False
        self.thread.join()
        self.top = max(self.top, self.process.memory_info().rss)
        self.peak = self.top - self.start
        return False


@dataclass
class MethodRun:
    """Every method's scores on a batch of texts: ``scores[method]`` per text its scores over the
    text's real positions (specials included, 0 there); ``cost``, ``skipped`` as in
    :class:`FaithfulnessResult`; ``padding``: padded / real tokens of the method batches."""

    scores: dict
    cost: dict
    skipped: dict
    padding: float
    undefined: dict = field(default_factory=dict)  # method → {text index: why its scores there are NaN}


def length_groups(full_batch, budget: int) -> list[np.ndarray]:
    """The texts of ``full_batch`` in groups of similar length, whatever order the caller gave
    (:func:`hf_attn.core.batching.padding_bounded_batches`: at most ``budget`` padded tokens and
    1.1 padded tokens per real one; each group is trimmed to its longest text)."""
    return padding_bounded_batches(full_batch.attention_mask.sum(1).cpu().numpy(), budget)


def run_methods(adapter, full_batch, settings: FaithfulnessSettings, progress: bool = False,
                groups=None, time_budget: float | None = None, contrast=None) -> MethodRun:
    """Run ``settings.methods`` on ``full_batch`` (any order, any lengths) in length-sorted groups of
    at most ``settings.batch_tokens`` padded tokens, each trimmed to its longest text; the table,
    ``Explainer.attributions`` and the Space all go through here. A method that does not apply is
    in ``skipped`` with the reason. With ``time_budget`` (seconds; or a budget the caller set with
    :func:`hf_attn.core.deadline.time_budget`) the budget binds inside the running methods too
    (:mod:`hf_attn.core.deadline`): a method that runs out, or whose remaining steps would not fit
    in the time left, stops and is in ``skipped`` as "not run: budget" with the reason, as are the
    methods after the budget is spent; no partial scores are kept (an interactive request stays
    bounded). ``contrast`` = ``(target class, foil class)`` (None: the predicted class, no foil):
    the class-explaining methods (:data:`CLASS_METHODS`) explain the target, or why the target rather
    than the foil; the attention family (no class) is skipped under a foil, captum's rows under either."""
    with deadline.time_budget(time_budget, "this request"):
        return _run_methods(adapter, full_batch, settings, progress, groups, contrast)


def _run_methods(adapter, full_batch, settings: FaithfulnessSettings, progress: bool, groups,
                 contrast=None) -> MethodRun:
    groups = length_groups(full_batch, settings.batch_tokens) if groups is None else groups
    count = len(full_batch)
    real_tokens = int(full_batch.attention_mask.sum())
    padded = sum(len(g) * int(full_batch.attention_mask[torch.as_tensor(g)].sum(1).max()) for g in groups)
    scores: dict[str, list] = {}
    cost, skipped, undefined = {}, {}, {}
    shared = {}  # saliency and gradient × input from one backward: group → gradient × input's scores
    both = {"saliency", "gradient_x_input"} <= set(settings.methods)
    for name in settings.methods:
        reason = _refusal(adapter, name, contrast)
        budget = deadline.current()
        if not reason and budget is not None and budget.remaining() <= 0:
            reason = (f"not run: budget: {budget.what}'s time budget of {budget.seconds:g} s was spent by the "
                      "methods before it")
        if reason:
            skipped[name] = reason
            continue
        try:
            function = (_method_function(name, settings) if contrast is None
                        else _method_function(name, settings, contrast))
        except ImportError as error:
            skipped[name] = str(error)
            continue
        if both and name == "saliency":
            function = _SharedGradient(settings.gradient_target, shared, contrast=contrast)
        elif both and name == "gradient_x_input" and "saliency" in scores:
            function = _SharedGradient(settings.gradient_target, shared, reuse=True, contrast=contrast)
        per_instance: list = [None] * count
        seconds, memory = 0.0, []
        started = time.perf_counter()
        try:
            for group in groups:  # the groups differ in length: each method paces its own (uniform) steps
                deadline.check()
                batch = full_batch.select(group.tolist())
                batch = _trim(batch, int(batch.attention_mask.sum(1).max()), adapter)
                with _PeakMemory(adapter.device) as peak:
                    start = time.perf_counter()
                    try:
                        values = function(adapter, batch)
                    except (UnsupportedModelError, InterventionError):  # the model's, not a text's: skipped
                        raise
                    except ValueError as error:  # one text's failure must not fail the others: each alone
                        values = _one_by_one(function, adapter, batch, error, undefined.setdefault(name, {}),
                                             group.tolist())
                    if adapter.device.type == "cuda":
                        torch.cuda.synchronize()
                    seconds += time.perf_counter() - start
                memory.append(peak.peak / len(group) / 2**20)
                for i, row in zip(group, _real_scores(batch, values)):
                    per_instance[i] = row
        except (UnsupportedModelError, InterventionError) as error:
            skipped[name] = f"{type(error).__name__}: {error}"
            continue
        except deadline.BudgetExceeded as error:  # nothing of this method is kept
            skipped[name] = f"not run: budget: {error} (stopped after {time.perf_counter() - started:.1f} s)"
            continue
        failures = list(undefined.get(name, {}).values())
        if len(failures) == count and not all(isinstance(e, TextRefused) for _, e in failures):
            raise failures[0][1]  # it failed on every text: the method's error, not a text's
        if progress:
            print(f"{name}: {seconds:.1f} s")
        scores[name] = per_instance
        cost[name] = {"seconds": seconds, "seconds_per_sentence": seconds / count,
                      "peak_mb_per_sentence": float(np.mean(memory)) if memory else 0.0}
        if isinstance(function, _SharedGradient):
            cost[name]["shared_backward"] = "saliency and gradient_x_input from one forward + backward"
        if isinstance(function, _IntegratedGradients):
            cost[name] |= function.completeness()
        if isinstance(function, _LRP):
            cost[name] |= function.conservation(full_batch)
    undefined = {name: {i: why for i, (why, _) in rows.items()} for name, rows in undefined.items()
                 if rows and name in scores}
    return MethodRun(scores, cost, skipped, padded / max(real_tokens, 1), undefined)


def _one_by_one(function, adapter, batch, error: ValueError, failed: dict, indices: list[int]) -> torch.Tensor:
    """``function`` on each text of ``batch`` alone after it raised ``error`` on the whole batch: a text
    that fails alone gets NaN scores and its reason in ``failed`` (text index → reason). A method
    that fails on every text of the table raises its first error (:func:`run_methods`), unless every
    failure is a refusal of that text (:class:`hf_attn.methods.one_token.TextRefused`)."""
    out = torch.full(batch.input_ids.shape, float("nan"), dtype=torch.float32, device=batch.input_ids.device)
    if len(batch) == 1:
        failed[indices[0]] = (f"{type(error).__name__}: {error}", error)
        return out
    for r in range(len(batch)):
        one = batch.select([r])
        one = _trim(one, int(one.attention_mask.sum()), adapter)
        try:
            values = function(adapter, one)
        except (UnsupportedModelError, InterventionError):
            raise
        except ValueError as own:
            failed[indices[r]] = (f"{type(own).__name__}: {own}", own)
            continue
        row = torch.zeros(batch.input_ids.shape[1], dtype=torch.float32, device=out.device)
        real = one.attention_mask[0].bool()
        row[batch.attention_mask[r].bool()] = values[0][real].float().to(out.device)
        out[r] = row
    return out
