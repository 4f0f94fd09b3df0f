"""AttnLRP and CP-LRP (hf_attn/methods/lrp.py, hf_attn/adapters/lrp_rules.py) against a slow explicit
reference: relevance propagated layer by layer with the papers' equations, in float64 with loops —
the LRP-0 rule of a linear map R_i = Σ_j x_i W_ji R_j / z_j (bias absorbing its share), the residual
sum split in proportion, the identity rule of norms and activations, the uniform rule of the
bilinear products (Achtibat et al. 2024 Eq. 7) and the softmax rule R_i = x_i (R_i^out − s_i Σ_j
R_j^out) (Prop. 3.1). Each rule alone (a LayerNorm, a GELU, an attention call at the seam, a gated
MLP) and the composed tiny Llama and tiny BERT end to end, every layer by hand."""

from __future__ import annotations

import math

import pytest
import torch

from architectures import TEXTS, tiny_classifier
from hf_attn.adapters import UnsupportedModelError, adapter_for
from hf_attn.adapters.interface import Intervention, intervened_attention
from hf_attn.adapters.lrp_rules import lrp_rules
from hf_attn.methods.lrp import lrp

D = torch.float64


# ------------------------------------------------------------------------------------------------
# the explicit reference: one function per rule, loops over the outputs

def linear_rule(x, weight, bias, relevance):
    """LRP-0 of z = W x + b for one vector x (n,): R_i = Σ_j x_i W_ji R_j / z_j."""
    z = weight @ x + (0 if bias is None else bias)
    out = torch.zeros_like(x)
    for j in range(weight.shape[0]):
        out += x * weight[j] * relevance[j] / z[j]
    return out


def rows(function, x, *args):
    """A per-vector rule over the rows of x (T, n)."""
    return torch.stack([function(x[t], *[a[t] if isinstance(a, torch.Tensor) and a.dim() == 2 and a.shape[0] ==
                                          x.shape[0] else a for a in args]) for t in range(x.shape[0])])


def sum_rule(a, b, relevance):
    """z = a + b: R_a = a / z R, R_b = b / z R (element-wise)."""
    z = a + b
    return a / z * relevance, b / z * relevance


def layer_norm_rule(x, weight, bias, eps, relevance):
    """y = (x − μ)/σ · w + b with σ held constant: the linear map W_ji = (δ_ij − 1/n) w_j / σ."""
    n = x.shape[0]
    sigma = math.sqrt(float(((x - x.mean()) ** 2).mean()) + eps)
    matrix = (torch.eye(n, dtype=D) - 1.0 / n) * (weight[:, None] / sigma)
    return linear_rule(x, matrix, bias, relevance)


def attention_rule(q, k, v, scaling, causal, relevance_out, mode):
    """One head: S = scaling q kᵀ (+ mask), A = softmax(S), O = A v. ``relevance_out`` (T, d) of O;
    returns R_q, R_k, R_v and the relevance the softmax rule does not pass on (its bias term)."""
    steps, dim = q.shape
    scores = scaling * q @ k.T
    allowed = torch.ones(steps, steps, dtype=torch.bool)
    if causal:
        allowed = torch.tril(allowed)
    scores_masked = torch.where(allowed, scores, torch.tensor(-math.inf, dtype=D))
    probs = torch.softmax(scores_masked, -1)
    out = probs @ v
    r_probs, r_v = torch.zeros(steps, steps, dtype=D), torch.zeros_like(v)
    share = 0.5 if mode == "attnlrp" else 1.0
    for i in range(steps):
        for j in range(dim):
            for t in range(steps):
                if allowed[i, t]:
                    part = probs[i, t] * v[t, j] * relevance_out[i, j] / out[i, j]
                    r_probs[i, t] += (1 - share) * part if mode == "attnlrp" else 0.0
                    r_v[t, j] += share * part
    r_q, r_k = torch.zeros_like(q), torch.zeros_like(k)
    leak = 0.0
    if mode == "attnlrp":
        r_scores = torch.zeros_like(r_probs)
        for i in range(steps):  # softmax rule, Prop. 3.1; masked entries carry none
            total = r_probs[i][allowed[i]].sum()
            for t in range(steps):
                if allowed[i, t]:
                    r_scores[i, t] = scores[i, t] * (r_probs[i, t] - probs[i, t] * total)
            leak += float(total - r_scores[i].sum())
        for i in range(steps):  # S_it = Σ_d scaling q_id k_td: uniform rule
            for t in range(steps):
                if allowed[i, t]:
                    for d in range(dim):
                        part = scaling * q[i, d] * k[t, d] * r_scores[i, t] / scores[i, t]
                        r_q[i, d] += 0.5 * part
                        r_k[t, d] += 0.5 * part
    return r_q, r_k, r_v, leak


