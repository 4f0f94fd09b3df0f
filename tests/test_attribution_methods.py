"""The per-token attribution methods over the adapter (``hf_attn/methods/``), each against a slow,
explicit reference: hand-computed one-layer cases, loops over heads/tokens with the model's own
modules, a different zeroing mechanism (a hook on the value projection), networkx max-flow, full
recomputation of deletions, and finite differences. Tiny random models of tests/architectures.py."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from architectures import TEXTS, tiny_classifier
from hf_attn.adapters import UnsupportedModelError, adapter_for
from hf_attn.adapters.internals import record_internals
from hf_attn.methods.adapter_integrated_gradients import integrated_gradients_attribution, quadrature
from hf_attn.methods.alti import alti, alti_contributions
from hf_attn.methods.attention_flow import attention_flow, max_flows, residual_attention
from hf_attn.methods.attention_norm import attention_norm
from hf_attn.methods.deletion import leave_one_out_deletion
from hf_attn.methods.gradient_x_input import gradient_x_input
from hf_attn.methods.raw_attention import raw_attention
from hf_attn.methods.rollout import rollout_importance
from hf_attn.methods.saliency import saliency
from hf_attn.methods.value_zeroing import value_zeroing, value_zeroing_matrices

ARCHS = ["bert", "llama", "distilbert"]
VALUE_MODULE = {"bert": "value", "llama": "v_proj", "distilbert": "v_lin"}


@pytest.fixture(scope="module", params=ARCHS)
def setup(request):
    model, tokenizer = tiny_classifier(request.param)
    reference = copy.deepcopy(model)
    adapter = adapter_for(model, tokenizer, device="cpu")
    return adapter, reference, request.param, adapter.encode(TEXTS)


def _inputs(batch, rows=None, **extra):
    rows = slice(None) if rows is None else rows
    out = {"input_ids": batch.input_ids[rows], "attention_mask": batch.attention_mask[rows], **extra}
    if batch.position_ids is not None:
        out["position_ids"] = batch.position_ids[rows]
    return out


def test_every_method_is_zero_outside_the_text(setup):
    adapter, _, _, batch = setup
    for method in (raw_attention, rollout_importance, attention_flow, attention_norm, alti, value_zeroing, saliency,
                   gradient_x_input, leave_one_out_deletion):
        scores = method(adapter, batch)
        assert scores.shape == batch.input_ids.shape, method.__name__
        assert torch.all(scores[~batch.content] == 0), method.__name__
        assert torch.isfinite(scores).all(), method.__name__


def test_raw_attention_is_the_eager_models_query_row(setup):
    adapter, reference, _, batch = setup
    with torch.no_grad():
        attentions = reference(**_inputs(batch, output_attentions=True)).attentions
    q = batch.query.float().argmax(-1)
    rows = torch.arange(len(batch))
    expected = attentions[-1].mean(1)[rows, q]
    torch.testing.assert_close(raw_attention(adapter, batch), torch.where(batch.content, expected, 0.0))
    expected = attentions[0][:, 1][rows, q]
    torch.testing.assert_close(raw_attention(adapter, batch, layer=0, heads=1), torch.where(batch.content, expected, 0.0))
    with pytest.raises(ValueError, match="heads"):
        raw_attention(adapter, batch, layer=0, heads=9)


# ------------------------------------------------------------------------------------------------
# attention flow


def _networkx_flow(capacities, source, sink):
    networkx = pytest.importorskip("networkx")
    graph = networkx.DiGraph()
    layers, n, _ = capacities.shape
    graph.add_nodes_from([(0, source), (layers, sink)])  # a source or sink without edges: no flow
    for layer in range(layers):
        for i in range(n):
            for j in range(n):
                if capacities[layer, i, j] > 0:
                    graph.add_edge((layer, j), (layer + 1, i), capacity=float(capacities[layer, i, j]))
    return networkx.maximum_flow_value(graph, (0, source), (layers, sink))


def test_max_flows_match_networkx_on_small_graphs():
    rng = np.random.default_rng(0)
    problems = []
    for layers, n in ((1, 2), (2, 4), (3, 5), (4, 3)):
        cap = rng.random((layers, n, n)) ** 3
        cap /= cap.sum(-1, keepdims=True)
        problems.append((cap, np.arange(n), np.full(n, n - 1)))
    flows = max_flows(problems)
    for (cap, sources, sinks), got in zip(problems, flows):
        expected = [_networkx_flow(cap, s, t) for s, t in zip(sources, sinks)]
        # rounding to 1e-6 per edge: at most (cut edges) / (2 · 10⁶) off
        np.testing.assert_allclose(got, expected, atol=cap.size * 5e-7)
    # a finer resolution: the 15 copies no longer fit one int32 solve and go to several calls
    fine = max_flows(problems, scale=2**28)
    for (cap, sources, sinks), got in zip(problems, fine):
        expected = [_networkx_flow(cap, s, t) for s, t in zip(sources, sinks)]
        np.testing.assert_allclose(got, expected, atol=cap.size * 2**-29)


def test_max_flows_with_other_sources_and_sinks_per_copy_match_networkx():
    """Each copy keeps only its own source's and sink's edges in the first and last layers: flows from
    every source to every sink, several problems in one call, one and two layers included."""
    rng = np.random.default_rng(1)
    problems = []
    for layers, n in ((1, 3), (2, 4), (5, 4), (3, 6)):
        cap = rng.random((layers, n, n)) ** 2
        cap[rng.random(cap.shape) < 0.3] = 0.0  # missing edges: a node with no way out on some layers
        cap /= np.maximum(cap.sum(-1, keepdims=True), 1e-12)
        pairs = np.array([(s, t) for s in range(n) for t in range(n)])
        problems.append((cap, pairs[:, 0], pairs[:, 1]))
    for (cap, sources, sinks), got in zip(problems, max_flows(problems, scale=2**20)):
        expected = [_networkx_flow(np.rint(cap * 2**20) / 2**20, s, t) for s, t in zip(sources, sinks)]
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)  # the same rounded graph: the same flow


def test_max_flow_hand_computed():
    # one layer: the only path (0, j) → (1, q) is one edge; two layers, 2 tokens: the min cut
    one = np.array([[[0.7, 0.3], [0.4, 0.6]]])
    np.testing.assert_allclose(max_flows([(one, np.array([0, 1]), np.array([0, 0]))])[0], [0.7, 0.3], atol=1e-6)
    two = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.5, 0.5], [0.0, 1.0]]])
    # from (0,0): paths via (1,0) [min(.9,.5)] and (1,1) [min(.2,.5)] → 0.5 + 0.2 = 0.7
    np.testing.assert_allclose(max_flows([(two, np.array([0]), np.array([0]))])[0], [0.7], atol=1e-6)


def test_attention_flow_matches_networkx_on_the_model(setup):
    """Raw flows against networkx per (source, sink); the default against the authors' compute_flows:
    each output node's flows over every input node (specials included) divided by their sum."""
    adapter, _, _, batch = setup
    raw = attention_flow(adapter, batch, normalise=False)
    got = attention_flow(adapter, batch)
    matrices = torch.stack([residual_attention(layer.probs, batch.attention_mask)
                            for layer in record_internals(adapter, batch)], 1)
    for b in (0, 3):
        real = batch.attention_mask[b].bool().nonzero().flatten()
        cap = matrices[b][:, real][:, :, real].double().numpy()
        local = {int(p): i for i, p in enumerate(real)}
        sink = local[int(batch.query[b].float().argmax())]
        every = {int(p): _networkx_flow(cap, local[int(p)], sink) for p in real}
        total = sum(every.values())
        for position in batch.content[b].nonzero().flatten().tolist():
            assert abs(float(raw[b, position]) - every[position]) < 1e-4
            assert abs(float(got[b, position]) - every[position] / total) < 1e-4


