"""ALTI-Logit (hf_attn/methods/alti_logit.py) against a slow reference written from the paper's
equations (Ferrando et al. 2023): loops over layers, heads and token pairs in float64 over the
model's own weights and its eager attention probabilities, the final norm linearised by hand with σ of
the unmodified forward, the rollout summed term by term. Conservation: the tokens' scores plus the
terms given to no token (b_O, the MLPs, the final norm's β, the head's bias) are the model's logit.
Refusals: post-LN encoders, ModernBERT's head and the papers' BiLSTM. Tiny random models of
tests/architectures.py."""

from __future__ import annotations

import copy

import pytest
import torch

from architectures import TEXTS, tiny_classifier
from hf_attn.adapters import UnsupportedModelError, adapter_for
from hf_attn.methods.alti_logit import alti_logit, alti_logit_terms


def _perturbed_biases(model, seed: int = 1):
    """Random biases everywhere GPT-2 has one (its initialisation leaves them 0): b_V, b_O, the
    norms' β — so the reference checks which of them are attributed and which are not."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("bias"):
                parameter.copy_(0.3 * torch.randn(parameter.shape, generator=generator))
    return model


def _model(name: str):
    model, tokenizer = tiny_classifier(name)
    if name == "gpt2":
        _perturbed_biases(model)
    return model, tokenizer


def _norm(x, module, centred: bool):
    """The norm of ``module`` on a float64 vector, written out: γ ⊙ (x − μ)/σ + β (LayerNorm) or
    γ ⊙ x/rms (RMSNorm); ``sigma`` returned with it."""
    eps = getattr(module, "eps", getattr(module, "variance_epsilon", None))
    centred_x = x - x.mean() if centred else x
    sigma = torch.sqrt((centred_x ** 2).mean() + eps)
    beta = module.bias.double() if getattr(module, "bias", None) is not None else torch.zeros_like(x)
    return module.weight.double() * centred_x / sigma + beta, sigma


def _pieces(model, name: str, layer: int):
    """``(norm, value(x_normed, h) → (d,), out(v, h) → (D,), b_O or zeros, heads, centred)`` of one
    layer, from the model's own weights (float64)."""
    if name == "gpt2":
        block = model.transformer.h[layer]
        dim = model.config.n_embd
        heads = model.config.n_head
        d = dim // heads
        w, b = block.attn.c_attn.weight.double(), block.attn.c_attn.bias.double()  # Conv1D: x @ W + b, (D, 3D)
        wo, bo = block.attn.c_proj.weight.double(), block.attn.c_proj.bias.double()
        value = lambda x, h: x @ w[:, 2 * dim + h * d: 2 * dim + (h + 1) * d] + b[2 * dim + h * d: 2 * dim + (h + 1) * d]  # noqa: E731
        out = lambda v, h: v @ wo[h * d: (h + 1) * d]  # noqa: E731
        return block.ln_1, value, out, bo, heads, True
    block = model.model.layers[layer]
    heads, groups = model.config.num_attention_heads, model.config.num_key_value_heads
    d = model.config.hidden_size // heads
    wv, wo = block.self_attn.v_proj.weight.double(), block.self_attn.o_proj.weight.double()
    bv = block.self_attn.v_proj.bias
    value = lambda x, h: (wv[(h // (heads // groups)) * d: (h // (heads // groups) + 1) * d] @ x  # noqa: E731
                          + (0 if bv is None else bv.double()[(h // (heads // groups)) * d: (h // (heads // groups) + 1) * d]))
    out = lambda v, h: wo[:, h * d: (h + 1) * d] @ v  # noqa: E731
    return block.input_layernorm, value, out, torch.zeros(model.config.hidden_size, dtype=torch.float64), heads, False


@torch.no_grad()
def _reference(model, name: str, ids: torch.Tensor, target: int) -> dict:
    """The paper's quantities for one unpadded text ``ids`` ``(n,)``, read-out position t = n − 1:
    ``tokens`` (n,) ALTI-Logit, the non-token terms and the model's logit, from explicit loops."""
    base = model.transformer if name == "gpt2" else model.model
    blocks = base.h if name == "gpt2" else base.layers
    final = base.ln_f if name == "gpt2" else base.norm
    seen = {"layer_in": [], "attn_out": []}
    handles = [b.register_forward_pre_hook(lambda m, args, kwargs: seen["layer_in"].append(
        (args[0] if args else kwargs["hidden_states"])[0].double()), with_kwargs=True) for b in blocks]
    handles += [(b.attn if name == "gpt2" else b.self_attn).register_forward_hook(
        lambda m, args, output: seen["attn_out"].append(output[0][0].double())) for b in blocks]
    handles.append(final.register_forward_pre_hook(lambda m, args: seen.update(last=args[0][0].double())))
    with torch.no_grad():
        output = model(input_ids=ids[None], attention_mask=torch.ones_like(ids)[None], output_attentions=True)
    for handle in handles:
        handle.remove()
    n, t = len(ids), len(ids) - 1
    centred = name == "gpt2"
    u = model.score.weight[target].double()
    x_last = seen["last"][t]
    _, sigma_f = _norm(x_last, final, centred)

    def logit_of(z):  # U_w · L_f(z): the final norm without its β, σ of the unmodified forward
        z = z - z.mean() if centred else z
        return float(u @ (final.weight.double() * z / sigma_f))

    rollout = [[float(i == s) for s in range(n)] for i in range(n)]  # M^0 = I
    tokens = [0.0] * n
    attention_bias = mlp = 0.0
    for layer in range(len(blocks)):
        x = seen["layer_in"][layer]
        norm, value, out, b_o, heads, _ = _pieces(model, name, layer)
        alpha = output.attentions[layer][0].double()  # (H, n, n)
        f = [[out(value(_norm(x[j], norm, centred)[0], h), h) for j in range(n)] for h in range(heads)]
        transformed = [[sum(alpha[h, i, j] * f[h][j] for h in range(heads)) for j in range(n)] for i in range(n)]
        y = [x[i] + sum(transformed[i]) + b_o for i in range(n)]
        torch.testing.assert_close(y[t], x[t] + seen["attn_out"][layer][t], atol=1e-5, rtol=1e-5)  # exact split
        delta = [logit_of(transformed[t][j]) for j in range(n)]  # Δ^l_j
        for s in range(n):
            tokens[s] += sum(delta[j] * rollout[j][s] for j in range(n))
        attention_bias += logit_of(b_o)
        after = seen["layer_in"][layer + 1][t] if layer + 1 < len(blocks) else x_last
        mlp += logit_of(after - y[t])
        c = [[max(0.0, float(y[i].abs().sum() - (y[i] - transformed[i][j] - (x[i] if i == j else 0)).abs().sum()))
              for j in range(n)] for i in range(n)]
        c = [[value / sum(row) for value in row] for row in c]
        rollout = [[sum(c[i][k] * rollout[k][s] for k in range(n)) for s in range(n)] for i in range(n)]
    tokens[t] += logit_of(seen["layer_in"][0][t])
    norm_bias = float(u @ final.bias.double()) if getattr(final, "bias", None) is not None else 0.0
    head_bias = float(model.score.bias[target]) if model.score.bias is not None else 0.0
    return {"tokens": torch.tensor(tokens, dtype=torch.float64), "attention_bias": attention_bias, "mlp": mlp,
            "norm_bias": norm_bias, "head_bias": head_bias, "logit": float(output.logits[0, target])}


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def setup(request):
    model, tokenizer = _model(request.param)
    reference = copy.deepcopy(model)
    adapter = adapter_for(model, tokenizer, device="cpu")
    return adapter, reference, request.param, adapter.encode(TEXTS[:4])


def test_matches_the_papers_equations_written_as_loops(setup):
    adapter, reference, name, batch = setup
    terms = alti_logit_terms(adapter, batch)
    scores = alti_logit(adapter, batch)
    for b in range(len(batch)):
        real = batch.attention_mask[b].bool()
        expected = _reference(reference, name, batch.input_ids[b][real], int(terms.target[b]))
        torch.testing.assert_close(terms.tokens[b][real].double(), expected["tokens"], atol=2e-5, rtol=1e-4)
        for key in ("attention_bias", "mlp", "norm_bias", "head_bias", "logit"):
            assert float(getattr(terms, key)[b]) == pytest.approx(expected[key], abs=2e-5, rel=1e-4), key
        # conservation in the reference itself: the tokens plus the unattributed terms are the model's logit
        rest = expected["attention_bias"] + expected["mlp"] + expected["norm_bias"] + expected["head_bias"]
        assert float(expected["tokens"].sum()) + rest == pytest.approx(expected["logit"], abs=1e-5)
        content = batch.content[b]
        torch.testing.assert_close(scores[b][content].double(), expected["tokens"][content[real]], atol=2e-5, rtol=1e-4)
        assert torch.all(scores[b][~content] == 0)
    if name == "gpt2":  # the perturbed biases really are among the unattributed terms
        assert bool((terms.attention_bias.abs() > 1e-3).all() and (terms.norm_bias.abs() > 1e-3).all())


@pytest.mark.parametrize("name", ["llama", "gpt2", "qwen2"])
def test_conservation_the_terms_add_up_to_the_logit(name):
    model, tokenizer = _model(name)
    adapter = adapter_for(model, tokenizer, device="cpu")
    batch = adapter.encode(TEXTS)
    logits = adapter.logits(batch)
    for target in (None, 2):
        classes = None if target is None else torch.full((len(batch),), target)
        terms = alti_logit_terms(adapter, batch, classes)
        explained = logits.gather(1, terms.target[:, None])[:, 0]
        torch.testing.assert_close(terms.logit, explained, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(terms.tokens.sum(-1) + terms.rest(), explained, atol=1e-4, rtol=1e-5)
        torch.testing.assert_close(terms.layers.sum(0).sum(-1) + terms.embedding, terms.tokens.sum(-1))
        assert torch.all(terms.tokens[~batch.attention_mask.bool()] == 0)
    # a contrastive explanation is the difference of the two classes' (every term is linear in U_w)
    target, foil = torch.zeros(len(batch), dtype=torch.long), torch.ones(len(batch), dtype=torch.long)
    both = alti_logit_terms(adapter, batch, target, foil)
    torch.testing.assert_close(both.tokens, alti_logit_terms(adapter, batch, target).tokens
                               - alti_logit_terms(adapter, batch, foil).tokens, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(both.logit, logits[:, 0] - logits[:, 1], atol=1e-5, rtol=1e-5)


def test_registered_in_the_table_and_the_explainer():
    from hf_attn import Explainer
    from hf_attn.batteries.faithfulness import DEFAULT_METHODS, METHODS, FaithfulnessSettings, run_faithfulness

    assert "alti_logit" in METHODS and "alti_logit" not in DEFAULT_METHODS  # opt-in
    model, tokenizer = tiny_classifier("llama")
    explainer = Explainer(model, tokenizer, device="cpu")
    result = explainer.attributions(TEXTS[:3], methods=["alti_logit", "alti"])
    assert result.methods == ["alti_logit", "alti"] and not result.skipped
    batch = explainer.adapter.encode(TEXTS[:3])
    scores = alti_logit(explainer.adapter, batch)
    for i in range(3):
        expected = scores[i][batch.content[i]].tolist()
        assert result.values["alti_logit"][i] == pytest.approx(expected, abs=1e-5)
    contrast = explainer.attributions(TEXTS[:3], methods=["alti_logit", "alti"], target=0, foil=1)
    assert contrast.methods == ["alti_logit"] and "alti" in contrast.skipped
    assert "alti_logit" not in explainer.attributions(TEXTS[:1], methods=["attention"]).methods
    table = run_faithfulness(explainer.adapter, TEXTS[:3], FaithfulnessSettings(
        methods=("attention", "alti_logit"), fractions=(0.5,), soft_draws=1, soft_max_draws=1, naopc_beam=0))
    assert table.methods == ["attention", "alti_logit"] and "comprehensiveness" in table.table["alti_logit"]


def test_refused_where_the_logit_is_not_a_sum_of_layer_updates():
    from hf_attn.data.tokenization import build_tokenizer
    from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
    from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification

    for name, reason in (("bert", "post-LN encoder"), ("distilbert", "post-LN encoder"),
                         ("modernbert", "dense, activation, norm")):
        model, tokenizer = tiny_classifier(name)
        adapter = adapter_for(model, tokenizer, device="cpu")
        with pytest.raises(UnsupportedModelError, match=reason):
            alti_logit(adapter, adapter.encode(TEXTS[:1]))
    lstm_tokenizer = build_tokenizer(TEXTS, max_length=24)
    lstm = AttnClassifierForSequenceClassification(AttnClassifierConfig(
        vocab_size=len(lstm_tokenizer.get_vocab()), embedding_dim=8, encoder="lstm", hidden_size=4,
        max_tokens=24, pad_token_id=0, unk_token_id=1, mask_token_id=2)).eval()
    lstm_adapter = adapter_for(lstm, lstm_tokenizer, device="cpu")
    with pytest.raises(UnsupportedModelError, match="ALTI-Logit needs the layers of a transformers model"):
        alti_logit(lstm_adapter, lstm_adapter.encode(TEXTS[:1]))
    from hf_attn.batteries.faithfulness import FaithfulnessSettings, run_faithfulness

    result = run_faithfulness(lstm_adapter, TEXTS[:2], FaithfulnessSettings(
        methods=("attention", "alti_logit"), fractions=(0.5,), soft_draws=1, soft_max_draws=1, naopc_beam=0))
    assert result.methods == ["attention"] and "transformers model" in result.skipped["alti_logit"]


def test_refused_when_the_models_logits_are_not_read_at_the_read_out_position(monkeypatch):
    """The decomposition is of the head applied at the read-out position; a model whose own logits
    differ (its pooling reads another position) is refused in one line instead of explained wrongly."""
    model, tokenizer = tiny_classifier("llama")
    adapter = adapter_for(model, tokenizer, device="cpu")
    batch = adapter.encode(TEXTS[:2])
    real = adapter.logits
    monkeypatch.setattr(adapter, "logits", lambda b, **options: real(b, **options) + 1.0)
    with pytest.raises(UnsupportedModelError, match="its pooling reads another position"):
        alti_logit(adapter, batch)