def gated_mlp_rule(x, mlp, relevance, mode):
    """down(act(gate x) ⊙ up x) for one vector: LRP-0 on the projections, the identity rule on the
    activation, the uniform rule on the product (CP-LRP: the gate held constant)."""
    gate = mlp.gate_proj.weight.to(D) @ x
    up = mlp.up_proj.weight.to(D) @ x
    hidden = torch.nn.functional.silu(gate) * up
    r_hidden = linear_rule(hidden, mlp.down_proj.weight.to(D), None, relevance)
    r_gate, r_up = (0.5 * r_hidden, 0.5 * r_hidden) if mode == "attnlrp" else (0 * r_hidden, r_hidden)
    return linear_rule(x, mlp.gate_proj.weight.to(D), None, r_gate) + linear_rule(x, mlp.up_proj.weight.to(D), None,
                                                                                 r_up)


def rope_matrix(cos, sin):
    """z = q cos + rotate_half(q) sin as z = Mᵀ q (one position)."""
    dim = cos.shape[0]
    half = dim // 2
    matrix = torch.diag(cos)
    for j in range(dim):
        if j < half:
            matrix[j, j + half] += -sin[j]
        else:
            matrix[j, j - half] += sin[j]
    return matrix  # rows: outputs, columns: inputs


def rms(x, weight, eps):
    return weight * x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + eps)