def test_one_layer_flow_is_the_residual_attention():
    model, tokenizer = tiny_classifier("bert", layers=1)
    adapter = adapter_for(model, tokenizer, device="cpu")
    batch = adapter.encode(TEXTS)
    with torch.no_grad():
        attention = model(**_inputs(batch, output_attentions=True)).attentions[0]
    a = residual_attention(attention, batch.attention_mask)[:, 0]  # [CLS] row
    # one layer: the raw flow is the residual attention row; normalised, the row sums to 1 already
    torch.testing.assert_close(attention_flow(adapter, batch, normalise=False), torch.where(batch.content, a, 0.0),
                               atol=2e-6, rtol=0)
    torch.testing.assert_close(attention_flow(adapter, batch), torch.where(batch.content, a, 0.0), atol=4e-6, rtol=0)
    torch.testing.assert_close(rollout_importance(adapter, batch), torch.where(batch.content, a, 0.0))


# ------------------------------------------------------------------------------------------------
# attention norm and ALTI against loops over the model's own modules


def _layer_pieces(reference, name, batch, b):
    """(x_j inputs to the value projection (T, D), residual (T, D), value module, W_O module,
    probs (H, T, T), heads, layer module) for layer 0 of instance b, by the model's modules."""
    with torch.no_grad():
        out = reference(**_inputs(batch, slice(b, b + 1), output_attentions=True, output_hidden_states=True))
    hidden = out.hidden_states[0][0]
    probs = out.attentions[0][0]
    if name == "bert":
        attention = reference.bert.encoder.layer[0].attention
        return hidden, hidden, attention.self.value, attention.output.dense, probs, attention.output.LayerNorm
    if name == "distilbert":
        block = reference.distilbert.transformer.layer[0]
        return hidden, hidden, block.attention.v_lin, block.attention.out_lin, probs, block.sa_layer_norm
    layer = reference.model.layers[0]
    return layer.input_layernorm(hidden), hidden, layer.self_attn.v_proj, layer.self_attn.o_proj, probs, None


