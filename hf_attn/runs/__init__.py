"""Runs: a battery on a model folder, written to an output folder.

The batteries themselves (:mod:`hf_attn.batteries`) compute in memory and return typed results;
this package puts them on folders. Each ``runs`` module registers one :class:`Battery` — Jain &
Wallace (``jw``), Wiegreffe & Pinter (``wp``), Tutek & Šnajder (``ts``) and the faithfulness table of
every attribution method (``faithfulness``) — with a typed settings dataclass, the ``hf-attn analyze``
flags derived from it, and ``run(model_dir, output_dir, settings) -> results`` that writes
``output_dir/results.json`` and the figures. ``hf-attn analyze DIR --battery NAME`` and
:func:`run_battery` are the only ways in. Beside them: :mod:`.folder` (one analysis per output
folder, resume), :mod:`.eraser` (``hf-attn eraser``), :mod:`.grid` (the T&Š training grid) and
:mod:`.reproduce` (the plan and the folder layout of ``hf-attn reproduce``).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

BATTERY_MODULES = {"jw": "hf_attn.runs.jw", "wp": "hf_attn.runs.wp", "ts": "hf_attn.runs.ts",
                   "faithfulness": "hf_attn.runs.faithfulness"}


@dataclass(frozen=True)
class Battery:
    """One diagnostic battery.

    ``settings_class``: a dataclass whose field defaults are the paper's defaults;
    ``add_options(parser)``: adds the battery's own ``--flags`` (defaults taken from ``settings_class``);
    ``settings_from_args(args)``: the parsed ``hf-attn analyze`` namespace → a ``settings_class`` instance;
    ``run(model_dir, output_dir, settings)``: runs the battery and returns its results dict;
    ``prefix``: of its flags (``--jw-…``; the options are generated from ``settings_class``'s fields,
    :mod:`hf_attn.core.settings_cli`, and a ``--config`` file's section is the battery's ``name``).
    """

    name: str
    settings_class: type
    add_options: Callable[[argparse.ArgumentParser], None]
    settings_from_args: Callable[[argparse.Namespace], Any]
    run: Callable[[str, str, Any], dict]
    prefix: str = ""


_BATTERIES: dict[str, Battery] = {}


def register_battery(battery: Battery) -> None:
    """Called once by each battery module at import."""
    _BATTERIES[battery.name] = battery


def available_batteries(names=None) -> dict[str, Battery]:
    """Import the battery modules (all, or only those of ``names``) and return their :class:`Battery`."""
    for name, module in BATTERY_MODULES.items():
        if names is None or name in names:
            importlib.import_module(module)
    # in BATTERY_MODULES order, whatever order the modules were imported in (the help text is stable)
    return {name: _BATTERIES[name] for name in BATTERY_MODULES
            if name in _BATTERIES and (names is None or name in names)}


def get_battery(name: str) -> Battery:
    if name not in BATTERY_MODULES:
        raise ValueError(f"unknown battery {name!r}; choose from {', '.join(sorted(BATTERY_MODULES))}")
    return available_batteries([name])[name]


def run_battery(name: str, model_dir: str, output_dir: str, settings=None, overwrite: bool = False,
                claim_folder: bool = True) -> dict:
    """Run battery ``name`` on ``model_dir`` into ``output_dir`` with ``settings`` (an instance of the
    battery's ``settings_class``; None: its defaults).

    One analysis per folder: ``output_dir`` holding another analysis (another battery, other
    settings, another model) raises :class:`hf_attn.runs.folder.AnalysisFolderMismatch` unless
    ``overwrite`` (which empties it first); the same analysis resumes. ``claim_folder=False``: the
    caller manages the folder (e.g. ``hf-attn reproduce``'s layout)."""
    battery = get_battery(name)
    if settings is None:
        settings = battery.settings_class()
    if not isinstance(settings, battery.settings_class):
        raise TypeError(f"settings of the {name} battery must be {battery.settings_class.__name__}, "
                        f"got {type(settings).__name__}")
    if not claim_folder:
        return battery.run(model_dir, output_dir, settings)
    from hf_attn.runs.folder import claimed_output_folder
    from hf_attn.core.io import exclusive_output_folder

    with exclusive_output_folder(output_dir), claimed_output_folder(output_dir, name, model_dir, settings, overwrite):
        return battery.run(model_dir, output_dir, settings)


__all__ = ["Battery", "BATTERY_MODULES", "available_batteries", "get_battery", "register_battery", "run_battery"]
