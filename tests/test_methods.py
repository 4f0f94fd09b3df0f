"""hf_attn.methods against explicit slow loops: the shared batching (as the batteries' former
copies cut batches), the ε-max JSD selection, the pair methods against their single-sequence form,
and the package's independence from the batteries."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from hf_attn import AttnPairClassifierConfig, AttnPairClassifierForSequenceClassification
from hf_attn.batteries.jw.summary import adversary_summary
from hf_attn.core.batching import in_row_chunks, length_batches
from hf_attn.methods.adversary import adversarial_attention, best_feasible_adversary, pair_adversarial_attention
from hf_attn.methods.pair_query import bind_query
from hf_attn.methods.permutation import pair_permutation_tvd, permutation_tvd, random_permutations


# ----------------------------------------------------------------------------------------------
# batching: the copies the batteries had, as explicit loops


def eraser_length_batches_loop(lengths, token_budget, rows_per_item=1):
    """The ERASER battery's former ``length_batches``: grow each batch while its padded size
    ``len(batch) · rows_per_item · max_length`` stays within the budget."""
    lengths = np.asarray(lengths)
    order = np.argsort(lengths, kind="stable")
    batches, start = [], 0
    while start < len(order):
        stop = start + 1
        while stop < len(order) and (stop + 1 - start) * rows_per_item * lengths[order[stop]] <= token_budget:
            stop += 1
        batches.append(order[start:stop])
        start = stop
    return batches


def jw_length_batches_loop(lengths, token_budget, cost="tokens"):
    """The J&W battery's cost model, one instance at a time: n instances of max length T cost n·T
    ("tokens") or n·T·(T−1) ("deletions", at least n·T)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(lengths, kind="stable")
    batches, current = [], []
    for i in order:
        longest = int(lengths[i])
        per = longest if cost == "tokens" else longest * max(longest - 1, 1)
        if current and (len(current) + 1) * per > token_budget:
            batches.append(np.array(current))
            current = []
        current.append(i)
    if current:
        batches.append(np.array(current))
    return batches


@pytest.mark.parametrize("seed", range(6))
def test_length_batches_equals_the_former_eraser_and_jw_loops(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 60, size=int(rng.integers(1, 300)))
    for budget in (1, 7, 50, 333, 4096):
        for rows in (1, 3, 11):
            expected = eraser_length_batches_loop(lengths, budget, rows)
            got = length_batches(lengths, budget, rows_per_item=rows)
            assert [b.tolist() for b in got] == [b.tolist() for b in expected]
        for cost in ("tokens", "deletions"):
            expected = jw_length_batches_loop(lengths, budget, cost)
            got = length_batches(lengths, budget, cost=cost)
            assert [b.tolist() for b in got] == [b.tolist() for b in expected]


def test_in_row_chunks_equals_one_call_and_respects_the_budget():
    rng = np.random.default_rng(0)
    lengths = torch.as_tensor(np.sort(rng.integers(1, 9, size=17)))
    mask = torch.arange(9)[None] < lengths[:, None]
    ids = torch.randint(1, 50, mask.shape) * mask
    widths = []

    def analysis(i, m):
        widths.append(tuple(i.shape))
        return (i.float() * 2 + m.sum(1, keepdim=True)) * m

    expected = (ids.float() * 2 + mask.sum(1, keepdim=True)) * mask
    assert torch.equal(in_row_chunks(analysis, ids, mask, token_budget=20), expected)
    assert all(rows * width <= 20 or rows == 1 for rows, width in widths)
    assert sum(rows for rows, _ in widths) == len(ids)


# ----------------------------------------------------------------------------------------------
# the ε-max JSD selection (J&W Alg. 3), one function for the battery, the summary and the explorer