@torch.no_grad()
def llama_reference(model, ids, mode, target=None):
    """Relevance per token (T,) of the tiny Llama's logit for ``ids`` (one text, no padding), every
    layer by hand; returns (relevance, logit, softmax leak)."""
    base = model.model
    emb = base.embed_tokens.weight.to(D)[ids]  # (T, E)
    steps = emb.shape[0]
    cos, sin = base.rotary_emb(emb.float()[None], torch.arange(steps)[None])
    cos, sin = cos[0].to(D), sin[0].to(D)
    # forward, keeping every intermediate
    h, cache = emb, []
    for layer in base.layers:
        attn = layer.self_attn
        normed = rms(h, layer.input_layernorm.weight.to(D), layer.input_layernorm.variance_epsilon)
        heads, kv_heads, hd = (attn.config.num_attention_heads, attn.config.num_key_value_heads, attn.head_dim)
        q = (normed @ attn.q_proj.weight.to(D).T).view(steps, heads, hd)
        k = (normed @ attn.k_proj.weight.to(D).T).view(steps, kv_heads, hd)
        v = (normed @ attn.v_proj.weight.to(D).T).view(steps, kv_heads, hd)
        mats = [rope_matrix(cos[t], sin[t]) for t in range(steps)]
        q_rot = torch.stack([torch.stack([mats[t] @ q[t, a] for a in range(heads)]) for t in range(steps)])
        k_rot = torch.stack([torch.stack([mats[t] @ k[t, a] for a in range(kv_heads)]) for t in range(steps)])
        outs = []
        for a in range(heads):
            kv = a // (heads // kv_heads)
            scores = attn.scaling * q_rot[:, a] @ k_rot[:, kv].T
            scores = scores.masked_fill(~torch.tril(torch.ones(steps, steps, dtype=torch.bool)), -math.inf)
            outs.append(torch.softmax(scores, -1) @ v[:, kv])
        context = torch.stack(outs, 1).reshape(steps, heads * hd)
        attn_out = context @ attn.o_proj.weight.to(D).T
        mid = h + attn_out
        normed2 = rms(mid, layer.post_attention_layernorm.weight.to(D), layer.post_attention_layernorm.variance_epsilon)
        mlp_out = layer.mlp.down_proj.weight.to(D) @ (torch.nn.functional.silu(
            layer.mlp.gate_proj.weight.to(D) @ normed2.T) * (layer.mlp.up_proj.weight.to(D) @ normed2.T))
        mlp_out = mlp_out.T
        cache.append((h, normed, q, k, v, q_rot, k_rot, mats, context, attn_out, mid, normed2, mlp_out))
        h = mid + mlp_out
    final = rms(h, base.norm.weight.to(D), base.norm.variance_epsilon)
    logits = model.score.weight.to(D) @ final[-1]
    target = int(logits.argmax()) if target is None else target
    # backward: relevance, layer by layer
    relevance = torch.zeros_like(final)
    relevance[-1] = final[-1] * model.score.weight.to(D)[target]  # LRP-0 of the head, R_out = z_c
    leak = 0.0  # the final norm: identity rule
    for layer, (h_in, normed, q, k, v, q_rot, k_rot, mats, context, attn_out, mid, normed2, mlp_out) in zip(
            reversed(base.layers), reversed(cache)):
        attn = layer.self_attn
        r_mid, r_mlp = sum_rule(mid, mlp_out, relevance)
        r_normed2 = torch.stack([gated_mlp_rule(normed2[t], layer.mlp, r_mlp[t], mode) for t in range(len(normed2))])
        r_mid = r_mid + r_normed2  # the norm: identity rule
        r_h, r_attn = sum_rule(h_in, attn_out, r_mid)
        r_context = rows(linear_rule, context, attn.o_proj.weight.to(D), None, r_attn)
        heads, kv_heads, hd = q.shape[1], k.shape[1], q.shape[2]
        r_context = r_context.view(-1, heads, hd)
        r_qrot, r_krot, r_v = torch.zeros_like(q_rot), torch.zeros_like(k_rot), torch.zeros_like(v)
        for a in range(heads):
            kv = a // (heads // kv_heads)
            rq, rk, rv, lost = attention_rule(q_rot[:, a], k_rot[:, kv], v[:, kv], attn.scaling, True,
                                              r_context[:, a], mode)
            r_qrot[:, a] += rq
            r_krot[:, kv] += rk
            r_v[:, kv] += rv
            leak += lost
        steps = q.shape[0]
        r_q = torch.stack([torch.stack([linear_rule(q[t, a], mats[t], None, r_qrot[t, a]) for a in range(heads)])
                           for t in range(steps)])
        r_k = torch.stack([torch.stack([linear_rule(k[t, a], mats[t], None, r_krot[t, a]) for a in range(kv_heads)])
                           for t in range(steps)])
        r_normed = (rows(linear_rule, normed, attn.q_proj.weight.to(D), None, r_q.reshape(steps, -1))
                    + rows(linear_rule, normed, attn.k_proj.weight.to(D), None, r_k.reshape(steps, -1))
                    + rows(linear_rule, normed, attn.v_proj.weight.to(D), None, r_v.reshape(steps, -1)))
        relevance = r_h + r_normed  # the norm: identity rule
    return relevance.sum(-1), float(logits[target]), leak



def activation_rule(x, function, relevance, mode):
    """y = f(x) element-wise: AttnLRP's identity rule R_x = R_y; CP-LRP's gradient, R_x = x f'(x) R_y / y."""
    if mode == "attnlrp":
        return relevance.clone()
    with torch.enable_grad():
        point = x.detach().clone().requires_grad_(True)
        (slope,) = torch.autograd.grad(function(point).sum(), point)
    return x * slope * relevance / function(x)


def _linear(module):
    return module.weight.detach().to(D), module.bias.detach().to(D)


