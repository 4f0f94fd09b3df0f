"""``hf-attn analyze DIR --battery jw|wp|ts|faithfulness [--split test] [--output-dir OUT]``."""

from __future__ import annotations

from hf_attn.runs import BATTERY_MODULES, available_batteries
from hf_attn.core.arguments import seed_int
from hf_attn.core.settings_cli import flag_value
from hf_attn.core.threads import threads_argument


def _named_battery(argv) -> list[str] | None:
    """``[NAME]`` when ``argv`` runs one battery (``--battery NAME``, no --help): only that battery's
    module (and options) is then imported; None: all of them."""
    if argv is None or "-h" in argv or "--help" in argv:
        return None
    for i, word in enumerate(argv):
        name = argv[i + 1] if word == "--battery" and i + 1 < len(argv) else (
            word.split("=", 1)[1] if word.startswith("--battery=") else None)
        if name is not None:
            return [name] if name in BATTERY_CHOICES else None
    return None


def add_parser(subparsers, argv: list[str] | None = None) -> None:
    p = subparsers.add_parser("analyze", help="run a diagnostic battery on a trained model",
                              description="Run the Jain & Wallace (jw), Wiegreffe & Pinter (wp), "
                                          "Tutek & Šnajder (ts) or faithfulness battery; writes results.json + "
                                          "figures.")
    p.add_argument("model_dir", help="a folder written by `hf-attn train` (or any hf_attn model folder)")
    p.add_argument("--battery", required=True, choices=sorted(BATTERY_CHOICES))
    p.add_argument("--split", default="test", choices=["train", "validation", "test"])
    p.add_argument("--output-dir", default=None,
                   help="where results.json and the figures go (default: MODEL_DIR/BATTERY for a model folder, "
                        "./NAME-BATTERY for a Hub id)")
    p.add_argument("--seed", type=seed_int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--overwrite", action="store_true",
                   help="replace what --output-dir holds (another battery's analysis, or this battery's with "
                        "other settings or another model): its whole content is removed first. Without it "
                        "such a folder is refused; the same analysis resumes")
    p.add_argument("--threads", type=threads_argument, default="auto",
                   help="torch threads of the command and every battery: a number, or auto (default): the cores "
                        "the load average says are free, at least 1")
    p.add_argument("--config", metavar="FILE", default=None,
                   help="settings file (.json, or .yaml / .yml): one section per battery (jw, wp, ts, "
                        "faithfulness), keys the settings' field names (the key in an option's help where it "
                        "differs from the flag), values typed, e.g. {\"jw\": {\"num_permutations\": 50}}; "
                        "the command line overrides the file, the file the defaults")
    batteries = available_batteries(_named_battery(argv))
    for battery in batteries.values():
        battery.add_options(p)
    path = flag_value(argv, "--config") if argv is not None and not _asks_help(argv) else None
    if path is not None:
        _apply_settings_file(p, path, argv)
    p.set_defaults(func=_run)


def _asks_help(argv) -> bool:
    return "-h" in argv or "--help" in argv


def _apply_settings_file(parser, path: str, argv) -> None:
    """``--config FILE``: the section of the battery named by ``--battery`` becomes the defaults of its
    options (the command line overrides them); a refused file is a one-line error (exit code 2)."""
    from hf_attn.core.settings_cli import SettingsFileError, apply_settings_file

    named = _named_battery(argv)
    if not named:  # no --battery or an unknown one: argparse says so
        return
    battery = available_batteries(named)[named[0]]
    try:
        apply_settings_file(parser, path, battery.name, battery.settings_class, battery.prefix or battery.name,
                            BATTERY_CHOICES)
    except SettingsFileError as error:
        parser.error(f"--config {error}")


def _run(args) -> int:
    import os

    from hf_attn.runs.folder import claimed_output_folder
    from hf_attn.core.io import exclusive_output_folder

    battery = available_batteries([args.battery])[args.battery]
    settings = battery.settings_from_args(args)  # built once, typed; the run sees nothing else
    if os.environ.get("RANK", "0") != "0":  # `accelerate launch` workers: the main process holds the folder
        battery.run(args.model_dir, args.output_dir, settings)
        return 0
    with exclusive_output_folder(args.output_dir):  # one writer per output folder
        with claimed_output_folder(args.output_dir, args.battery, args.model_dir, settings, args.overwrite):
            battery.run(args.model_dir, args.output_dir, settings)
    return 0


BATTERY_CHOICES = tuple(BATTERY_MODULES)
