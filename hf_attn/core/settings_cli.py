"""Command-line options generated from typed settings dataclasses, and settings files.

A settings dataclass (``JWRunSettings``, ``WPSettings``, ``TSSettings``, ``FaithfulnessRunSettings``)
states each setting once: its name, type, default and checks. A field that is also a command-line
option carries that in its metadata, ``field(default=…, metadata=option(help, flag=…, type=…))``
(:func:`option`); a field without it is a Python-only setting. From the fields:

- :func:`add_settings_options` adds one ``argparse`` group, every flag named ``--PREFIX-NAME``
  (``NAME``: the ``flag`` of the metadata, else the field name with dashes), nested dataclass fields
  (``JWRunSettings.algorithm``) flattened into the same group; each help line ends with the value's
  type, the default and the allowed values, e.g. ``(int ≥ 1, default 100)``;
- :func:`settings_from_namespace` builds the dataclass back from the parsed namespace;
- :func:`apply_settings_file` reads a JSON or YAML settings file into the parser's defaults, so that
  the precedence is: dataclass defaults < the file < the command line.

The file holds one section per battery, keys the settings' field names (the ``key`` named in a
flag's help when it differs from the flag)::

    {"jw": {"num_permutations": 50, "use_cache": false}, "faithfulness": {"methods": ["attention"]}}

Values are what the options take, typed (numbers, ``true`` / ``false``, ``null`` for an optional
setting, a list for a list setting); unknown sections or keys, wrong types and out-of-bound values
are a :class:`SettingsFileError` naming the file and the key.

This module imports neither torch nor NumPy (``hf-attn --help`` stays fast).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Callable
from typing import Any

from hf_attn.core.arguments import bounded_list, bounded_text, type_spec

OPTION = "cli"  # the metadata key of a field's command-line option


@dataclasses.dataclass(frozen=True)
class CliOption:
    """How one settings field appears on the command line (:func:`option` makes it).

    ``flag``: the flag's name after the prefix (``"permutations"`` → ``--jw-permutations``), or a
    whole flag without the prefix (``"--device"``); None: the field name with dashes. ``type`` /
    ``choices`` / ``nargs`` / ``metavar``: as ``argparse``'s. ``negate``: a boolean field set False by a
    flag (``--jw-no-cache`` for ``use_cache``). ``command``: the field is read from the command's own
    option of that name (``split``, ``seed``, ``quiet`` with ``negate``, ``threads``), not added here.
    ``shared``: several settings classes add the same flag (``--dataset``): the first adds it.
    ``aliases``: more flags of the option. ``unset``: the option's default is None, which means the
    field's default (so the run can tell whether it was given). ``type_text`` / ``default_text``: what
    the help says the type / the default is, where the type or the value does not say it.
    ``convert(value, flag)``: the parsed value → the field's (a ``ValueError`` naming the flag)."""

    help: str
    flag: str | None = None
    type: Callable | None = None
    choices: tuple | None = None
    nargs: str | None = None
    metavar: str | None = None
    negate: bool = False
    command: str | None = None
    shared: bool = False
    aliases: tuple[str, ...] = ()
    unset: bool = False
    type_text: str | None = None
    default_text: str | None = None
    convert: Callable[[Any, str], Any] | None = None


def option(help: str = "", **kwargs) -> dict:
    """The ``metadata`` of a settings field that is a command-line option (:class:`CliOption`)."""
    if "choices" in kwargs and kwargs["choices"] is not None:
        kwargs["choices"] = tuple(kwargs["choices"])
    return {OPTION: CliOption(help=help, **kwargs)}


# --dataset / --text-column / --label-column: one meaning for every battery that reads a dataset
_DATA_HELP = {
    "dataset": "models without a run.json (trained elsewhere, a Hub id): the dataset to analyse (sst, agnews, "
               "imdb, a CSV/JSON(L) file or folder, or a Hub dataset id; a single file is analysed whole by the "
               "jw battery)",
    "text_column": "the text column of --dataset",
    "label_column": "the label column of --dataset"}


def data_option(name: str) -> dict:
    """The metadata of a settings class's ``dataset`` / ``text_column`` / ``label_column`` field: the
    unprefixed, shared ``--dataset`` / ``--text-column`` / ``--label-column`` (default None: the
    folder's run.json, else the class's default)."""
    return option(_DATA_HELP[name], flag="--" + name.replace("_", "-"), shared=True, unset=True,
                  default_text="from the model folder's run.json" if name == "dataset" else
                  f"{name.split('_')[0]}, or from the model folder's run.json")