@torch.no_grad()
def bert_reference(model, ids, mode, target):
    """Relevance per token (T,) of the tiny BERT's logit ``target`` for ``ids`` (one text, no padding),
    every layer by hand (post-LN blocks, biases, GELU, the pooler's tanh)."""
    emb = model.bert.embeddings
    steps = ids.shape[0]
    word = emb.word_embeddings.weight.to(D)[ids]
    other = emb.position_embeddings.weight.to(D)[:steps] + emb.token_type_embeddings.weight.to(D)[0]
    summed = word + other
    ln = lambda x, norm: torch.nn.functional.layer_norm(x, x.shape[-1:], norm.weight.to(D), norm.bias.to(D), norm.eps)  # noqa: E731
    h, cache = ln(summed, emb.LayerNorm), []
    for layer in model.bert.encoder.layer:
        sa = layer.attention.self
        heads, hd = sa.num_attention_heads, sa.attention_head_size
        (wq, bq), (wk, bk), (wv, bv) = _linear(sa.query), _linear(sa.key), _linear(sa.value)
        q, k, v = [(h @ w.T + b).view(steps, heads, hd) for w, b in ((wq, bq), (wk, bk), (wv, bv))]
        context = torch.stack([torch.softmax(sa.scaling * q[:, a] @ k[:, a].T, -1) @ v[:, a] for a in range(heads)],
                              1).reshape(steps, -1)
        wo, bo = _linear(layer.attention.output.dense)
        attn_dense = context @ wo.T + bo
        pre1 = attn_dense + h
        a = ln(pre1, layer.attention.output.LayerNorm)
        wi, bi = _linear(layer.intermediate.dense)
        inner = a @ wi.T + bi
        act = torch.nn.functional.gelu(inner)
        w2, b2 = _linear(layer.output.dense)
        ffn = act @ w2.T + b2
        pre2 = ffn + a
        cache.append((h, q, k, v, context, attn_dense, pre1, a, inner, act, ffn, pre2))
        h = ln(pre2, layer.output.LayerNorm)
    wp, bp = _linear(model.bert.pooler.dense)
    pre_pool = wp @ h[0] + bp
    pooled = torch.tanh(pre_pool)
    wc, bc = _linear(model.classifier)
    logit = float(wc[target] @ pooled + bc[target])
    # backward
    r_pooled = linear_rule(pooled, wc[target:target + 1], bc[target:target + 1], torch.tensor([logit], dtype=D))
    r_pre_pool = activation_rule(pre_pool, torch.tanh, r_pooled, mode)
    relevance = torch.zeros_like(h)
    relevance[0] = linear_rule(h[0], wp, bp, r_pre_pool)
    for layer, (h_in, q, k, v, context, attn_dense, pre1, a, inner, act, ffn, pre2) in zip(
            reversed(model.bert.encoder.layer), reversed(cache)):
        sa = layer.attention.self
        norm2, norm1 = layer.output.LayerNorm, layer.attention.output.LayerNorm
        r_pre2 = rows(layer_norm_rule, pre2, norm2.weight.to(D), norm2.bias.to(D), norm2.eps, relevance)
        r_ffn, r_a = sum_rule(ffn, a, r_pre2)
        r_act = rows(linear_rule, act, *_linear(layer.output.dense), r_ffn)
        r_inner = activation_rule(inner, torch.nn.functional.gelu, r_act, mode)
        r_a = r_a + rows(linear_rule, a, *_linear(layer.intermediate.dense), r_inner)
        r_pre1 = rows(layer_norm_rule, pre1, norm1.weight.to(D), norm1.bias.to(D), norm1.eps, r_a)
        r_dense, r_h = sum_rule(attn_dense, h_in, r_pre1)
        r_context = rows(linear_rule, context, *_linear(layer.attention.output.dense), r_dense).view(q.shape)
        r_q, r_k, r_v = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for head in range(q.shape[1]):
            r_q[:, head], r_k[:, head], r_v[:, head], _ = attention_rule(q[:, head], k[:, head], v[:, head],
                                                                       sa.scaling, False, r_context[:, head], mode)
        steps = q.shape[0]
        for module, r in ((sa.query, r_q), (sa.key, r_k), (sa.value, r_v)):
            r_h = r_h + rows(linear_rule, h_in, *_linear(module), r.reshape(steps, -1))
        relevance = r_h
    norm0 = emb.LayerNorm
    r_summed = rows(layer_norm_rule, summed, norm0.weight.to(D), norm0.bias.to(D), norm0.eps, relevance)
    r_word, _ = sum_rule(word, other, r_summed)
    return r_word.sum(-1), logit

# ------------------------------------------------------------------------------------------------
# each rule alone

def _relevance_in(module, inputs, mode, upstream_seed=0, **kwargs):
    """Gradient × input at ``inputs`` for an output relevance R_out = y ⊙ g (g random), under the rules."""
    inputs = [x.detach().clone().requires_grad_(True) for x in inputs]
    with lrp_rules(module, mode):
        out = module(*inputs, **kwargs)
    out = out[0] if isinstance(out, tuple) else out
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(upstream_seed), dtype=out.dtype)
    grads = torch.autograd.grad(out, inputs, g, allow_unused=True)
    return out.detach(), g, [x.detach() * (gr if gr is not None else 0) for x, gr in zip(inputs, grads)]


