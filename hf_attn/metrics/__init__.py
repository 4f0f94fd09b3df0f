"""hf_attn's ``evaluate`` modules, one folder each (``evaluate.load("hf_attn/metrics/<name>")`` locally,
``hf-attn push-metric`` to the Hub), and ``_hf_attn_measures.py``: the self-contained NumPy measures
the modules ship, which the library imports where its code is the same (one source)."""
