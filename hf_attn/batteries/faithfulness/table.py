"""One faithfulness table, step by step: the texts encoded and scored once, every method's scores,
then each family of columns, the agreement between methods and the paired tests against the
random floor."""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, replace

import numpy as np

from hf_attn.core import faithfulness as fm
from hf_attn.methods.eraser import tokens_per_fraction
from hf_attn.methods.one_token import empty_input_refusal, one_token_refusal, reasons_count, undefined_rows
from hf_attn.batteries.faithfulness.result import FaithfulnessResult, _paired
from hf_attn.batteries.faithfulness.settings import (COLUMNS, METHODS, PLAUSIBILITY_METRICS, UNDEFINED,
                                                     FaithfulnessSettings)
from hf_attn.batteries.faithfulness.methods import _PeakMemory, length_groups, run_methods
from hf_attn.batteries.faithfulness.inputs import _ProbabilityCache, _instances
from hf_attn.batteries.faithfulness.erasure import _cached_leave_one_out, _erasure, _naopc_columns
from hf_attn.batteries.faithfulness.soft import SOFT_COLUMNS, _soft_columns, cell_stderr


def _mask_token(adapter) -> int:
    """The tokenizer's mask token id (NAOPC's "mask" perturbation), or a one-line refusal."""
    tokenizer = getattr(adapter, "tokenizer", None)
    mask_id = getattr(tokenizer, "mask_token_id", None)
    if mask_id is None:
        raise ValueError("naopc_perturbation='mask' needs a tokenizer with a mask token; this model's has none "
                         "(use naopc_perturbation='delete')")
    return int(mask_id)


@dataclass
class _Inputs:
    """The texts as the table scores them: the encoded batch, one :class:`_Instance` per text, its
    length groups, the pad id, the shared probability cache and the model's prediction (class and
    probability) on every full text."""

    texts: list
    full_batch: object
    instances: list
    groups: list
    pad: int
    cache: _ProbabilityCache
    predicted: np.ndarray
    p_full: np.ndarray
    empty_refusal: str | None = None  # why a text without special tokens has no empty input (None: it has one)


def _table_inputs(adapter, texts, settings: FaithfulnessSettings) -> _Inputs:
    """``texts`` encoded and each full text scored once; a refusal when a text has no tokens of its own."""
    if isinstance(texts, str) or not len(texts):
        raise ValueError("texts must be a non-empty list of strings")
    texts = list(texts)
    full_batch = adapter.encode(texts)
    keep = full_batch.content.any(1).cpu()
    if not bool(keep.all()):
        dropped = [i for i, k in enumerate(keep.tolist()) if not k]
        raise ValueError(f"texts {dropped[:5]} have no tokens of their own (only special tokens): nothing to rank")
    instances = _instances(adapter, full_batch)
    groups = length_groups(full_batch, settings.batch_tokens)
    pad = int(getattr(adapter, "pad_id", 0))
    cache = _ProbabilityCache(adapter, max(settings.batch_tokens * 4, 2048))
    full = cache.get([tuple(int(t) for t in i.tokens) for i in instances])
    predicted = full.argmax(1)
    return _Inputs(texts, full_batch, instances, groups, pad, cache, predicted,
                   full[np.arange(len(instances)), predicted], empty_input_refusal(adapter))