def _slow_vectors(reference, name, batch, b):
    """T_i(x_j) by explicit loops: (T, T, D) tensor, the residual added on i == j; and the probs."""
    x, residual, value, output, probs, _ = _layer_pieces(reference, name, batch, b)
    heads = probs.shape[0]
    with torch.no_grad():
        v = value(x)  # (T, H_kv · d)
        dim = output.weight.shape[1] // heads
        groups = heads // (v.shape[-1] // dim)
        steps = x.shape[0]
        vectors = torch.zeros(steps, steps, output.weight.shape[0])
        for i in range(steps):
            for j in range(steps):
                for h in range(heads):
                    kv = h // groups
                    head_value = v[j, kv * dim:(kv + 1) * dim]
                    vectors[i, j] += probs[h, i, j] * (output.weight[:, h * dim:(h + 1) * dim] @ head_value)
                if i == j:
                    vectors[i, j] += residual[i]
    return vectors


def test_attention_norm_matches_a_loop_over_heads(setup):
    adapter, reference, name, batch = setup
    model, tokenizer = tiny_classifier(name, layers=1)
    one = adapter_for(model, tokenizer, device="cpu")
    got = attention_norm(one, batch)
    for b in (0, 1):
        vectors = _slow_vectors(model, name, batch, b)
        q = int(batch.query[b].float().argmax())
        eye = torch.eye(vectors.shape[0])[q]
        _, residual, *_ = _layer_pieces(model, name, batch, b)
        attn_only = vectors[q] - eye[:, None] * residual[q][None]  # drop the residual term
        expected = attn_only.norm(dim=-1)
        real = batch.content[b]
        torch.testing.assert_close(got[b][real], expected[real], atol=1e-5, rtol=1e-4)


def test_alti_one_layer_matches_explicit_loops(setup):
    _, _, name, batch = setup
    model, tokenizer = tiny_classifier(name, layers=1)
    adapter = adapter_for(model, tokenizer, device="cpu")
    got = alti(adapter, batch)
    for b in (0, 1):
        vectors = _slow_vectors(model, name, batch, b)
        _, residual, _, output, _, norm = _layer_pieces(model, name, batch, b)
        real = batch.attention_mask[b].bool()
        q = int(batch.query[b].float().argmax())
        bias = output.bias if output.bias is not None else torch.zeros(vectors.shape[-1])
        with torch.no_grad():
            if norm is not None:  # post-LN: y = LN(Σ_j T + b_O), split linearly with the row's σ
                whole = vectors[q][real].sum(0) + bias
                sigma = torch.sqrt(whole.var(unbiased=False) + norm.eps)
                terms = [norm.weight * (vectors[q, j] - vectors[q, j].mean()) / sigma for j in range(len(real))]
                y = norm(whole)
            else:
                terms = [vectors[q, j] for j in range(len(real))]
                y = vectors[q][real].sum(0) + bias
            raw = []
            for j in range(len(real)):
                raw.append(max(0.0, float(y.abs().sum() - (y - terms[j]).abs().sum())) if real[j] else 0.0)
        expected = torch.tensor(raw) / sum(raw)
        content = batch.content[b]
        torch.testing.assert_close(got[b][content], expected[content].float(), atol=1e-5, rtol=1e-4)


def test_alti_decomposition_is_exact_and_rolls_out(setup):
    adapter, _, _, batch = setup
    layers = record_internals(adapter, batch)
    product = None
    for layer in layers:
        c = alti_contributions(layer, batch.attention_mask)
        real = batch.attention_mask.bool()
        torch.testing.assert_close(c.sum(-1)[real], torch.ones(int(real.sum())), atol=1e-5, rtol=0)
        product = c if product is None else c @ product
    q = batch.query.float().argmax(-1)
    expected = product[torch.arange(len(batch)), q]
    torch.testing.assert_close(alti(adapter, batch), torch.where(batch.content, expected, 0.0))


def test_unknown_block_layout_is_refused():
    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    adapter.model.config.model_type = "mystery"
    batch = adapter.encode(TEXTS[:1])
    for method in (alti, attention_norm):
        with pytest.raises(UnsupportedModelError, match="layout of 'mystery' models is not known"):
            method(adapter, batch)


