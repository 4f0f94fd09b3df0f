"""``hf-attn train-grid`` and ``hf-attn ts-report GRID``: the commands' options; the grid is
:mod:`hf_attn.runs.grid`, the T&Š battery over it :mod:`hf_attn.runs.ts`."""

from __future__ import annotations

import argparse
import os

from hf_attn.core.arguments import MAX_EMBEDDING_DIM, MAX_HIDDEN_SIZE, count, positive_int, seed_int
from hf_attn.runs.grid import (DEFAULT_ATTENTIONS, DEFAULT_MLM_WEIGHT, DEFAULT_TYING_DELTA, DEFAULT_VARIANTS, grid_runs,
                               train_grid)
from hf_attn.training.engine import TrainSettings


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "train-grid", help="train the T&Š variant × attention × seed grid (resumable)",
        description="Train base/concat/residual/tying/mlm × additive/dot × seeds on equal footing "
                    "(same embeddings, H, epochs, seeds), one run at a time, seed-major; rerun to "
                    "resume. Writes DIR/<variant>-<attention>/seed<k> and DIR/grid.json.")
    p.add_argument("--dataset", default="sst")
    p.add_argument("--data-path")
    p.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS), choices=DEFAULT_VARIANTS)
    p.add_argument("--attentions", nargs="+", default=list(DEFAULT_ATTENTIONS),
                   choices=["additive", "dot", "uniform"])
    p.add_argument("--seeds", type=count(1, limit="seed_models"), default=5, help="number of seeds (0 … n−1)")
    p.add_argument("--seed-list", type=seed_int, nargs="+", help="explicit seeds instead of --seeds")
    p.add_argument("--embeddings", choices=["glove-6b-50d", "random"], default="glove-6b-50d")
    p.add_argument("--embedding-dim", type=count(1, MAX_EMBEDDING_DIM), default=300, help="d for --embeddings random")
    p.add_argument("--hidden-size", type=count(1, MAX_HIDDEN_SIZE), default=None, help="H for every variant (default d/2)")
    p.add_argument("--tying-delta", type=float, default=DEFAULT_TYING_DELTA)
    p.add_argument("--mlm-weight", type=float, default=DEFAULT_MLM_WEIGHT)
    p.add_argument("--mlm-probability", type=float, default=0.15)
    p.add_argument("--epochs", type=count(1, limit="epochs"), default=8)
    p.add_argument("--batch-size", type=count(1, limit="batch_size"), default=32)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_run)

    r = subparsers.add_parser(
        "ts-report", help="run the ts battery on every run of a train-grid folder and tabulate",
        description="Tutek & Šnajder tables (fragility, MI, per-token probability, J&W adversary) "
                    "as mean ± std over seeds, beside the published SST numbers; resumable.")
    r.add_argument("grid_dir")
    r.add_argument("--output-dir", required=True)
    r.add_argument("--seed", type=seed_int, default=0)
    r.add_argument("--mi-attentions", nargs="+", default=["additive"])
    r.add_argument("--mi-variants", nargs="+", default=["base", "residual", "tying", "mlm"])
    r.add_argument("--mi-seeds", type=seed_int, nargs="+", default=None, help="default: every seed")
    r.add_argument("--skip-adversary", action="store_true")
    r.add_argument("--adversary-limit", type=positive_int, default=500)
    r.add_argument("--summarize-only", action="store_true", help="only aggregate existing results")
    r.add_argument("--wp-lambdas", type=float, nargs="*", default=[],
                   help="also train W&P model-consistent adversaries with these λ (one training "
                        "each) against seed --wp-seed of --wp-cells (T&Š Fig. 1)")
    r.add_argument("--wp-cells", nargs="+", default=["base-additive", "mlm-additive", "tying-additive"])
    r.add_argument("--wp-seed", type=seed_int, default=0)
    r.add_argument("--quiet", action="store_true")
    r.set_defaults(func=_run_report)


def _run_report(args: argparse.Namespace) -> int:
    from hf_attn.runs.ts import analyze_grid, summarize_grid, train_consistent_adversaries

    if args.wp_lambdas:
        train_consistent_adversaries(args.grid_dir, args.output_dir, args.wp_cells, args.wp_lambdas,
                                     args.wp_seed, progress=not args.quiet)
    if args.summarize_only:
        summary = summarize_grid(args.grid_dir, args.output_dir)
    else:
        summary = analyze_grid(args.grid_dir, args.output_dir, seed=args.seed,
                               mi_attentions=args.mi_attentions, mi_seeds=args.mi_seeds,
                               mi_variants=args.mi_variants, adversary=not args.skip_adversary,
                               adversary_limit=args.adversary_limit, progress=not args.quiet)
    with open(os.path.join(args.output_dir, "tables.md"), encoding="utf-8") as f:
        print(f.read())
    return 0 if summary else 1


def _run(args: argparse.Namespace) -> int:
    if args.seeds < 1 and not args.seed_list:
        raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
    base = TrainSettings(dataset=args.dataset, data_path=args.data_path, embeddings=args.embeddings,
                         embedding_dim=args.embedding_dim, hidden_size=args.hidden_size,
                         tying_delta=args.tying_delta, mlm_weight=args.mlm_weight,
                         mlm_probability=args.mlm_probability, epochs=args.epochs,
                         batch_size=args.batch_size)
    runs = grid_runs(base, args.variants, args.attentions, args.seed_list or args.seeds)
    summary = train_grid(runs, args.output_dir, progress=not args.quiet)
    failed = [r for r in summary["runs"] if r["status"] == "failed"]
    from hf_attn.core.io import print_json

    print_json({k: summary[k] for k in ("num_runs", "trained_runs", "wall_seconds",
                                              "seconds_per_trained_run")})
    for r in failed:
        print(f"FAILED {r['dir']}: {r['error']}")
    return 1 if failed else 0
