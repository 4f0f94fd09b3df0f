"""scripts/bench/peers.py's pure parts: argument validation, the agreement numbers, the ERASER bins
given to ferret, the tables and the generated page. No peer is installed and nothing is timed."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bp():
    spec = importlib.util.spec_from_file_location("benchmark_peers", ROOT / "scripts" / "bench" / "peers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def model_dir(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    return str(tmp_path)


def test_defaults_of_the_modes(bp, model_dir):
    quick = bp.parse_args(["--quick", "--model", model_dir])
    assert (quick.sentences, quick.rounds, quick.ig_steps) == (20, 1, 8)
    full = bp.parse_args(["--full", "--model", model_dir])
    assert full.sentences == 1821 and full.rounds == 3 and full.ig_steps == 50
    assert bp.parse_args(["--model", model_dir]).methods == list(bp.METHODS)
    growth = bp.parse_args(["--growth", "--growth-max-count", "100"])
    assert growth.growth_max_count == 100 and growth.growth_lengths == list(bp.GROWTH_LENGTHS)


@pytest.mark.parametrize("argv, name", [
    (["--rounds", "0"], "--rounds"), (["--rounds", "two"], "--rounds"), (["--sentences", "0"], "--sentences"),
    (["--sentences", "5000"], "--sentences"), (["--ig-steps", "-1"], "--ig-steps"), (["--device", "tpu"], "--device"),
    (["--methods", "shap"], "--methods"), (["--peers", "inseq"], "--peers"), (["--tolerance", "0"], "--tolerance"),
    (["--tolerance", "nan"], "--tolerance"), (["--write", "out.txt"], "--write"), (["--threads", "0"], "--threads"),
    (["--growth-lengths", "2"], "--growth-lengths"), (["--growth-max-count", "x"], "--growth-max-count"),
])
def test_bad_arguments_are_one_line_naming_the_argument(bp, model_dir, capsys, argv, name):
    assert bp.main(argv + ["--model", model_dir]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and name in err


def test_a_missing_model_folder_and_unknown_options_exit_2(bp, tmp_path, capsys):
    assert bp.main(["--model", str(tmp_path / "nowhere")]) == 2
    assert "--model" in capsys.readouterr().err
    assert bp.main(["--no-such-option"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_device_resolution(bp):
    assert bp.resolve_device("auto", False) == "cpu"
    assert bp.resolve_device("auto", True) == "cuda"
    assert bp.resolve_device("cuda", True) == "cuda"
    with pytest.raises(bp.ArgumentError, match="--device cuda"):
        bp.resolve_device("cuda", False)


def test_agreement_on_hand_made_arrays(bp):
    a = [np.array([0.1, 0.2, 0.3]), np.array([1.0]), np.array([0.5, 0.5])]
    b = [np.array([0.1, 0.2, 0.3 + 2e-6]), np.array([1.0 + 1e-3]), np.array([0.5, 0.5])]
    out = bp.agreement(a, b, tolerance=1e-5)
    assert out["compared"] == 3
    assert out["max_abs"] == pytest.approx(1e-3)
    assert out["equal_share"] == pytest.approx(2 / 3)


def test_agreement_leaves_out_missing_sentences_and_counts_shape_mismatches_unequal(bp):
    a = [np.array([0.0, 1.0]), np.array([2.0]), np.array([3.0, 4.0])]
    b = [None, np.array([2.0]), np.array([3.0])]
    out = bp.agreement(a, b)
    assert out["compared"] == 2 and out["equal_share"] == 0.5 and out["max_abs"] == 0.0
    assert math.isnan(bp.agreement([None], [None])["max_abs"])
    with pytest.raises(ValueError, match="sentences"):
        bp.agreement(a, b[:2])


def test_erasure_bins_given_to_ferret(bp):
    # k = ceil(p·n) in [1, n] per ERASER bin, repeats removed
    assert bp.distinct_k(8) == [1, 2, 4]
    assert bp.distinct_k(30) == [1, 2, 3, 6, 15]  # 0.1 · 30 is 3, not 4
    assert bp.distinct_k(1) == [1]
    # hf_attn's per-bin values averaged over the bins of distinct k: the first bin of each k
    # n = 8: k = 1, 1, 1, 2, 4 → bins 1, 4 and 5
    assert bp.distinct_bin_mean([0.1, 0.1, 0.2, 0.4, 0.6], 8) == pytest.approx((0.1 + 0.4 + 0.6) / 3)


def test_table_ratio_is_peer_over_hf_attn(bp):
    rows = [{"method": "leave_one_out", "seconds": {"hf_attn": 2.0, "captum": 3.0, "ferret": 1.0},
             "rss_mb": {"hf_attn": 600.0, "captum": 500.0},
             "agreement": {"captum": {"max_abs": 3e-7, "equal_share": 1.0}}}]
    table = bp.format_table(rows)
    lines = table.splitlines()
    assert len(lines) == 3 and lines[0].startswith("| method | hf_attn s | captum s | ferret s")
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[:6] == ["leave_one_out", "2.00", "3.00", "1.00", "1.50×", "0.50×"]
    assert cells[6] == "600 / 500 / –"
    assert cells[7] == "3.0e-07, 100 %" and cells[8] == "–"


def test_generated_page_starts_with_the_marker(bp, tmp_path):
    record = {"setup": {"sentences": 20, "rounds": 1, "ig_steps": 8, "device": "cpu", "threads": 1,
                        "peers": ["captum"]},
              "rows": [{"method": "saliency", "seconds": {"hf_attn": 1.0, "captum": 1.1}, "rss_mb": {},
                        "agreement": {}}],
              "notes": ["ferret not run: reason"], "flops": {},
              "growth": [{"method": "saliency", "length": 16, "count": 100, "seconds": 0.5, "rss_mb": 700.0}]}
    path = tmp_path / "peers.json"
    bp.write_record(str(path), record)
    page = path.with_suffix(".md").read_text(encoding="utf-8")
    assert page.splitlines()[0] == "<!-- generated by scripts/bench/peers.py -->"
    assert "1.10×" in page and "ferret not run: reason" in page and "## Growth" in page
    assert json.loads(path.read_text())["rows"][0]["method"] == "saliency"


class _Config:
    """The tiny BERT-type shape of the FLOP tests (h = 4, f = 8, 2 layers)."""

    hidden_size, intermediate_size, num_hidden_layers = 4, 8, 2


def _tiny_model_folder(tmp_path, ig_steps: int = 10):
    """A model folder holding only :class:`_Config`'s config.json, as ``args`` of :func:`floors`."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 4, "intermediate_size": 8,
                                                      "num_hidden_layers": 2, "num_attention_heads": 2}))

    class Args:
        model = str(tmp_path)
    Args.ig_steps = ig_steps
    return Args