# ------------------------------------------------------------------------------------------------
# value zeroing against a hook that zeroes the value projection's output


def test_value_zeroing_matches_a_value_projection_hook(setup):
    adapter, reference, name, batch = setup
    got = value_zeroing_matrices(adapter, batch)
    values = [m for n, m in reference.named_modules() if n.endswith("." + VALUE_MODULE[name])]
    last = len(values) - 1
    for layer, b, j in ((0, 1, 2), (last, 3, 4), (last, 0, 1)):
        def zero(module, args, output, j=j):
            output = output.clone()
            output[:, j] = 0
            return output

        with torch.no_grad():
            plain = reference(**_inputs(batch, slice(b, b + 1), output_hidden_states=True)).hidden_states
            handle = values[layer].register_forward_hook(zero)
            try:
                zeroed = reference(**_inputs(batch, slice(b, b + 1), output_hidden_states=True)).hidden_states
            finally:
                handle.remove()
        # (Llama's last hidden state is after the final RMSNorm, whose unit initial weight keeps cosines)
        expected = 1 - torch.nn.functional.cosine_similarity(zeroed[layer + 1][0], plain[layer + 1][0], dim=-1)
        real = batch.attention_mask[b].bool()
        torch.testing.assert_close(got[b, layer, :, j][real], expected[real], atol=1e-5, rtol=1e-4)
    # normalised rows rolled out over the layers, the query row read
    normalised = got / got.sum(-1, keepdim=True).clamp_min(1e-30)
    product = normalised[:, 0]
    for layer in range(1, normalised.shape[1]):
        product = normalised[:, layer] @ product
    expected = product[torch.arange(len(batch)), batch.query.float().argmax(-1)]
    torch.testing.assert_close(value_zeroing(adapter, batch), torch.where(batch.content, expected, 0.0))
    assert adapter._value_zeroing_sharing[0]  # the path above: the variants shared the layer's work


def _variant_by_variant(adapter, batch):
    """value_zeroing_matrices with the sharing off (each variant's layer computed whole)."""
    saved = getattr(adapter, "_value_zeroing_sharing", None)
    adapter._value_zeroing_sharing = (False, "off for the comparison")
    try:
        return value_zeroing_matrices(adapter, batch)
    finally:
        adapter._value_zeroing_sharing = saved