def _method_scores(adapter, inputs: _Inputs, settings: FaithfulnessSettings, progress: bool
                   ) -> tuple[dict, dict, dict, dict]:
    """``(scores, cost, skipped, failed)`` of the requested methods, in the requested order (``failed``:
    method → {text: reason} of the texts it failed on alone, NaN in its scores). Leave-one-out goes
    through the erasure cache: its deletions are the k = 1 erasures of every method."""
    runner = replace(settings, methods=tuple(m for m in settings.methods if m != "leave_one_out") or ("random",))
    run = run_methods(adapter, inputs.full_batch, runner, progress=progress, groups=inputs.groups)
    scores, cost, skipped = run.scores, run.cost, run.skipped
    if "leave_one_out" in settings.methods:
        count = len(inputs.instances)
        with _PeakMemory(adapter.device) as peak:
            start = time.perf_counter()
            scores["leave_one_out"] = _cached_leave_one_out(inputs.cache, inputs.instances, inputs.p_full,
                                                            inputs.predicted, inputs.pad, inputs.empty_refusal)
            seconds = time.perf_counter() - start
        cost["leave_one_out"] = {"seconds": seconds, "seconds_per_sentence": seconds / count,
                                 "peak_mb_per_sentence": peak.peak / count / 2**20,
                                 "shared_forwards": "deletions scored through the erasure inputs' cache"}
    if "random" not in settings.methods:
        scores.pop("random", None), cost.pop("random", None)
    return {m: scores[m] for m in settings.methods if m in scores}, cost, skipped, run.undefined


class _Columns:
    """The table being filled: per method and metric the summary cell (mean, interval, median, the
    undefined count) and the per-text values behind it, and per method and metric the reasons of
    the undefined texts (``reasons``). A text on which a method's scores are undefined
    (``undefined[method]``, :func:`hf_attn.methods.one_token.undefined_rows`) is undefined in every
    column of that method, with the method's reason; the aggregates leave undefined texts out and
    count them."""

    def __init__(self, methods: list[str], confidence: float, adapter=None, instances=(),
                 undefined: dict | None = None):
        self.table: dict = {m: {} for m in methods}
        self.per_metric: dict = {m: {} for m in methods}
        self.confidence = confidence
        self.adapter, self.instances = adapter, list(instances)
        self.undefined = undefined or {}
        self.reasons: dict = {m: {} for m in methods}  # method → metric → {reason: texts}

    def _reason(self, metric: str, i: int) -> str:
        """Why text ``i``'s ``metric`` is undefined when the computation gave NaN: the one-token rule
        for a text of one token, else the column's general cause."""
        inst = self.instances[i] if i < len(self.instances) else None
        if inst is not None and int(inst.content.sum()) == 1:
            reason = one_token_refusal(self.adapter, metric, bool((~inst.content).any()))
            if reason:
                return reason
        return UNDEFINED[metric]

    def add(self, method: str, metric: str, values, reasons=None) -> None:
        values = np.array(values, dtype=float)
        why: list = [None] * len(values)
        for i, reason in enumerate(self.undefined.get(method) or []):
            if reason is not None:
                values[i], why[i] = math.nan, f"{method}: {reason}"
        for i in np.flatnonzero(~np.isfinite(values)):
            if why[i] is None:
                why[i] = (reasons[i] if reasons is not None else None) or self._reason(metric, int(i))
        self.set(method, metric, values, reasons_count(why))

    def set(self, method: str, metric: str, values, counted: dict) -> None:
        """The cell of ``method`` × ``metric`` from its per-text ``values`` (NaN: undefined, already
        applied) and the ``{reason: texts}`` of its undefined texts."""
        values = np.asarray(values, dtype=float)
        self.per_metric[method][metric] = values
        finite = values[np.isfinite(values)]
        self.table[method][metric] = fm.mean_ci(values, self.confidence) | {
            "median": float(np.median(finite)) if len(finite) else math.nan,
            "undefined": int(len(values) - len(finite))}
        if counted:
            self.reasons[method][metric] = dict(counted)


def _erasure_cells(columns: _Columns, inputs: _Inputs, scores: dict, settings: FaithfulnessSettings) -> None:
    """ERASER comprehensiveness and sufficiency (AOPC over ``settings.fractions``) of every method."""
    instances, predicted = inputs.instances, inputs.predicted
    sizes = np.array([int(i.content.sum()) for i in instances])
    counts = tokens_per_fraction(sizes, settings.fractions)
    rows = np.arange(len(instances))
    # a bin that removes every token of a text without special tokens reads the model's empty input:
    # none on a model that would read zero tokens (hf_attn.methods.one_token), so that bin is undefined
    framed = np.array([bool((~i.content).any()) for i in instances])
    emptied = (counts == sizes[:, None]) & ~framed[:, None] & (inputs.empty_refusal is not None)
    reasons = [inputs.empty_refusal if e else None for e in emptied.any(1)]
    for method, content_scores in scores.items():
        p_removed, p_kept = _erasure(inputs.cache, instances, content_scores, counts, inputs.pad)
        comp = fm.erasure_differences(inputs.p_full, p_removed[rows, :, predicted])
        comp[emptied] = math.nan
        suff = fm.erasure_differences(inputs.p_full, p_kept[rows, :, predicted])
        columns.add(method, "comprehensiveness", fm.aopc(comp), reasons)
        columns.add(method, "sufficiency", fm.aopc(suff))


