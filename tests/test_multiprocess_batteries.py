"""ERASER, W&P and T&Š shard their per-instance work (hf_attn.core.sharding.run_sharded): two processes
under ``accelerate launch`` give one process's results exactly (max |Δ| = 0), finished shards are cached
and a deleted one is the only one recomputed, and T&Š's sharded permutations are one loop's draws.

The launches (``accelerate launch --multi_gpu --num_processes 2`` on the CPU: gloo) are slow; the
in-process checks are fast."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from architectures import TEXTS, tiny_classifier  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TRAIN_FLAGS = ["--embeddings", "random", "--embedding-dim", "16", "--hidden-size", "8", "--epochs", "2",
               "--batch-size", "24", "--quiet"]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
LAUNCH = ["accelerate", "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
          "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "hf_attn.cli"]
needs_accelerate = pytest.mark.skipif(shutil.which("accelerate") is None, reason="accelerate CLI not installed")


def _cli(*args, processes: int = 1) -> None:
    command = [*LAUNCH, *args] if processes == 2 else [sys.executable, "-m", "hf_attn.cli", *args]
    done = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]


def _read(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _without_clock(value, drop=("seconds", "processes", "sharding", "versions", "timing", "model_dir", "runs_dir",
                                "seconds_fragility_and_token_probability")):
    """A results.json without what a clock or the launch decides (every other value compared exactly)."""
    if isinstance(value, dict):
        return {k: _without_clock(v) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        return [_without_clock(v) for v in value]
    return value


def _check_split(record: dict, shards: int) -> None:
    assert record["processes"] == 2
    assert sorted(sum(record["shards_by_process"].values(), [])) == list(range(shards))
    assert len(record["shards_by_process"]) == 2


@pytest.fixture(scope="module")
def model(tmp_path_factory, data_folder):
    out = str(tmp_path_factory.mktemp("mpb") / "model")
    _cli("train", "--dataset", data_folder, *TRAIN_FLAGS, "--output-dir", out)
    return out


# ----------------------------------------------------------------------------------------------
# two processes = one process (slow: each launches two processes)


@needs_accelerate
@pytest.mark.slow
def test_two_process_eraser_matches_one_process(model, tmp_path):
    """150 test sentences in 4 shards of 40 (2 + 2 per process): every value of results.json and
    eraser.md the same as one process computing the same shards; the cache is gone when done."""
    flags = ["eraser", model, "--ig-steps", "4", "--shard-instances", "40", "--quiet"]
    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    _cli(*flags, "--output-dir", one)
    _cli(*flags, "--output-dir", two, processes=2)
    r1, r2 = _read(os.path.join(one, "results.json")), _read(os.path.join(two, "results.json"))
    assert r1["processes"] == 1 and r1["sharding"]["shards_by_process"] == {"0": [0, 1, 2, 3]}
    _check_split(r2["sharding"], 4)
    assert r2["processes"] == 2 and r2["sharding"]["shard_instances"] == 40
    assert _without_clock(r1) == _without_clock(r2)
    assert "random" in r1["measures"] and r1["kendall_tau"]
    with open(os.path.join(one, "eraser.md"), encoding="utf-8") as f1, \
            open(os.path.join(two, "eraser.md"), encoding="utf-8") as f2:
        assert f1.read() == f2.read()
    assert not os.path.exists(os.path.join(two, "cache"))


@needs_accelerate
@pytest.mark.slow
def test_two_process_ts_matches_one_process(model, tmp_path):
    """T&Š in batches of 40 (4 fragility shards, 2 adversary shards): the same F1s under permutation,
    token probabilities, adversary and per-instance file as one process."""
    flags = ["analyze", model, "--battery", "ts", "--ts-skip-mi", "--ts-permutation-draws", "3",
             "--ts-adversary-limit", "60", "--ts-batch-size", "40", "--quiet"]
    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    _cli(*flags, "--output-dir", one)
    _cli(*flags, "--output-dir", two, processes=2)
    r1, r2 = _read(os.path.join(one, "results.json")), _read(os.path.join(two, "results.json"))
    _check_split(r2["sharding"], 4)
    _check_split({"processes": 2, **r2["sharding"]["adversary"]}, 2)
    assert _without_clock(r1) == _without_clock(r2)
    assert _read(os.path.join(one, "per_instance.json")) == _read(os.path.join(two, "per_instance.json"))
    assert not os.path.exists(os.path.join(two, "cache"))


@needs_accelerate
@pytest.mark.slow
def test_two_process_wp_matches_one_process(model, tmp_path):
    """W&P on the papers' model, its helper models trained by the first (one-process) run and found by
    the second: every model's forward (3 batches of 64) and the per-instance adversary (4 batches of
    40) split between two processes, every value the same."""
    runs = str(tmp_path / "runs")
    flags = ["analyze", model, "--battery", "wp", "--wp-num-seeds", "1", "--wp-lambdas", "0.01",
             "--wp-guide-lambda", "0.01", "--wp-adversary-steps", "5", "--wp-epochs", "1", "--wp-runs-dir", runs,
             "--wp-adversary-shard-instances", "40", "--quiet"]
    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    _cli(*flags, "--output-dir", one)
    _cli(*flags, "--output-dir", two, processes=2)
    r1, r2 = _read(os.path.join(one, "results.json")), _read(os.path.join(two, "results.json"))
    assert r2["timing"]["models_trained_this_run"] == 0
    _check_split({"processes": r2["processes"], **r2["sharding"]["forward"]}, 3)
    _check_split({"processes": 2, **r2["sharding"]["adversary"]}, 4)
    assert r1["per_instance_adversary"]["available"] and r1["seed_variance"].get("run", True)
    assert _without_clock(r1) == _without_clock(r2)
    assert not os.path.exists(os.path.join(two, "cache"))


AFTER_A_COMMAND = """
import os
import sys
import numpy as np
import hf_attn.cli as cli
from hf_attn.core import sharding