def test_value_zeroing_shares_an_instances_work_between_its_variants(setup, monkeypatch):
    """The variants of one instance share the zeroed layer's projections and attention (the zeroed
    token's term taken off P·V): the scores of computing each variant's layer whole up to float32
    rounding (1e-6 of the largest score), also when chunks of 3 variants straddle instances (the
    stores keep an instance across chunks and drop it after)."""
    from hf_attn.methods import value_zeroing as vz

    adapter, _, _, batch = setup
    value_zeroing_matrices(adapter, batch)
    assert adapter._value_zeroing_sharing[0], adapter._value_zeroing_sharing
    steps = batch.input_ids.shape[1]
    monkeypatch.setattr(adapter, "token_budget", 3 * steps)  # 3 variants per forward
    made, real = [], vz.SharedZeroing

    def recorded(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(vz, "SharedZeroing", recorded)
    shared, whole = value_zeroing_matrices(adapter, batch), _variant_by_variant(adapter, batch)
    assert int((whole > 0).sum()) > 100  # (a distance of ~1e-14 may round to 0 in one of the two)
    torch.testing.assert_close(shared, whole, rtol=1e-3, atol=1e-6 * float(whole.max()))
    # one store per layer; every linear map before the attention computed each instance once, though
    # 3-variant chunks cut the instances; at the end only the last chunk's instances are kept
    assert [s.layer for s in made] == list(range(adapter.num_layers))
    variants = batch.attention_mask.nonzero()[:, 0].tolist()  # each variant's instance, in order
    last = set(variants[len(variants) - (len(variants) % 3 or 3):])  # the last 3-variant chunk's instances
    for store in made:
        assert store.computed and set(store.computed.values()) == {len(batch)}
        assert {key[2] for key in store.outputs} == last and set(store.attention) == last


@pytest.mark.parametrize("name", ["bert", "distilbert"])
def test_shared_value_zeroing_is_as_close_to_float64_as_the_whole_layer(name):
    """Against the same model run in float64, the shared scores' largest error is at most twice the
    variant-by-variant scores' (float32 rounding either way; measured: 3.4e-7 against 4.0e-7 on BERT)."""
    model, tokenizer = tiny_classifier(name)
    exact_model = copy.deepcopy(model)
    adapter = adapter_for(model, tokenizer, device="cpu")
    exact = adapter_for(exact_model, tokenizer, device="cpu")
    exact_model.double()  # after the adapter's float32 checks
    batch = adapter.encode(TEXTS)
    truth = _variant_by_variant(exact, batch).double()
    shared, whole = value_zeroing_matrices(adapter, batch).double(), _variant_by_variant(adapter, batch).double()
    assert adapter._value_zeroing_sharing[0]
    assert float((shared - truth).abs().max()) <= 2 * float((whole - truth).abs().max()) + 1e-9


def test_value_zeroing_keeps_the_whole_layer_where_sharing_fails_its_check(monkeypatch):
    """A model whose shared forward disagrees with the whole one (here: a broken attention term) keeps
    the variant-by-variant forward, with the reason, and its scores are unchanged."""
    from hf_attn.methods import value_zeroing as vz

    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    batch = adapter.encode(TEXTS[:3])
    real_attend = vz.SharedZeroing.attend
    monkeypatch.setattr(vz.SharedZeroing, "attend", lambda self, *a: (lambda o, p: (o + 1e-3, p))(*real_attend(self, *a)))
    got = value_zeroing_matrices(adapter, batch)
    ok, reason = adapter._value_zeroing_sharing[:2]
    assert not ok and reason.startswith("the shared forward differs from the variant-by-variant one by")
    assert torch.equal(got, _variant_by_variant(adapter, batch))


def test_value_zeroing_sharing_is_refused_for_models_with_their_own_attention():
    model, tokenizer = tiny_classifier("deberta-v2")
    adapter = adapter_for(model, tokenizer, device="cpu")
    value_zeroing_matrices(adapter, adapter.encode(TEXTS[:2]))
    assert adapter._value_zeroing_sharing[:2] == (
        False, "the attention is computed in the model's own modules (hooked), not through the interface")


# ------------------------------------------------------------------------------------------------
# gradients: finite differences; integrated gradients: completeness and a slow loop; LOO: recomputation


def _float64(name):
    model, tokenizer = tiny_classifier(name)
    adapter = adapter_for(model.to(torch.float64), tokenizer, device="cpu")
    return adapter, adapter.encode(TEXTS[1:2])


@pytest.mark.parametrize("name", ARCHS)
def test_saliency_and_gradient_x_input_match_finite_differences(name):
    adapter, batch = _float64(name)
    embeddings = adapter.embeddings(batch).detach()
    c = adapter.logits(batch).argmax(-1)

    def p(e):
        with torch.no_grad():
            return float(adapter.logits_from_embeddings(batch, e).softmax(-1)[0, c[0]])

    position = int(batch.content[0].nonzero()[1])
    # several architectures round their softmax to float32 even in float64 (see test_adapters): a step of
    # 1e-3 and a tolerance of 1e-3 (rounding noise ~1e-7 / 1e-3 per coordinate)
    step = 1e-3
    grad = torch.zeros(embeddings.shape[-1], dtype=torch.float64)
    for d in range(embeddings.shape[-1]):
        delta = torch.zeros_like(embeddings)
        delta[0, position, d] = step
        grad[d] = (p(embeddings + delta) - p(embeddings - delta)) / (2 * step)
    assert abs(float(saliency(adapter, batch)[0, position]) - float(grad.norm())) < 1e-3 * (1 + float(grad.norm()))
    expected = float((grad * embeddings[0, position]).sum())
    assert abs(float(gradient_x_input(adapter, batch)[0, position]) - expected) < 1e-3 * (1 + abs(expected))


def test_quadrature_rules_integrate_polynomials():
    for rule, steps, degree in (("gauss-legendre", 4, 7), ("trapezoid", 1, 1), ("riemann-right", 3, 0)):
        a, w = quadrature(steps, rule)
        np.testing.assert_allclose((w * a ** degree).sum(), 1 / (degree + 1), atol=1e-12)
    with pytest.raises(ValueError, match="steps"):
        quadrature(0, "trapezoid")
    with pytest.raises(ValueError, match="rule"):
        quadrature(4, "simpson")


@pytest.mark.parametrize("name", ["bert", "distilbert"])
def test_integrated_gradients_completeness_and_slow_reference(name):
    adapter, batch = _float64(name)
    result = integrated_gradients_attribution(adapter, batch, steps=48, rule="gauss-legendre")
    difference = float(result.target_input[0] - result.target_baseline[0])
    if name == "bert":  # a smooth path: completeness to quadrature precision
        assert abs(float(result.completeness_gap[0])) < 1e-4 * max(abs(difference), 1e-2)
    # the slow reference: the same nodes one at a time, each its own forward and gradient
    embeddings = adapter.embeddings(batch).detach()
    base = torch.where(batch.content.unsqueeze(-1), torch.zeros_like(embeddings), embeddings)
    c = result.target_class
    total = torch.zeros_like(embeddings)
    for alpha, weight in zip(*quadrature(48, "gauss-legendre")):
        point = (base + float(alpha) * (embeddings - base)).requires_grad_(True)
        value = adapter.logits_from_embeddings(batch, point).softmax(-1)[0, c[0]]
        (grad,) = torch.autograd.grad(value, point)
        total += grad * float(weight)
    expected = ((embeddings - base) * total).sum(-1)[0]
    content = batch.content[0]
    torch.testing.assert_close(result.attributions[0][content].double(), expected[content], atol=1e-6, rtol=1e-5)
    gap = float(expected.sum()) - difference
    assert abs(gap - float(result.completeness_gap[0])) < 1e-6
    # one right-rule step is gradient × input (the baseline is zero on the text)
    one = integrated_gradients_attribution(adapter, batch, steps=1, rule="riemann-right")
    torch.testing.assert_close(one.attributions, gradient_x_input(adapter, batch).float(), atol=1e-6, rtol=1e-5)


def test_integrated_gradients_keeps_every_forward_within_the_token_budget(setup):
    """A budget below one instance's path points splits the points (memory bounded at any length);
    the attributions, f(x), f(x') and the gap equal the unsplit run's; the weights are frozen only
    during the forwards (no weight gradient, flags restored)."""
    adapter, _, _, batch = setup
    width = batch.input_ids.shape[1]
    reference = integrated_gradients_attribution(adapter, batch, steps=6, token_budget=10 ** 6)
    seen, frozen = [], []
    inner = adapter.logits_from_embeddings

    def recording(sub, embeddings, **kwargs):
        seen.append(embeddings.shape[0] * embeddings.shape[1])
        out = inner(sub, embeddings, **kwargs)
        frozen.append(out.requires_grad == embeddings.requires_grad)
        return out

    adapter.logits_from_embeddings = recording
    try:
        split = integrated_gradients_attribution(adapter, batch, steps=6, token_budget=3 * width)
    finally:
        del adapter.logits_from_embeddings
    assert max(seen) <= 3 * width and len(seen) > len(batch) * 2  # some points of one instance per pass
    assert all(frozen)
    for name in ("attributions", "target_input", "target_baseline"):
        torch.testing.assert_close(getattr(split, name), getattr(reference, name), atol=1e-6, rtol=1e-5)
    # the gap is a float32 difference of O(1) sums (Σ attributions − (f(x) − f(x'))), summed in another
    # order when the points are split: a few float32 ulps of 1 apart
    torch.testing.assert_close(split.completeness_gap, reference.completeness_gap, atol=1e-5, rtol=1e-5)
    assert all(p.requires_grad for p in adapter.model.parameters())
    assert all(p.grad is None for p in adapter.model.parameters())


def test_leave_one_out_matches_full_recomputation(setup):
    adapter, reference, _, batch = setup
    got = leave_one_out_deletion(adapter, batch)
    for b in range(len(batch)):
        real = batch.attention_mask[b].bool()
        tokens = batch.input_ids[b][real].tolist()
        content = batch.content[b][real].tolist()
        with torch.no_grad():
            full = reference(input_ids=torch.tensor([tokens])).logits.softmax(-1)[0]
        c = int(full.argmax())
        for t in range(len(tokens)):
            if not content[t]:
                continue
            shorter = tokens[:t] + tokens[t + 1:]
            with torch.no_grad():
                p = reference(input_ids=torch.tensor([shorter])).logits.softmax(-1)[0, c]
            position = int(real.nonzero()[t])
            assert abs(float(got[b, position]) - float(full[c] - p)) < 1e-5


def test_captum_integrated_gradients_equals_ours_and_kernel_shap_runs():
    pytest.importorskip("captum", reason="captum is an optional extra (pip install torch==2.13.0 'hf_attn[captum]'; the test extra has it)")
    from hf_attn.methods.captum_attributions import captum_attribution

    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model.to(torch.float64), tokenizer, device="cpu")
    batch = adapter.encode(TEXTS)
    ours = integrated_gradients_attribution(adapter, batch, steps=32, rule="gauss-legendre").attributions
    torch.testing.assert_close(captum_attribution(adapter, batch, "integrated_gradients", steps=32), ours.float(),
                               atol=1e-6, rtol=1e-5)
    shap = captum_attribution(adapter, batch, "kernel_shap", n_samples=32)
    assert shap.shape == batch.input_ids.shape and torch.all(shap[~batch.content] == 0)
    with pytest.raises(ValueError, match="method must be one of"):
        captum_attribution(adapter, batch, "lime")