def test_growth_table_and_flop_count(bp):
    table = bp.format_growth([{"method": "erasure", "length": 64, "count": 100, "seconds": 3.2, "rss_mb": 800.0}])
    assert "| erasure | 64 | 100 | 3.20 | 0.5000 | 800 |" in table

    class Config:
        hidden_size, intermediate_size, num_hidden_layers = 4, 8, 2
    # per layer: 2·T·(4h² + 2hf) + 4·T²·h with T = 3
    assert bp.model_gflop(Config, 3) == pytest.approx(2 * (2 * 3 * (64 + 64) + 4 * 9 * 4) / 1e9)
    # hf_attn's read-out pruning: the capture's Q/K/V for the 3 rows (2·3·3h²), the replay's attention
    # products of one query row (4·T·h), its Q/K/V/O projections and feed-forward block (2·(4h² + 2hf))
    last = 2 * 3 * 3 * 16 + 4 * 3 * 4 + 2 * (64 + 64)
    assert bp.model_gflop(Config, 3, pruned=True) == pytest.approx((2 * 3 * 128 + 4 * 9 * 4 + last) / 1e9)


def test_a_pruned_hf_attn_row_counts_its_own_flops_and_the_peers_theirs(bp, tmp_path):
    Args, Config = _tiny_model_folder(tmp_path), _Config
    ids = [[101, 5, 6, 7, 102]]
    table = [{"method": "saliency", "seconds": {"hf_attn": 1.0, "captum": 2.0},
              "extra": {"hf_attn": {"adapter": {"readout_pruning": True}}}}]
    floor = bp.floors(Args, None, ids, table)["saliency"]
    assert floor["gflop"] == pytest.approx(2 * bp.model_gflop(Config, 5, pruned=True))
    assert floor["peers_gflop"] == pytest.approx(2 * bp.model_gflop(Config, 5))
    assert floor["peers_gflops"]["captum"] == pytest.approx(floor["peers_gflop"] / 2.0)