assert cli.main(["eraser", sys.argv[1], "--ig-steps", "2", "--max-instances", "20", "--quiet",
                 "--output-dir", sys.argv[2]]) == 0
shards = [np.arange(4 * n, 4 * n + 4) for n in range(3)]
done = sharding.run_sharded(shards, lambda number, rows: {"twice": rows * 2}, progress=False)
assert [d["twice"].tolist() for d in done] == [(s * 2).tolist() for s in shards], done
sharding.wait_for_everyone()
open(f"{sys.argv[2]}-rank{os.environ['RANK']}-sharded", "w").close()
sharding.end_process_group()  # by hand: the launch's split is over
try:
    sharding.run_sharded(shards, lambda number, rows: {"twice": rows * 2}, progress=False)
except RuntimeError as refused:
    assert "needs a new launch" in str(refused), refused
    open(f"{sys.argv[2]}-rank{os.environ['RANK']}-refused", "w").close()
"""


@needs_accelerate
@pytest.mark.slow
def test_a_launched_script_shards_after_a_command(model, tmp_path):
    """Under ``accelerate launch``, a script that calls ``hf_attn.cli.main`` and then shards its own
    work in the same processes keeps its process group; once the group is ended by hand, sharding is
    refused with a clear error instead of a second rendezvous."""
    script = tmp_path / "after_a_command.py"
    script.write_text(AFTER_A_COMMAND, encoding="utf-8")
    done = subprocess.run([*LAUNCH[:-2], str(script), model, str(tmp_path / "eraser")], env=ENV,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    assert sorted(p.name for p in tmp_path.glob("eraser-rank*")) == [
        f"eraser-rank{rank}-{step}" for rank in (0, 1) for step in ("refused", "sharded")]


# ----------------------------------------------------------------------------------------------
# in one process (fast)


EXIT_CHECK = """
import atexit, sys
import torch.distributed as dist
import hf_attn.cli as cli