@dataclasses.dataclass(frozen=True)
class SettingOption:
    """One generated option: the field's ``key`` (its name; the settings file's key), ``path`` (field
    names from the outer settings class, e.g. ``("algorithm", "num_permutations")``), the flag's
    ``name`` without dashes and prefix (``permutations``), the ``flags``
    (first: the option's name), the namespace ``dest``, the field's ``default`` and ``optional``
    (None allowed), and the field's :class:`CliOption`."""

    key: str
    path: tuple[str, ...]
    name: str
    flags: tuple[str, ...]
    dest: str
    default: Any
    optional: bool
    cli: CliOption


def _nested_class(f: dataclasses.Field):
    factory = f.default_factory
    return factory if factory is not dataclasses.MISSING and dataclasses.is_dataclass(factory) else None


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else None


def settings_options(settings_class, prefix: str, path: tuple[str, ...] = ()) -> list[SettingOption]:
    """Every field of ``settings_class`` (nested dataclass fields flattened) that is an option, in field
    order. Keys must be unique across the nesting (the settings file is flat per section)."""
    found: list[SettingOption] = []
    for f in dataclasses.fields(settings_class):
        nested = _nested_class(f)
        if nested is not None:
            found += settings_options(nested, prefix, path + (f.name,))
            continue
        cli = f.metadata.get(OPTION)
        if cli is None:
            continue
        if cli.command:
            name, flags, dest = cli.command, (f"--{cli.command}",), cli.command
        else:
            name = cli.flag or f.name.replace("_", "-")
            first = name if name.startswith("--") else (f"--{prefix}-{name}" if prefix else f"--{name}")
            name = name.lstrip("-")
            flags, dest = (first, *cli.aliases), first[2:].replace("-", "_")
        default = _default(f)
        if isinstance(default, bool) and default != cli.negate and not cli.command:  # a switch can only change it
            raise TypeError(f"{settings_class.__name__}.{f.name}: a switch of a field defaulting to {default} "
                            f"needs negate={default}")
        found.append(SettingOption(f.name, path + (f.name,), name, flags, dest, default,
                                   default is None or "None" in str(f.type), cli))
    keys = [o.key for o in found]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated and not path:
        raise TypeError(f"{settings_class.__name__}: options {repeated} appear twice in the nested settings")
    return found


def _type_words(kind) -> str:
    """``int ≥ 1``, ``number > 0``, ``int in [0, 20]``: the value an ``argparse`` type takes."""
    spec = type_spec(kind)
    if spec is None or spec == ["str"]:
        return ""
    if spec[0] in ("int", "float"):
        return "int" if spec[0] == "int" else "number"
    if spec[0] == "threads":
        return "int ≥ 1 or auto"
    if spec[0] == "count":
        low, high = spec[1], spec[2]
        return f"int in [{low}, {high}]" if high is not None else f"int ≥ {low}"
    if spec[0] == "finite_float":
        low, strictly = spec[1], spec[2]
        return "number" if low is None else f"number {'>' if strictly else '≥'} {low:g}"
    return ""


def _value_text(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (tuple, list)):
        return ",".join(_value_text(v) for v in value) if value else "none"
    return str(value)


def help_text(o: SettingOption) -> str:
    """The option's help: the metadata's text, then ``(TYPE, default D; key K)`` from the field."""
    cli = o.cli
    words = ""
    if not _is_flag(o):  # a switch says what it does; its default is "not given"
        kind = cli.type_text or (("{" + ",".join(map(str, cli.choices)) + "}") if cli.choices else _type_words(cli.type))
        words = ", ".join(filter(None, [kind, f"default {cli.default_text or _value_text(o.default)}"]))
    if o.name.replace("-", "_") != o.key:
        words = "; ".join(filter(None, [words, f"key {o.key}"]))
    return " ".join(filter(None, [cli.help, f"({words})" if words else ""])).replace("%", "%%")


def _is_flag(o: SettingOption) -> bool:
    return isinstance(o.default, bool)


