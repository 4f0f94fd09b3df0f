"""Analysis batteries: Jain & Wallace (``jw``), Wiegreffe & Pinter (``wp``), Tutek & Šnajder (``ts``).

Each battery module registers a runner with :func:`register_battery`; ``hf-attn analyze DIR
--battery NAME`` finds it here. A runner takes ``(model_dir, output_dir, options)`` where
``options`` is the parsed ``argparse.Namespace`` and writes ``output_dir/results.json`` + figures.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

BATTERY_MODULES = {"jw": "hf_attn.analysis.jw", "wp": "hf_attn.analysis.wp", "ts": "hf_attn.analysis.ts"}
_RUNNERS: dict[str, Callable] = {}
_OPTION_ADDERS: dict[str, Callable] = {}


def register_battery(name: str, runner: Callable, add_options: Callable | None = None) -> None:
    """Register ``runner(model_dir, output_dir, options) -> dict`` and, optionally,
    ``add_options(parser)`` adding the battery's own ``--flags`` to ``hf-attn analyze``."""
    _RUNNERS[name] = runner
    if add_options is not None:
        _OPTION_ADDERS[name] = add_options


def available_batteries(names=None) -> dict[str, Callable]:
    """Import every battery module that exists (or only those of ``names``) and return the
    registered runners."""
    for name, module in BATTERY_MODULES.items():
        if names is not None and name not in names:
            continue
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name != module:
                raise
    return dict(_RUNNERS)


def option_adders(names=None) -> dict[str, Callable]:
    available_batteries(names)
    return {name: add for name, add in _OPTION_ADDERS.items() if names is None or name in names}
