"""``hf-attn train-seeds BASE_DIR --output-dir OUT``: the command's options; the training is
:func:`hf_attn.training.wp.train_seeds`."""

from __future__ import annotations

from hf_attn.core.arguments import count, seed_int
from hf_attn.training.wp import train_seeds


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "train-seeds", help="train N copies of a model that differ only in seed (W&P §3.3)",
        description="Train N models identical to BASE_DIR's settings except the seed (base+1 … base+N) "
                    "into OUTPUT_DIR/seed-S. Rerun to resume; finished runs are skipped.")
    p.add_argument("base_dir")
    p.add_argument("--num-seeds", type=count(1, limit="seed_models"), default=8)
    p.add_argument("--first-seed", type=seed_int, default=None)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_run_train_seeds)


def _run_train_seeds(args) -> int:
    results = train_seeds(args.base_dir, args.output_dir, args.num_seeds, progress=not args.quiet,
                          first_seed=args.first_seed)
    from hf_attn.core.io import print_json

    print_json({seed: {k: round(v, 4) for k, v in m.items() if k in ("test_f1", "test_macro_f1",
                                                                           "test_accuracy")}
                      for seed, m in results.items()})
    return 0