def add_settings_options(parser, settings_class, prefix: str, title: str, description: str | None = None):
    """One ``argparse`` group of ``settings_class``'s options (module docstring); returns it. A shared
    flag another class added already is skipped (its aliases that are still free are added)."""
    group = parser.add_argument_group(title, description)
    taken = parser._option_string_actions
    for o in settings_options(settings_class, prefix):
        if o.cli.command:
            continue
        free = [flag for flag in o.flags if flag not in taken]
        if len(free) < len(o.flags) and not o.cli.shared:
            raise argparse.ArgumentError(None, f"{settings_class.__name__}.{o.key}: {o.flags[0]} is taken")
        if not free:
            continue
        if _is_flag(o):
            group.add_argument(*free, dest=o.dest, action="store_true", default=False, help=help_text(o))
            continue
        kwargs = {"type": o.cli.type, "choices": list(o.cli.choices) if o.cli.choices else None,
                  "nargs": o.cli.nargs, "metavar": o.cli.metavar}
        default = None if o.cli.unset else (list(o.default) if isinstance(o.default, tuple) else o.default)
        group.add_argument(*free, dest=o.dest, default=default, help=help_text(o),
                           **{k: v for k, v in kwargs.items() if v is not None})
    return group


def _field_value(o: SettingOption, value):
    """A parsed option's value → the field's."""
    if _is_flag(o):
        value = bool(value)
        return not value if o.cli.negate else value
    if value is None and o.cli.unset:
        return o.default
    if isinstance(value, list) and isinstance(o.default, tuple):
        value = tuple(value)
    if o.cli.convert is not None:
        value = o.cli.convert(value, o.flags[0])
    return value


def settings_from_namespace(settings_class, args: argparse.Namespace, prefix: str, **fixed):
    """The parsed namespace → a ``settings_class`` instance: every option's value (its dest must be
    in ``args``: no fallbacks), nested dataclasses built the same way; ``fixed``: values of fields
    that are no option (e.g. derived from others)."""
    try:
        return _build(settings_class, args, prefix, fixed)
    except (ValueError, TypeError) as error:
        flag = _refused_option(settings_class, args, prefix, fixed)
        if flag is None or flag in str(error):
            raise
        raise ValueError(f"argument {flag}: {error}") from None


def _refused_option(settings_class, args, prefix: str, fixed: dict) -> str | None:
    """The flag of the first option whose value alone (every other setting at its default) the
    settings class refuses; None when each is accepted alone (a combination is refused)."""
    for o in settings_options(settings_class, prefix):
        try:
            _build(settings_class, args, prefix, fixed, only=o.dest)
        except (ValueError, TypeError):
            return o.flags[0]
    return None


def _build(settings_class, args, prefix: str, fixed: dict, only: str | None = None):
    """``only``: the dest of the one option read from ``args``; every other option keeps its field's
    default (to find which value a settings class refuses)."""
    values = {}
    for f in dataclasses.fields(settings_class):
        nested = _nested_class(f)
        if nested is not None:
            values[f.name] = _build(nested, args, prefix, fixed, only)
        elif f.name in fixed and f.metadata.get(OPTION) is None:
            values[f.name] = fixed[f.name]
    for o in settings_options(settings_class, prefix):
        if len(o.path) == 1 and (only is None or o.dest == only):
            values[o.key] = _field_value(o, getattr(args, o.dest))
    return settings_class(**values)


# ------------------------------------------------------------------------------- settings files
class SettingsFileError(ValueError):
    """A settings file that cannot be read, or a key or value in it that is refused (one line)."""


