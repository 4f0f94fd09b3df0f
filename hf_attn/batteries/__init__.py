"""The batteries, in memory: each takes a model (or its adapter) and texts and returns typed results,
writing nothing of its own accord. ``jw`` (Jain & Wallace 2019), ``wp`` (Wiegreffe & Pinter 2019),
``ts`` (Tutek & Šnajder 2020), ``eraser`` (the ERASER / integrated-gradients table) and
:mod:`.faithfulness` (every attribution method). They orchestrate :mod:`hf_attn.methods`; putting them
on model and output folders is :mod:`hf_attn.runs`."""
