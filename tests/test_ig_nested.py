"""The nested integrated-gradients rule ("gauss-kronrod"): the Kronrod rules of
hf_attn.methods.kronrod (exact for polynomials of degree 3n + 1, Gauss subset = numpy's leggauss,
QUADPACK's G7–K15 table), the Kronrod refinement that reuses the n Gauss nodes' gradients (equal to
the Kronrod rule run from scratch, n + (n + 1) gradients per sentence, counted; the table's
default) and the doubling rule's output unchanged. Tiny random BERT of tests/architectures.py, float32."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from architectures import TEXTS, tiny_classifier
from hf_attn.adapters import adapter_for
from hf_attn.batteries.faithfulness import FaithfulnessSettings
from hf_attn.batteries.faithfulness.methods import _IntegratedGradients
from hf_attn.methods.adapter_integrated_gradients import integrated_gradients_attribution, kronrod_refinement
from hf_attn.methods.integrated_gradients import quadrature
from hf_attn.methods.kronrod import gauss_kronrod, kronrod, kronrod_extension

# QUADPACK qk15: the G7–K15 nodes (x ≥ 0, descending) and weights on [−1, 1]
XGK = [0.991455371120812639206854697526329, 0.949107912342758524526189684047851, 0.864864423359769072789712788640926,
       0.741531185599394439863864773280788, 0.586087235467691130294144845693013, 0.405845151377397166906606412076961,
       0.207784955007898467600689403773245, 0.0]
WGK = [0.022935322010529224963732008058970, 0.063092092629978553290700663189204, 0.104790010322250183839876322541518,
       0.140653259715525918745189590510238, 0.169004726639267902826583426598550, 0.190350578064785409913256402421014,
       0.204432940075298892414161999234649, 0.209482141084727828012999174891714]


@pytest.mark.parametrize("n", [4, 7, 16])
def test_the_kronrod_rule_integrates_polynomials_up_to_degree_3n_plus_1_on_0_1(n):
    nodes, weights = gauss_kronrod(n)
    assert len(nodes) == 2 * n + 1 and (weights > 0).all() and ((0 < nodes) & (nodes < 1)).all()
    for degree in range(3 * n + 2):
        assert (weights * nodes ** degree).sum() == pytest.approx(1 / (degree + 1), abs=1e-14)
    gauss_x, gauss_w = np.polynomial.legendre.leggauss(n)
    x, _ = kronrod(n)
    np.testing.assert_allclose(x[1::2], gauss_x, rtol=0, atol=1e-14)  # the Gauss subset
    np.testing.assert_array_equal(nodes[:n], (gauss_x + 1) / 2)  # the first pass's nodes exactly
    if n == 4:  # an even n's rule is not exact one degree higher (measured error 3e-10 at n = 4)
        assert abs((weights * nodes ** (3 * n + 2)).sum() - 1 / (3 * n + 3)) > 1e-12
    assert len(set(np.round(nodes, 12))) == 2 * n + 1 and len(gauss_w) == n


def test_the_g7_k15_rule_is_quadpacks_table():
    x, w = kronrod(7)
    np.testing.assert_allclose(x[7:][::-1], XGK, rtol=0, atol=1e-12)
    np.testing.assert_allclose(w[7:][::-1], WGK, rtol=0, atol=1e-12)
    np.testing.assert_allclose(x[:7], -np.array(XGK[:7]), rtol=0, atol=1e-12)
    gauss_weights, new_nodes, new_weights = kronrod_extension(7)
    assert gauss_weights.sum() + new_weights.sum() == pytest.approx(1, abs=1e-15) and len(new_nodes) == 8
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="n must be"):
            kronrod(bad)


@pytest.fixture(scope="module")
def bert():
    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    return adapter, adapter.encode(TEXTS)


def _counting(adapter, counts):
    """``adapter`` whose gradient forwards (path points) are counted in ``counts``."""
    original = adapter.logits_from_embeddings

    def counted(batch, embeddings, *args, **kwargs):
        if embeddings.requires_grad:
            counts.append(len(embeddings))
        return original(batch, embeddings, *args, **kwargs)

    adapter.logits_from_embeddings = counted
    return adapter


def test_the_refinement_equals_the_kronrod_rule_from_scratch_and_the_default_is_unchanged(bert):
    adapter, batch = bert
    plain = integrated_gradients_attribution(adapter, batch, 4)
    gauss = integrated_gradients_attribution(adapter, batch, 4, node_contributions=True)
    assert plain.node_contributions is None and gauss.node_contributions.shape == (len(TEXTS), 4, batch.input_ids.shape[1])
    assert torch.equal(plain.attributions, gauss.attributions) and torch.equal(plain.completeness_gap,
                                                                                gauss.completeness_gap)
    assert float(gauss.node_contributions[~batch.content[:, None].expand_as(gauss.node_contributions)].abs().max()) == 0
    weights = torch.as_tensor(quadrature(4, "gauss-legendre")[1])
    combined = (gauss.node_contributions * weights[:, None]).sum(1)
    assert float((combined - gauss.attributions.double()).abs().max()) <= 1e-6
    nested = kronrod_refinement(adapter, batch, gauss.node_contributions)
    scratch = integrated_gradients_attribution(adapter, batch, nodes=gauss_kronrod(4))
    assert float((nested.attributions - scratch.attributions).abs().max()) <= 1e-6
    assert float((nested.completeness_gap - scratch.completeness_gap).abs().max()) <= 1e-6
    assert quadrature(4, "gauss-kronrod")[0].tolist() == quadrature(4, "gauss-legendre")[0].tolist()
    with pytest.raises(ValueError, match="nodes must"):
        integrated_gradients_attribution(adapter, batch, nodes=([0.5, 1.5], [0.5, 0.5]))
    with pytest.raises(ValueError, match="gauss_contributions must"):
        kronrod_refinement(adapter, batch, gauss.node_contributions[:2])


def test_the_table_refines_with_n_plus_n_plus_1_gradients_by_default_and_the_doubling_rule_as_before(bert):
    model, tokenizer = tiny_classifier("bert")
    counts = []
    adapter = _counting(adapter_for(model, tokenizer, device="cpu"), counts)
    batch = adapter.encode(TEXTS)
    common = {"methods": ("integrated_gradients",), "ig_steps": 4, "ig_target": 1e-6}
    assert FaithfulnessSettings().ig_rule == "gauss-kronrod"  # the nested rule is the table's default
    nested = _IntegratedGradients(FaithfulnessSettings(ig_max_steps=9, **common))
    attributions = nested(adapter, batch)
    refined = nested.steps[0] == 9
    assert refined.sum() >= 3  # the tiny model misses 1e-6 at 4 nodes on most sentences
    assert nested.evaluated[0].tolist() == [9 if r else 4 for r in refined]
    assert sum(counts) == nested.evaluated[0].sum()  # 4 + 5 gradients per refined sentence, not 4 + 9
    scratch = integrated_gradients_attribution(adapter, batch, nodes=gauss_kronrod(4))
    rows = torch.from_numpy(refined)
    assert float((attributions[rows] - scratch.attributions[rows]).abs().max()) <= 1e-6
    # the doubling rule: as before (4 nodes, then 8 from scratch for the sentences that missed)
    counts.clear()
    default = _IntegratedGradients(FaithfulnessSettings(ig_rule="gauss-legendre", ig_max_steps=8, **common))
    got = default(adapter, batch)
    gradients = sum(counts)
    first = integrated_gradients_attribution(adapter, batch, 4)
    missed = (first.completeness_gap.abs() > 1e-6 * (first.target_input - first.target_baseline).abs()) & (
        first.completeness_gap.abs() > 1e-9)
    again = integrated_gradients_attribution(adapter, batch.select(missed.nonzero().flatten().tolist()), 8)
    expected = first.attributions.clone()
    expected[missed] = again.attributions
    assert torch.equal(got, expected)
    assert default.evaluated[0].tolist() == [12 if m else 4 for m in missed.tolist()]
    assert gradients == default.evaluated[0].sum()
    with pytest.raises(ValueError, match="ig_rule must be one of"):
        FaithfulnessSettings(ig_rule="simpson")


def test_refinements_reuse_the_first_pass_ends_and_count_the_gradients(bert):
    """f(x) and f(x') run once per text in a whole table's integrated gradients: the refinements reuse
    them (the same numbers as running them again); ``ig_gradients_mean`` is the gradients evaluated."""
    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    ends = []  # the rows of every forward without gradients (f(x) and f(x') of a pass)
    original = adapter.logits_from_embeddings

    def counted(batch, embeddings, *args, **kwargs):
        if not embeddings.requires_grad:
            ends.append(len(embeddings))
        return original(batch, embeddings, *args, **kwargs)

    adapter.logits_from_embeddings = counted
    batch = adapter.encode(TEXTS)
    for rule, cap in (("gauss-kronrod", 16), ("gauss-legendre", 16)):
        counts = []
        for target in (None, 1e-6):  # without refinements (the first pass and the baseline's probe), with
            ends.clear()
            table = _IntegratedGradients(FaithfulnessSettings(methods=("integrated_gradients",), ig_steps=2,
                                                              ig_target=target, ig_rule=rule, ig_max_steps=cap))
            got = table(adapter, batch)
            counts.append(sum(ends))
        assert (table.steps[0] > 2).sum() >= 3  # refined: the tiny model misses 1e-6 at 2 nodes
        assert counts[0] >= 2 * len(TEXTS) and counts[1] == counts[0]  # no f(x), f(x') again
        assert table.completeness()["ig_gradients_mean"] == pytest.approx(table.evaluated[0].mean())
        if rule == "gauss-legendre":  # the same numbers as refinements that run their ends again
            first = integrated_gradients_attribution(adapter, batch, 2)
            for steps in sorted(set(table.steps[0].tolist()) - {2}):
                rows = torch.from_numpy(table.steps[0] == steps).nonzero().flatten().tolist()
                again = integrated_gradients_attribution(adapter, batch.select(rows), steps)
                assert torch.equal(got[rows], again.attributions)
                assert not torch.equal(first.attributions[rows], got[rows])
    first = integrated_gradients_attribution(adapter, batch, 2)
    with pytest.raises(ValueError, match="ends needs the target_class"):
        integrated_gradients_attribution(adapter, batch, 2, ends=(first.target_input, first.target_baseline))
    with pytest.raises(ValueError, match=r"ends must be two \(5,\) tensors"):
        integrated_gradients_attribution(adapter, batch, 2, target_class=first.target_class,
                                         ends=(first.target_input[:2], first.target_baseline))


def test_a_cpu_forward_and_backward_holds_at_most_the_backward_cap():
    """On a CPU every integrated-gradients pass holds at most CPU_BACKWARD_TOKENS padded tokens (the
    activations a backward keeps), the nodes split into equal passes; an explicit budget is kept."""
    from hf_attn.core.batching import CPU_BACKWARD_TOKENS

    model, tokenizer = tiny_classifier("bert")
    counts = []
    adapter = _counting(adapter_for(model, tokenizer, device="cpu"), counts)
    batch = adapter.encode([TEXTS[1]])
    width = batch.input_ids.shape[1]
    assert 50 * width > CPU_BACKWARD_TOKENS >= width and adapter.token_budget > CPU_BACKWARD_TOKENS
    integrated_gradients_attribution(adapter, batch, 50)
    assert sum(counts) == 50 and max(counts) * width <= CPU_BACKWARD_TOKENS and max(counts) - min(counts) <= 1
    counts.clear()
    integrated_gradients_attribution(adapter, batch, 50, token_budget=50 * width)
    assert counts == [50]


def test_freed_heap_memory_goes_back_to_the_system_without_changing_a_value(bert, monkeypatch):
    """Integrated gradients trims the C heap after its passes when the process grew (glibc's
    malloc_trim): the same attributions to the last bit whether it trims after every call or never;
    never for another device; and a heap left with scattered free blocks shrinks when trimmed."""
    import numpy as np

    from hf_attn.core import batching

    adapter, _ = bert
    batch = adapter.encode(TEXTS[:4])
    assert len(set(batch.attention_mask.sum(1).tolist())) > 1  # texts of several lengths: a pass per length
    monkeypatch.setattr(batching, "RESIDENT_GROWTH_KEPT", 2**62)  # never trims
    kept = integrated_gradients_attribution(adapter, batch, 8)
    batching.release_freed_memory()  # loads the C library's functions
    trims = []
    if batching._TRIM["trim"] is not None:
        real = batching._TRIM["trim"]
        monkeypatch.setitem(batching._TRIM, "trim", lambda pad: trims.append(pad) or real(pad))
    monkeypatch.setattr(batching, "RESIDENT_GROWTH_KEPT", -1)  # trims after every call
    trimmed = integrated_gradients_attribution(adapter, batch, 8)
    assert torch.equal(kept.attributions, trimmed.attributions) and torch.equal(kept.completeness_gap,
                                                                              trimmed.completeness_gap)
    assert not batching.release_freed_memory("meta") and not batching.release_freed_memory(torch.device("meta"))
    if batching._TRIM["trim"] is None:  # no glibc on Linux: nothing to trim with
        assert trims == [] and not batching.release_freed_memory()
        return
    assert trims and trims == [0] * len(trims)  # malloc_trim(0): every free page
    # 4,000 blocks of 64 KiB (heap, not mmap), every 20th kept: 240 MiB of free blocks no trim at the
    # top of the heap can return; a trim gives them back
    blocks = [np.ones(8192) for _ in range(4000)]
    held = blocks[19::20]
    del blocks
    before = batching._resident_bytes()
    assert batching.release_freed_memory()
    assert before - batching._resident_bytes() > 100 * 2**20
    assert len(held) == 200


def _preloadable_allocator() -> str | None:
    import glob

    for pattern in ("/usr/lib/*/libjemalloc.so.2", "/usr/lib/*/libtcmalloc*.so.4", "/usr/lib/libjemalloc.so*"):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


@pytest.mark.skipif(_preloadable_allocator() is None,
                    reason="no jemalloc or tcmalloc to preload (apt-get install libjemalloc2)")
def test_the_heap_trim_stays_off_when_another_allocator_replaces_malloc():
    """With jemalloc (or tcmalloc) preloaded, glibc's malloc_trim would trim a heap nobody uses: the trim
    finds the process's malloc is not glibc's and does nothing; without the preload it is found."""
    import subprocess
    import sys

    probe = "from hf_attn.core import batching; batching.release_freed_memory(); print(batching._TRIM['trim'] is None)"
    plain = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    preloaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                               env={**os.environ, "LD_PRELOAD": _preloadable_allocator()})
    assert plain.returncode == 0 and preloaded.returncode == 0, plain.stderr + preloaded.stderr
    assert (plain.stdout.strip(), preloaded.stdout.strip()) == ("False", "True")