@pytest.mark.parametrize("mode", ["attnlrp", "cp"])
def test_layer_norm_identity_rule_matches_the_explicit_linear_map(mode):
    torch.manual_seed(0)
    norm = torch.nn.LayerNorm(6).to(D)
    torch.nn.init.normal_(norm.weight)
    torch.nn.init.normal_(norm.bias)
    x = torch.randn(4, 6, dtype=D)
    out, g, (got,) = _relevance_in(norm, [x], mode)
    torch.testing.assert_close(out, torch.nn.functional.layer_norm(x, (6,), norm.weight, norm.bias))
    expected = rows(layer_norm_rule, x, norm.weight.detach(), norm.bias.detach(), norm.eps, out * g)
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-10)


def test_activation_identity_rule_passes_relevance_unchanged_and_cp_keeps_the_gradient():
    from transformers.activations import GELUActivation

    x = torch.randn(3, 5, dtype=D, generator=torch.Generator().manual_seed(1))
    out, g, (got,) = _relevance_in(GELUActivation(), [x], "attnlrp")
    torch.testing.assert_close(got, out * g)  # R_in = R_out, Eq. 9
    tanh = torch.nn.Tanh()
    out, g, (got,) = _relevance_in(tanh, [x], "cp")
    torch.testing.assert_close(got, x * (1 - torch.tanh(x) ** 2) * g)


