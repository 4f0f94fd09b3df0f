#!/usr/bin/env python
"""Write ``hf_attn/cli_help.json``: the subcommands' parsers as data, so that ``hf-attn CMD --help``
answers without importing CMD's module (torch). ``--check`` writes nothing and exits 1 when the file
is stale (run by the test suite). Run this after changing any command's options."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hf_attn.cli import HELP_CACHE, help_specs  # noqa: E402

TARGET = ROOT / "hf_attn" / HELP_CACHE


def render() -> str:
    return json.dumps(help_specs(), indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail when the file is stale, write nothing")
    args = parser.parse_args(argv)
    text = render()
    current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else None
    if args.check:
        if current != text:
            print(f"stale: {TARGET.relative_to(ROOT)} (run `python scripts/generate_cli_help.py`)")
            return 1
        return 0
    if current != text:
        TARGET.write_text(text, encoding="utf-8")
        print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
