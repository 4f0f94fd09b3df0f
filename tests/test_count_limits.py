"""Upper bounds for every count setting (integrated-gradients nodes, Kernel SHAP samples, draws,
permutations, steps, adversaries, beam width, budgets, batch sizes, seeds, epochs, clusters) in the
one validation (``hf_attn.core.numpy_measures.COUNT_LIMITS`` through ``check_whole``): each setting
at its bound + 1 is a ValueError naming the setting and the reason, at its bound it is accepted
(settings are only made, nothing runs), and the command line refuses one in one line, exit code 2.
``attributions(..., ig_steps=10**9, ig_max_steps=10**9)`` was a raw MemoryError (6.9 EiB)."""

from __future__ import annotations

import re

import pytest

from hf_attn.core.numpy_measures import COUNT_LIMITS, check_whole


def _refused(make, name: str, limit: str, value: int) -> None:
    bound, why = COUNT_LIMITS[limit]
    with pytest.raises(ValueError) as error:
        make(value)
    message = str(error.value)
    assert message.startswith(f"{name} must be <= {bound}, got {value}"), message
    assert why in message, message


def test_every_limit_has_a_bound_and_a_reason():
    for kind, (bound, why) in COUNT_LIMITS.items():
        assert isinstance(bound, int) and bound >= 1000 and len(why) > 20, kind
    assert COUNT_LIMITS["ig_nodes"][0] == 4096
    with pytest.raises(ValueError, match="must be >= 1, got 0"):  # the lower bound as before
        check_whole("ig_steps", 0, limit="ig_nodes")
    with pytest.raises(ValueError, match="whole number"):
        check_whole("ig_steps", 4096.0, limit="ig_nodes")


# (setting, kind of limit, the other settings its bound needs)
FAITHFULNESS = [("ig_steps", "ig_nodes", {"ig_max_steps": 4096}), ("ig_max_steps", "ig_nodes", {}),
                 ("soft_draws", "draws", {"soft_max_draws": 10_000}), ("soft_max_draws", "draws", {}),
                 ("shap_samples", "shap_samples", {}), ("batch_tokens", "token_budget", {}),
                 ("naopc_beam", "beam_width", {}), ("naopc_beam_max", "tokens", {"naopc_every_k_max": 1_000_000}),
                 ("naopc_every_k_max", "tokens", {})]


@pytest.mark.parametrize("name,limit,extra", FAITHFULNESS, ids=[f[0] for f in FAITHFULNESS])
def test_faithfulness_settings(name, limit, extra):
    from hf_attn.batteries.faithfulness import FaithfulnessSettings

    bound = COUNT_LIMITS[limit][0]
    assert getattr(FaithfulnessSettings(**{name: bound, **extra}), name) == bound
    _refused(lambda v: FaithfulnessSettings(**{name: v, **extra}), name, limit, bound + 1)


JW = [("num_permutations", "permutations"), ("k", "adversaries"), ("steps", "steps"), ("batch_size", "batch_size"),
      ("adversary_batch_size", "batch_size"), ("token_budget", "token_budget"),
      ("gradient_token_budget", "token_budget"), ("loo_token_budget", "token_budget"), ("max_length", "tokens")]


@pytest.mark.parametrize("name,limit", JW, ids=[j[0] for j in JW])
def test_jw_settings(name, limit):
    from hf_attn.batteries.jw.common import JWSettings

    bound = COUNT_LIMITS[limit][0]
    assert getattr(JWSettings(**{name: bound}), name) == bound
    _refused(lambda v: JWSettings(**{name: v}), name, limit, bound + 1)


WP = [("num_seeds", "seed_models"), ("guide_seeds", "seed_models"), ("epochs", "epochs"),
      ("adversary_k", "adversaries"), ("adversary_steps", "steps"), ("adversary_max_epochs", "epochs"),
      ("batch_size", "batch_size")]
TS = [("permutation_draws", "permutations"), ("mi_words", "word_types"), ("mi_clusters", "clusters"),
      ("mi_max_occurrences", "occurrences")]


@pytest.mark.parametrize("name,limit", WP, ids=[w[0] for w in WP])
def test_wp_settings(name, limit):
    from hf_attn.batteries.wp.battery import WPSettings

    bound = COUNT_LIMITS[limit][0]
    WPSettings(**{name: bound}).validate()
    _refused(lambda v: WPSettings(**{name: v}).validate(), name, limit, bound + 1)


@pytest.mark.parametrize("name,limit", TS, ids=[t[0] for t in TS])
def test_ts_settings(name, limit):
    from hf_attn.batteries.ts.battery import TSSettings

    bound = COUNT_LIMITS[limit][0]
    TSSettings(**{name: bound}).validate()
    _refused(lambda v: TSSettings(**{name: v}).validate(), name, limit, bound + 1)


@pytest.fixture(scope="module")
def explainer():
    from architectures import tiny_classifier
    from hf_attn import Explainer

    return Explainer(*tiny_classifier("bert"), device="cpu")


EXPLAIN = [("ig_steps", "ig_nodes"), ("k", "adversaries"), ("adversary_steps", "steps"),
           ("num_permutations", "permutations"), ("batch_size", "batch_size")]


@pytest.mark.parametrize("name,limit", EXPLAIN, ids=[e[0] for e in EXPLAIN])
def test_explain_knobs(explainer, name, limit):
    bound = COUNT_LIMITS[limit][0]
    _refused(lambda v: explainer.explain("a good movie", **{name: v}), name, limit, bound + 1)


def test_attributions_and_eraser_refuse_a_billion_nodes_before_allocating(explainer):
    """The measured failure: a raw MemoryError (6.9 EiB) — now refused where the setting is given."""
    _refused(lambda v: explainer.attributions("a good movie", methods=["integrated_gradients"], ig_steps=v,
                                              ig_max_steps=v), "ig_steps", "ig_nodes", 10 ** 9)
    _refused(lambda v: explainer.eraser("a good movie", ig_steps=v), "ig_steps", "ig_nodes", 4097)


def test_evaluate_modules_share_the_bounds():
    import evaluate
    from pathlib import Path

    metrics = Path(__file__).resolve().parents[1] / "hf_attn" / "metrics"
    fragility = evaluate.load(str(metrics / "ts_fragility"))
    _refused(lambda v: fragility.compute(token_logits=[[[1.0], [2.0]]], attentions=[[0.5, 0.5]], references=[0],
                                         permutation_draws=v), "permutation_draws", "permutations", 100_001)
    mutual = evaluate.load(str(metrics / "ts_mutual_information"))
    _refused(lambda v: mutual.compute(input_vectors=[[0.0]], hidden_vectors=[[0.0]], n_clusters=v),
             "n_clusters", "clusters", 100_001)


@pytest.mark.parametrize("argv,flag,limit", [
    (["explain", "MODEL", "a text", "--ig-steps", "4097"], "--ig-steps", "ig_nodes"),
    (["analyze", "DIR", "--battery", "faithfulness", "--faith-shap-samples", "65537"], "--faith-shap-samples",
     "shap_samples"),
    (["analyze", "DIR", "--battery", "jw", "--jw-permutations", "100001"], "--jw-permutations", "permutations"),
    (["eraser", "DIR", "--token-budget", str((1 << 24) + 1)], "--token-budget", "token_budget"),
])
def test_cli_refuses_in_one_line(argv, flag, limit, capsys):
    from hf_attn.cli import main

    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    bound, why = COUNT_LIMITS[limit]
    assert len(lines) == 1, lines
    assert re.search(rf"error: argument {flag}: must be <= {bound}, got {bound + 1}: ", lines[0]), lines[0]
    assert why in lines[0]
