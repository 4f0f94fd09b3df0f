"""hf_attn's ``evaluate`` modules, one folder each (``evaluate.load("hf_attn/metrics/<name>")`` locally,
``hf-attn push-metric`` to the Hub). Each folder holds ``_hf_attn_measures.py``, a generated copy of
``hf_attn/core/numpy_measures.py`` (``scripts/generate_metric_copies.py``), so that it loads on its own."""