class _DenseAdapter:
    """A hand-built adapter over a net of linear layers and activation modules (every nonlinearity
    an ``nn.Module`` captum's DeepLift hooks): logits = net(Σ_t e_t), so DeepLift is exact."""

    def __init__(self, net, table):
        self.model = torch.nn.ModuleDict({"net": net, "table": table})

    def embeddings(self, batch):
        return self.model["table"](batch.input_ids)

    def logits_from_embeddings(self, batch, embeddings):
        summed = (embeddings * batch.attention_mask.unsqueeze(-1)).sum(1)
        return self.model["net"](summed)


def _dense_batch():
    from hf_attn.adapters.base import Batch

    ids = torch.tensor([[1, 3, 4, 2, 0], [1, 5, 6, 7, 2]])
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    content = torch.tensor([[0, 1, 1, 0, 0], [0, 1, 1, 1, 0]], dtype=torch.bool)
    return Batch(input_ids=ids, attention_mask=mask, content=content, query=torch.zeros_like(content))


def test_captum_deeplift_equals_the_rescale_rule_computed_by_hand():
    pytest.importorskip("captum", reason="captum is an optional extra (pip install torch==2.13.0 'hf_attn[captum]'; the test extra has it)")
    from hf_attn.methods.captum_attributions import captum_attribution

    torch.manual_seed(0)
    hidden, classes, dim = 6, 3, 4
    net = torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, classes)).double()
    table = torch.nn.Embedding(8, dim).double()
    adapter, batch = _DenseAdapter(net, table), _dense_batch()
    got = captum_attribution(adapter, batch, "deeplift")
    W1, b1 = net[0].weight.detach().numpy(), net[0].bias.detach().numpy()
    W2, b2 = net[2].weight.detach().numpy(), net[2].bias.detach().numpy()
    E = table.weight.detach().numpy()
    for b in range(len(batch)):
        ids = batch.input_ids[b].numpy()
        real = batch.attention_mask[b].numpy().astype(bool)
        content = batch.content[b].numpy()
        x = E[ids[real]].sum(0)  # the summed embeddings, input of the net
        x0 = E[ids[real & ~content]].sum(0)  # the reference: content embeddings zeroed
        h, h0 = W1 @ x + b1, W1 @ x0 + b1
        relu = np.maximum(h, 0) - np.maximum(h0, 0)
        # rescale rule at the ReLU: Δy/Δh, the gradient (0 or 1) where Δh = 0
        m_relu = np.where(np.abs(h - h0) > 1e-10, relu / np.where(h == h0, 1, h - h0), (h > 0).astype(float))
        z = W2 @ np.maximum(h, 0) + b2
        c = int(np.argmax(z))
        w_target = W2[c] - W2.mean(0)  # t = z_c − mean_k z_k
        m_x = W1.T @ (m_relu * w_target)  # multiplier of each element of the summed embedding
        for t in np.flatnonzero(content):
            expected = float(E[ids[t]] @ m_x)  # C = Δx·m with Δx = e_t − 0
            assert abs(float(got[b, t]) - expected) < 1e-5, (b, t)
        assert torch.all(got[b][~batch.content[b]] == 0)


