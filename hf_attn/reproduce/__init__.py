"""One-command reproduction report: ``hf-attn reproduce --datasets sst --output-dir OUT``.

Trains every model the three batteries need (resumable: a finished run is reused as is, a killed
one resumes from its checkpoint), runs the Jain & Wallace 2019 (``hf_attn.batteries.jw.battery``),
Wiegreffe & Pinter 2019 (``hf_attn.batteries.wp.battery``) and Tutek & Šnajder 2020 (``hf_attn.batteries.ts.battery``
over an ``hf_attn.runs.grid`` variant grid) batteries and the ERASER / integrated-gradients table
(``hf_attn.batteries.eraser.battery``), and writes

* ``OUT/REPORT.md``: for every published table of the three papers the published value beside the measured
  one (mean ± std over seeds where the paper averaged runs), and per finding the paper's sentence
  (verbatim) beside the rule derived from it, the tolerance (from the seed spread measured in the
  same report) and the verdict — computed from the numbers by the checks in :func:`findings_for` —
  the embeddings and model sizes beside each table, the machine, versions and wall time per stage;
* ``OUT/report.json``: the same numbers, machine readable;
* ``OUT/figures/``: the batteries' figures, copied.

Neither file holds a machine path: paths inside OUT are written relative to it, any other as
``<local path>``. :func:`regrade` (``hf-attn reproduce --regrade OUT/report.json``) re-grades a saved
report.json with the current rules, without its run folders (``--report-only`` rebuilds everything but
needs them). The J&W battery also runs on the W&P seed models (the seed spread of the J&W numbers), and
the T&Š Fig. 1 adversaries use T&Š's own objective (Eq. 6, TVD − λ·JSD), not W&P's TVD − λ·KL.

Budget (``--datasets sst``, 2 idle cores): ~50 trainings and all analyses in well under an hour with
the defaults; the expensive T&Š mutual information (k = 1000 MiniBatchKMeans on up to 1M
occurrences) runs on seeds 0–2 only (``ReproducePlan.mi_seeds``). ``--quick`` trains on small real-SST
subsets for one epoch with short adversary searches: a smoke test of the whole pipeline (numbers are
meaningless). ``--bert-family`` (opt-in, SST) adds a BERT-family section: all-MiniLM-L6-v2 fine-tuned on
SST (~7 min on one thread; or a folder given with ``--bert-model-dir``) and the J&W battery on its
last-layer ``[CLS]`` attention over the first 500 test sentences, beside the BiLSTM's numbers.

Which file holds what. This one folder spans two floors of the package: ``plan``, ``layout``, ``collect`` and
``machine`` sit on the runs' floor, so that the reporting can read a reproduction folder, and ``pipeline`` sits on
the top floor, above the reporting it drives:

* ``plan.py``: :class:`ReproducePlan` (what is trained and analysed),
  :func:`stage_estimates`, the stage titles, :data:`DATASETS`, :func:`dataset_source` and :func:`snli_folder`;
* ``layout.py``: :class:`ReproductionLayout`, the folder layout of OUT (runs,
  analyses, data, figures, stages.json, the report files) and the path scrubbing of what is shipped;
* ``collect.py``: :func:`collect.collect`, the numbers of one dataset read back from its folders;
* ``machine.py``: :func:`machine_info`;
* ``hf_attn/reporting/published.py``: the papers' published numbers and the verbatim sentences the findings quote;
* ``hf_attn/reporting/findings/``: :class:`Check`, :func:`verdict_of`, :data:`VERDICTS` (``checks.py``), one
  function per finding (``jw.py``, ``wp.py``, ``ts.py``, ``eraser.py``; the :data:`FINDINGS` table),
  :func:`findings_for` and :func:`regrade`;
* ``hf_attn/reporting/report.py``: :func:`write_report`, :func:`dataset_section` (one function per
  table, in ``paper_sections.py`` and ``beyond_sections.py``), :func:`format_findings_table` and
  :data:`TABLE_HEADERS`;
* ``pipeline.py``: :func:`reproduce` and :func:`run_dataset` (one function per stage;
  which runs are shared between batteries), :class:`StageClock`, :func:`train_and_analyse_snli` and
  the battery settings. It drives the runs and then the reporting, so it sits above both;
* ``hf_attn/cli/reproduce.py``: ``hf-attn reproduce`` (``add_parser``, ``main``) and ``regrade_file``.

This package's names are read on first use (:func:`__getattr__`), so that ``import hf_attn.reproduce.layout`` from
the reporting does not import the pipeline, which imports the reporting.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "hf_attn.reporting.findings": ["FINDINGS", "TOLERANCE", "VERDICTS", "Check", "findings_for", "regrade", "verdict_of"],
    "hf_attn.reporting.published": ["JW_AVERAGE_LOO_GAIN", "JW_COMMITTED_SST", "JW_GRADIENT_LOO_GAP", "JW_PUBLISHED",
                                    "JW_RELEASED_SST", "QUOTES", "TS_PUBLISHED_EXTRA", "TS_TABLE6_SST", "ts_published"],
    "hf_attn.reporting.report": ["BERT_FAMILY_HEADER", "FAITHFULNESS_HEADER", "TABLE_HEADERS", "dataset_section",
                                 "format_findings_table", "write_report"],
    "hf_attn.reproduce.pipeline": ["StageClock", "machine_info", "reproduce", "run_dataset", "train_and_analyse_snli"],
    "hf_attn.reproduce.layout": ["ReproductionLayout"],
    "hf_attn.reproduce.plan": ["AGNEWS_PATH_ENV", "DATASETS", "STAGE_TITLES", "BertFamilyPlan", "ReproducePlan",
                               "dataset_source", "snli_folder", "stage_estimates"],
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_HOME)


def __getattr__(name: str):
    """The re-exported name ``name`` (PEP 562), imported from its home module on first use."""
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_HOME))
