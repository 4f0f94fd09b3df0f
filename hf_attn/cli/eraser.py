"""``hf-attn eraser DIR [--output-dir OUT]``: the command's options; the folder job is
:func:`hf_attn.runs.eraser.run_eraser`."""

from __future__ import annotations

from hf_attn.batteries.eraser.battery import MEASURES
from hf_attn.core.arguments import count, finite_float, positive_int, seed_int
from hf_attn.methods.eraser import DEFAULT_FRACTIONS
from hf_attn.runs.eraser import run_eraser


def add_parser(subparsers) -> None:
    """``hf-attn eraser DIR [--output-dir OUT]``."""
    p = subparsers.add_parser(
        "eraser", help="ERASER faithfulness of attention / gradient / LOO-TVD / IG rankings",
        description="ERASER comprehensiveness, sufficiency and AOPC (DeYoung et al. 2020 §4) of each "
                    "importance measure of a trained model; writes results.json, eraser.md, eraser.png.")
    p.add_argument("model_dir", help="an hf_attn model folder, or a BERT-family classifier (folder or Hub id)")
    p.add_argument("--output-dir", default=None,
                   help="where results.json, eraser.md and eraser.png go (default: MODEL_DIR/eraser for a model "
                        "folder, ./NAME-eraser for a Hub id)")
    p.add_argument("--split", default="test", choices=["train", "validation", "test"])
    p.add_argument("--measures", nargs="+", default=None,
                   choices=list(MEASURES),
                   help="default: every measure that applies to the model (rollout: models with several "
                        "attention layers)")
    p.add_argument("--fractions", nargs="+", type=finite_float(0, strictly_above=True), default=list(DEFAULT_FRACTIONS))
    p.add_argument("--ig-steps", type=count(1, limit="ig_nodes"), default=50)
    p.add_argument("--ig-baseline", choices=["zero", "pad", "mean"], default="zero",
                   help="the text's embeddings start from 0, the pad token's or the mean input embedding "
                        "(default %(default)s)")
    p.add_argument("--seed", type=seed_int, default=0)
    p.add_argument("--token-budget", type=count(1, limit="token_budget"), default=16384)
    p.add_argument("--max-instances", type=positive_int, default=None, help="only the first N instances")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--overwrite", action="store_true",
                   help="replace what --output-dir holds (another analysis, or this one with other settings)")
    g = p.add_argument_group("transformers classifiers")
    g.add_argument("--dataset", default=None,
                   help="the data to analyse for a model without run.json (trained elsewhere, a Hub id): sst, "
                        "a CSV/JSON(L) file (analysed whole) or folder, or a Hub dataset id")
    g.add_argument("--text-column", default=None, help="the text column of --dataset (default: text)")
    g.add_argument("--label-column", default=None, help="the label column of --dataset (default: label)")
    g.add_argument("--layer", type=int, default=-1, help="the layer whose [CLS] attention is explained (-1: last)")
    g.add_argument("--heads", default="mean", help="'mean' (average the heads) or one head's index")
    g.add_argument("--device", default="auto",
                   help="auto | cpu | cuda | cuda:N | mps (the papers' models run on the CPU)")
    g.add_argument("--precision", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="forward precision (the papers' models run in float32)")
    p.set_defaults(func=_run_cli)


def _run_cli(args) -> int:
    from hf_attn.runs.folder import claimed_output_folder
    from hf_attn.core.io import exclusive_output_folder

    heads = args.heads.strip().lower()
    if heads != "mean" and not heads.isdigit():
        raise ValueError(f"--heads must be 'mean' or a head index, got {args.heads!r}")
    from hf_attn.batteries.data import is_transformer_model_dir

    options = {"dataset": args.dataset, "text_column": args.text_column, "label_column": args.label_column,
               "layer": args.layer, "heads": heads, "device": args.device, "precision": args.precision}
    if not is_transformer_model_dir(args.model_dir):
        from hf_attn.batteries.jw.battery import check_papers_model_device

        check_papers_model_device(args.device, args.precision)
    settings = {"split": args.split, "measures": args.measures, "fractions": args.fractions,
                "ig_steps": args.ig_steps, "ig_baseline": args.ig_baseline, "seed": args.seed,
                "token_budget": args.token_budget, "max_instances": args.max_instances, **options}
    with exclusive_output_folder(args.output_dir), \
            claimed_output_folder(args.output_dir, "eraser", args.model_dir, settings, args.overwrite):
        run_eraser(args.model_dir, args.output_dir, args.split, args.measures, args.fractions,
                   ig_steps=args.ig_steps, ig_baseline=args.ig_baseline, seed=args.seed,
                   token_budget=args.token_budget, max_instances=args.max_instances, progress=not args.quiet,
                   **options)
    return 0