def test_captum_deeplift_sums_to_the_output_difference():
    pytest.importorskip("captum", reason="captum is an optional extra (pip install torch==2.13.0 'hf_attn[captum]'; the test extra has it)")
    from hf_attn.methods.captum_attributions import deeplift_attribution

    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 5), torch.nn.ReLU(),
                              torch.nn.Linear(5, 2)).double()
    adapter, batch = _DenseAdapter(net, torch.nn.Embedding(8, 4).double()), _dense_batch()
    got = deeplift_attribution(adapter, batch)
    with torch.no_grad():
        embeddings = adapter.embeddings(batch)
        logits = adapter.logits_from_embeddings(batch, embeddings)
        zeroed = torch.where(batch.content.unsqueeze(-1), torch.zeros_like(embeddings), embeddings)
        reference = adapter.logits_from_embeddings(batch, zeroed)
    c = logits.argmax(-1)
    target = lambda z: (z - z.mean(-1, keepdim=True)).gather(1, c[:, None]).squeeze(1)  # noqa: E731
    torch.testing.assert_close(got.sum(1).double(), target(logits) - target(reference), atol=1e-5, rtol=1e-5)
    assert bool((got[batch.content] != 0).all())


def test_captum_deeplift_on_a_transformer_and_refused_on_the_papers_bilstm():
    pytest.importorskip("captum", reason="captum is an optional extra (pip install torch==2.13.0 'hf_attn[captum]'; the test extra has it)")
    from hf_attn.batteries.faithfulness import FaithfulnessSettings, run_faithfulness
    from hf_attn.data.tokenization import build_tokenizer
    from hf_attn.methods.captum_attributions import captum_attribution
    from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
    from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification

    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    batch = adapter.encode(TEXTS)
    scores = captum_attribution(adapter, batch, "deeplift")
    assert scores.shape == batch.input_ids.shape and torch.isfinite(scores).all()
    assert torch.all(scores[~batch.content] == 0) and bool((scores[batch.content] != 0).any())
    # a row's scores do not depend on the other rows of the batch (DeepLift stacks inputs and baselines)
    torch.testing.assert_close(captum_attribution(adapter, batch.select([1]), "deeplift")[0], scores[1],
                               atol=1e-5, rtol=1e-4)

    lstm_tokenizer = build_tokenizer(TEXTS, max_length=24)
    lstm = AttnClassifierForSequenceClassification(AttnClassifierConfig(
        vocab_size=len(lstm_tokenizer.get_vocab()), embedding_dim=8, encoder="lstm", hidden_size=4,
        max_tokens=24, pad_token_id=0, unk_token_id=1, mask_token_id=2)).eval()
    lstm_adapter = adapter_for(lstm, lstm_tokenizer, device="cpu")
    with pytest.raises(UnsupportedModelError, match="recurrent modules"):
        captum_attribution(lstm_adapter, lstm_adapter.encode(TEXTS), "deeplift")
    result = run_faithfulness(lstm_adapter, TEXTS[:2], FaithfulnessSettings(
        methods=("attention", "deeplift"), fractions=(0.5,), soft_draws=1, soft_max_draws=1, naopc_beam=0))
    assert result.methods == ["attention"] and "recurrent modules" in result.skipped["deeplift"]


