"""``hf-attn push RUN_DIR``, ``hf-attn push-metric MODULE``, ``hf-attn push-space``: the commands'
options; the folders and uploads are :mod:`hf_attn.hub.push`."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hf_attn.hub.push import (HubError, build_metric_space_folder, build_model_folder, build_space_folder,
                              metric_module_dir, push_metric, push_model, push_space)


def _check_repo_id(repo_id: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*", repo_id):
        raise HubError(f"--repo-id must look like USER/NAME, got {repo_id!r}")
    return repo_id


def _finish(args, build, push) -> int:
    _check_repo_id(args.repo_id)
    if args.to_dir:
        folder = build(Path(args.to_dir))
        print(f"wrote {folder} (not uploaded)")
        return 0
    if args.dry_run:
        with tempfile.TemporaryDirectory(prefix="hf-attn-dry-run-") as tmp:
            folder = build(Path(tmp) / "repo")
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    print(f"{path.relative_to(folder)}\t{path.stat().st_size}")
        print("dry run: nothing uploaded")
        return 0
    info = push()
    print(info.commit_url)
    return 0


def _run_push(args) -> int:
    return _finish(args, lambda out: build_model_folder(args.run_dir, out, args.repo_id, args.analysis),
                   lambda: push_model(args.run_dir, args.repo_id, args.private, args.analysis))


def _run_push_metric(args) -> int:
    module_dir = metric_module_dir(args.module_dir)
    return _finish(args, lambda out: build_metric_space_folder(module_dir, out, args.repo_id),
                   lambda: push_metric(module_dir, args.repo_id, args.private))


def _run_push_space(args) -> int:
    return _finish(args, lambda out: build_space_folder(out, models=args.model),
                   lambda: push_space(args.repo_id, private=args.private, models=args.model))


def _common(p) -> None:
    p.add_argument("--repo-id", required=True, help="USER/NAME on the Hub (HF_ENDPOINT selects the Hub)")
    p.add_argument("--private", action="store_true")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--dry-run", action="store_true", help="list the files that would be uploaded")
    group.add_argument("--to-dir", help="write the folder that would be uploaded here instead")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("push", help="publish a trained run as a Hub model repo",
                              description="Upload a trained run (weights, tokenizer, modelling code for "
                                          "trust_remote_code, metrics, analyses) with a generated model card. "
                                          "A BERT-family folder (hf-attn train --base-model) is uploaded "
                                          "without code: it loads with AutoModelForSequenceClassification.")
    p.add_argument("run_dir")
    p.add_argument("--analysis", action="append", default=[],
                   help="an analysis output folder (with results.json) to include; folders inside "
                        "RUN_DIR are found automatically")
    _common(p)
    p.set_defaults(func=_run_push)

    p = subparsers.add_parser("push-metric", help="publish an evaluate module as a metric Space")
    p.add_argument("module_dir", metavar="MODULE",
                   help="one of hf_attn's evaluate modules by name (e.g. jw_correlation) or a module folder")
    _common(p)
    p.set_defaults(func=_run_push_metric)

    p = subparsers.add_parser("push-space", help="publish the Gradio attention explorer as a Space")
    p.add_argument("--model", action="append", default=[], metavar="USER/NAME",
                   help="a Hub model id visitors may pick (repeat for several; the first opens first); "
                        "written to space_config.json")
    _common(p)
    p.set_defaults(func=_run_push_space)
