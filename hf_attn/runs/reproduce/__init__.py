"""The runs of ``hf-attn reproduce``: what is trained and analysed (:mod:`.plan`), where each run and
analysis lives (:mod:`.layout`), the numbers read back from those folders (:mod:`.collect`) and the
machine they ran on (:mod:`.machine`). The pipeline that runs the stages is :mod:`hf_attn.reproduce`."""
