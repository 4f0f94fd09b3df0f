"""The faithfulness table as a result: rankings, paired tests, the generated sentence and summary,
the figure, and its folder (save / load)."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, fields

import numpy as np

from hf_attn.core import faithfulness as fm
from hf_attn.batteries.faithfulness.settings import (ATTENTION_FAMILY, COLUMNS, HIGHER_IS_BETTER, METHOD_LABELS,
                                                     METRIC_LABELS, METRICS, UNDEFINED)
from hf_attn.core.measure_names import FAITHFULNESS_MEASURES, LOO_DROP, LOO_DROP_DEFINITION, LOO_TVD


@dataclass
class FaithfulnessResult:
    """Rows = methods, columns = metrics (module docstring).

    ``table[method][metric]``: ``{"mean", "low", "high", "n"}`` (interval over sentences; soft metrics
    add ``seed_low`` / ``seed_high`` over the seeds); ``cost[method]``: ``seconds_per_sentence``,
    ``peak_mb_per_sentence``, ``seconds``; ``skipped[method]``: why it did not run; ``agreement``:
    mean Kendall τ between methods; ``per_instance[method][metric]``: the per-sentence values;
    ``attributions[method]``: per sentence, the scores over its real positions; ``content``: per
    sentence, which real positions are the text's; ``forwards``: requested / unique erasure inputs;
    ``undefined[method]``: per sentence why the method's scores are undefined on it (None: defined;
    e.g. a one-token text's leave-one-out on a model without an empty input,
    :mod:`hf_attn.methods.one_token`): those sentences are left out of that method's cells and
    counted in each cell's ``undefined``; ``undefined_reasons[method][metric]``: ``{reason:
    sentences}`` of every cell's undefined sentences."""

    methods: list[str]
    table: dict
    cost: dict
    skipped: dict
    agreement: dict
    per_instance: dict
    attributions: dict
    content: list
    settings: dict
    model: dict = field(default_factory=dict)
    num_instances: int = 0
    forwards: dict = field(default_factory=dict)
    texts: list = field(default_factory=list)
    metric_details: dict = field(default_factory=dict)
    undefined: dict = field(default_factory=dict)
    undefined_reasons: dict = field(default_factory=dict)

    def to_pandas(self):
        """DataFrame: one row per method that ran; per metric its mean, interval, median, the
        sentences it covers and the paired test's p against random, then the cost."""
        import pandas as pd

        rows = []
        for method in self.methods:
            row = {"method": method}
            for metric in COLUMNS:
                cell = self.table[method].get(metric)
                if cell is not None:
                    row[metric] = cell["mean"]
                    row[f"{metric}_low"] = cell["low"]
                    row[f"{metric}_high"] = cell["high"]
                    row[f"{metric}_median"] = cell.get("median", math.nan)
                    row[f"{metric}_n"] = cell.get("n", 0)
                    if "vs_random" in cell:
                        row[f"{metric}_p_vs_random"] = cell["vs_random"]["p"]
            row |= self.cost.get(method, {})
            rows.append(row)
        return pd.DataFrame(rows).set_index("method")

    def tidy(self):
        """Long-format DataFrame: one row per (method, metric) with ``mean``, ``low``, ``high``,
        ``median``, ``n`` and ``p_vs_random`` (NaN where the paired test did not run); the cost of each
        method as rows of metric ``"seconds"`` etc. is left to :meth:`to_pandas`."""
        import pandas as pd

        rows = []
        for method in self.methods:
            for metric in COLUMNS:
                cell = self.table[method].get(metric)
                if cell is None:
                    continue
                rows.append({"method": method, "metric": metric, "mean": cell["mean"], "low": cell["low"],
                             "high": cell["high"], "median": cell.get("median", math.nan), "n": cell.get("n", 0),
                             "p_vs_random": cell.get("vs_random", {}).get("p", math.nan)})
        return pd.DataFrame(rows, columns=["method", "metric", "mean", "low", "high", "median", "n", "p_vs_random"])

    @property
    def alpha(self) -> float:
        """The significance level of the paired tests: 1 − the intervals' confidence."""
        return 1 - float(self.settings.get("confidence", 0.95))

    def _mean(self, method: str, metric: str) -> float:
        return self.table.get(method, {}).get(metric, {}).get("mean", math.nan)

    def ranks(self, metric: str) -> dict:
        """{method: rank} on ``metric`` (1 = best): ties share a rank, undefined means get none (NaN)."""
        return fm.shared_ranks({m: self._mean(m, metric) for m in self.methods}, HIGHER_IS_BETTER[metric])

    def ranking(self, metric: str) -> list[str]:
        """Methods with a defined value on ``metric``, best first (tied methods in table order)."""
        ranks = self.ranks(metric)
        return sorted((m for m in self.methods if not math.isnan(ranks[m])), key=lambda m: ranks[m])

    def _ranked_metrics(self) -> list[str]:
        """The faithfulness metrics (agreement excluded) that can rank: at least two methods with a
        defined mean, and not all equal (one-token texts give every method the same score)."""
        out = []
        for metric in METRICS:
            if metric == "agreement":
                continue
            values = [v for v in (self._mean(m, metric) for m in self.methods) if math.isfinite(v)]
            if len(values) >= 2 and max(values) - min(values) > 1e-12:
                out.append(metric)
        return out

    def mean_rank(self, metrics=None) -> dict:
        """Each method's mean rank (1 = best; ties share a rank) over ``metrics`` (default: the
        metrics that can rank, :meth:`_ranked_metrics`), the random floor included; a metric where a
        method is undefined does not count for it."""
        metrics = [m for m in (metrics or self._ranked_metrics()) if m in self._ranked_metrics()]
        collected = {m: [] for m in self.methods}
        for metric in metrics:
            for method, rank in self.ranks(metric).items():
                if not math.isnan(rank):
                    collected[method].append(rank)
        return {m: float(np.mean(r)) if r else math.nan for m, r in collected.items()}

    def compare(self, a: str, b: str, metric: str) -> dict | None:
        """Paired Wilcoxon test of methods ``a`` and ``b`` on ``metric`` over the sentences where
        both are defined: ``{"p", "n", "median_difference", "better"}`` (``better``: which of the two
        is better when p < :attr:`alpha`, else None); None without per-sentence values."""
        values = self.per_instance
        if metric not in values.get(a, {}) or metric not in values.get(b, {}):
            # a result read back without its per-sentence values: the tests the run stored
            stored = self.metric_details.get("paired", {}).get(metric, {}).get(a, {}).get(b)
            if stored is None and b == "random":
                stored = self.table.get(a, {}).get(metric, {}).get("vs_random")
            if stored is None:
                return None
            test = dict(stored)
            mean_difference = test.pop("mean_difference", test.get("median_difference", math.nan))
        else:
            test = _paired(values[a][metric], values[b][metric])
            mean_difference = test.pop("mean_difference")
        test.pop("better", None)
        better = None
        if math.isfinite(test["p"]) and test["p"] < self.alpha and mean_difference != 0:
            better = a if (mean_difference > 0) == HIGHER_IS_BETTER[metric] else b
        return test | {"better": better}

    def below_random(self) -> list[tuple[str, str, float]]:
        """(method, metric, p) where a method is significantly *worse* than the random floor."""
        out = []
        for method in self.methods:
            if method == "random":
                continue
            for metric in self._ranked_metrics():
                test = self.compare(method, "random", metric)
                if test and test["better"] == "random":
                    out.append((method, metric, test["p"]))
        return out

    def sentence(self) -> str:
        """What the table says about attention vs the other methods, computed from the numbers: mean
        ranks (ties shared), and only the differences a paired test finds significant."""
        attention = [m for m in self.methods if m in ATTENTION_FAMILY]
        others = [m for m in self.methods if m not in ATTENTION_FAMILY and m != "random"]
        if "attention" not in self.methods or not others:
            return "The table has no raw attention row or no other method to compare it with."
        ranked = self._ranked_metrics()
        if not ranked:
            return (f"Over {self.num_instances} sentences every method scores alike on every metric (or no metric "
                    "is defined, e.g. one-token texts): the table cannot rank them.")
        ranks = self.mean_rank()
        order = sorted((m for m in self.methods if not math.isnan(ranks[m])), key=lambda m: ranks[m])
        best = order[0]
        floor = (f"; the random floor {ranks['random']:.1f}" if not math.isnan(ranks.get("random", math.nan)) else "")
        parts = [f"Over {self.num_instances} sentences, raw attention has mean rank {ranks['attention']:.1f} of "
                 f"{len(order)} methods across {len(ranked)} faithfulness metrics (1 = best, ties share a rank"
                 f"{floor}); the best overall is {best} ({ranks[best]:.1f})."]
        parts += self._comprehensiveness_claims()
        best_family = min(attention, key=lambda m: (math.isnan(ranks[m]), ranks[m]))
        best_other = min(others, key=lambda m: (math.isnan(ranks[m]), ranks[m]))
        claim = f"The best attention-family method is {best_family} ({ranks[best_family]:.1f}), the best of the " \
                f"others {best_other} ({ranks[best_other]:.1f})"
        test = self.compare(best_family, best_other, "comprehensiveness") if "comprehensiveness" in ranked else None
        if test is None or not math.isfinite(test["p"]):
            parts.append(claim + ".")
        elif test["better"] is None:
            parts.append(claim + f"; their comprehensiveness does not differ significantly (p = {test['p']:.2g}).")
        else:
            parts.append(claim + f"; by comprehensiveness {test['better']} is the more faithful (p = {test['p']:.2g}).")
        below = self.below_random()
        if below:
            parts.append("Below the random floor (paired test, p < " + f"{self.alpha:.2g}): "
                         + ", ".join(f"{m} on {k} (p = {p:.2g})" for m, k, p in below) + ".")
        tau = self._mean("attention", "tau_loo")
        if math.isfinite(tau):
            parts.append(f"Attention's Kendall τ with the leave-one-out drop ({LOO_DROP}) is {tau:.2f}.")
        plausible = self.plausibility_sentence()
        return " ".join(parts + ([plausible] if plausible else []))

    # ------------------------------------------------------------------------------------------
    # the second axis: plausibility against human rationales

    def two_axes(self, faithfulness: str = "comprehensiveness", plausibility: str = "auprc") -> dict:
        """Per method (the random floor excluded): its mean on the ``faithfulness`` and the
        ``plausibility`` column and whether a paired Wilcoxon test puts it above the random floor on
        each (``faithful`` / ``plausible``: True above, False not distinguishable or below, None
        without the test), with the p values, and its ``quadrant`` (``"both"``, ``"faithful only"``,
        ``"plausible only"``, ``"neither"``, ``"untested"`` where a test could not run) and ``below``: the axes (``"faithful"``, ``"plausible"``)
        on which the test puts it significantly *below* the floor. Empty without the two columns or the
        random floor."""
        if "random" not in self.methods or not all(
                any(c in self.table.get(m, {}) for m in self.methods) for c in (faithfulness, plausibility)):
            return {}
        out = {}
        for method in self.methods:
            if method == "random":
                continue
            row = {"below": []}
            for axis, column in (("faithful", faithfulness), ("plausible", plausibility)):
                test = self.compare(method, "random", column)
                row[f"{axis}_mean"] = self._mean(method, column)
                row[f"{axis}_p"] = test["p"] if test else math.nan
                row[axis] = None if test is None or not math.isfinite(test["p"]) else test["better"] == method
                if test is not None and test["better"] == "random":
                    row["below"].append(axis)
            if row["faithful"] is None or row["plausible"] is None:  # too few sentences for the test
                row["quadrant"] = "untested"
            else:
                row["quadrant"] = {(True, True): "both", (True, False): "faithful only",
                                   (False, True): "plausible only"}.get((row["faithful"], row["plausible"]), "neither")
            out[method] = row
        return out

    def plausibility_sentence(self) -> str:
        """Which methods are faithful (comprehensiveness above the random floor), which plausible
        (AUPRC against the human rationales above it), which both — each only as far as the paired
        test at :attr:`alpha` carries it. Empty without plausibility columns."""
        axes = self.two_axes()
        if not axes:
            return ""
        groups = {q: [m for m, r in axes.items() if r["quadrant"] == q]
                  for q in ("both", "faithful only", "plausible only", "neither", "untested")}
        said = "; ".join(f"{q}: {', '.join(ms)}" for q, ms in groups.items() if ms)
        text = (f"Against the human rationales (AUPRC; the random floor {self._mean('random', 'auprc'):.3f}) and by "
                f"comprehensiveness, each method above the random floor or not (paired Wilcoxon, p < {self.alpha:.2g}) "
                f"— {said}.")
        below = {axis: [m for m, r in axes.items() if axis in r["below"]] for axis in ("plausible", "faithful")}
        if any(below.values()):
            text += " Significantly below the floor: " + "; ".join(
                f"{'on AUPRC' if axis == 'plausible' else 'on comprehensiveness'} {', '.join(ms)}"
                for axis, ms in below.items() if ms) + "."
        if "attention" in axes:
            a = axes["attention"]
            text += (f" Attention's AUPRC is {a['plausible_mean']:.3f} (p = {a['plausible_p']:.2g} against the "
                     f"floor).")
        return text + self._trade_off()

    def _trade_off(self) -> str:
        """The most plausible method against the most comprehensive one on AUPRC (the paired test):
        the two axes name the same method, or how far apart they are."""
        plausible = [m for m in self.ranking("auprc") if m != "random"]
        faithful = [m for m in self.ranking("comprehensiveness") if m != "random"]
        if not plausible or not faithful:
            return ""
        top_p, top_f = plausible[0], faithful[0]
        if top_p == top_f:
            return f" The most plausible method is also the most comprehensive: {top_p}."
        test = self.compare(top_p, top_f, "auprc")
        verdict = ("" if test is None or not math.isfinite(test["p"]) else
                   f"; on AUPRC they do not differ significantly (p = {test['p']:.2g})" if test["better"] is None else
                   f"; on AUPRC {test['better']} is the more plausible (p = {test['p']:.2g})")
        return (f" The most plausible method is {top_p} (AUPRC {self._mean(top_p, 'auprc'):.3f}), the most "
                f"comprehensive {top_f} (comprehensiveness {self._mean(top_f, 'comprehensiveness'):.3f}, AUPRC "
                f"{self._mean(top_f, 'auprc'):.3f}){verdict}.")

    def _comprehensiveness_claims(self) -> list[str]:
        """Attention against the random floor and against the most comprehensive method, each only as
        far as a paired test carries it."""
        if "comprehensiveness" not in self._ranked_metrics():
            return []
        att = self.table["attention"]["comprehensiveness"]
        out = []
        if "random" in self.methods:
            test = self.compare("attention", "random", "comprehensiveness")
            if test and math.isfinite(test["p"]):
                verdict = ("not distinguishable from" if test["better"] is None else
                           "more comprehensive than" if test["better"] == "attention" else "less comprehensive than")
                out.append(f"By ERASER comprehensiveness attention ({att['mean']:.3f}) is {verdict} the random floor "
                           f"({self._mean('random', 'comprehensiveness'):.3f}; paired Wilcoxon p = {test['p']:.2g}).")
        top = next((m for m in self.ranking("comprehensiveness") if m not in ("attention", "random")), None)
        if top is not None:
            test = self.compare("attention", top, "comprehensiveness")
            if test and math.isfinite(test["p"]):
                if test["better"] is None:
                    out.append(f"Attention and {top}, the most comprehensive other method "
                               f"({self._mean(top, 'comprehensiveness'):.3f}), do not differ significantly "
                               f"(p = {test['p']:.2g}).")
                else:
                    out.append(f"{test['better']} is the more comprehensive of attention and {top} "
                               f"({att['mean']:.3f} vs {self._mean(top, 'comprehensiveness'):.3f}, p = {test['p']:.2g}).")
        return out

    def coverage(self) -> list[str]:
        """Per column: the sentences it covers, and why the others are undefined."""
        lines = []
        for metric in COLUMNS:
            cells = [self.table[m][metric] for m in self.methods if metric in self.table[m]]
            if not cells or metric == "agreement":  # agreement averages over methods, not sentences
                continue
            undefined = max(c.get("undefined", 0) for c in cells)
            line = f"{metric}: {min(c.get('n', 0) for c in cells)}–{max(c.get('n', 0) for c in cells)} of " \
                   f"{self.num_instances} sentences"
            reasons: dict = {}
            for m in self.methods:
                for reason, count in ((self.undefined_reasons or {}).get(m, {}).get(metric) or {}).items():
                    reasons[reason] = max(reasons.get(reason, 0), count)
            if undefined:
                said = (next(iter(reasons)) if len(reasons) == 1 else
                        "; ".join(f"{count}: {reason}" for reason, count in reasons.items()) or UNDEFINED[metric])
                line += f" (up to {undefined} undefined: {said})"
            lines.append(line)
        return lines

    def summary(self) -> str:
        """Markdown: the table (mean [interval], median), coverage, the cost, the skipped methods and
        :meth:`sentence`."""
        metrics = [m for m in COLUMNS if any(m in self.table[x] for x in self.methods)]
        arrows = {m: "↑" if HIGHER_IS_BETTER[m] else "↓" for m in metrics}
        lines = ["| method | " + " | ".join(f"{METRIC_LABELS.get(m, m)} {arrows[m]}" for m in metrics)
                 + " | s / sentence | peak MB / sentence |",
                 "|---" * (len(metrics) + 3) + "|"]
        for method in self.methods:
            cells = []
            for metric in metrics:
                c = self.table[method].get(metric)
                if c is None or math.isnan(c["mean"]):
                    cells.append("–")
                    continue
                text = f"{c['mean']:.3f}" if math.isnan(c["low"]) else f"{c['mean']:.3f} [{c['low']:.3f}, {c['high']:.3f}]"
                if math.isfinite(c.get("median", math.nan)):
                    text += f" med {c['median']:.3f}"
                if c.get("vs_random", {}).get("p", 1.0) < self.alpha:
                    text += " *"
                cells.append(text)
            cost = self.cost.get(method, {})
            lines.append(f"| {METHOD_LABELS.get(method, method)} | " + " | ".join(cells)
                         + f" | {cost.get('seconds_per_sentence', math.nan):.4f} | {cost.get('peak_mb_per_sentence', math.nan):.2f} |")
        conf = int(round(100 * self.settings.get("confidence", 0.95)))
        lines += ["", f"{self.num_instances} sentences; [low, high] = {conf} % interval over sentences (Student t); "
                      f"med = median; * = differs from the random floor (paired Wilcoxon, p < {self.alpha:.2g}). "
                      f"Erasure inputs (leave-one-out's deletions among them): {self.forwards.get('requested', 0)} "
                      f"requested, {self.forwards.get('unique', 0)} unique forwards "
                      f"({100 * self.forwards.get('saved_share', 0.0):.0f} % shared)."]
        lines += [f"- {line}" for line in self.coverage()]
        if "leave_one_out" in self.methods or "tau_loo" in metrics:
            lines.append(f"- {LOO_DROP_DEFINITION}: the leave_one_out row, and tau_loo is each method's Kendall "
                         f"τ-b with it (not J&W's {LOO_TVD}, TVD(ŷ(x₋t), ŷ(x)))")
        lines += self._detail_lines()
        for method, reason in self.skipped.items():
            lines.append(f"- skipped {method}: {reason}")
        lines += ["", self.sentence()]
        return "\n".join(lines)

    def _detail_lines(self) -> list[str]:
        """How the soft metrics, NAOPC and integrated gradients were computed in this run."""
        lines = []
        soft = self.metric_details.get("soft")
        if soft and "draws_mean" in soft:  # per-sentence draws (each sentence to its own standard error)
            target = soft.get("target_stderr", self.settings.get("soft_stderr", math.nan))
            missed = soft.get("missed_target", 0)
            errors = (f"; largest standard error of a sentence {soft['max_sentence_stderr']:.3g}, of a cell's mean "
                      f"{soft['max_mc_stderr']:.3g}" if math.isfinite(soft.get("max_sentence_stderr", math.nan))
                      else "; no standard error (one draw per sentence)")
            lines.append(f"- soft metrics ({soft['variant']}): " + (
                f"Bernoulli draws per sentence and method until the Monte-Carlo standard error of its mean is ≤ "
                f"{target:g}: {soft['draws_mean']:.1f} on average, at most {soft['draws_max']}" + errors
                + (f"; {missed} sentence–method pairs stopped at soft_max_draws above the target" if missed else "")
                if soft.get("draws_max") else "no draws: ŷ(x) ≤ ŷ(null input) on every sentence"))
        elif soft:  # a result saved before draws were counted per sentence: one count for the whole table
            target = self.settings.get("soft_stderr", 0.01)
            lines.append(f"- soft metrics ({soft['variant']}): {soft['draws']} Bernoulli draws per sentence, largest "
                         f"Monte-Carlo standard error of a cell {soft['max_mc_stderr']:.3g}"
                         + (f" (above the {target:g} target at soft_max_draws; more sentences or draws lower it)"
                            if soft["max_mc_stderr"] > target else ""))
        naopc = self.metric_details.get("naopc")
        if naopc:
            b = naopc["bounds"]
            lines.append(f"- NAOPC bounds ({naopc['perturbation']}): exact on {b['exact']} sentences (≤ "
                         f"{naopc['exact_max_tokens']} tokens), beam search (width {naopc['beam_width']}, an "
                         f"approximation) on {b['beam']}, the extremes of the table's orderings (an approximation) "
                         f"on {b['orderings']}"
                         + (f"; {naopc['k_grid_sentences']} sentences over {naopc['every_k_max_tokens']} tokens "
                            f"average {naopc['every_k_max_tokens']} evenly spaced k's, not every k"
                            if naopc.get("k_grid_sentences") else ""))
        plausible = self.metric_details.get("plausibility")
        if plausible:
            lines.append(f"- plausibility: word scores (each word the sum of its tokens') against the human rationale "
                         f"of each text, ERASER's metrics; token and IOU F1 of each text's top "
                         f"int({plausible['k_fraction']:.3f} × words) words; {len(plausible['without_rationale'])} "
                         f"texts without a marked word (undefined), {len(plausible['fully_marked'])} marked entirely "
                         f"(AUPRC 1 whatever the scores), {len(plausible['cut_by_length_limit'])} cut by the model's "
                         f"length limit (the words it never read rank last); iou_f1 is per text, ERASER's data-set "
                         f"macro IOU F1 per method is in metric_details")
        ig = self.cost.get("integrated_gradients", {})
        if "completeness_gap_mean_abs" in ig:
            text = (f"- integrated gradients ({self.settings.get('ig_rule')}, {ig.get('ig_steps_mean', math.nan):.0f} "
                    f"nodes on average, at most {ig.get('ig_steps_max', '?')}): |completeness gap| within 1 % of "
                    f"|f(x) − f(x')| on {100 * ig['completeness_within_1pct_share']:.0f} % of the sentences (mean |gap| "
                    f"{ig['completeness_gap_mean_abs']:.2g}, mean |f(x) − f(x')| {ig['output_difference_mean_abs']:.2g})")
            if "ig_target_missed" in ig:
                text += f"; {ig['ig_target_missed']} sentences missed the target at {self.settings.get('ig_max_steps')} nodes"
            if ig.get("ig_baseline_problem"):  # per model: why the target cannot be met, and what can
                text += f". On this model {ig['ig_baseline_problem']}"
            lines.append(text)
        return lines

    def measure_definitions(self) -> dict:
        """What this table's leave-one-out row and column hold (``results.json``'s
        ``measure_definitions``): the LOO-drop, not J&W's LOO-TVD
        (:data:`hf_attn.core.measure_names.FAITHFULNESS_MEASURES`)."""
        present = set(self.methods) | {k for m in self.methods for k in self.table.get(m, {})}
        return {k: v for k, v in FAITHFULNESS_MEASURES.items() if k in present}

    def plot(self, path: str | None = None):
        """Heatmap methods × metrics (each column scaled to [0, 1] with 1 = best, the mean printed);
        saved atomically to ``path`` when given. Returns the figure."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        metrics = [m for m in COLUMNS if any(m in self.table[x] for x in self.methods)]
        values = np.array([[self.table[m].get(k, {}).get("mean", np.nan) for k in metrics] for m in self.methods])
        scaled = np.full_like(values, np.nan)
        for j, metric in enumerate(metrics):
            column = values[:, j]
            if np.isfinite(column).sum() >= 2 and np.nanmax(column) > np.nanmin(column):
                s = (column - np.nanmin(column)) / (np.nanmax(column) - np.nanmin(column))
                scaled[:, j] = s if HIGHER_IS_BETTER[metric] else 1 - s
        fig, ax = plt.subplots(figsize=(1.3 * len(metrics) + 2.5, 0.45 * len(self.methods) + 1.5))
        ax.imshow(np.ma.masked_invalid(scaled), cmap="viridis", vmin=0, vmax=1, aspect="auto")
        for i in range(len(self.methods)):
            for j in range(len(metrics)):
                if np.isfinite(values[i, j]):
                    ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if (np.isfinite(scaled[i, j]) and scaled[i, j] < 0.5) else "black")
        ax.set_xticks(range(len(metrics)), [f"{METRIC_LABELS.get(m, m)} {'↑' if HIGHER_IS_BETTER[m] else '↓'}"
                                            for m in metrics],
                      rotation=35, ha="right", fontsize=8)
        ax.set_yticks(range(len(self.methods)), [METHOD_LABELS.get(m, m) for m in self.methods], fontsize=8)
        name = os.path.basename(str(self.model.get("name", "")).rstrip("/"))  # no local path in a figure
        ax.set_title(f"faithfulness, {name} ({self.num_instances} sentences); colour: 1 = best",
                     fontsize=9)
        fig.tight_layout()
        if path is not None:
            from hf_attn.core.io import save_figure_atomic
            save_figure_atomic(fig, path, dpi=130)
        return fig

    def plot_axes(self, path: str | None = None, faithfulness: str = "comprehensiveness",
                  plausibility: str = "auprc"):
        """Faithfulness against plausibility, one point per method (its mean on each column with the
        95 % intervals as bars; the random floor's means as dashed lines; the marker says which
        quadrant the paired tests put it in, :meth:`two_axes`); saved atomically to ``path`` when
        given. Returns the figure."""
        axes = self.two_axes(faithfulness, plausibility)
        if not axes:
            raise ValueError(f"the faithfulness-against-plausibility figure needs the {faithfulness!r} and "
                             f"{plausibility!r} columns (plausibility: rationales) and the random floor (the "
                             "'random' method)")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        styles = {"both": ("o", "tab:green"), "faithful only": ("s", "tab:blue"),
                  "plausible only": ("^", "tab:orange"), "neither": ("x", "tab:gray"), "untested": ("d", "tab:olive")}
        fig, ax = plt.subplots(figsize=(6.4, 4.8))
        for quadrant, (marker, colour) in styles.items():
            methods = [m for m, r in axes.items() if r["quadrant"] == quadrant]
            for i, method in enumerate(methods):
                fx, py = self.table[method][faithfulness], self.table[method][plausibility]
                xerr = [[fx["mean"] - fx["low"]], [fx["high"] - fx["mean"]]] if math.isfinite(fx["low"]) else None
                yerr = [[py["mean"] - py["low"]], [py["high"] - py["mean"]]] if math.isfinite(py["low"]) else None
                ax.errorbar(fx["mean"], py["mean"], xerr=xerr, yerr=yerr, fmt=marker, color=colour, capsize=2,
                            label=quadrant if i == 0 else None)
                ax.annotate(METHOD_LABELS.get(method, method).split(" (")[0], (fx["mean"], py["mean"]), fontsize=7,
                            xytext=(4, 3), textcoords="offset points")
        ax.axvline(self._mean("random", faithfulness), ls="--", color="k", lw=0.8)
        ax.axhline(self._mean("random", plausibility), ls="--", color="k", lw=0.8, label="random floor")
        arrow = lambda c: "↑" if HIGHER_IS_BETTER[c] else "↓"  # noqa: E731
        ax.set_xlabel(f"faithfulness: {METRIC_LABELS.get(faithfulness, faithfulness)} {arrow(faithfulness)}")
        ax.set_ylabel(f"{METRIC_LABELS.get(plausibility, plausibility)} {arrow(plausibility)}")
        name = os.path.basename(str(self.model.get("name", "")).rstrip("/"))  # no local path in a figure
        ax.set_title(f"faithful or plausible? {name} ({self.num_instances} texts; markers: paired test vs random, "
                     f"p < {self.alpha:.2g})", fontsize=8)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        if path is not None:
            from hf_attn.core.io import save_figure_atomic
            save_figure_atomic(fig, path, dpi=130)
        return fig

    def save(self, directory: str) -> str:
        """``results.json`` (everything but the attributions) and ``attributions.npz``, both written
        atomically, plus ``faithfulness.md``; returns the folder."""
        from hf_attn.core.io import atomic_write, write_json_atomic, write_text_atomic

        os.makedirs(directory, exist_ok=True)
        payload = {k: v for k, v in asdict(self).items() if k not in ("attributions", "content", "per_instance")}
        payload["measure_definitions"] = self.measure_definitions()
        payload["per_instance"] = {m: {k: np.asarray(v, dtype=float).tolist() for k, v in d.items()}
                                   for m, d in self.per_instance.items()}
        arrays = {}
        for method, rows in self.attributions.items():
            arrays[f"{method}__values"] = np.concatenate(rows) if rows else np.zeros(0)
        arrays["content__values"] = np.concatenate(self.content) if self.content else np.zeros(0, bool)
        arrays["lengths"] = np.array([len(c) for c in self.content])
        with atomic_write(os.path.join(directory, "attributions.npz"), "wb", encoding=None) as f:
            np.savez(f, **arrays)
        write_json_atomic(os.path.join(directory, "results.json"), payload)
        write_text_atomic(os.path.join(directory, "faithfulness.md"), self.summary() + "\n")
        return directory

    @classmethod
    def load(cls, directory: str) -> "FaithfulnessResult":
        with open(os.path.join(directory, "results.json"), encoding="utf-8") as f:
            payload = json.load(f)
        with np.load(os.path.join(directory, "attributions.npz")) as data:
            cuts = np.cumsum(data["lengths"])[:-1]
            content = [c.astype(bool) for c in np.split(data["content__values"], cuts)]
            attributions = {k[: -len("__values")]: np.split(data[k], cuts) for k in data.files
                            if k.endswith("__values") and k != "content__values"}
        return cls.from_payload(payload, attributions, content)

    @classmethod
    def from_payload(cls, payload: dict, attributions: dict | None = None, content: list | None = None
                     ) -> "FaithfulnessResult":
        """The result from the content of its ``results.json`` (extra keys of the folder battery such
        as ``request`` ignored; missing per-sentence values and attributions empty), enough for
        :meth:`summary`, :meth:`sentence`, :meth:`to_pandas` and :meth:`plot`."""
        names = {f.name for f in fields(cls)} - {"attributions", "content"}
        missing = sorted({"methods", "table", "cost", "skipped", "settings"} - set(payload))
        if missing:
            raise ValueError(f"payload is not a faithfulness result: it lacks {missing}")
        kept = {k: v for k, v in payload.items() if k in names}
        kept["per_instance"] = {m: {k: np.asarray(v, dtype=float) for k, v in d.items()}
                                for m, d in (payload.get("per_instance") or {}).items()}
        kept.setdefault("agreement", {})
        kept.setdefault("metric_details", {})
        for key in ("table", "agreement", "cost", "metric_details"):  # JSON wrote NaN as null
            kept[key] = _nan_for_none(kept[key])
        return cls(attributions=attributions or {}, content=content or [], **kept)


def _nan_for_none(value):
    if isinstance(value, dict):
        return {k: _nan_for_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_for_none(v) for v in value]
    return math.nan if value is None else value


def _paired(a, b) -> dict:
    """:func:`hf_attn.core.faithfulness.paired_test` plus the mean paired difference a − b."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    both = np.isfinite(a) & np.isfinite(b)
    return fm.paired_test(a, b) | {"mean_difference": float((a[both] - b[both]).mean()) if both.any() else math.nan}
