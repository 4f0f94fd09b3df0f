#!/usr/bin/env python
"""Publish to the Hugging Face Hub: a trained run, an evaluate module or the explorer Space.

    python scripts/push_to_hub.py model runs/sst-lstm-additive --repo-id USER/sst-lstm-additive
    python scripts/push_to_hub.py metric hf_attn/metrics/jw_correlation --repo-id USER/jw_correlation
    python scripts/push_to_hub.py space --repo-id USER/attention-explorer --model USER/sst-lstm-additive

Add --dry-run (list files) or --to-dir OUT (write the folder) to upload nothing. Same as
``hf-attn push`` / ``push-metric`` / ``push-space``; HF_TOKEN and HF_ENDPOINT are honoured.
"""
import sys

from hf_attn.cli import main

KINDS = {"model": "push", "metric": "push-metric", "space": "push-space"}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in KINDS:
        sys.exit(__doc__)
    sys.exit(main([KINDS[sys.argv[1]], *sys.argv[2:]]))
