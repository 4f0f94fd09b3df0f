#!/usr/bin/env python
"""The whole reproduction in one command (same as ``hf-attn reproduce``):

    python scripts/reproduce.py --datasets sst --output-dir runs/reproduce [--quick] [--seeds 5]

Trains what is missing (finished runs are reused), runs the J&W, W&P and T&Š batteries and the
ERASER table, and writes OUT/REPORT.md, OUT/report.json and OUT/figures/.
"""

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from hf_attn.cli.reproduce import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