@pytest.mark.parametrize("mode", ["attnlrp", "cp"])
def test_attention_at_the_seam_matches_the_uniform_and_softmax_rules(mode):
    model, _ = tiny_classifier("llama")
    attn = model.model.layers[0].self_attn
    steps, heads, kv_heads, hd = 5, 4, 2, attn.head_dim
    generator = torch.Generator().manual_seed(2)
    q = torch.randn(1, heads, steps, hd, dtype=D, generator=generator).requires_grad_(True)
    k = torch.randn(1, kv_heads, steps, hd, dtype=D, generator=generator).requires_grad_(True)
    v = torch.randn(1, kv_heads, steps, hd, dtype=D, generator=generator).requires_grad_(True)
    mask = torch.full((steps, steps), torch.finfo(D).min, dtype=D).triu(1)[None, None]
    with lrp_rules(attn, mode):
        out, _ = intervened_attention(attn, q, k, v, mask, scaling=attn.scaling,
                                      hf_attn_intervention=Intervention(lrp=mode))
    g = torch.randn(out.shape, dtype=D, generator=generator)
    gq, gk, gv = torch.autograd.grad(out, (q, k, v), g, allow_unused=True)
    r_out = (out * g).detach()[0]  # (T, H, d)
    for a in range(heads):
        kv = a // (heads // kv_heads)
        rq, rk, rv, _ = attention_rule(q[0, a].detach(), k[0, kv].detach(), v[0, kv].detach(), attn.scaling, True,
                                       r_out[:, a], mode)
        torch.testing.assert_close((q * gq)[0, a].detach() if gq is not None else torch.zeros_like(rq), rq,
                                   rtol=1e-5, atol=1e-6)  # the softmax runs in float32 (the model's own)
        if a % (heads // kv_heads) == 0:  # a key/value head shared by two query heads: both heads' shares
            rk2, rv2 = attention_rule(q[0, a + 1].detach(), k[0, kv].detach(), v[0, kv].detach(), attn.scaling,
                                      True, r_out[:, a + 1], mode)[1:3]
            torch.testing.assert_close((k * gk)[0, kv].detach() if gk is not None else torch.zeros_like(rk),
                                       rk + rk2, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close((v * gv)[0, kv].detach(), rv + rv2, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["attnlrp", "cp"])
def test_gated_mlp_matches_the_uniform_and_identity_rules(mode):
    model, _ = tiny_classifier("llama")
    mlp = model.model.layers[0].mlp.to(D)
    x = torch.randn(4, 32, dtype=D, generator=torch.Generator().manual_seed(3))
    out, g, (got,) = _relevance_in(mlp, [x], mode)
    expected = torch.stack([gated_mlp_rule(x[t], mlp, out[t] * g[t], mode) for t in range(4)])
    torch.testing.assert_close(got, expected, rtol=1e-8, atol=1e-10)


# ------------------------------------------------------------------------------------------------
# the composed model, end to end

@pytest.fixture(scope="module")
def llama():
    model, tokenizer = tiny_classifier("llama")
    return adapter_for(model, tokenizer, device="cpu")


@pytest.mark.parametrize("mode", ["attnlrp", "cp"])
def test_tiny_llama_matches_the_layer_by_layer_reference(llama, mode):
    batch = llama.encode(TEXTS)
    result = lrp(llama, batch, mode)
    for r, text in enumerate(TEXTS):
        one = llama.encode([text])
        ids = one.input_ids[0]
        expected, logit, leak = llama_reference(llama.model, ids, mode, int(result.target_class[r]))
        real = batch.attention_mask[r].bool()
        content = batch.content[r][real]
        got = result.relevance[r][real].double()
        torch.testing.assert_close(got[content], expected[content], rtol=2e-4, atol=2e-5)
        torch.testing.assert_close(result.total[r].double(), expected.sum(), rtol=2e-4, atol=2e-5)
        assert abs(float(result.logit[r]) - logit) < 1e-4
        # no biases, no added embeddings: CP-LRP conserves the logit; AttnLRP up to its softmax terms
        assert abs(expected.sum().item() + leak - logit) < 1e-5 * max(1.0, abs(logit))
        if mode == "cp":
            assert leak == 0.0 and abs(float(result.ratio[r]) - 1) < 1e-5



@pytest.mark.parametrize("mode", ["attnlrp", "cp"])
def test_tiny_bert_matches_the_layer_by_layer_reference(mode):
    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    batch = adapter.encode(TEXTS[:3])
    result = lrp(adapter, batch, mode)
    for r, text in enumerate(TEXTS[:3]):
        ids = adapter.encode([text]).input_ids[0]
        expected, logit = bert_reference(model, ids, mode, int(result.target_class[r]))
        real = batch.attention_mask[r].bool()
        content = batch.content[r][real]
        torch.testing.assert_close(result.relevance[r][real][content].double(), expected[content], rtol=2e-4,
                                   atol=2e-5)
        torch.testing.assert_close(result.total[r].double(), expected.sum(), rtol=2e-4, atol=2e-5)
        assert abs(float(result.logit[r]) - logit) < 1e-4

def test_conservation_is_reported_per_sentence_and_the_model_is_left_as_it_was(llama):
    batch = llama.encode(TEXTS)
    before = llama.logits(batch)
    result = lrp(llama, batch, "attnlrp")
    assert result.ratio.shape == (len(TEXTS),)
    torch.testing.assert_close(result.ratio, result.total / result.logit)
    torch.testing.assert_close(result.logit, before.gather(1, result.target_class[:, None]).squeeze(1))
    assert torch.equal(llama.logits(batch), before)  # hooks removed, forwards restored
    assert not any(hasattr(m, "_hf_attn_lrp_kind") for m in llama.model.modules())
    assert torch.all(result.relevance[~batch.content] == 0)


def test_bert_runs_and_its_functional_tanh_gets_the_identity_rule():
    model, tokenizer = tiny_classifier("roberta")  # its head calls torch.tanh, not a module
    adapter = adapter_for(model, tokenizer, device="cpu")
    batch = adapter.encode(TEXTS[:2])
    for mode in ("attnlrp", "cp"):
        result = lrp(adapter, batch, mode)
        assert torch.isfinite(result.relevance).all() and bool((result.relevance[batch.content] != 0).all())


def test_refusals_name_the_component():
    from hf_attn.data.tokenization import build_tokenizer
    from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
    from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification

    tokenizer = build_tokenizer(TEXTS, max_length=24)
    lstm = AttnClassifierForSequenceClassification(AttnClassifierConfig(
        vocab_size=len(tokenizer.get_vocab()), embedding_dim=8, encoder="lstm", hidden_size=4,
        max_tokens=24, pad_token_id=0, unk_token_id=1, mask_token_id=2)).eval()
    adapter = adapter_for(lstm, tokenizer, device="cpu")
    for mode in ("attnlrp", "cp"):
        with pytest.raises(UnsupportedModelError, match=r"recurrent cell of LSTM"):
            lrp(adapter, adapter.encode(TEXTS[:2]), mode)
    model, tokenizer = tiny_classifier("mpnet")  # attention in its own modules
    adapter = adapter_for(model, tokenizer, device="cpu")
    with pytest.raises(UnsupportedModelError, match="own modules"):
        lrp(adapter, adapter.encode(TEXTS[:1]), "attnlrp")
    with pytest.raises(ValueError, match="mode must be one of"):
        lrp(adapter, adapter.encode(TEXTS[:1]), "lrp")


def test_a_sigmoid_gate_outside_a_module_is_refused_by_attnlrp():
    class Gated(torch.nn.Module):
        def forward(self, x):
            return torch.sigmoid(x) * x

    with pytest.raises(UnsupportedModelError, match=r"no rule for sigmoid .* in the model \(Gated\)"):
        _relevance_in(Gated(), [torch.randn(2, 3)], "attnlrp")


def test_registered_for_attributions_and_the_faithfulness_table_with_the_ratio_per_sentence(llama):
    from hf_attn import Explainer
    from hf_attn.batteries.faithfulness import DEFAULT_METHODS, FaithfulnessSettings, run_faithfulness

    assert "attnlrp" not in DEFAULT_METHODS and "cp_lrp" not in DEFAULT_METHODS  # opt-in
    texts = TEXTS[:3] + [TEXTS[0]]  # a repeated text keeps its own ratio
    side = Explainer(llama.model, llama.tokenizer, device="cpu").attributions(texts, methods=["attnlrp", "cp_lrp"])
    assert side.methods == ["attnlrp", "cp_lrp"]
    direct = lrp(llama, llama.encode(texts), "cp")
    for i in range(len(texts)):
        content = direct.relevance[i][llama.encode(texts).content[i]]
        np_values = torch.tensor(side.values["cp_lrp"][i], dtype=torch.float32)
        torch.testing.assert_close(np_values, content, rtol=1e-4, atol=1e-5)
    per_sentence = side.cost["cp_lrp"]["conservation_ratio_per_sentence"]
    assert len(per_sentence) == len(texts) and all(abs(r - 1) < 1e-4 for r in per_sentence)  # no biases: conserved
    assert side.cost["cp_lrp"]["conservation_within_1pct_share"] == 1.0
    ratios = side.cost["attnlrp"]["conservation_ratio_per_sentence"]
    assert ratios[0] == pytest.approx(ratios[3]) and ratios == pytest.approx(
        lrp(llama, llama.encode(texts), "attnlrp").ratio.tolist(), rel=1e-4)
    result = run_faithfulness(llama, TEXTS[:2], FaithfulnessSettings(
        methods=("attnlrp", "cp_lrp"), fractions=(0.5,), soft_draws=1, soft_max_draws=1, naopc_beam=0))
    assert result.methods == ["attnlrp", "cp_lrp"] and "conservation_ratio_mean" in result.cost["attnlrp"]


def test_the_rules_leave_other_threads_forwards_alone():
    """While one thread explains with LRP, another thread's gradient through the same model is its plain
    gradient (the rules' hooks act on the explaining thread only), and two LRP calls in two threads
    give each the relevance of one call alone."""
    import threading

    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    batch = adapter.encode(TEXTS[:2])

    def gradient():
        embeddings = adapter.embeddings(batch).detach().requires_grad_(True)
        with torch.enable_grad():
            logits = adapter._model_call(batch.input_ids, batch.attention_mask, embeddings, None,
                                         batch.position_ids).logits
            (grad,) = torch.autograd.grad(logits[:, 0].sum(), embeddings)
        return grad

    plain = gradient()
    out = {}
    with lrp_rules(adapter.model, "attnlrp"):
        other = threading.Thread(target=lambda: out.setdefault("grad", gradient()))
        other.start()
        other.join()
    torch.testing.assert_close(out["grad"], plain, rtol=0, atol=1e-7)

    alone = lrp(adapter, batch, "attnlrp").relevance
    with lrp_rules(adapter.model, "cp"):  # another thread's rules registered meanwhile: not applied here
        other = threading.Thread(target=lambda: out.setdefault("relevance", lrp(adapter, batch, "attnlrp").relevance))
        other.start()
        other.join()
    torch.testing.assert_close(out["relevance"], alone, rtol=0, atol=1e-7)