def _soft_cells(columns: _Columns, adapter, inputs: _Inputs, scores: dict, settings: FaithfulnessSettings
                ) -> dict | None:
    """Soft-NC / Soft-NS of every method when asked for (Zhao & Aletras 2023 §3), each sentence's value
    the mean over its own draws, added until its own Monte-Carlo standard error is within
    ``soft_stderr`` (:func:`~hf_attn.batteries.faithfulness.soft._soft_columns`). Each cell records
    the Monte-Carlo standard error of its mean over the sentences it covers (``mc_stderr``,
    √(Σ_i se_i²) / n) and the draws per sentence (``draws_mean``, ``draws_max``); returns what
    ``metric_details["soft"]`` records (None: not asked for): per method the draws and per column
    the standard error of every sentence, the null probabilities, the largest standard error of a
    cell and of a sentence, and the sentences that stopped at ``soft_max_draws`` above the target."""
    if not set(SOFT_COLUMNS) & set(settings.metrics):
        return None
    if settings.soft_variant == "reference" and not hasattr(adapter, "logits_with_embedding_output"):
        raise ValueError(f"{type(adapter).__name__} cannot reach its model's embedding-layer output "
                         "(logits_with_embedding_output): use soft_variant='embedding' or leave the soft metrics out")
    methods = list(scores)
    lengths = np.array([len(i.tokens) for i in inputs.instances])
    soft = _soft_columns(adapter, inputs.full_batch, inputs.instances, inputs.groups, lengths, scores, methods,
                         inputs.predicted, inputs.p_full, settings)
    from hf_attn.batteries.faithfulness.soft import EQUAL_SCORES

    for method in methods:
        reasons = [EQUAL_SCORES if soft["defined"][i] and soft["unranked"][method][i] else None
                   for i in range(len(lengths))]
        for metric, values in soft["columns"][method].items():
            columns.add(method, metric, values, reasons)
    return soft_summary(columns, soft, methods, settings)


def soft_summary(columns: _Columns, soft: dict, methods: list, settings: FaithfulnessSettings) -> dict:
    """The soft cells' Monte-Carlo standard errors and draws (added to ``columns``, whose soft values
    are set) and ``metric_details["soft"]`` from ``soft``: per method the draws (``draws``) and per
    column the standard error of every sentence (``stderr``), the null probabilities (``null``), the
    ``seconds`` and ``forwards``."""
    cells, missed = {}, 0
    wanted = [c for c in SOFT_COLUMNS if c in settings.metrics]
    for method in methods:
        draws = np.asarray(soft["draws"][method])
        drawn = draws > 0
        for metric in SOFT_COLUMNS:
            if metric not in columns.per_metric[method]:  # a merged table keeps only the requested columns
                continue
            covered = np.isfinite(columns.per_metric[method][metric])
            errors = np.asarray(soft["stderr"][method][metric], dtype=float)
            cells[(method, metric)] = cell_stderr(errors[covered])
            columns.table[method][metric] |= {
                "mc_stderr": cells[(method, metric)],
                "draws_mean": float(draws[covered].mean()) if covered.any() else math.nan,
                "draws_max": int(draws[covered].max()) if covered.any() else 0}
        errors = np.stack([np.asarray(soft["stderr"][method][c], dtype=float) for c in wanted])
        missed += int((drawn & (errors > settings.soft_stderr).any(0)).sum())  # NaN (one draw): not estimated
    every_draws = np.concatenate([np.asarray(soft["draws"][m])[np.asarray(soft["draws"][m]) > 0] for m in methods])
    sentence_errors = np.concatenate([np.asarray(soft["stderr"][m][c], dtype=float) for m in methods for c in wanted])
    finite = [v for (_, c), v in cells.items() if c in wanted and math.isfinite(v)]
    return {"variant": settings.soft_variant, "seconds": soft["seconds"], "target_stderr": settings.soft_stderr,
            "draws_mean": float(every_draws.mean()) if len(every_draws) else math.nan,
            "draws_max": int(every_draws.max()) if len(every_draws) else 0,
            "missed_target": missed, "forwards": soft["forwards"],
            "max_mc_stderr": max(finite) if finite else math.nan,
            "max_sentence_stderr": float(np.nanmax(sentence_errors)) if np.isfinite(sentence_errors).any()
            else math.nan,
            "draws": {m: np.asarray(soft["draws"][m]).tolist() for m in methods},
            "stderr": {m: {c: np.asarray(soft["stderr"][m][c], dtype=float).tolist() for c in SOFT_COLUMNS}
                       for m in methods},
            "null_probability": np.asarray(soft["null"], dtype=float).tolist()}


