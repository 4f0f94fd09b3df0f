#!/usr/bin/env python
"""Statistics of the SST token rationales (``hf_attn.datasets.load("sst_rationales")``) and the
plausibility of uniformly random word scores, the chance level any explanation's AUPRC / token F1 /
IOU F1 on these rationales should be read against.

    python scripts/rationale_stats.py [--write docs/plausibility/sst_rationales.json] [--check] [--seed 0]

Per split: sentences, words, marked words, the share of words marked (pooled and averaged per
sentence), sentences without a rationale and sentences marked entirely
(:func:`hf_attn.data.rationales.rationale_statistics`), and how many texts differ from
``load("sst")`` (the leaves with a no-break space, which ``load("sst")`` skips). Random baseline: one
uniform score per word (``numpy.random.default_rng(seed)``) on the test split, top-k at the train
split's mean share of marked words (:func:`hf_attn.core.plausibility.plausibility`). ``--check``
recomputes and fails (exit code 1) when the record differs. Bad arguments: one line, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "docs" / "plausibility" / "sst_rationales.json"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", default=str(DEFAULT_OUT), help="where the JSON record goes")
    parser.add_argument("--check", action="store_true", help="compare with the record instead of writing it")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random-score baseline")
    args = parser.parse_args(argv)
    if not 0 <= args.seed < 2**32:
        parser.error(f"--seed must be in [0, 2**32), got {args.seed}")
    return args


def record(seed: int = 0) -> dict:
    import numpy as np

    import hf_attn.datasets
    from hf_attn.core.plausibility import plausibility
    from hf_attn.data.rationales import SST_RATIONALE_THRESHOLD, rationale_statistics

    data = hf_attn.datasets.load("sst_rationales")
    sst = hf_attn.datasets.load("sst")
    stats = rationale_statistics(data)
    differing = {split: sum(a != b for a, b in zip(data.texts(split), sst.texts(split))) for split in data.split_names}
    k_fraction = stats["train"]["mean_share_marked"]
    rng = np.random.default_rng(seed)
    truth = data.rationales("test")
    scores = [rng.random(len(t)) for t in truth]
    result = plausibility(scores, truth, k_fraction=k_fraction)
    baseline = {key: value for key, value in result.to_dict().items()
                if key not in ("instance_auprc", "instance_token_f1", "without_rationale")}
    baseline["without_rationale"] = len(result.without_rationale)
    return {
        "dataset": "sst_rationales",
        "procedure": "Carton, Rathore & Tan (2020), BoulderDS/evaluating-human-rationales "
                     "scripts/download_and_process_sst.py; binarised as their dataset/dataset.py",
        "threshold": SST_RATIONALE_THRESHOLD,
        "splits": stats,
        "texts_differing_from_sst": differing,
        "random_baseline": {"split": "test", "seed": seed, "k_fraction_from": "train mean_share_marked",
                            **baseline},
    }


def _same(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-9)
    return a == b


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.write)
    fresh = record(args.seed)
    if args.check:
        if not out.exists():
            print(f"{out}: missing; run python scripts/rationale_stats.py", file=sys.stderr)
            return 1
        if not _same(json.loads(out.read_text()), fresh):
            print(f"{out}: out of date; run python scripts/rationale_stats.py", file=sys.stderr)
            return 1
        print(f"{out}: up to date")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(fresh, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
