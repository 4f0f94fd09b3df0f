"""Edges of the one validation: thread counts, the explainer's count bounds, NumPy integers, seeds
and the Space's request gate are each refused (or accepted) where they are given, with the reason."""

import numpy as np
import pytest

from hf_attn.cli import build_parser
from hf_attn.core.numpy_measures import COUNT_LIMITS, MAX_SEED, check_seed

TEXTS = ["a good movie", "a bad film"]


@pytest.fixture(scope="module")
def explainer():
    from hf_attn import Explainer
    from tests.architectures import tiny_classifier

    model, tokenizer = tiny_classifier("bert", layers=1)
    return Explainer(model, tokenizer)


# ---------------------------------------------------------------------------------------- threads
@pytest.mark.parametrize("argv", [["explain", "RUN", "good movie", "--threads", "1000000000"],
                                  ["analyze", "RUN", "--battery", "jw", "--threads", "1000000000"],
                                  ["train", "--output-dir", "x", "--threads", "4097"]])
def test_thread_flags_are_bounded(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--threads" in err and "<= 4096" in err and "cores" in err


def test_thread_flags_accept_the_bound():
    args = build_parser().parse_args(["train", "--output-dir", "x", "--threads", "4096"])
    assert args.threads == 4096 == COUNT_LIMITS["threads"][0]


def test_thread_settings_of_the_python_api_are_bounded():
    from hf_attn.batteries.jw.common import JWSettings
    from hf_attn.core.threads import check_threads, resolve_threads
    from hf_attn.training.transformer import TransformerTrainSettings

    with pytest.raises(ValueError, match=r"num_threads must be <= 4096.*cores"):
        JWSettings(num_threads=10 ** 9)
    with pytest.raises(ValueError, match=r"threads must be <= 4096"):
        resolve_threads(10 ** 9)
    with pytest.raises(ValueError, match="num_threads"):
        check_threads(0)
    assert JWSettings(num_threads=np.int64(2)).num_threads == 2
    settings = TransformerTrainSettings(num_threads=10 ** 9)
    with pytest.raises(ValueError, match=r"num_threads must be <= 4096"):
        settings.validate()


# ------------------------------------------------------------------------ the explainer's counts
@pytest.mark.parametrize("kwargs, message", [({"token_budget": 2 ** 24 + 1}, r"token_budget must be <= 16777216, got 16777217: .*memory"),
                                             ({"max_length": 10 ** 6 + 1}, r"max_length must be <= 1000000, got 1000001: no model"),
                                             ({"token_budget": 0}, "token_budget must be >= 1"),
                                             ({"max_length": 1}, "max_length must be >= 2"),
                                             ({"token_budget": 1.5}, "token_budget must be a whole number")])
def test_explainer_constructor_checks_its_count_bounds(kwargs, message):
    from hf_attn import Explainer
    from tests.architectures import tiny_classifier

    model, tokenizer = tiny_classifier("bert", layers=1)
    with pytest.raises(ValueError, match=message):
        Explainer(model, tokenizer, **kwargs)


def test_adapter_counts_one_check_and_numpy_integers():
    from hf_attn.adapters.contract import check_adapter_counts

    assert check_adapter_counts(np.int64(64), np.int32(8)) == (64, 8)
    assert type(check_adapter_counts(np.int64(64), None)[0]) is int
    with pytest.raises(ValueError, match="token_budget must be <= 16777216"):
        check_adapter_counts(2 ** 24 + 1, None)


# ------------------------------------------------------------------------------- NumPy integers
def test_numpy_integers_are_accepted_everywhere(explainer):
    result = explainer.attributions(TEXTS, methods=["integrated_gradients"], ig_steps=np.int64(8))
    assert "integrated_gradients" in result.methods
    explainer.eraser(TEXTS, ig_steps=np.int64(4), seed=np.int64(1))
    explained = explainer.explain(TEXTS, ig_steps=np.int64(4), k=np.int64(2), adversary_steps=np.int64(2),
                                  num_permutations=np.int64(3), seed=np.int64(0), batch_size=np.int64(2))
    assert len(explained.sentences) == 2
    explainer.jw(TEXTS, num_permutations=np.int64(5), k=np.int64(2), steps=np.int64(2))


def test_settings_store_normalised_ints():
    from hf_attn.batteries.faithfulness import FaithfulnessSettings
    from hf_attn.batteries.jw.common import JWSettings

    faithfulness = FaithfulnessSettings(ig_steps=np.int64(8), seed=np.int64(3))
    assert type(faithfulness.ig_steps) is int and type(faithfulness.seed) is int
    jw = JWSettings(num_permutations=np.int64(5), batch_size=np.int16(4), seed=np.uint64(7))
    assert (type(jw.num_permutations), type(jw.batch_size), type(jw.seed)) == (int, int, int)


# -------------------------------------------------------------------------------------- seeds
@pytest.mark.parametrize("seed", [2 ** 63, 2 ** 64, -1, "x", 1.0, True])
def test_bad_seeds_are_refused_naming_seed(seed):
    with pytest.raises(ValueError, match="^seed must be"):
        check_seed(seed)


def test_seed_bounds_are_what_torch_and_numpy_accept():
    import torch

    assert check_seed(MAX_SEED) == MAX_SEED and check_seed(np.int64(0)) == 0
    torch.Generator().manual_seed(MAX_SEED + 1000)  # room for the per-batch offsets
    np.random.default_rng(MAX_SEED)


@pytest.mark.parametrize("call", ["explain", "eraser"])
@pytest.mark.parametrize("seed", [2 ** 64, -1, "x"])
def test_explainer_refuses_bad_seeds(explainer, call, seed):
    with pytest.raises(ValueError, match="seed must be"):
        getattr(explainer, call)(TEXTS, seed=seed)


def test_settings_refuse_bad_seeds():
    from hf_attn.batteries.faithfulness import FaithfulnessSettings
    from hf_attn.batteries.jw.common import JWSettings

    for make in (FaithfulnessSettings, JWSettings):
        with pytest.raises(ValueError, match="seed must be <= 9223372036854775807"):
            make(seed=2 ** 70)


@pytest.mark.parametrize("argv", [["explain", "RUN", "good movie", "--seed", "1180591620717411303424"],
                                  ["eraser", "RUN", "--seed", "1180591620717411303424"],
                                  ["analyze", "RUN", "--battery", "jw", "--seed", "-1"],
                                  ["train", "--output-dir", "x", "--data-seed", str(2 ** 63)]])
def test_seed_flags_exit_2_in_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "seed" in err and ("<= 9223372036854775807" in err or ">= 0" in err)


# --------------------------------------------------------------------------------- request gate
@pytest.mark.parametrize("kwargs, name", [({"max_wait": float("inf")}, "max_wait"), ({"max_wait": float("nan")}, "max_wait"),
                                          ({"max_wait": 0}, "max_wait"), ({"max_wait": -1.0}, "max_wait"),
                                          ({"max_wait": 1e12}, "max_wait"), ({"max_wait": "30"}, "max_wait"),
                                          ({"running": 0}, "running"), ({"running": 1.5}, "running"),
                                          ({"waiting": -1}, "waiting"), ({"waiting": True}, "waiting")])
def test_request_gate_refuses_bad_arguments_when_made(kwargs, name):
    from hf_attn.app.space import RequestGate

    with pytest.raises(ValueError, match=f"^{name} must be"):
        RequestGate(**kwargs)


def test_request_gate_accepts_good_arguments():
    from hf_attn.app.space import RequestGate

    gate = RequestGate(running=np.int64(2), waiting=0, max_wait=0.01)
    assert gate.capacity == 2 and gate.max_wait == 0.01
    with gate.turn():
        pass