def _naopc_cells(columns: _Columns, adapter, inputs: _Inputs, scores: dict, settings: FaithfulnessSettings
                 ) -> dict | None:
    """Normalised AOPC of every method when asked for; returns ``metric_details["naopc"]`` (None: not
    asked for)."""
    if not (settings.naopc_beam > 0 and {"naopc_comprehensiveness", "naopc_sufficiency"} & set(settings.metrics)):
        return None
    mask_id = _mask_token(adapter) if settings.naopc_perturbation == "mask" else None
    methods = list(scores)
    naopc = _naopc_columns(inputs.cache, inputs.instances, scores, methods, inputs.p_full, inputs.predicted,
                           settings, inputs.pad, mask_id)
    for method in methods:
        for metric, values in naopc["columns"][method].items():
            columns.add(method, metric, values)
    return naopc["info"]


def _content_matrix(rows: list, masks: list) -> tuple[np.ndarray, np.ndarray]:
    """One method's scores over the texts' content tokens, left-aligned and zero-padded, with the mask
    of real entries: ``(N, longest)`` each."""
    width = max(int(m.sum()) for m in masks)
    out = np.zeros((len(masks), width))
    mask = np.zeros((len(masks), width), bool)
    for i, (row, m) in enumerate(zip(rows, masks)):
        out[i, :m.sum()] = row[m]
        mask[i, :m.sum()] = True
    return out, mask


def _agreement_cells(columns: _Columns, scores: dict, masks: list, settings: FaithfulnessSettings) -> dict:
    """The rank agreement (mean Kendall τ-b) of every pair of methods; per method τ with the
    leave-one-out drop, the LOO-drop (``tau_loo``), and its mean agreement with the others
    (``agreement``). Returns the full matrix."""
    methods = list(scores)
    dense = {m: _content_matrix(scores[m], masks) for m in methods}
    agreement: dict = {a: {} for a in methods}
    for a in methods:
        for b in methods:
            if a != b:
                tau = fm.rank_agreement(dense[a][0], dense[b][0], dense[a][1])
                with np.errstate(invalid="ignore"):
                    agreement[a][b] = float(np.nanmean(tau)) if np.isfinite(tau).any() else math.nan
    for method in methods:
        if "leave_one_out" in dense and method != "leave_one_out" and "tau_loo" in settings.metrics:
            columns.add(method, "tau_loo",
                        fm.rank_agreement(dense[method][0], dense["leave_one_out"][0], dense[method][1]))
        others = [agreement[method][b] for b in methods if b != method and b != "random"
                  and not math.isnan(agreement[method][b])]
        columns.table[method]["agreement"] = {"mean": float(np.mean(others)) if others else math.nan,
                                              "low": math.nan, "high": math.nan, "n": len(others)}
    return agreement


