"""Reporting: ``REPORT.md`` / ``report.json`` of ``hf-attn reproduce`` (:mod:`.report`), the verdict of
every finding (:mod:`.findings`) and the published numbers they compare with (:mod:`.published`). It
reads what the runs wrote (:mod:`hf_attn.reproduce`) and runs nothing."""
