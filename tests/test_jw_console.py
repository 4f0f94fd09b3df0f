"""The J&W console summary (``hf-attn analyze DIR --battery jw`` prints
:func:`hf_attn.batteries.jw.common.format_summary`): rows per predicted class, said so, and J&W's
published value beside ours where J&W published one for that model and data ("–" elsewhere)."""

from __future__ import annotations

from hf_attn.batteries.jw.common import WIDTH, format_summary
from hf_attn.batteries.jw.summary import published_for_model
from hf_attn.core.published import JW_QA_SUMMARY, JW_SST_SUMMARY


def _tau(count, mean, std, sig, skipped=0):
    return {"count": count, "mean": mean, "std": std, "median": mean, "fraction_significant": sig,
            "skipped": skipped}


def _results(dataset="sst", encoder="lstm", published=JW_SST_SUMMARY, names=("negative", "positive"),
             counts=(900, 918)):
    """A results.json of the battery, every number chosen by hand (two classes unless ``counts`` says)."""
    per = {str(c): _tau(n, 0.341 + c / 100, 0.214, 0.481, skipped=3 - 3 * min(c, 1)) for c, n in enumerate(counts)}
    block = {"per_class": per, "overall": _tau(sum(counts), 0.35, 0.2, 0.5, skipped=3), "alpha": 0.05}
    summary = {"num_instances": sum(counts) + 3, "num_classes": len(counts), "accuracy": 0.8125,
               "predicted_class_counts": list(counts),
               "tau_gradient": block, "tau_loo": block, "tau_gradient_loo": block,
               "permutation": {"per_class": {c: {"count": v["count"], "median": 0.02742, "skipped": v["skipped"]}
                                             for c, v in per.items()},
                               "overall": {"count": sum(counts), "median": 0.0274, "skipped": 3}},
               "adversary": {"eps": 0.01,
                             "per_class": {c: {"count": v["count"], "mean": 0.5, "fraction_feasible": 1.0,
                                               "skipped": v["skipped"]} for c, v in per.items()},
                             "overall": {"count": sum(counts), "mean": 0.5, "fraction_feasible": 1.0, "skipped": 3}},
               "seconds": {"total": 12.5, "forward": 0.25}}
    return {"model_dir": "runs/sst-lstm", "split": "test", "dataset": dataset, "label_names": list(names),
            "model": {"encoder": encoder, "attention": "additive", "variant": "base"}, "summary": summary,
            "published": published}


def test_the_header_says_how_classes_are_split_and_whose_numbers_are_beside():
    text = format_summary(_results())
    lines = text.splitlines()
    assert lines[0] == "J&W battery: runs/sst-lstm [test]"
    assert lines[1] == "  1821 instances, accuracy 0.812"  # SST: J&W Table 1 gives F1, not accuracy
    assert "Rows by predicted class: the class the model predicts for the unaltered input (the argmax of its" in text
    assert "not the gold label" in text
    assert "J&W = J&W 2019 Table 2, sst, BiLSTM + additive attention; – = not published" in text
    assert all(len(line) <= WIDTH for line in lines)


def test_the_published_value_is_printed_beside_ours():
    lines = format_summary(_results()).splitlines()
    gradient = lines.index("  τ(attention, gradient): mean±std, sig = share with p < 0.05")
    # ours: class 0's mean 0.341, std 0.214, 48.1 % significant; J&W Table 2, SST BiLSTM, negative:
    # 0.34 ± 0.21, 0.48; positive 0.36 ± 0.21, 0.49; no overall value published ("–")
    assert lines[gradient + 1] == "    negative               900       3  0.341±0.21 sig 0.48    0.34±0.21 sig 0.48"
    assert lines[gradient + 2] == "    positive               918       0  0.351±0.21 sig 0.48    0.36±0.21 sig 0.49"
    assert lines[gradient + 3] == "    all                   1818       3  0.350±0.20 sig 0.50    –"
    loo = lines.index("  τ(attention, LOO-TVD): mean±std, sig = share with p < 0.05")
    assert lines[loo + 1].endswith("  0.27 sig 0.33")  # results.json's SST block has no std for τ_loo
    between = lines.index("  τ(gradient, LOO-TVD): mean±std, sig = share with p < 0.05")
    assert lines[between + 1].endswith("sig 0.48    –")  # J&W published no τ(gradient, LOO-TVD)
    permutation = lines.index("  permutation Δŷ_med: median over the instances")
    assert lines[permutation + 1] == "    negative               900       3  0.0274                 –"


def test_no_published_value_for_a_model_jw_did_not_run():
    """A transformer analysed on SST carries the SST block in results.json, but J&W's numbers are
    their BiLSTM's: every J&W cell is "–"."""
    text = format_summary(_results(encoder="transformer"))
    assert "J&W: – throughout" in text and "0.34±0.21" not in text
    assert published_for_model(_results(encoder="transformer")) == (None, "")
    assert published_for_model(_results(dataset="sst-quick", published=None)) == (None, "")


def test_imdb_published_values_come_from_jw_table_2_without_a_published_block():
    lines = format_summary(_results(dataset="imdb", published=None)).splitlines()
    gradient = lines.index("  τ(attention, gradient): mean±std, sig = share with p < 0.05")
    assert lines[gradient + 1].endswith("  0.44±0.06 sig 1.00")  # J&W Table 2, IMDB BiLSTM, class 0
    assert lines[gradient + 2].endswith("  0.43±0.06 sig 1.00")


def test_qa_published_overall_values_sit_on_the_all_row_and_unpredicted_answers_are_not_listed():
    names = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")
    results = _results(dataset="babi1", published={**JW_QA_SUMMARY["babi1"], "notes": "…"}, names=names,
                       counts=(1, 2, 2, 0, 0, 15))
    lines = format_summary(results).splitlines()
    assert lines[1] == "  23 instances, accuracy 0.812 (J&W Table 1: 1.00)"
    gradient = lines.index("  τ(attention, gradient): mean±std, sig = share with p < 0.05")
    assert [line.split()[0] for line in lines[gradient + 1:gradient + 6]] == ["bathroom", "bedroom", "garden",
                                                                             "office", "all"]
    assert lines[gradient + 1].endswith("    –")
    assert lines[gradient + 5] == "    all                     20       3  0.350±0.20 sig 0.50    0.25±0.16 sig 0.55"
    assert "  2 of the 6 classes never predicted (not listed)." in lines
    assert all(len(line) <= WIDTH for line in lines)