def _paired_tests(columns: _Columns, methods: list[str], settings: FaithfulnessSettings) -> dict | None:
    """Every method against the random floor on every column (``vs_random`` in its cells); returns
    every pair on comprehensiveness (``metric_details["paired"]``, so the sentence can be rebuilt
    from results.json alone), None without that column."""
    per_metric = columns.per_metric
    if "random" in per_metric:
        for method in methods:
            if method == "random":
                continue
            for metric, values in per_metric[method].items():
                if metric in per_metric["random"]:
                    columns.table[method][metric]["vs_random"] = _paired(values, per_metric["random"][metric])
    if "comprehensiveness" not in settings.metrics:
        return None
    return {"comprehensiveness": {
        a: {b: _paired(per_metric[a]["comprehensiveness"], per_metric[b]["comprehensiveness"])
            for b in methods if b != a} for a in methods}}


def _result(adapter, inputs: _Inputs, settings: FaithfulnessSettings, scores: dict, cost: dict, skipped: dict,
            columns: _Columns, agreement: dict, extra: dict) -> FaithfulnessResult:
    """The filled table as a :class:`FaithfulnessResult`, only the requested columns kept."""
    cache = inputs.cache
    forwards = {"requested": cache.requested, "unique": len(cache.store),
                "saved_share": 1 - len(cache.store) / max(cache.requested, 1)}
    return _result_from(adapter, inputs.texts, inputs.instances, settings, scores, cost, skipped, columns, agreement,
                        extra, forwards)


def _result_from(adapter, texts: list, instances: list, settings: FaithfulnessSettings, scores: dict, cost: dict,
                 skipped: dict, columns: _Columns, agreement: dict, extra: dict, forwards: dict) -> FaithfulnessResult:
    """:func:`_result` from its parts (also what merging shards gives)."""
    methods = list(scores)
    wanted = set(settings.metrics) - (set() if "plausibility" in extra else set(PLAUSIBILITY_METRICS))
    table = {m: {k: v for k, v in row.items() if k in wanted} for m, row in columns.table.items()}
    per_metric = {m: {k: v for k, v in row.items() if k in wanted} for m, row in columns.per_metric.items()}
    describe = adapter.describe() if hasattr(adapter, "describe") else {}
    model = {"name": getattr(adapter, "name", type(adapter).__name__), **describe}
    return FaithfulnessResult(
        methods=methods, table=table, cost=cost, skipped=skipped, agreement=agreement, per_instance=per_metric,
        attributions={m: scores[m] for m in methods}, content=[i.content for i in instances],
        settings=asdict(settings) | {"descriptions": {m: METHODS[m][0] for m in settings.methods},
                                     "naopc_seconds": extra.get("naopc", {}).get("seconds", 0.0),
                                     "memory": "peak RSS above each batch's start (psutil, 5 ms samples) / sentences "
                                               "in the batch; CUDA: allocator peak"},
        model=model, num_instances=len(instances), forwards=forwards,
        texts=list(texts), metric_details=extra,
        undefined={m: columns.undefined.get(m) or [None] * len(instances) for m in methods},
        undefined_reasons={m: {k: v for k, v in columns.reasons.get(m, {}).items() if k in wanted} for m in methods})


def _checked_plausibility_request(texts, rationales, settings: FaithfulnessSettings):
    """The rationales checked against the texts (None: no plausibility columns); a plausibility
    column asked for by name without rationales, or rationales whose columns are all left out, is a
    one-line refusal."""
    asked = [m for m in settings.metrics if m in PLAUSIBILITY_METRICS]
    if rationales is None:
        if asked and tuple(settings.metrics) != COLUMNS:
            raise ValueError(f"metrics {asked} are plausibility columns: they need rationales (one 0/1 mark per "
                             "whitespace word of each text)")
        return None
    if not asked:
        raise ValueError(f"rationales were given but metrics {list(settings.metrics)} leave out every plausibility "
                         f"column ({', '.join(PLAUSIBILITY_METRICS)})")
    from hf_attn.batteries.faithfulness.plausibility import checked_rationales, k_fraction_of

    if isinstance(texts, str) or not len(texts):
        raise ValueError("texts must be a non-empty list of strings")
    checked = checked_rationales(list(texts), rationales)
    if settings.rationale_k_fraction is None:
        k_fraction_of(checked)  # no rationale marks a word: refused before any method runs
    return checked


