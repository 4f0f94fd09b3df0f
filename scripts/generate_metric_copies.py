#!/usr/bin/env python
"""Write into every evaluate module folder, as ``hf_attn/metrics/<name>/_hf_attn_measures.py``, the part
of ``hf_attn/core/numpy_primitives.py``, ``hf_attn/core/numpy_measures.py`` and
``hf_attn/core/plausibility.py`` (the sources, ``metric_copies.SOURCES``) that folder uses: the names
its scripts import from it, the definitions those use in turn (a name one source imports from
another is inlined), and the imports they need (``hf_attn.core.metric_copies``); with ``--check``,
write nothing and exit 1 when a copy is missing or stale (run by the test suite)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hf_attn.core import metric_copies  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail when a copy is stale, write nothing")
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    if args.check:
        stale = metric_copies.stale_copies()
        for path in stale:
            print(f"stale: {path.relative_to(root)} (run `python scripts/generate_metric_copies.py`)")
        return 1 if stale else 0
    for path in metric_copies.write_copies():
        print(f"wrote {path.relative_to(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
