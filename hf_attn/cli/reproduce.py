"""``hf-attn reproduce``: the command line of the reproduction (:func:`add_parser` registers it with
``hf-attn``; :func:`main` is the stand-alone entry point, scripts/reproduce.py) and
:func:`regrade_file` (``--regrade REPORT_JSON``)."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from hf_attn.core.arguments import count, positive_int
from hf_attn.core.io import exclusive_output_folder, write_text_atomic
from hf_attn.core.threads import threads_argument

from hf_attn.reproduce.collect import read_json
from hf_attn.reporting.findings import VERDICTS, regrade
from hf_attn.reproduce.layout import ReproductionLayout
from hf_attn.reproduce.pipeline import reproduce
from hf_attn.reproduce.plan import AGNEWS_PATH_ENV, DATASETS
from hf_attn.reporting.report import format_findings_table


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "reproduce", help="train, run all three batteries + ERASER, write REPORT.md (resumable)",
        description="One command for the whole reproduction: trains what is missing under OUT/runs (finished runs "
                    "are reused, across batteries too), runs the J&W, W&P and T&Š batteries and the ERASER table, "
                    "and writes OUT/REPORT.md, OUT/report.json and OUT/figures, graded per corpus and across corpora. "
                    "What each corpus costs on 2 cores is measured in docs/reproduction/cost.md (SST: hours with "
                    "SNLI and the model selection; AG News under an hour); --quick [DATASET ...] is a 1–2 minute "
                    "smoke test per corpus on small subsets.")
    p.add_argument("--datasets", nargs="+", default=["sst"], choices=list(DATASETS))
    p.add_argument("--output-dir", default=None, help="the reproduction folder (required unless --regrade)")
    p.add_argument("--quick", nargs="*", default=None, choices=list(DATASETS), metavar="DATASET",
                   help="small subsets, 1 epoch, short searches (smoke test): every corpus, or only the ones "
                        "named (e.g. --datasets sst imdb --quick imdb)")
    p.add_argument("--full-corpora", action="store_true",
                   help="train on every corpus whole: IMDB's plan otherwise takes a seeded subset of each split "
                        "(4000 / 500 / 1000 reviews; its whole 25,000 is days of CPU on 2 cores)")
    p.add_argument("--seeds", type=count(1, limit="seed_models"), default=None, help="T&Š grid seeds (default 5, as the paper)")
    p.add_argument("--wp-seeds", type=count(1, limit="seed_models"), default=None, help="W&P seed models (default 8)")
    p.add_argument("--agnews-path", default=None, help=f"AG News CSV (default: ${AGNEWS_PATH_ENV})")
    p.add_argument("--threads", type=threads_argument, default="auto",
                   help="torch threads: a number, or auto (default): the cores the load average says "
                        "are free, at least 1")
    p.add_argument("--jobs", default="auto", type=_jobs_argument,
                   help="1, 2 or auto (default): with 2, the W&P chain trains in a second process beside the "
                        "T&Š chain (one torch thread each; about half the wall time on 2 idle cores); auto: 2 "
                        "when the load average leaves 2 cores free")
    p.add_argument("--bert-family", action="store_true",
                   help="also the BERT-family section (SST): fine-tune all-MiniLM-L6-v2 (~7 min on one thread; "
                        "needs hf_attn[bert]) and run the J&W battery on its last-layer [CLS] attention beside the "
                        "BiLSTM's (off by default)")
    p.add_argument("--bert-model-dir", default=None, metavar="DIR",
                   help="with the BERT-family section: reuse this fine-tuned BERT-family folder instead of "
                        "training one (implies --bert-family)")
    p.add_argument("--bert-base-model", default=None, metavar="NAME",
                   help="the base model to fine-tune for the BERT-family section (default minilm-l6; a local "
                        "folder or a Hub id also works)")
    p.add_argument("--bert-instances", type=positive_int, default=None, metavar="N",
                   help="test sentences of the BERT-family J&W battery (default 500; --quick: 40)")
    p.add_argument("--report-only", action="store_true", help="only rebuild REPORT.md from existing results "
                   "(needs the run folders under --output-dir)")
    p.add_argument("--regrade", metavar="REPORT_JSON", default=None,
                   help="re-grade the findings of a saved report.json with the current verdict rules, without its "
                        "run folders, and print the verdict table (Markdown); with --output-dir also write "
                        "findings.md and findings.json there")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_run_cli, _parser=p)


def regrade_file(report_path: str, output_dir: str | None = None) -> tuple[list[dict], str]:
    """:func:`regrade` a report.json file; returns the findings and their Markdown verdict table
    (also written to ``output_dir/findings.md`` + ``findings.json`` when given)."""
    from hf_attn.core.io import write_json_atomic

    findings = regrade(read_json(report_path))
    counts = {v: sum(f["verdict"] == v for f in findings) for v in VERDICTS}
    shown = os.path.relpath(report_path) if os.path.isabs(report_path) else report_path  # no machine paths
    text = (f"Verdicts re-graded from `{shown}`: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n)
            + ".\n\n" + format_findings_table(findings) + "\n"
            + "\n".join(f"- **{f['dataset']} {f['id']}** — **{f['verdict']}**: {f['sentence']}" for f in findings) + "\n")
    if output_dir:
        os.makedirs(output_dir, exist_ok=True)
        write_text_atomic(os.path.join(output_dir, "findings.md"),
                          f"<!-- generated by `hf-attn reproduce --regrade {shown}` -->\n" + text)
        write_json_atomic(os.path.join(output_dir, "findings.json"), findings)
    return findings, text


def _run_cli(args) -> int:
    if args.regrade:
        _, text = regrade_file(args.regrade, args.output_dir)
        print(text)
        return 0
    if not args.output_dir:
        args._parser.error("--output-dir is required (unless --regrade)")
    with exclusive_output_folder(args.output_dir):  # one writer per output folder
        quick = False if args.quick is None else (args.quick or True)
        report = reproduce(args.datasets, args.output_dir, quick=quick, seeds=args.seeds,
                           wp_seeds=args.wp_seeds, agnews_path=args.agnews_path, full_corpora=args.full_corpora, progress=not args.quiet,
                           report_only=args.report_only, threads=args.threads,
                           jobs=resolve_jobs(args.jobs), bert_family=args.bert_family,
                           bert_model_dir=args.bert_model_dir, bert_instances=args.bert_instances,
                           bert_base_model=args.bert_base_model)
    counts = {v: sum(f["verdict"] == v for f in report["findings"]) for v in VERDICTS}
    from hf_attn.core.io import print_json

    print_json({"report": ReproductionLayout(args.output_dir).report_md,
                      "verdicts": {k: v for k, v in counts.items() if v},
                      "total_stage_minutes": round(report["total_stage_seconds"] / 60, 1)})
    return 0


def _jobs_argument(text: str) -> str | int:
    if text.strip().lower() == "auto":
        return "auto"
    if text.strip() in ("1", "2"):
        return int(text)
    raise argparse.ArgumentTypeError(f"must be 1, 2 or auto, got {text!r}")


def resolve_jobs(spec: str | int) -> int:
    """``auto`` → 2 when the load average leaves at least 2 cores free, else 1."""
    from hf_attn.core.threads import auto_threads

    return (2 if auto_threads() >= 2 else 1) if spec == "auto" else int(spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="reproduce", description="hf-attn reproduce: train, run every battery, write REPORT.md",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    add_parser(sub)
    args = parser.parse_args(["reproduce", *(sys.argv[1:] if argv is None else argv)])
    logging.basicConfig(level=logging.WARNING)
    return args.func(args)
