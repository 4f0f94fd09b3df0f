"""The report's Markdown pieces: number cells (mean ± std, τ beside the published values), model
lines, the verdict lines and table of the findings, and the figures copied beside the report."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

from hf_attn.reporting.findings import _f
from hf_attn.reproduce.layout import ReproductionLayout


def _ms(stat: dict | None, digits=1, scale=1.0) -> str:
    """mean ± std (n) of a {mean, std, n} block."""
    if not stat or stat.get("mean") is None:
        return "–"
    if stat.get("n", 1) <= 1:
        return f"{scale * stat['mean']:.{digits}f} (n=1)"
    return f"{scale * stat['mean']:.{digits}f} ± {scale * stat['std']:.{digits}f} (n={stat['n']})"


def _model_line(facts: dict | None, what: str) -> str:
    if not facts:
        return f"{what}: not trained."
    sizes = facts.get("split_sizes") or {}
    return (f"{what}: {facts['encoder']}+{facts['attention']} ({facts['variant']}), embeddings "
            f"{facts['embeddings']} (d = {facts['embedding_dim']}), H = {facts['hidden_size']}, "
            f"{facts['parameters']:,} parameters, {facts['epochs']} epochs, seed {facts['seed']}; "
            f"train/dev/test {sizes.get('train')}/{sizes.get('validation')}/{sizes.get('test')}; "
            f"test F1 {_f(facts['test_f1'])}, accuracy {_f(facts['test_accuracy'])}, "
            f"ROC-AUC {_f(facts['test_roc_auc'])}.")


def _finding_lines(f: dict) -> list[str]:
    """One finding: the verdict sentence, then the paper's quoted sentence(s) beside the rule and the
    tolerance derived from them."""
    lines = [f"- **{f['id']}** ({f['paper']}) — **{f['verdict']}**: {f['sentence']}"]
    for q in f.get("quotes") or []:
        lines.append(f"  - Paper ({q['source']}): “{q['text']}”")
    if f.get("rule"):
        lines.append(f"  - Rule: {f['rule']}." + (f" Tolerance: {f['tolerance']}." if f.get("tolerance") else ""))
    return lines


def _verdict_lines(findings: list[dict], ids) -> str:
    lines = [line for f in findings if f["id"] in ids or any(f["id"].startswith(i) for i in ids)
             for line in _finding_lines(f)]
    return ("\n" + "\n".join(lines) + "\n") if lines else ""


def format_findings_table(findings: list[dict]) -> str:
    """Markdown verdict table: id, the paper's quoted sentence(s), the rule, the tolerance, the verdict."""
    lines = ["| dataset | id | paper says (verbatim) | rule | tolerance | verdict |", "|---|---|---|---|---|---|"]
    for f in findings:
        quotes = " ".join(f"“{q['text']}” ({q['source']})" for q in f.get("quotes") or []) or "–"
        lines.append(f"| {f.get('dataset', '')} | {f['id']} | {_cell(quotes)} | {_cell(f.get('rule') or '–')} | "
                     f"{_cell(f.get('tolerance') or '–')} | {f['verdict']} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _tau_cell(res: dict | None, key: str) -> str:
    """Measured per-class τ of a J&W battery result: mean±std (fraction significant) per class."""
    if not res:
        return "–"
    blk = res["summary"][key]["per_class"]
    return " / ".join(f"{_f(blk[c]['mean'], 2)}±{_f(blk[c]['std'], 2)} ({_f(blk[c]['fraction_significant'], 2)})"
                      for c in sorted(blk, key=int))


def _published_tau_cell(pub: dict, key: str, std_key=None, sig_key=None) -> str:
    """J&W Table 2's per-class values of ``key`` (with std / fraction significant where published)."""
    vals = pub.get(key)
    if not vals:
        return "–"
    parts = []
    for i, v in enumerate(vals):
        s = f"{v:.2f}"
        if std_key and pub.get(std_key):
            s += f"±{pub[std_key][i]:.2f}"
        if sig_key and pub.get(sig_key):
            s += f" ({pub[sig_key][i]:.2f})"
        parts.append(s)
    return " / ".join(parts)


def _committed_tau_cell(committed: dict, name: str, key: str) -> str:
    """J&W's committed SST outputs for run ``name`` (marked ᶜ: not in the paper's table)."""
    c = committed.get(name) or {}
    if not c.get(key):
        return "–"
    return " / ".join(f"{v:.2f}±{c[key + '_std'][i]:.2f} ({c[key + '_sig'][i]:.2f})" for i, v in enumerate(c[key])) + "ᶜ"


def _ts_rows(cells: dict, tpub: dict, key: str, attentions=("additive", "dot")):
    """(variant, attention, measured cell or an empty one) for every measured cell and every cell
    with a published value, in T&Š's order: unmeasured published cells show as "–"."""
    from hf_attn.batteries.ts.battery import VARIANT_ORDER

    empty = {"mean": None, "std": None, "n": 0}
    for attention in attentions:
        published = tpub.get(key if attention == "additive" else f"{key}_dot", {})
        for variant in VARIANT_ORDER:
            c = cells.get(f"{variant}-{attention}")
            if c is None and variant in published:
                c = {k: empty for k in ("f1_trained", "delta_uniform", "delta_permuted", "token_probability",
                                        "mi_MF", "mi_RS", "jw_mean_jsd", "jw_mean_tvd", "jw_mean_eps_max_jsd")}
            if c is not None:
                yield variant, attention, c


@dataclass
class _Figures:
    """Copies the batteries' figures into ``OUT/figures/<dataset>-<name>`` and lists them (report.json)."""

    dataset: str
    out_dir: str
    copied: list = field(default_factory=list)

    def add(self, src_dir: str, name: str, caption: str) -> str:
        """Copy ``src_dir/name`` and return its Markdown ("" when the battery made no such figure)."""
        src = os.path.join(src_dir, name)
        if not os.path.exists(src):
            return ""
        stem, ext = os.path.splitext(name)
        folder = os.path.basename(os.path.dirname(src))
        target = (f"{self.dataset}-{stem}-{folder}{ext}" if stem == "eraser"
                  else f"{self.dataset}-{folder}{ext}" if stem == "faithfulness"  # faithfulness-lstm, -bert-family
                  else f"{self.dataset}-{name}")
        layout = ReproductionLayout(self.out_dir)
        os.makedirs(layout.figures, exist_ok=True)
        shutil.copyfile(src, layout.figure(target))
        self.copied.append(f"figures/{target}")
        return f"\n![{caption}](figures/{target})\n\n*{caption}*\n"


def paths_of(data: dict) -> dict:
    return data["paths"]