# registered first, so it runs last (atexit is last in, first out): after hf_attn's handler
atexit.register(lambda: print("group alive at exit:", dist.is_initialized(), flush=True))
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)


def fails(_threads):
    raise ValueError("threads refused")


cli.apply_threads = fails  # a command that fails inside main; the group outlives it for the next one
for _ in range(2):
    assert cli.main(["train", "--dataset", sys.argv[2], "--output-dir", sys.argv[3], "--quiet"]) == 2
    assert dist.is_initialized()
print("two commands done", flush=True)
"""


def test_a_commands_process_group_ends_before_the_interpreter(tmp_path, data_folder):
    """A launched process leaves no live process group to the interpreter's teardown (where gloo's
    threads can abort it after its results were written): the command registers the group's end at
    exit, and the group outlives the command, so a script can run a second one in the same process."""
    done = subprocess.run([sys.executable, "-c", EXIT_CHECK, str(tmp_path / "store"), data_folder, str(tmp_path / "m")],
                          env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-2:] == ["two commands done", "group alive at exit: False"], done.stdout


def test_an_ended_process_group_is_not_started_again(tmp_path, monkeypatch, caplog, data_folder):
    """end_process_group destroys the group; a second call is harmless; work split between processes
    is then refused in one line (a second rendezvous of the same launch can hang); a teardown that
    fails leaves the command's exit code alone."""
    import torch.distributed as dist

    import hf_attn.cli as cli
    import hf_attn.core.sharding as sharding

    monkeypatch.setattr(sharding, "_ENDED", False)
    monkeypatch.setattr(sharding, "_ACCELERATOR", None)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    sharding.end_process_group()  # a group hf_attn did not start: it may be started again
    assert not dist.is_initialized() and not sharding._ENDED
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store2'}", rank=0, world_size=1)
    monkeypatch.setattr(sharding, "_ACCELERATOR", object())  # as if current_accelerator had started it
    sharding.end_process_group()
    assert not dist.is_initialized() and sharding._ENDED
    sharding.end_process_group()  # no group: nothing to do
    assert not dist.is_initialized()
    monkeypatch.setattr(sharding, "_ACCELERATOR", None)
    assert sharding.current_accelerator() is None  # one process: nothing to split, nothing refused
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match="process group has ended .* needs a new launch"):
        sharding.current_accelerator()
    for rank, main in (("1", False), ("0", True)):  # who writes is still answered, from the launcher's rank
        monkeypatch.setenv("RANK", rank)
        assert sharding.is_main_process() is main
    monkeypatch.delenv("WORLD_SIZE")

    def teardown_fails():
        raise RuntimeError("gloo went away")

    def fails(_threads):
        raise ValueError("threads refused")

    monkeypatch.setattr(cli, "apply_threads", fails)
    monkeypatch.setattr(sharding, "end_process_group_at_exit", teardown_fails)
    with caplog.at_level("WARNING", logger="hf_attn.cli"):  # the command's own exit code stands
        assert cli.main(["train", "--dataset", data_folder, "--output-dir", str(tmp_path / "m"), "--quiet"]) == 2
    assert "could not end the process group: RuntimeError: gloo went away" in caplog.text