def test_whole_table_columns_means_and_page(bp, tmp_path):
    # per sentence: gradient × input (comp, suff, τ), integrated gradients (comp, suff, τ); None = not scored
    rows = [np.array([0.1, 0.2, 0.5, 0.3, -0.1, float("nan")]), None, np.array([0.3, 0.4, 0.1, 0.5, 0.1, 0.2])]
    means = bp.table_means(rows)
    assert list(means) == bp.TABLE_COLUMNS and len(means) == 6
    assert means["gradient_x_input comprehensiveness"] == pytest.approx(0.2)
    assert means["integrated_gradients tau_loo"] == pytest.approx(0.2)  # the NaN τ left out
    assert bp.table_means([None])["gradient_x_input sufficiency"] is None
    page = bp.format_columns({"hf_attn": means, "captum": means})
    assert page.splitlines()[0] == "| cell | hf_attn | captum |"
    assert "| integrated_gradients sufficiency | 0.0000 | 0.0000 |" in page
    record = {"setup": {"sentences": 3, "peers": ["captum"]}, "notes": [], "flops": {},
              "rows": [{"method": "faithfulness_table", "seconds": {"hf_attn": 1.0, "captum": 2.0}, "rss_mb": {},
                        "agreement": {}, "columns": {"hf_attn": means, "captum": means},
                        "extra": {"hf_attn": {"ig_completeness": {"completeness_within_1pct_share": 0.5,
                                                                  "completeness_gap_mean_abs": 1e-3}}}}]}
    bp.write_record(str(tmp_path / "p.json"), record)
    text = (tmp_path / "p.md").read_text(encoding="utf-8")
    assert "The whole faithfulness table" in text and "on 50 % of the sentences" in text and "2.00×" in text


def test_whole_table_flop_floor_counts_every_forward(bp, tmp_path):
    ids = [[101, 5, 6, 7, 102]]  # L = 5, n = 3: distinct k 1, 2
    table = [{"method": "faithfulness_table", "seconds": {"hf_attn": 2.0, "captum": 4.0}}]
    floor = bp.floors(_tiny_model_folder(tmp_path), None, ids, table)["faithfulness_table"]
    g = lambda t: bp.model_gflop(_Config, t)  # noqa: E731
    expected = (2 * bp.TABLE_PEER_IG_STEPS + 4) * g(5) + g(5) + 3 * g(4) + 2 * (g(4) + g(3) + g(3) + g(4))
    assert floor["gflop"] == pytest.approx(expected)
    assert floor["gflops"] == pytest.approx(expected / 2.0) and floor["peers_gflops"]["captum"] == pytest.approx(expected / 4)