def test_best_feasible_adversary_equals_a_per_instance_loop():
    rng = np.random.default_rng(1)
    tvds = rng.uniform(0, 0.03, size=(40, 5))
    jsds = rng.uniform(0, 0.69, size=(40, 5))
    tvds[3] = 0.5  # nothing feasible
    jsds[4, :] = 0.2  # ties: the first feasible one wins
    eps = 0.01
    best = best_feasible_adversary(torch.from_numpy(tvds), torch.from_numpy(jsds), eps)
    for b in range(len(tvds)):
        feasible = [i for i in range(5) if tvds[b, i] <= eps]
        if feasible:
            top = max(jsds[b, i] for i in feasible)
            assert best.index[b] == next(i for i in feasible if jsds[b, i] == top)
            assert best.eps_max_jsd[b] == top and best.any_feasible[b]
        else:
            assert best.index[b] == int(np.argmin(tvds[b])) and best.eps_max_jsd[b] == 0.0
            assert not best.any_feasible[b]
    # the summary's ragged rows (k may differ) give the per-instance values too
    ragged_t = [tvds[b, : 1 + b % 5] for b in range(40)]
    ragged_j = [jsds[b, : 1 + b % 5] for b in range(40)]
    summary = adversary_summary(ragged_t, ragged_j, np.full(40, 0.5), np.zeros(40, dtype=int), eps, 2)
    for b in range(40):
        ok = ragged_t[b] <= eps
        assert summary["eps_max_jsd"][b] == (ragged_j[b][ok].max() if ok.any() else 0.0)


# ----------------------------------------------------------------------------------------------
# pair methods: the single-sequence method on the pair model with Q fixed


def make_pair_model(decoder):
    torch.manual_seed(0)
    config = AttnPairClassifierConfig(vocab_size=30, embedding_dim=12, hidden_size=6, encoder="lstm",
                                      attention="additive", pair_decoder=decoder, num_labels=3)
    return AttnPairClassifierForSequenceClassification(config).eval()


def pair_batch():
    g = torch.Generator().manual_seed(0)
    p_len, h_len = torch.tensor([7, 4, 1]), torch.tensor([3, 5, 2])
    p_mask = torch.arange(7)[None] < p_len[:, None]
    h_mask = torch.arange(5)[None] < h_len[:, None]
    return (torch.randint(3, 30, (3, 7), generator=g) * p_mask, p_mask,
            torch.randint(3, 30, (3, 5), generator=g) * h_mask, h_mask)


@pytest.mark.parametrize("decoder", ["tanh", "linear"])
def test_pair_permutation_tvd_is_the_single_method_on_the_bound_query_and_a_decode_loop(decoder):
    model = make_pair_model(decoder)
    ids, mask, hids, hmask = pair_batch()
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, hypothesis_input_ids=hids,
                    hypothesis_attention_mask=hmask, output_hidden_states=True)
        permutations = random_permutations(mask, 6, torch.Generator().manual_seed(2))
        ours = pair_permutation_tvd(model, out.hidden_states, out.attentions, mask, out.query,
                                    permutations=permutations)
        single = permutation_tvd(bind_query(model, out.query), out.hidden_states, out.attentions, mask,
                                 permutations=permutations)
        assert torch.equal(ours, single)
        original = out.logits.softmax(-1)
        for p in range(6):  # the whole decoder on each permuted attention
            permuted = out.attentions.gather(1, permutations[:, p])
            q = model.decode(out.hidden_states, permuted, out.query).softmax(-1)
            torch.testing.assert_close(ours[:, p], 0.5 * (q - original).abs().sum(-1), rtol=1e-5, atol=1e-6)


def test_pair_adversary_with_a_linear_decoder_is_the_single_adversary_on_the_bound_query():
    model = make_pair_model("linear")
    ids, mask, hids, hmask = pair_batch()
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, hypothesis_input_ids=hids,
                    hypothesis_attention_mask=hmask, output_hidden_states=True)
    noise = torch.randn(3, 2, 7, generator=torch.Generator().manual_seed(3))
    kw = dict(k=2, steps=15, noise=noise, eps=0.05)
    ours = pair_adversarial_attention(model, out.hidden_states, out.attentions, mask, out.query, **kw)
    single = adversarial_attention(bind_query(model, out.query), out.hidden_states, out.attentions, mask, **kw)
    torch.testing.assert_close(ours.attention, single.attention, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(ours.eps_max_jsd, single.eps_max_jsd, rtol=1e-4, atol=1e-6)
    best = best_feasible_adversary(ours.tvd, ours.jsd, 0.05)
    assert torch.equal(best.eps_max_jsd, ours.eps_max_jsd)


def test_methods_do_not_import_the_batteries():
    code = ("import sys\n"
            "from hf_attn.methods import adversary, eraser, gradient, integrated_gradients, leave_one_out, permutation\n"
            "print(sorted(m for m in sys.modules if m.startswith('hf_attn.runs')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
