"""T&Š Eq. 6 model-consistent adversary objective, L = TVD(ŷ_a, ŷ_b) − λ·JSD(α_a, α_b) (the objective
of their Fig. 1), as the ``divergence="jsd"`` option of ``hf_attn.methods.consistent_adversary``: hand-computed values
with pads and zeros, finite-difference gradients, the trainer using it, and W&P's KL staying the
default."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hf_attn.methods import consistent_adversary as ca
from hf_attn.training import wp as wpt
from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification


def _kl(p, q):
    return sum(a * math.log(a / b) for a, b in zip(p, q) if a > 0)


def _jsd(p, q):
    m = [(a + b) / 2 for a, b in zip(p, q)]
    return 0.5 * _kl(p, m) + 0.5 * _kl(q, m)


def _batch():
    # row 0: 3 real tokens + 1 pad; row 1: 2 real tokens, the adversary puts 0 on one, the base 0 on the other
    a = torch.tensor([[0.2, 0.3, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    b = torch.tensor([[0.5, 0.25, 0.25, 0.0], [0.0, 1.0, 0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    pa = torch.tensor([[0.3, 0.7], [0.9, 0.1]], dtype=torch.float64)
    pb = torch.tensor([[0.2, 0.8], [0.6, 0.4]], dtype=torch.float64)
    return a, b, mask, pa, pb


def test_jsd_objective_by_hand_with_pads_and_zeros():
    a, b, mask, pa, pb = _batch()
    lam = 0.7
    loss, distance, div = ca.consistent_adversary_loss(pa, pb, a, b, mask, lam, reduction="none",
                                                        divergence="jsd")
    expected_jsd = [_jsd([0.2, 0.3, 0.5], [0.5, 0.25, 0.25]), math.log(2)]  # row 1: disjoint supports
    np.testing.assert_allclose(div.numpy(), expected_jsd, rtol=1e-12)
    np.testing.assert_allclose(distance.numpy(), [0.1, 0.3], rtol=1e-12)
    np.testing.assert_allclose(loss.numpy(), [0.1 - lam * expected_jsd[0], 0.3 - lam * math.log(2)], rtol=1e-12)
    # hand value of row 0, written out: m = (0.35, 0.275, 0.375)
    by_hand = 0.5 * (0.2 * math.log(0.2 / 0.35) + 0.3 * math.log(0.3 / 0.275) + 0.5 * math.log(0.5 / 0.375)) + \
        0.5 * (0.5 * math.log(0.5 / 0.35) + 0.25 * math.log(0.25 / 0.275) + 0.25 * math.log(0.25 / 0.375))
    assert div[0].item() == pytest.approx(by_hand, rel=1e-12)
    mean, _, _ = ca.consistent_adversary_loss(pa, pb, a, b, mask, lam, divergence="jsd")
    assert mean.item() == pytest.approx(float(loss.mean()), rel=1e-12)


def test_kl_stays_the_default_and_differs_from_jsd():
    a, b, mask, pa, pb = _batch()
    default = ca.consistent_adversary_loss(pa, pb, a, b, mask, 0.5, reduction="none")
    kl = ca.consistent_adversary_loss(pa, pb, a, b, mask, 0.5, reduction="none", divergence="kl")
    jsd = ca.consistent_adversary_loss(pa, pb, a, b, mask, 0.5, reduction="none", divergence="jsd")
    for x, y in zip(default, kl):
        assert torch.equal(x, y)
    assert default[2][0].item() == pytest.approx(_kl([0.2, 0.3, 0.5], [0.5, 0.25, 0.25]), rel=1e-12)
    assert not torch.allclose(default[2], jsd[2])
    with pytest.raises(ValueError, match="divergence"):
        ca.consistent_adversary_loss(pa, pb, a, b, mask, 0.5, divergence="js")
    with pytest.raises(ValueError, match="lambda"):
        ca.consistent_adversary_loss(pa, pb, a, b, mask, -0.5, divergence="jsd")


def test_jsd_objective_gradient_matches_finite_differences():
    # α_a = softmax(logits) on the real tokens (as the model produces it), ŷ_a a sigmoid of a score:
    # the analytic gradient of the mean objective must match central differences.
    torch.manual_seed(0)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    base = torch.tensor([[0.6, 0.3, 0.1, 0.0], [0.1, 0.2, 0.3, 0.4]], dtype=torch.float64)
    pb = torch.tensor([[0.25, 0.75], [0.8, 0.2]], dtype=torch.float64)

    def objective(logits, score):
        att = logits.masked_fill(~mask, float("-inf")).softmax(-1)
        p = torch.sigmoid(score)
        probs = torch.stack([1 - p, p], -1)
        return ca.consistent_adversary_loss(probs, pb, att, base, mask, 0.9, divergence="jsd")[0]

    logits = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    score = torch.randn(2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(objective, (logits, score), eps=1e-6, atol=1e-7)
    # and by hand for one coordinate: d/dα_a,t of −λ·JSD/B = −λ/(2B) · log(α_a,t / m_t)
    att = torch.tensor([[0.2, 0.3, 0.5, 0.0]], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([[0.5, 0.25, 0.25, 0.0]], dtype=torch.float64)
    m1 = torch.tensor([[1, 1, 1, 0]], dtype=torch.bool)
    p = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
    ca.consistent_adversary_loss(p, p, att, b, m1, 0.9, divergence="jsd")[0].backward()
    assert att.grad[0, 0].item() == pytest.approx(-0.9 / 2 * math.log(0.2 / 0.35), rel=1e-10)
    assert att.grad[0, 3].item() == 0.0  # the pad gets nothing


def _tiny_model():
    torch.manual_seed(0)
    config = AttnClassifierConfig(vocab_size=30, embedding_dim=8, encoder="lstm", hidden_size=6, num_labels=2)
    return AttnClassifierForSequenceClassification(config).eval()


@pytest.mark.parametrize("divergence", ["kl", "jsd"])
def test_trainer_compute_loss_uses_the_selected_divergence(divergence):
    model = _tiny_model()
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
    mask = (ids != 0).long()
    base_att = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 0.0, 0.0]])
    base_probs = torch.tensor([[0.3, 0.7], [0.6, 0.4]])
    inputs = {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([1, 0]),
              "base_attention": base_att, "base_probs": base_probs}
    fake_self = SimpleNamespace(lam=0.25, divergence=divergence)
    loss = wpt.ConsistentAdversaryTrainer.compute_loss(fake_self, model, inputs)
    out = model(input_ids=ids, attention_mask=mask)
    probs = out.logits.softmax(-1)
    expected = []
    for i in range(2):
        n = int(mask[i].sum())
        t = 0.5 * (probs[i] - base_probs[i]).abs().sum().item()
        d = (_jsd if divergence == "jsd" else _kl)(out.attentions[i, :n].tolist(), base_att[i, :n].tolist())
        expected.append(t - 0.25 * d)
    assert loss.item() == pytest.approx(np.mean(expected), rel=1e-5)
    # a trainer built without the option keeps W&P's KL
    assert wpt.ConsistentAdversaryTrainer.__init__.__kwdefaults__["divergence"] == "kl"


def test_finished_adversary_folder_of_the_other_objective_is_refused(tmp_path):
    import json

    folder = tmp_path / "adversary-lambda-0.1"
    folder.mkdir()
    (folder / "metrics.json").write_text(json.dumps({"lambda": 0.1, "test_f1": 0.8}))  # legacy: no field = KL
    assert wpt.train_consistent_adversary("unused", str(folder), 0.1)["test_f1"] == 0.8
    with pytest.raises(ValueError, match="divergence"):
        wpt.train_consistent_adversary("unused", str(folder), 0.1, divergence="jsd")
