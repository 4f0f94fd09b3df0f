"""Contrastive targets (Yin & Neubig 2022 §2.2: why class a rather than b): the gradient family
differentiates f(target) − f(foil), leave-one-out erases it; checked against slow references
written from the definitions (finite differences, explicit deletions), the linearity in the class
score, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from architectures import tiny_classifier
from hf_attn import Explainer
from hf_attn.adapters import adapter_for
from hf_attn.methods.adapter_integrated_gradients import integrated_gradients_attribution
from hf_attn.methods.deletion import leave_one_out_deletion
from hf_attn.methods.gradient_x_input import gradient_x_input
from hf_attn.methods.saliency import class_scores

TEXTS = ["not very fun acting , but a great story", "the good movies", "a boring film and a dull plot"]


@pytest.fixture(scope="module")
def model():
    return tiny_classifier("bert")  # three classes


@pytest.fixture(scope="module")
def adapter(model):
    return adapter_for(*model, device="cpu")


def _classes(n, c):
    return torch.full((n,), c, dtype=torch.long)


def test_class_scores_contrast_is_the_difference():
    logits = torch.tensor([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    t, f = torch.tensor([0, 2]), torch.tensor([1, 1])
    probs = logits.softmax(-1)
    assert torch.allclose(class_scores(logits, t, "logit", f), torch.tensor([-1.0, 4.0]))
    assert torch.allclose(class_scores(logits, t, "probability", f),
                          probs[[0, 1], [0, 2]] - probs[[0, 1], [1, 1]])


def test_contrastive_gradient_x_input_is_the_difference_of_two_explanations(adapter):
    """Gradient × input is linear in f: the contrast a − b equals the explanation of a minus that of b."""
    batch = adapter.encode(TEXTS)
    n = len(TEXTS)
    for target in ("logit", "probability"):
        a = gradient_x_input(adapter, batch, _classes(n, 0), target)
        b = gradient_x_input(adapter, batch, _classes(n, 2), target)
        contrast = gradient_x_input(adapter, batch, _classes(n, 0), target, foil_class=_classes(n, 2))
        torch.testing.assert_close(contrast, a - b, atol=1e-6, rtol=1e-5)


def test_contrastive_integrated_gradients_keep_completeness_for_the_difference(adapter):
    batch = adapter.encode(TEXTS)
    n = len(TEXTS)
    result = integrated_gradients_attribution(adapter, batch, 64, target="logit", target_class=_classes(n, 1),
                                              foil_class=_classes(n, 0))
    torch.testing.assert_close(result.attributions.double().sum(-1), result.target_input - result.target_baseline,
                               atol=2e-3, rtol=0)


def test_contrastive_leave_one_out_equals_explicit_deletions(adapter, model):
    """(ŷ_t − ŷ_f)(x) − (ŷ_t − ŷ_f)(x₋i), each deletion run alone through the model."""
    net, tokenizer = model
    text = TEXTS[0]
    batch = adapter.encode([text])
    ours = leave_one_out_deletion(adapter, batch, _classes(1, 2), _classes(1, 1))[0]
    ids = tokenizer(text)["input_ids"]

    def contrast(sequence):
        with torch.no_grad():
            p = net(input_ids=torch.tensor([sequence])).logits.softmax(-1)[0]
        return float(p[2] - p[1])

    full = contrast(ids)
    for i in range(1, len(ids) - 1):  # the text's tokens; [CLS] and [SEP] stay
        expected = full - contrast(ids[:i] + ids[i + 1:])
        assert float(ours[i]) == pytest.approx(expected, abs=1e-5)


def test_the_explainer_runs_only_the_methods_that_explain_a_class(model):
    explainer = Explainer(*model, device="cpu")
    names = explainer._label_names()
    out = explainer.attributions(TEXTS, methods=["attention", "saliency", "gradient_x_input", "integrated_gradients",
                                                 "leave_one_out", "random"], target=0, foil=names[2],
                                 ig_steps=8, ig_target=None)
    assert out.methods == ["saliency", "gradient_x_input", "integrated_gradients", "leave_one_out", "random"]
    assert "no contrastive form" in out.skipped["attention"]
    batch = explainer.adapter.encode(TEXTS)
    direct = gradient_x_input(explainer.adapter, batch, _classes(3, 0), "probability", _classes(3, 2))
    for i in range(3):
        np.testing.assert_allclose(out.values["gradient_x_input"][i], direct[i][batch.content[i]].numpy(), atol=1e-6)
    with pytest.raises(ValueError, match="the foil is the target class"):
        explainer.attributions(TEXTS, methods=["saliency"], target=1, foil=1)
    with pytest.raises(ValueError, match="foil 'maybe' is not one of the model's classes"):
        explainer.attributions(TEXTS, methods=["saliency"], foil="maybe")
    with pytest.raises(ValueError, match=r"target must be a class index in \[0, 3\)"):
        explainer.attributions(TEXTS, methods=["saliency"], target=7)


def test_a_text_predicted_as_the_foil_has_no_contrast(model):
    explainer = Explainer(*model, device="cpu")
    predicted = explainer.attributions(TEXTS, methods=["random"]).predicted
    foil = predicted[0]
    out = explainer.attributions(TEXTS, methods=["saliency"], foil=foil)
    for i, c in enumerate(predicted):
        if c == foil:
            assert "the explained class is the foil" in out.undefined["saliency"][i]
            assert all(np.isnan(out.values["saliency"][i]))
        else:
            assert i not in out.undefined.get("saliency", {})


def test_contrastive_kernel_shap_and_deeplift_are_the_difference_of_two_explanations(adapter):
    """captum's rows take the contrast as the model's one output: DeepLift's multipliers are linear in
    the output (t = z_target − z_foil, the mean logit cancels) and Kernel SHAP's regression is linear in
    the outputs of the same seeded coalitions, so each contrast equals the target's explanation minus
    the foil's."""
    pytest.importorskip("captum")
    from hf_attn.methods.captum_attributions import captum_attribution, deeplift_attribution

    batch = adapter.encode(TEXTS)
    n = len(TEXTS)
    a = deeplift_attribution(adapter, batch, _classes(n, 0))
    b = deeplift_attribution(adapter, batch, _classes(n, 2))
    contrast = deeplift_attribution(adapter, batch, _classes(n, 0), _classes(n, 2))
    torch.testing.assert_close(contrast, a - b, atol=1e-5, rtol=1e-4)
    assert float(contrast.abs().max()) > 1e-4
    a = captum_attribution(adapter, batch, "kernel_shap", 24, target_class=_classes(n, 0))
    b = captum_attribution(adapter, batch, "kernel_shap", 24, target_class=_classes(n, 2))
    contrast = captum_attribution(adapter, batch, "kernel_shap", 24, target_class=_classes(n, 0),
                                  foil_class=_classes(n, 2))
    torch.testing.assert_close(contrast, a - b, atol=1e-5, rtol=1e-4)
    assert float(contrast.abs().max()) > 1e-4


def test_the_table_runs_captums_rows_under_a_contrast(model):
    pytest.importorskip("captum")
    explainer = Explainer(*model, device="cpu")
    out = explainer.attributions(TEXTS, methods=["kernel_shap", "deeplift", "attention"], target=0, foil=2)
    assert out.methods == ["kernel_shap", "deeplift"] and "no contrastive form" in out.skipped["attention"]