def test_every_row_has_its_flops_and_an_unmet_goal_says_what_bounds_it(bp, tmp_path):
    Args, Config = _tiny_model_folder(tmp_path), _Config
    g = lambda t: bp.model_gflop(Config, t)  # noqa: E731
    ids = [[101, 5, 6, 7, 102], [101, 5, 102]]  # L = 5, n = 3 (k 1, 2); L = 3, n = 1 (k 1)
    table = [{"method": "saliency", "seconds": {"hf_attn": 1.0, "captum": 1.1}, "rss_mb": {"hf_attn": 700.0, "captum": 650.0},
              "ratio": {"captum": 1.1}},
             {"method": "leave_one_out", "seconds": {"hf_attn": 2.0, "captum": 3.0}, "ratio": {"captum": 1.5}},
             {"method": "erasure", "seconds": {"hf_attn": 2.0, "ferret": 3.0}, "ratio": {"ferret": 1.5}},
             {"method": "integrated_gradients", "seconds": {"hf_attn": 4.0, "captum": 4.0}, "ratio": {"captum": 1.0}},
             {"method": "integrated_gradients_target", "seconds": {"hf_attn": 1.0, "captum": 4.0},
              "ratio": {"captum": 4.0}, "extra": {"hf_attn": {"ig_completeness": {"ig_gradients_mean": 3.0}}}}]
    flops = bp.floors(Args, None, ids, table)
    assert flops["saliency"]["gflop"] == pytest.approx(2 * g(5) + 2 * g(3))
    assert flops["leave_one_out"]["gflop"] == pytest.approx(g(5) + 3 * g(4) + g(3) + g(2))
    assert flops["erasure"]["gflop"] == pytest.approx(g(5) + g(4) + g(3) + g(3) + g(4)  # full; k = 1, 2: deleted, kept
                                                     + g(3) + g(2) + g(3))
    assert flops["integrated_gradients"]["gflop"] == pytest.approx(21 * (g(5) + g(3)))
    target = flops["integrated_gradients_target"]  # hf_attn's 3 gradients per sentence, the peers' 10 nodes
    assert target["gflop"] == pytest.approx(7 * (g(5) + g(3))) and target["peers_gflop"] == pytest.approx(21 * (g(5) + g(3)))
    assert target["peers_gflops"]["captum"] == pytest.approx(21 * (g(5) + g(3)) / 4.0)
    # peak: 1 GFLOP/s; saliency 1.1× < 1.2×; IG 1.0×; the target row 4.0× ≥ 2×
    out = bp.goals(table, flops, peak=flops["integrated_gradients"]["gflops"] * 1.1)
    by = {(g["row"], g["goal"]): g for g in out}
    sal = by[("saliency", "≥ 1.2× the fastest peer (captum)")]
    assert not sal["met"] and sal["bound"].startswith("FLOPs" if 1.2 / 1.1 * flops["saliency"]["gflops"] >
                                                      flops["integrated_gradients"]["gflops"] * 1.1 else "overhead")
    ig = by[("integrated_gradients", "≥ 1.2× the fastest peer (captum)")]
    assert not ig["met"] and ig["bound"].startswith("FLOPs: 1.2× captum needs")  # 1.2 × the rate > 1.1 × it
    assert by[("integrated_gradients_target", "≥ 2.0× captum")]["met"]
    assert by[("saliency", "peak RSS ≤ the lowest peer's (captum, MB)")]["bound"] == "50 MB above captum's 650 MB"
    assert by[("leave_one_out", "≥ 1.2× the fastest peer (captum)")]["met"]
    page = bp.format_flops(flops, {"gflops": 2.0, "threads": 1, "repeats": 3, "shape": "s"}, ("captum", "ferret"))
    assert "| integrated_gradients_target | " in page and "measured matmul peak on 1 thread(s): 2 GFLOP/s" in page


def test_growth_record_page_and_the_commit_in_the_setup(bp, tmp_path):
    record = {"setup": {"argv": "--growth --growth-lengths 32", "device": "cpu", "threads": 1},
              "growth": [{"method": "saliency", "length": 32, "count": 100, "seconds": 1.0, "rss_mb": 650.0}]}
    bp.write_record(str(tmp_path / "growth.json"), record)
    page = (tmp_path / "growth.md").read_text(encoding="utf-8")
    assert page.splitlines()[2] == "# hf_attn's cost against length and count"
    assert "`scripts/bench/peers.py --growth --growth-lengths 32`" in page and "| saliency | 32 | 100 |" in page
    commit = bp.checkout_commit()
    assert commit is None or (4 <= len(commit) <= 40 and all(c in "0123456789abcdef" for c in commit))


def test_ferret_roundtrip_checks_every_erased_and_deleted_input(bp):
    class Tokenizer:  # token 9 does not survive decode → tokenize (it comes back as 8)
        def decode(self, ids):
            return " ".join(map(str, ids))

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [8 if t == "9" else int(t) for t in text.split()]}

    tok = Tokenizer()
    assert bp._deletions([1, 2, 3]) == [[2, 3], [1, 3], [1, 2]]
    assert bp._survive_roundtrip(tok, bp._deletions([1, 2, 3]))
    assert not bp._survive_roundtrip(tok, bp._deletions([1, 9, 3]))
    ids, content = [101, 1, 2, 3, 102], [False, True, True, True, False]
    assert bp._roundtrip_exact(tok, ids, content, [0.1, 0.9, 0.5])
    # n = 3: k = 1 only; the top token kept alone is [9]: it changes
    assert not bp._roundtrip_exact(tok, [101, 1, 9, 3, 102], content, [0.1, 0.9, 0.5])