def read_settings_file(path: str) -> dict:
    """The mapping a ``.json``, ``.yaml`` or ``.yml`` settings file holds (YAML needs PyYAML)."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in (".json", ".yaml", ".yml"):
        raise SettingsFileError(f"{path}: a settings file is .json, .yaml or .yml, got {suffix or 'no suffix'!r}")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as error:
        raise SettingsFileError(f"{path}: cannot be read ({error.strerror or error})") from None
    if suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError as error:
            raise SettingsFileError(f"{path}: not valid JSON ({error})") from None
    else:
        try:
            import yaml
        except ImportError:
            raise SettingsFileError(f"{path}: reading YAML needs PyYAML (pip install pyyaml); "
                                    "or write the settings as JSON") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise SettingsFileError(f"{path}: not valid YAML ({' '.join(str(error).split())})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SettingsFileError(f"{path}: expected a mapping of sections, got {type(data).__name__}")
    return data


def _file_value(o: SettingOption, action, value, where: str):
    """A settings-file value → what the option's dest holds (checked as the command line checks it)."""
    def refuse(why: str):
        raise SettingsFileError(f"{where}: {why}")

    if action.nargs == 0:  # a switch: the field's own value, a boolean
        if not isinstance(value, bool):
            refuse(f"expected true or false, got {bounded_text(repr(value), 80)}")
        return (not value) if o.cli.negate else value
    if value is None:
        if not o.optional:
            refuse("null is not allowed here")
        return None
    if isinstance(value, bool) or isinstance(value, dict):
        refuse(f"expected {_type_words(action.type) or 'a value'}, got {bounded_text(json.dumps(value), 80)}")
    many = action.nargs in ("+", "*")
    if isinstance(value, list):
        if many:
            items = value
        elif isinstance(o.default, tuple):  # a comma-separated list option
            items = [",".join(str(v) for v in value)]
        else:
            refuse(f"expected one value, got a list {bounded_text(json.dumps(value), 80)}")
    else:
        items = [value]
    parsed = []
    for item in items:
        if isinstance(item, (bool, dict, list)):
            refuse(f"expected a plain value, got {bounded_text(json.dumps(item), 80)}")
        text = str(item)
        try:
            item = action.type(text) if action.type else text
        except (argparse.ArgumentTypeError, ValueError, TypeError) as error:
            refuse(str(error) or f"invalid value {text!r}")
        if action.choices is not None and item not in action.choices:
            refuse(f"must be one of {', '.join(map(str, action.choices))}, got {text!r}")
        parsed.append(item)
    result = parsed if many else parsed[0]
    if o.cli.convert is not None:
        try:
            o.cli.convert(tuple(result) if many else result, o.flags[0])
        except ValueError as error:
            refuse(str(error))
    return result


def apply_settings_file(parser, path: str, section: str, settings_class, prefix: str,
                        sections: tuple[str, ...]) -> dict:
    """Read ``path`` (:func:`read_settings_file`) and make its ``section`` the defaults of
    ``parser``'s options of ``settings_class`` (so the command line still overrides them); other
    sections must be among ``sections``. Returns ``{dest: value}`` as set. Raises
    :class:`SettingsFileError` naming the file and the key."""
    data = read_settings_file(path)
    unknown = [name for name in data if name not in sections]
    if unknown:
        raise SettingsFileError(f"{path}: unknown section {unknown[0]!r}; the sections are {', '.join(sections)}")
    values = data.get(section) or {}
    if not isinstance(values, dict):
        raise SettingsFileError(f"{path}: {section}: expected a mapping of settings, got {type(values).__name__}")
    options = {o.key: o for o in settings_options(settings_class, prefix)}
    actions = {a.dest: a for a in parser._actions}
    defaults = {}
    for key, value in values.items():
        where = f"{path}: {section}.{key}"
        o = options.get(key)
        if o is None:
            by_flag = [x for x in options.values() if x.name == str(key).replace("_", "-")]
            hint = f" (the key of {by_flag[0].flags[0]} is {by_flag[0].key})" if by_flag else ""
            raise SettingsFileError(f"{where}: unknown key{hint}; the keys are {bounded_list(options, 8)}")
        action = actions.get(o.dest)
        if action is None:
            raise SettingsFileError(f"{where}: this command has no {o.flags[0]} option")
        defaults[o.dest] = _file_value(o, action, value, where)
    # what the settings class itself refuses (e.g. an unknown method in a list), each key alone
    namespace = argparse.Namespace(**{a.dest: a.default for a in parser._actions if a.dest != argparse.SUPPRESS})
    for key, dest in ((o.key, o.dest) for o in options.values() if o.dest in defaults):
        setattr(namespace, dest, defaults[dest])
        try:
            _build(settings_class, namespace, prefix, {}, only=dest)
        except (ValueError, TypeError) as error:
            raise SettingsFileError(f"{path}: {section}.{key}: {error}") from None
    parser.set_defaults(**defaults)
    return defaults


def flag_value(argv: list[str] | None, flag: str) -> str | None:
    """The value of ``flag`` in ``argv`` (``--flag VALUE`` or ``--flag=VALUE``; the last one given)."""
    found = None
    words = list(argv or [])
    if "--" in words:
        words = words[:words.index("--")]
    for i, word in enumerate(words):
        if word == flag and i + 1 < len(words):
            found = words[i + 1]
        elif word.startswith(flag + "="):
            found = word.split("=", 1)[1]
    return found


__all__ = ["CliOption", "OPTION", "SettingOption", "SettingsFileError", "add_settings_options", "apply_settings_file",
           "data_option",
           "flag_value", "help_text", "option", "read_settings_file", "settings_from_namespace",
           "settings_options"]
