"""Make the golden records of the sentence-pair J&W battery (tests/data/golden/pair_jw_snli.json and
pair_jw_babi1.json): ``hf-attn analyze DIR --battery jw`` on two small pair models trained here, one NLI
(SNLI, the test fixture tests/data/snli) and one QA (generated bAbI task 1), every number of results.json
and every per-instance array of instances.jsonl.

What is recorded: results.json flattened to ``{"summary/tau_gradient/overall/mean": 0.41, ...}`` (numbers,
strings, booleans, nulls) without the timings (``seconds``), the versions and the paths, and the rows of
instances.jsonl (tokens, probabilities, attention, gradient, leave-one-out, permutation medians, the
adversaries' attention, TVD and JSD, Kendall τ). tests/test_pair_golden.py trains the same models, runs
the battery the same way (:func:`analyze`) and compares (:func:`compare`: every number within 1e-6).

Regenerate only deliberately (a change meant to move the numbers), on one torch thread::

    OMP_NUM_THREADS=1 python scripts/make_golden_pair_jw.py
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN_DIR = os.path.join(ROOT, "tests", "data", "golden")
SNLI_FIXTURE = os.path.join(ROOT, "tests", "data", "snli")

# task → (training settings, analysis settings). The NLI run has several token-budget batches (the
# batch number seeds the permutations and the adversaries); the QA run has one batch of 70 pairs, more
# than the single-sequence battery's batch_size.
CASES = {
    "snli": ({"dataset": "snli", "data_path": SNLI_FIXTURE, "embeddings": "random", "embedding_dim": 16,
              "hidden_size": 8, "epochs": 15, "batch_size": 8, "learning_rate": 0.01},
             {"num_permutations": 12, "k": 3, "steps": 60, "token_budget": 120, "seed": 3}),
    "babi1": ({"dataset": "babi1", "embeddings": "random", "embedding_dim": 16, "hidden_size": 8, "epochs": 1,
               "batch_size": 50},
              {"num_permutations": 8, "k": 2, "steps": 40, "seed": 0, "max_instances": 70}),
}
# results.json keys that are not results: timings, versions, paths
EXCLUDED = {"seconds", "versions", "model_dir", "instances_file", "figures"}


def train_model(case: str, output_dir: str) -> str:
    """Train the ``case`` pair model into ``output_dir`` (one torch thread) and return it."""
    import torch

    from hf_attn.data.tasks import SNLI_ENV
    from hf_attn.training.engine import TrainSettings, train

    os.environ.pop(SNLI_ENV, None)  # the fixture, not a local SNLI copy
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(TrainSettings(**CASES[case][0]), output_dir, progress=False)
    finally:
        torch.set_num_threads(threads)
    return output_dir


def analyze(case: str, model_dir: str, output_dir: str) -> dict:
    """``hf-attn analyze model_dir --battery jw`` with the case's settings → its record (:func:`record`)."""
    import torch

    from hf_attn.batteries.jw.common import JWRunSettings, JWSettings
    from hf_attn.runs.jw import run

    options = dict(CASES[case][1])
    limit = options.pop("max_instances", None)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run(model_dir, output_dir, JWRunSettings(progress=False, max_instances=limit, use_cache=False,
                                                 algorithm=JWSettings(**options)))
    finally:
        torch.set_num_threads(threads)
    return record(output_dir)


def flatten(value, path: str = "", into: dict | None = None) -> dict:
    """``{"a/b/0/c": leaf}`` for every leaf of a JSON value, leaving out :data:`EXCLUDED` keys."""
    into = {} if into is None else into
    if isinstance(value, dict):
        for key, item in value.items():
            if key not in EXCLUDED:
                flatten(item, f"{path}/{key}" if path else str(key), into)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            flatten(item, f"{path}/{i}" if path else str(i), into)
    else:
        into[path] = value
    return into


def record(output_dir: str) -> dict:
    """A finished run's folder → ``{"results": flattened results.json, "instances": the rows of
    instances.jsonl}``, floats to 10 significant digits (far below the comparison's 1e-6)."""
    with open(os.path.join(output_dir, "results.json"), encoding="utf-8") as f:
        results = json.load(f)
    with open(os.path.join(output_dir, "instances.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return {"results": _rounded(flatten(results)), "instances": _rounded(rows)}


def _rounded(value):
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.10g}")
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def compare(golden: dict, new: dict, tolerance: float = 1e-6, new_keys=()) -> tuple[list[str], float]:
    """``(differences as readable lines, max |Δ| over the numbers)`` between two records: every number
    within ``tolerance`` (NaN only where NaN), everything else equal, the same keys (``new_keys``: keys of
    results.json allowed to be new, e.g. a label added since the record was made)."""
    diffs, largest = [], 0.0
    for part in ("results", "instances"):
        old, now = flatten(golden[part]), flatten(new[part])
        for key in sorted(set(old) - set(now)):
            diffs.append(f"{part}: {key} missing")
        for key in sorted(set(now) - set(old) - (set(new_keys) if part == "results" else set())):
            diffs.append(f"{part}: {key} new ({now[key]!r})")
        for key in sorted(set(old) & set(now)):
            a, b = old[key], now[key]
            if _number(a) and _number(b):
                if math.isnan(a) or math.isnan(b):
                    if not (math.isnan(a) and math.isnan(b)):
                        diffs.append(f"{part}: {key}: {a!r} → {b!r}")
                    continue
                delta = abs(a - b)
                largest = max(largest, delta)
                if delta > tolerance:
                    diffs.append(f"{part}: {key}: {a!r} → {b!r} (|Δ| {delta:.3g})")
            elif a != b or type(a) is not type(b) and not (_number(a) and _number(b)):
                diffs.append(f"{part}: {key}: {a!r} → {b!r}")
    return diffs, largest


def golden_path(case: str) -> str:
    return os.path.join(GOLDEN_DIR, f"pair_jw_{case}.json")


def main(argv: list[str] | None = None) -> int:
    cases = list(argv if argv is not None else sys.argv[1:]) or list(CASES)
    for case in cases:
        with tempfile.TemporaryDirectory() as tmp:
            model_dir = train_model(case, os.path.join(tmp, "model"))
            made = analyze(case, model_dir, os.path.join(tmp, "jw"))
        made = {"what": f"hf-attn analyze --battery jw on the {case} pair model of scripts/make_golden_pair_jw.py",
                "training": CASES[case][0] | {"data_path": "tests/data/snli"} if case == "snli" else CASES[case][0],
                "analysis": CASES[case][1], **made}
        with open(golden_path(case), "w", encoding="utf-8") as f:
            json.dump(made, f, separators=(",", ":"))
            f.write("\n")
        print(f"{golden_path(case)}: {len(made['results'])} results values, {len(flatten(made['instances']))} "
              "instance values")
    return 0


if __name__ == "__main__":
    sys.exit(main())
