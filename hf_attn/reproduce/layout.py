"""The folder layout of one reproduction, in one place (:class:`ReproductionLayout`).

Everything lives under one output folder OUT::

    OUT/stages.json                       wall time per stage (StageClock)
    OUT/report.json, OUT/REPORT.md        the report (paths in them relative to OUT)
    OUT/figures/<dataset>-<figure>.png    the batteries' figures, copied
    OUT/data/<dataset>-quick/             --quick: the seeded subsets of the real splits
    OUT/runs/<dataset>/                   trained models (shared between batteries, see pipeline.py)
        lstm-additive/                    J&W BiLSTM = W&P base
        wp/                               W&P helpers; wp/mlp-guide-trained = J&W Average
        cnn-additive/, lstm-dot/          J&W's other encoder / attention
        ts-grid/<variant>-<attention>/seed<S>/, ts-grid-<L>layer/...
        snli-lstm-additive/
        bert-family/                      --bert-family: the fine-tuned BERT-family classifier
    OUT/analysis/<dataset>/               battery outputs (results.json, figures)
        jw-lstm/, jw-average/, jw-<extra>/, jw-seeds/seed-<S>/, jw-snli/
        wp/, ts/, ts-<L>layer/, eraser/<cell>/, faithfulness-lstm/
        jw-bert-family/, wp-bert-family/  --bert-family: J&W and (W&P uniform) on that classifier

The training (pipeline.py) and the report (collect.py / report.py, also ``--report-only`` on an existing
folder) both take their paths from here, so they cannot drift apart. :meth:`ReproductionLayout.public`
turns the paths of a report into what is shipped: relative to OUT, any other machine path
``<local path>`` (the convention of ``hf_attn.hub.scrub``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


def layer_counts(plan) -> tuple[int, ...]:
    """The BiLSTM depths of T&Š Table 6 a plan runs (an int in plans recorded before it took several)."""
    layers = plan.ts_multilayer_layers
    return (int(layers),) if isinstance(layers, int) else tuple(int(x) for x in layers)


@dataclass(frozen=True)
class ReproductionLayout:
    """Paths of a reproduction under ``output_dir`` (as given: relative paths stay relative, so the
    requests recorded beside each analysis match those of earlier invocations)."""

    output_dir: str

    # ---- the whole reproduction
    @property
    def stages_json(self) -> str:
        return os.path.join(self.output_dir, "stages.json")

    @property
    def report_json(self) -> str:
        return os.path.join(self.output_dir, "report.json")

    @property
    def report_md(self) -> str:
        return os.path.join(self.output_dir, "REPORT.md")

    @property
    def figures(self) -> str:
        return os.path.join(self.output_dir, "figures")

    def figure(self, name: str) -> str:
        return os.path.join(self.figures, name)

    # ---- one dataset
    def quick_data(self, dataset: str) -> str:
        """The ``--quick`` subsets of ``dataset`` ({train,validation,test}.jsonl)."""
        return os.path.join(self.output_dir, "data", f"{dataset}-quick")

    def subset_data(self, dataset: str) -> str:
        """The seeded subset of ``dataset`` a corpus plan trains on (``ReproducePlan.subset_sizes``)."""
        return os.path.join(self.output_dir, "data", f"{dataset}-subset")

    def runs(self, dataset: str) -> str:
        return os.path.join(self.output_dir, "runs", dataset)

    def analysis(self, dataset: str) -> str:
        return os.path.join(self.output_dir, "analysis", dataset)

    def dataset_paths(self, dataset: str, plan) -> dict:
        """Every run and analysis folder of one dataset, for ``plan`` already adapted to it
        (``ReproducePlan.for_dataset``): the dict the pipeline trains into and ``collect`` reads.
        ``data`` is the TrainSettings dataset: the quick-subset folder in --quick, else the name."""
        from hf_attn.training import wp as wpt

        runs, analysis = self.runs(dataset), self.analysis(dataset)
        wp_runs = os.path.join(runs, "wp")
        layers = layer_counts(plan)
        section = getattr(plan, "bert_family", None)
        bert = {} if section is None else {  # --bert-family: its model (trained here, or the given folder)
            "bert_model": section.model_dir or os.path.join(runs, "bert-family"),
            "jw_bert": os.path.join(analysis, "jw-bert-family"), "wp_bert": os.path.join(analysis, "wp-bert-family"),
            "faith_bert": os.path.join(analysis, "faithfulness-bert-family")}
        return bert | {"dataset": dataset, "data": (self.quick_data(dataset) if plan.quick
                                               else self.subset_data(dataset) if getattr(plan, "subset_sizes", None)
                                               else dataset),
                "runs": runs, "analysis": analysis,
                "base": os.path.join(runs, "lstm-additive"),  # J&W BiLSTM = W&P base
                "average": wpt.guide_run_dir(wp_runs, "trained"),  # J&W Average = W&P TRAINED-MLP guide
                "wp_runs": wp_runs, "grid": os.path.join(runs, "ts-grid"),
                "ts_select": os.path.join(runs, "ts-select"),
                "jw_lstm": os.path.join(analysis, "jw-lstm"), "jw_average": os.path.join(analysis, "jw-average"),
                "jw_seeds": os.path.join(analysis, "jw-seeds"),
                # {name: (run folder, J&W battery folder)} of plan.jw_extra_models
                "jw_extra": {name: (os.path.join(runs, name), os.path.join(analysis, f"jw-{name}"))
                             for name, _, _ in plan.jw_extra_models},
                "snli_model": os.path.join(runs, "snli-lstm-additive"), "jw_snli": os.path.join(analysis, "jw-snli"),
                # the SNLI seed models (seed ≥ 1) and their J&W batteries: seed-S below each
                "snli_seeds": os.path.join(runs, "snli-seeds"), "jw_snli_seeds": os.path.join(analysis, "jw-snli-seeds"),
                # J&W QA (bAbI, generated): {task: (run folder, J&W battery folder)}
                "qa": {task: (os.path.join(runs, f"qa-{task}"), os.path.join(analysis, f"jw-qa-{task}"))
                       for task in getattr(plan, "qa_tasks", ())},
                # T&Š Table 6: {layers: folder} per depth of the plan
                "ts_layers_grid": {n: os.path.join(runs, f"ts-grid-{n}layer") for n in layers},
                "ts_layers": {n: os.path.join(analysis, f"ts-{n}layer") for n in layers},
                "wp": os.path.join(analysis, "wp"), "ts": os.path.join(analysis, "ts"),
                "eraser": {c: os.path.join(analysis, "eraser", c) for c in plan.eraser_cells},
                "faith_lstm": os.path.join(analysis, "faithfulness-lstm")}

    # ---- what is shipped
    def public(self, value):
        """``value`` (report dict, list or Markdown text) without machine paths: a path inside the
        output folder becomes relative to it (``runs/sst/lstm-additive``), any other absolute path
        ``<local path>``. Absolute paths are found by ``hf_attn.hub.scrub``'s scrubber; paths under a
        relative output folder (``out/runs/...``) by their prefix here."""
        from hf_attn.hub.scrub import _PathScrubber

        scrubber = _PathScrubber(Path(self.output_dir))
        given = os.path.normpath(self.output_dir)
        prefix = None if os.path.isabs(given) or given == "." else given + os.sep

        def walk(v):
            if isinstance(v, str):
                if prefix and "\n" not in v and (v == given or v.startswith(prefix)):
                    relative = os.path.relpath(v, given)
                    return PurePosixPath(*Path(relative).parts).as_posix() if relative != "." else "."
                return scrubber.value(v)
            if isinstance(v, dict):
                return {scrubber.text(k) if isinstance(k, str) else k: walk(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [walk(x) for x in v]
            return v

        return walk(value)
