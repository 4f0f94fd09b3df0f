"""``hf-attn eraser DIR [--output-dir OUT]``: the command's options; the folder job is
:func:`hf_attn.runs.eraser.run_eraser`."""

from __future__ import annotations

from dataclasses import asdict

from hf_attn.core.settings_cli import add_settings_options, settings_from_namespace
from hf_attn.runs.eraser import EraserRunSettings, run_eraser


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
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--overwrite", action="store_true",
                   help="replace what --output-dir holds (another analysis, or this one with other settings)")
    # the analysis' options, generated from EraserRunSettings' fields (hf_attn.core.settings_cli)
    add_settings_options(p, EraserRunSettings, "", "the ERASER table (EraserRunSettings; --dataset … --precision: "
                         "transformers classifiers)")
    p.set_defaults(func=_run_cli)


def _run_cli(args) -> int:
    import os

    from hf_attn.runs.folder import claimed_output_folder
    from hf_attn.core.io import exclusive_output_folder

    settings = settings_from_namespace(EraserRunSettings, args, "")
    from hf_attn.batteries.data import is_transformer_model_dir

    if not is_transformer_model_dir(args.model_dir):
        from hf_attn.batteries.jw.battery import check_papers_model_device

        check_papers_model_device(settings.device, settings.precision)
    record = asdict(settings)  # what the output folder is claimed with (a rerun with other settings is refused)
    record["measures"] = list(settings.measures) if settings.measures is not None else None
    record["fractions"] = list(settings.fractions)
    if os.environ.get("RANK", "0") != "0":  # `accelerate launch` workers: the main process holds the folder
        run_eraser(args.model_dir, args.output_dir, progress=not args.quiet, **{**record, "fractions": settings.fractions})
        return 0
    with exclusive_output_folder(args.output_dir), \
            claimed_output_folder(args.output_dir, "eraser", args.model_dir, record, args.overwrite):
        run_eraser(args.model_dir, args.output_dir, progress=not args.quiet,
                   **{**record, "fractions": settings.fractions})
    return 0