def test_value_zeroing_distance_is_one_minus_cosine_without_cancellation():
    from hf_attn.methods.value_zeroing import cosine_distance

    generator = torch.Generator().manual_seed(0)
    a = torch.randn(6, 384, generator=generator)
    b = torch.randn(6, 384, generator=generator)
    near = a + 1e-4 * b  # an output moved by 10⁻⁴ of its size: 1 − cos ≈ 5·10⁻⁹
    for x, y in ((a, b), (a, near)):
        x64, y64 = x.double(), y.double()
        exact = 1 - (x64 * y64).sum(-1) / (x64.norm(dim=-1) * y64.norm(dim=-1))
        torch.testing.assert_close(cosine_distance(x, y), exact, rtol=1e-6, atol=0)
    naive = 1 - torch.nn.functional.cosine_similarity(a, near, dim=-1)  # float32: rounding, not a distance
    exact = cosine_distance(a, near)
    assert (naive.double() - exact).abs().max() > 0.5 * exact.abs().min()


def test_attention_flow_refuses_a_text_past_its_length_limit_with_the_estimate():
    """One maximum flow per token on L·n² edges: a text longer than ``max_tokens`` is refused before
    any solve, the message states the estimate; in the faithfulness table only that text's flow is
    undefined, with the reason, and the other texts keep theirs."""
    from hf_attn.batteries.faithfulness import FaithfulnessSettings, run_faithfulness
    from hf_attn.methods.attention_flow import FLOW_SECONDS_PER_L_N3, check_flow_length, flow_seconds_estimate

    assert flow_seconds_estimate(4, 2048) == pytest.approx(FLOW_SECONDS_PER_L_N3 * 4 * 2048 ** 3)
    with pytest.raises(ValueError, match=r"text of 2048 tokens \(more than 512\).*4·2048² edges, about 3,78"):
        check_flow_length(4, 2048)
    check_flow_length(4, 2048, max_tokens=None)  # no limit
    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    texts = ["dull", "not very fun acting , but a great story"]  # 3 and 12 real positions
    batch = adapter.encode(texts)
    with pytest.raises(ValueError, match="text of 12 tokens"):
        attention_flow(adapter, batch, max_tokens=6)
    table = run_faithfulness(adapter, texts, FaithfulnessSettings(methods=("attention_flow", "random"),
                                                                  metrics=("comprehensiveness",), naopc_beam=0,
                                                                  flow_max_tokens=6))
    assert table.undefined["attention_flow"][0] is None
    assert "attention flow is refused on a text of 12 tokens" in table.undefined["attention_flow"][1]
    assert table.table["attention_flow"]["comprehensiveness"]["n"] == 1
    every = run_faithfulness(adapter, texts[1:], FaithfulnessSettings(methods=("attention_flow", "random"),
                                                                      metrics=("comprehensiveness",), naopc_beam=0,
                                                                      flow_max_tokens=6))
    assert "attention flow is refused" in every.undefined["attention_flow"][0]  # every text refused: no error
    alone = attention_flow(adapter, adapter.encode(texts[:1]), max_tokens=6)  # (1, 3): [CLS] dull [SEP]
    np.testing.assert_allclose(table.attributions["attention_flow"][0], alone[0].numpy(), atol=1e-6)
