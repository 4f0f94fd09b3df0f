"""hf_attn's ``evaluate`` modules, one folder each (``evaluate.load("hf_attn/metrics/<name>")`` locally,
``hf-attn push-metric`` to the Hub). Each folder holds ``_hf_attn_measures.py``, generated from
``hf_attn/core/numpy_primitives.py`` + ``numpy_measures.py`` (+ ``plausibility.py`` for ``plausibility``;
``scripts/generate_metric_copies.py``: the definitions its script imports and what they use), so that it loads
on its own."""
