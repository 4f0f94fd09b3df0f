"""``hf-attn`` command line (argparse only). ``train`` is defined here; every other subcommand is the
``add_parser(subparsers)`` function of its module in this package, named in :data:`SUBCOMMANDS`
(``analyze``, ``eraser``, ``grid``, ``push``, ``reproduce``, ``train_seeds``)."""

from __future__ import annotations

import argparse
import inspect
import logging
import sys

from hf_attn.core.arguments import bounded_text, type_from_spec, type_spec
from hf_attn.core.threads import apply_threads, threads_argument

# This module imports neither torch nor any subcommand's module: ``hf-attn --help`` lists the
# subcommands from the table below, and ``hf-attn CMD …`` imports only CMD's module (the test suite
# checks the table against the modules' own parsers).


def add_train_parser(subparsers) -> None:
    p = subparsers.add_parser("train", help="train one attentive classifier",
                              description="Train an attentive classifier with transformers.Trainer; "
                                          "rerun the same command to resume.")
    # the settings' options, generated from the two settings classes' fields (hf_attn.core.settings_cli)
    from hf_attn.core.settings_cli import add_settings_options
    from hf_attn.training.settings import TrainSettings
    from hf_attn.training.transformer import TransformerTrainSettings

    add_settings_options(p, TrainSettings, "", "settings (TrainSettings: the attentive BiLSTM/CNN/Average)")
    add_settings_options(p, TransformerTrainSettings, "", "fine-tuning a pretrained transformer "
                         "(TransformerTrainSettings; --dataset … --batch-size, --seed, --data-seed, --label-names, "
                         "--epochs, --learning-rate and --max-length apply too)")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--overwrite", action="store_true",
                   help="replace a run in --output-dir that was trained with other settings "
                        "(without it such a folder is refused; the same settings resume)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--json", action="store_true",
                   help="end with the test metrics as strict JSON on stdout instead of the readable table")
    p.set_defaults(func=_run_train)


def _run_train(args) -> int:
    if args.base_model:
        return _run_train_transformer(args)
    if args.freeze_layers is not None:
        raise ValueError("--freeze-layers goes with --base-model")
    if args.max_train_examples is not None:
        raise ValueError("--max-train-examples goes with --base-model")
    from hf_attn.core.settings_cli import settings_from_namespace
    from hf_attn.training.engine import TrainSettings, train

    settings = settings_from_namespace(TrainSettings, args, "")
    metrics = train(settings, args.output_dir, progress=not args.quiet, overwrite=args.overwrite)
    if args.json:
        print_json({k: v for k, v in metrics.items() if k.startswith("test_")
                    or k in ("train_seconds", "train_tokens_per_second")})
    else:
        print(format_train_summary(metrics, args.output_dir, _recorded_split(args)))
    return 0


