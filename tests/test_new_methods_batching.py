"""A sentence's ALTI-Logit, AttnLRP and CP-LRP scores do not change when other texts join the call:
one text alone and among 100 others, on a right-padded encoder (BERT) and a left-padded decoder
(Llama)."""

import random

import numpy as np
import pytest

from architectures import TEXTS, tiny_classifier
from hf_attn import Explainer

WORDS = " ".join(TEXTS).split()


def _texts(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 14))) for _ in range(count)]


@pytest.mark.parametrize("name,methods", [("bert", ["attnlrp", "cp_lrp"]),
                                          ("llama", ["alti_logit", "attnlrp", "cp_lrp"])])
def test_a_sentence_alone_and_among_100_others(name, methods):
    explainer = Explainer(*tiny_classifier(name), device="cpu")
    others = _texts(100)
    probe = "not very fun acting , but a great story"
    together = explainer.attributions(others[:50] + [probe] + others[50:], methods=methods)
    alone = explainer.attributions([probe], methods=methods)
    assert together.methods == methods and alone.methods == methods
    for method in methods:
        np.testing.assert_allclose(together.values[method][50], alone.values[method][0], rtol=0, atol=1e-5,
                                   err_msg=f"{name} {method}")
        assert np.abs(alone.values[method][0]).max() > 0, method