def test_eraser_resumes_from_its_cached_shards(tmp_path, monkeypatch):
    """Shards of 5 of 20 texts cached; one deleted: a rerun computes only that shard, and the table
    (random floor included) is the same."""
    from hf_attn.adapters import adapter_for
    from hf_attn.batteries.eraser import battery
    from hf_attn.batteries.eraser.battery import encode_for, eraser_table

    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    ids, mask, units = encode_for(adapter, TEXTS * 4)
    cache = str(tmp_path / "cache")
    settings = {"ig_steps": 3, "shard_instances": 5, "cache_dir": cache, "key": "k", "accelerator": None}
    first = eraser_table(adapter, ids, mask, units, **settings)
    files = sorted(os.listdir(cache))
    assert len(files) == 4 and first["sharding"] == {"processes": 1, "shards": 4, "shard_instances": 5,
                                                     "shards_by_process": {"0": [0, 1, 2, 3]}}
    os.unlink(os.path.join(cache, files[2]))
    computed = []
    original = battery.shard_rows

    def counted(adapter, ids, mask, units, indices, *args, **kwargs):
        computed.append(np.asarray(indices).tolist())
        return original(adapter, ids, mask, units, indices, *args, **kwargs)

    monkeypatch.setattr(battery, "shard_rows", counted)
    again = eraser_table(adapter, ids, mask, units, **settings)
    assert computed == [[10, 11, 12, 13, 14]]
    assert _without_clock(again) == _without_clock(first)


def test_eraser_random_floor_is_one_matrix_sliced(tmp_path):
    """The random measure's scores do not depend on the shards: each shard's rows are those of the one
    seeded (N, T) matrix of an unsharded table."""
    from hf_attn.adapters import adapter_for
    from hf_attn.batteries.eraser import shards as eraser_shards
    from hf_attn.batteries.eraser.battery import encode_for, shard_rows

    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    ids, mask, units = encode_for(adapter, TEXTS * 2)
    whole = torch.rand(ids.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    common = {"ig_steps": 2, "ig_baseline": "zero", "seed": 7, "token_budget": 4096, "gradient_token_budget": 4096,
              "accelerator": None}
    shards, results, _ = eraser_shards.eraser_shards(shard_rows, adapter, ids, mask, units, ("random",), (0.5,),
                                                     shard_instances=4, **common)
    merged = eraser_shards.merge_shards(shards, results, ("random",), len(ids))
    assert len(shards) == 3
    # sufficiency with only the top half kept ranks by the random scores: recompute it from the whole matrix
    from hf_attn.batteries.eraser.units import framed_eraser_scores

    reference = framed_eraser_scores(model, ids, mask, units, whole, (0.5,))
    assert np.allclose(merged["sufficiency"]["random"], np.asarray(reference.sufficiency), atol=1e-6)
    assert np.allclose(merged["comprehensiveness"]["random"], np.asarray(reference.comprehensiveness), atol=1e-6)


def test_ts_sharded_permutations_are_one_loops_draws(trained_model_dir):
    """The T&Š fragility computed in 4 batches of 40 as shards equals the battery's one loop over the same
    batches with one generator (written out here), every prediction and probability exactly."""
    from hf_attn.batteries.ts.battery import (encode_texts, fragility_predictions, fragility_shards, load_run,
                                              model_states, per_token_prediction_probability,
                                              token_class_probabilities)

    model, tokenizer, task = load_run(trained_model_dir, "test")
    ids = encode_texts(tokenizer, task.splits["test"]["text"][:160], model.config.max_tokens)
    generator = torch.Generator().manual_seed(3)
    n = len(ids)
    expected = {"trained": np.empty(n, np.int64), "uniform": np.empty(n, np.int64),
                "permuted": np.empty((4, n), np.int64), "token_probability": np.empty(n)}
    for b in model_states(model, ids, 40):
        preds = fragility_predictions(model, b.token_logits, b.attention, b.mask, generator, 4)
        for name in ("trained", "uniform"):
            expected[name][b.index] = preds[name].numpy()
        expected["permuted"][:, b.index] = preds["permuted"].numpy()
        expected["token_probability"][b.index] = per_token_prediction_probability(
            token_class_probabilities(model, b.token_logits), preds["trained"], b.mask).numpy()
    got, sharding = fragility_shards(model, ids, seed=3, permutation_draws=4, batch_size=40)
    assert sharding["shards"] == 4
    for name, value in expected.items():
        assert np.array_equal(got[name], value), name
    assert len(np.unique(got["permuted"], axis=0)) > 1  # the draws differ: a real permutation test
