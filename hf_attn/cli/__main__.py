"""``python -m hf_attn.cli``: the ``hf-attn`` command."""

import sys

from hf_attn.cli import main

sys.exit(main())