def _with_given_rows(adapter, inputs: _Inputs, raw_scores: dict, cost: dict, given: dict, level: str) -> dict:
    """The table's rows with the caller's (:mod:`hf_attn.batteries.faithfulness.given`) before the
    random floor."""
    from hf_attn.batteries.faithfulness.given import given_cost, token_scores

    rows = token_scores(adapter, inputs.texts, inputs.instances, given, level)
    for name in rows:
        cost[name] = given_cost()
    order = [m for m in raw_scores if m != "random"] + list(rows) + (["random"] if "random" in raw_scores else [])
    merged = raw_scores | rows
    return {m: merged[m] for m in order}


def run_faithfulness(adapter, texts, settings: FaithfulnessSettings | None = None, progress: bool = False,
                     rationales=None, attributions=None, attributions_level: str = "token") -> FaithfulnessResult:
    """The faithfulness table of ``adapter``'s model on ``texts`` (the package docstring): the texts
    scored once, every method's scores, then the ERASER, soft and NAOPC columns, the agreement
    between methods and the paired tests against the random floor. ``rationales`` (one 0/1 mark per
    whitespace word of each text, a human rationale) adds the plausibility columns
    (:mod:`hf_attn.batteries.faithfulness.plausibility`). ``attributions`` (``{name: one array of
    scores per text}``, at ``attributions_level`` ``"token"`` or ``"word"``) adds rows computed
    elsewhere, scored like every method (:mod:`hf_attn.batteries.faithfulness.given`)."""
    from hf_attn.batteries.faithfulness.given import checked_attributions

    settings = settings or FaithfulnessSettings()
    rationales = _checked_plausibility_request(texts, rationales, settings)
    given = checked_attributions(attributions, len(texts) if hasattr(texts, "__len__") else 0)
    inputs = _table_inputs(adapter, texts, settings)
    raw_scores, cost, skipped, failed = _method_scores(adapter, inputs, settings, progress)
    if given:
        raw_scores = _with_given_rows(adapter, inputs, raw_scores, cost, given, attributions_level)
    methods = list(raw_scores)
    contents = [i.content for i in inputs.instances]
    # a text a method leaves undefined (NaN, e.g. a one-token text's leave-one-out on a model without an
    # empty input) is undefined in that method's columns, with the reason; its scores read as 0 below
    # only so the other texts' columns run in the same batches
    undefined = {m: undefined_rows(adapter, m, raw_scores[m], contents) for m in methods}
    for m, rows in failed.items():  # a text a method failed on alone: the error is its reason
        for i, reason in rows.items():
            undefined[m][i] = reason
    scores = {m: [np.where(np.isfinite(r), r, 0.0) for r in raw_scores[m]] for m in methods}
    columns = _Columns(methods, settings.confidence, adapter, inputs.instances, undefined)
    _erasure_cells(columns, inputs, scores, settings)
    extra = {}
    for key, details in (("soft", _soft_cells(columns, adapter, inputs, scores, settings)),
                         ("naopc", _naopc_cells(columns, adapter, inputs, scores, settings))):
        if details is not None:
            extra[key] = details
    if rationales is not None:
        from hf_attn.batteries.faithfulness.plausibility import plausibility_cells

        extra["plausibility"] = plausibility_cells(columns, adapter, inputs.texts, inputs.instances, scores, rationales,
                                                   settings.rationale_k_fraction, settings.metrics)
    agreement = _agreement_cells(columns, scores, [i.content for i in inputs.instances], settings)
    paired = _paired_tests(columns, methods, settings)
    if paired is not None:
        extra["paired"] = paired
    return _result(adapter, inputs, settings, raw_scores, cost, skipped, columns, agreement, extra)