def _recorded_split(args, record: dict | None = None) -> str | None:
    """The split line of the run in ``--output-dir`` (:func:`hf_attn.data.classes.split_line`), from
    its ``run.json`` (or ``record``); None for a run recorded before splits were."""
    import os

    from hf_attn.core.io import read_json
    from hf_attn.data.classes import split_line

    try:
        record = record or read_json(os.path.join(args.output_dir, "run.json"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not record.get("split") or not isinstance(record.get("split_sizes"), dict):
        return None
    return split_line(args.dataset, record["split"], record["split_sizes"], record.get("label_names"))


def print_json(payload) -> None:
    """:func:`hf_attn.core.io.print_json` (imported on use: ``hf-attn --help`` loads no numpy)."""
    from hf_attn.core import io

    io.print_json(payload)


def _cell(value) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"


def format_train_summary(metrics: dict, output_dir: str, split: str | None = None) -> str:
    """The short table ``hf-attn train`` ends with: test and dev accuracy, F1, macro-F1, ROC-AUC (from
    ``metrics.json``'s ``test_*`` / ``dev_*``, or the ``test`` / ``dev`` dicts of a BERT-family run),
    then time, throughput, the kept checkpoint and where the model is, then ``split`` (the line of
    :func:`hf_attn.data.classes.split_line`: split sizes, seed and class names) when given."""
    def value(split: str, name: str):
        nested = metrics.get(split)
        return nested.get(name) if isinstance(nested, dict) else metrics.get(f"{split}_{name}")

    rows = [("accuracy", "accuracy"), ("F1", "f1"), ("macro F1", "macro_f1"), ("ROC-AUC", "roc_auc")]
    lines = [f"{'':<10}{'test':>8}{'dev':>8}"]
    lines += [f"{label:<10}{_cell(value('test', key)):>8}{_cell(value('dev', key)):>8}" for label, key in rows]
    facts = []
    seconds = metrics.get("train_seconds", metrics.get("seconds"))
    if isinstance(seconds, dict):  # a BERT-family run.json: {"train": …, "total": …}
        seconds = seconds.get("train")
    if isinstance(seconds, (int, float)):
        speed = metrics.get("train_tokens_per_second")
        facts.append(f"trained in {seconds:.1f} s" + (f" ({speed:,.0f} tokens/s)" if speed else ""))
    if metrics.get("best_checkpoint"):
        facts.append(f"kept {metrics['best_checkpoint']} (best on dev)")
    facts.append(f"model, metrics.json and run.json in {output_dir}")
    return "\n".join(lines + ["; ".join(facts)] + ([split] if split else []))


# command → (module defining it with ``add_parser(subparsers)``, one-line help), in --help order
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "train": ("hf_attn.cli", "train one attentive classifier"),
    "analyze": ("hf_attn.cli.analyze", "run a diagnostic battery on a trained model"),
    "explain": ("hf_attn.cli.explain", "explain sentences: attention, gradient, leave-one-out (LOO-TVD), IG, adversary, τ"),
    "train-grid": ("hf_attn.cli.grid", "train the T&Š variant × attention × seed grid (resumable)"),
    "ts-report": ("hf_attn.cli.grid", "run the ts battery on every run of a train-grid folder and tabulate"),
    "push": ("hf_attn.cli.push", "publish a trained run as a Hub model repo"),
    "push-metric": ("hf_attn.cli.push", "publish an evaluate module as a metric Space"),
    "push-space": ("hf_attn.cli.push", "publish the Gradio attention explorer as a Space"),
    "train-seeds": ("hf_attn.cli.train_seeds", "train N copies of a model that differ only in seed (W&P §3.3)"),
    "eraser": ("hf_attn.cli.eraser", "ERASER faithfulness of attention / gradient / LOO-TVD / IG rankings"),
    "reproduce": ("hf_attn.cli.reproduce", "train, run all three batteries + ERASER, write REPORT.md (resumable)"),
}
# Modules that contribute subcommands (each defines `add_parser(subparsers)`), in --help order: the
# table's, so that a moved module cannot drop out of the full parser unnoticed.
_SUBCOMMAND_MODULES: list[str] = list(dict.fromkeys(module for module, _ in SUBCOMMANDS.values()
                                                    if module != "hf_attn.cli"))


def _run_train_transformer(args) -> int:
    """``hf-attn train --base-model M``: fine-tune a pretrained transformer classifier through a real
    Trainer (hf_attn.training.transformer); the BiLSTM-only options are not used."""
    from hf_attn.training.transformer import TransformerTrainSettings, train_transformer_classifier

    from hf_attn.core.settings_cli import settings_from_namespace
    from hf_attn.training.settings import TrainSettings

    # the options it shares with TrainSettings: their values where given, else this class's defaults
    shared = settings_from_namespace(TrainSettings, args, "")
    given = {name: getattr(shared, name) for name in TransformerTrainSettings.__dataclass_fields__
             if name in TrainSettings.__dataclass_fields__ and getattr(args, name, None) is not None}
    if "max_length" in given:
        given["max_length"] = min(given["max_length"], 512)
    settings = settings_from_namespace(TransformerTrainSettings, args, "", **given)
    record = train_transformer_classifier(output_dir=args.output_dir, settings=settings, progress=not args.quiet)
    if args.json:
        print_json({"test": record.get("test"), "seconds": record.get("seconds")})
    else:
        print(format_train_summary(record, args.output_dir, _recorded_split(args, record)))
    return 0


class OneLineErrorParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line on stderr (exit code 2) naming the argument,
    and pointing at ``--help`` instead of printing the whole usage first. Subcommand parsers are of
    the same class (argparse creates them with the parent's class)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {bounded_text(' '.join(message.split()), 1000)} "
                     f"(see {self.prog} --help)\n")


# What `hf-attn --help` says above and below the list of commands (this module's docstring is for
# developers).
DESCRIPTION = """\
Is attention explanation? Train the papers' attentive classifiers or bring any transformers
classifier, run the Jain & Wallace, Wiegreffe & Pinter and Tutek & Šnajder diagnostics, ERASER and
the faithfulness table of attribution methods on it, and publish models, evaluate modules and the
explorer Space to the Hugging Face Hub."""
EPILOG = """\
example:
  hf-attn train --dataset sst --output-dir runs/sst-lstm
  hf-attn analyze runs/sst-lstm --battery jw        # results in runs/sst-lstm/jw

`hf-attn COMMAND --help` describes a command and its options."""


def _new_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    from hf_attn import __version__

    parser = OneLineErrorParser(prog="hf-attn", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"hf-attn {__version__}")
    return parser, parser.add_subparsers(dest="command", required=True)


def _add_module_parsers(subparsers, module: str, argv: list[str] | None = None) -> None:
    mod = __import__(module, fromlist=["add_parser"])
    if "argv" in inspect.signature(mod.add_parser).parameters:
        mod.add_parser(subparsers, argv=argv)  # e.g. analyze: only the named battery's options
    else:
        mod.add_parser(subparsers)


def _add_threads_option(subparsers) -> None:
    for sub in subparsers.choices.values():  # --quiet, --verbose and --threads for every command
        if not any("--quiet" in action.option_strings for action in sub._actions):
            sub.add_argument("--quiet", action="store_true", help="no progress bars, only warnings and errors")
        sub.add_argument("--verbose", action="store_true",
                         help="also the libraries' informational messages (e.g. every Hub request)")
        if not any("--threads" in action.option_strings for action in sub._actions):
            sub.add_argument("--threads", type=threads_argument, default="auto",
                             help="torch threads: a number, or auto (default): the cores the load "
                                  "average says are free, at least 1")


def build_parser(command: str | None = None, argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The full parser (every subcommand with its options; imports every subcommand module), or,
    with ``command``, one holding that command (and the others of its module) only."""
    parser, subparsers = _new_parser()
    if command in (None, "train"):  # its settings classes are imported only when it is parsed
        add_train_parser(subparsers)
    if command is None:
        modules = _SUBCOMMAND_MODULES
    else:
        modules = [m for m in (SUBCOMMANDS[command][0],) if m != "hf_attn.cli"]  # train: defined here
    for module in modules:
        _add_module_parsers(subparsers, module, argv)
    _add_threads_option(subparsers)
    return parser


def build_overview_parser() -> argparse.ArgumentParser:
    """``hf-attn`` / ``hf-attn --help`` / an unknown command: every subcommand with its help line,
    from :data:`SUBCOMMANDS`, without importing any of them."""
    parser, subparsers = _new_parser()
    for name, (_, help_text) in SUBCOMMANDS.items():
        subparsers.add_parser(name, help=help_text, add_help=False)
    return parser


# ``hf-attn CMD --help`` must answer at once, but building CMD's parser imports CMD's module (and
# torch with it). The parsers of the commands are therefore also stored as plain data in the package
# (``hf_attn/cli_help.json``, written by ``python scripts/generate_cli_help.py``; a test fails when
# it is stale) and ``--help`` formats that: the same text as the real parser at any width.
HELP_CACHE = "cli_help.json"
_ACTION_KINDS = {"_StoreAction": "store", "_StoreTrueAction": "store_true", "_AppendAction": "append",
                 "_HelpAction": "help"}


def parser_spec(parser: argparse.ArgumentParser) -> dict | None:
    """What ``parser.format_help()`` depends on, as JSON-able data (None: a parser this cannot hold,
    e.g. one with mutually exclusive options, whose usage line depends on more)."""
    if parser._mutually_exclusive_groups or parser.formatter_class.__name__ not in (
            "HelpFormatter", "RawDescriptionHelpFormatter"):
        return None
    group_of = {id(action): i for i, group in enumerate(parser._action_groups) for action in group._group_actions}
    actions = []
    for action in parser._actions:  # in the order of the usage line
        kind = _ACTION_KINDS.get(type(action).__name__)
        if kind is None or id(action) not in group_of:
            return None
        actions.append({"kind": kind, "group": group_of[id(action)], "option_strings": list(action.option_strings),
                        "dest": action.dest, "nargs": action.nargs, "default": str(action.default),
                        "required": action.required, "help": action.help, "metavar": action.metavar,
                        "choices": None if action.choices is None else [str(c) for c in action.choices],
                        "type": type_spec(action.type) if kind in ("store", "append") else None})
    groups = [{"title": group.title, "description": group.description} for group in parser._action_groups]
    return {"prog": parser.prog, "usage": parser.usage, "description": parser.description, "epilog": parser.epilog,
            "formatter": parser.formatter_class.__name__, "groups": groups, "actions": actions}


def parser_from_spec(spec: dict, check: bool = False) -> argparse.ArgumentParser:
    """A parser that formats the same help as the one :func:`parser_spec` described. ``check=True``:
    one that also refuses the same arguments as the real one, with the same one-line error (exit
    code 2), but imports nothing heavy: missing, unknown and misspelt arguments, choices and the
    value types of :mod:`hf_attn.core.arguments`; a type it cannot make again is left to the real
    parser, and its values are not the real ones (for checking only)."""
    parser = (OneLineErrorParser if check else argparse.ArgumentParser)(
        prog=spec["prog"], usage=spec["usage"], description=spec["description"], epilog=spec["epilog"],
        add_help=False, formatter_class=getattr(argparse, spec["formatter"]))
    groups = []
    for i, group in enumerate(spec["groups"]):
        target = ((parser._positionals, parser._optionals)[i] if i < 2
                  else parser.add_argument_group(group["title"], group["description"]))
        target.title, target.description = group["title"], group["description"]
        groups.append(target)
    for a in spec["actions"]:
        target, names = groups[a["group"]], a["option_strings"] or [a["dest"]]
        extra = {} if not a["option_strings"] else {"dest": a["dest"]}
        default = argparse.SUPPRESS if check else a["default"]
        if a["kind"] == "help":
            target.add_argument(*names, action="help", help=a["help"])
        elif a["kind"] == "store_true":
            target.add_argument(*names, action="store_true", help=a["help"], default=default, **extra)
        else:
            if a["option_strings"]:
                extra["required"] = a["required"]
            choices = a["choices"]
            if check:
                kind = a.get("type")
                extra["type"] = type_from_spec(kind)
                if choices is not None and kind != ["str"]:
                    try:
                        choices = [extra["type"](c) for c in choices] if extra["type"] else None
                    except (ValueError, TypeError, argparse.ArgumentTypeError):
                        choices = None  # values of a type this cannot make: the real parser checks them
            target.add_argument(*names, action=a["kind"], nargs=a["nargs"], choices=choices,
                                default=default, help=a["help"], metavar=a["metavar"], **extra)
    return parser


def command_parser(command: str, argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The real parser of one subcommand (imports its module)."""
    parser = build_parser(command, argv)
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[command]


def help_specs() -> dict[str, dict]:
    """Every subcommand's :func:`parser_spec` that can be stored (what ``hf_attn/cli_help.json`` holds)."""
    specs = {name: parser_spec(command_parser(name, [name, "--help"])) for name in SUBCOMMANDS}
    return {name: spec for name, spec in specs.items() if spec is not None}


def _cached_help(command: str, check: bool = False) -> argparse.ArgumentParser | None:
    import json
    from importlib import resources

    try:
        specs = json.loads((resources.files("hf_attn") / HELP_CACHE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    spec = specs.get(command)
    return parser_from_spec(spec, check=check) if spec else None


def _asks_for_help(argv: list[str]) -> bool:
    words = argv[:argv.index("--")] if "--" in argv else argv
    return "-h" in words or "--help" in words


def _command_of(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names (its first non-option word), if it is a known one."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word if word in SUBCOMMANDS else None
    return None


LOG_FILE = "hf-attn.log"
# Loggers whose informational messages are noise on a console (one line per HTTP request, ...);
# --verbose shows them, and the run's log file always holds them.
NOISY_LOGGERS = ("httpx", "httpx2", "httpcore", "urllib3", "filelock", "huggingface_hub", "matplotlib", "PIL")


class _ConsoleFilter(logging.Filter):
    """On the console: hf_attn's own messages, and the libraries' warnings and errors only; never a
    record marked ``console=False`` below ERROR (third-party ``warnings``: the log file holds them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return record.levelno >= logging.ERROR or getattr(record, "console", True)
        return record.name.split(".")[0] == "hf_attn" and getattr(record, "console", True)


class RunLogHandler(logging.Handler):
    """Every log record of a command, written to ``FOLDER/hf-attn.log`` (appended, so a resumed run
    keeps the earlier part). Records are held in memory until the command has written something
    else into FOLDER, so a command that fails at once leaves no folder behind."""

    def __init__(self, folder: str, level: int = logging.INFO):
        super().__init__(level)
        self.folder, self.buffer, self.stream = folder, [], None
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def _ready(self) -> bool:
        import os

        from hf_attn.core.io import LOCK_NAME

        return os.path.isdir(self.folder) and any(n not in (LOCK_NAME, LOG_FILE) for n in os.listdir(self.folder))

    def _open(self) -> bool:
        import os

        if self.stream is None and self._ready():
            self.stream = open(os.path.join(self.folder, LOG_FILE), "a", encoding="utf-8")
            self.stream.writelines(line + "\n" for line in self.buffer)
            self.buffer = []
        return self.stream is not None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            if self._open():
                self.stream.write(line + "\n")
                self.stream.flush()
            else:
                self.buffer.append(line)
        except Exception:  # logging must never break the command
            self.handleError(record)

    def close(self) -> None:
        try:
            if self._open():
                self.stream.close()
        except OSError:
            pass
        super().close()


def console_logging(args) -> RunLogHandler | None:
    """Logging for one command: hf_attn's messages on the console (``--quiet``: warnings and errors
    only, and no progress bars; ``--verbose``: every library's messages too) and everything in the
    output folder's ``hf-attn.log`` (a command with ``--output-dir``). Returns that file's handler."""
    quiet, verbose = getattr(args, "quiet", False), getattr(args, "verbose", False)
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    console = logging.StreamHandler()
    console.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    console.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)
    if not verbose:
        console.addFilter(_ConsoleFilter())
    console._hf_attn_console = True  # replaced by the next command run in this process
    root.handlers = [h for h in root.handlers if not getattr(h, "_hf_attn_console", False)]
    root.addHandler(console)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.INFO)
    if not verbose:  # one bar per long stage: none for loading or saving weights, or tokenizing
        _disable_progress_bars()
    folder = getattr(args, "output_dir", None)
    if not folder:
        return None
    handler = RunLogHandler(folder, logging.DEBUG if verbose else logging.INFO)
    root.addHandler(handler)
    logging.getLogger("transformers").addHandler(handler)  # transformers does not propagate to the root
    return handler


def _disable_progress_bars() -> None:
    """No bars from transformers (loading and saving weights), datasets (tokenizing) and the Hub client
    (downloads, uploads): short stages. hf_attn's own bars (training steps, each analysis) stay unless
    the command is ``--quiet``; ``--verbose`` keeps them all."""
    import os

    os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    for module, function in (("huggingface_hub.utils", "disable_progress_bars"),
                             ("datasets.utils.logging", "disable_progress_bar"),
                             ("transformers.utils.logging", "disable_progress_bar")):
        try:
            getattr(__import__(module, fromlist=[function]), function)()
        except (ImportError, AttributeError):
            pass


def default_output_dir(model_dir: str, name: str) -> str:
    """Where ``hf-attn analyze`` (``name``: the battery) and ``hf-attn eraser`` (``"eraser"``) write
    without ``--output-dir``: ``MODEL_DIR/NAME`` for a model folder (``runs/sst-lstm/jw``, where
    ``hf-attn push`` finds it); for a Hub id or an alias, ``LAST-NAME`` in the working directory
    (``distilbert-sst2-jw`` for ``owner/distilbert-sst2``; never a folder spelled like the id, which
    would then be taken for the model)."""
    import os

    if os.path.isdir(model_dir):
        return os.path.join(model_dir, name)
    return f"{model_dir.rstrip('/').split('/')[-1] or 'model'}-{name}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command_of(argv)
    if command is None:  # --help, no command or an unknown one: argparse prints or fails
        build_overview_parser().parse_args(argv)
        return 2  # not reached: a valid command is always known
    if _asks_for_help(argv):
        cached = _cached_help(command)
        if cached is not None:
            cached.print_help()
            return 0
    from hf_attn.cli.preflight import argument_problem

    checker = _cached_help(command, check=True)
    if checker is not None:  # argument errors answer as fast as --help, before the command's imports
        quick = checker.parse_args(argv[argv.index(command) + 1:])
        # a --config file may set the data's columns: those are known once the real parser has read it
        problem = argument_problem(command, quick) if getattr(quick, "config", None) is None else None
        if problem:  # a wrong folder or data file: before torch, transformers or the command's module
            print(f"hf-attn {command}: error: {bounded_text(problem, 1000)}", file=sys.stderr)
            return 2
    args = build_parser(command, argv).parse_args(argv)
    problem = argument_problem(command, args)  # before anything is logged or made
    if problem:
        print(f"hf-attn {args.command}: error: {bounded_text(problem, 1000)}", file=sys.stderr)
        return 2
    default_output = getattr(args, "output_dir", "") is None and getattr(args, "model_dir", None)
    if default_output:  # analyze, eraser: RUN/<battery>
        args.output_dir = default_output_dir(args.model_dir, getattr(args, "battery", None) or args.command)
    run_log = console_logging(args)
    if default_output:
        logging.getLogger("hf_attn.cli").info("writing to %s (the default --output-dir)", args.output_dir)
    try:
        args.threads = apply_threads(args.threads)
        from hf_attn.core.warning_log import third_party_warnings_to_log

        with third_party_warnings_to_log():  # captum's, torch's, …: into hf-attn.log, not the console
            return args.func(args)
    # User errors: bad data or arguments (ValueError, incl. DataError, HubError, ModelFolderError,
    # RunSettingsMismatch), missing/corrupt/busy files (OSError, incl. OutputFolderBusy). One line,
    # exit code 2; anything else is a bug and keeps its traceback.
    except (ValueError, OSError) as err:
        message = bounded_text(" ".join(str(err).split()) or type(err).__name__, 1000)
        print(f"hf-attn {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"hf-attn {args.command}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    finally:
        if "torch.distributed" in sys.modules:  # a launch's process group ends before the interpreter does
            try:
                from hf_attn.core.sharding import end_process_group_at_exit

                end_process_group_at_exit()
            except Exception as err:  # the command's own outcome stands; the teardown's failure is reported
                logging.getLogger("hf_attn.cli").warning("could not end the process group: %s: %s",
                                                         type(err).__name__, err)
        if run_log is not None:
            logging.getLogger().removeHandler(run_log)
            logging.getLogger("transformers").removeHandler(run_log)
            run_log.close()

