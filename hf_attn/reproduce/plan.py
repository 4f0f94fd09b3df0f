"""What a reproduction runs: :class:`ReproducePlan` (every knob that sets how much is trained and
analysed, recorded in report.json), the per-stage time estimates, the stage titles, and where each
dataset's data comes from (:func:`dataset_source`, :func:`snli_folder`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace

import numpy as np

from hf_attn.core.io import write_jsonl_atomic

from .layout import ReproductionLayout, layer_counts  # noqa: F401 (layer_counts re-exported)

DATASETS = ("sst", "agnews", "imdb")

# What a corpus's plan changes on a 2-core machine (``ReproducePlan.for_dataset``; ``full_corpora`` lifts the
# subset and keeps the rest). IMDB has ~40× SST's tokens per epoch (25,000 reviews of ~250 words): every
# stage of the SST plan on all of it is days of CPU here. Its plan trains on a seeded subset of each split
# and runs fewer seeds, adversaries and instances; the report says so beside every IMDB table.
CORPUS_PLANS = {
    "imdb": {"subset_sizes": (4000, 500, 1000), "wp_seeds": 3, "wp_lambdas": (0.001, 0.1, 1.0), "wp_guide_seeds": 1,
             "wp_adversary_max_epochs": 10, "ts_seeds": 3, "mi_seeds": (0, 1), "ts_adversary_limit": 100,
             "ts_fig1_lambdas": (0.01, 0.1), "jw_max_instances": 500, "eraser_max_instances": 200,
             "jw_extra_models": (), "ts_tying_deltas": (10.0,), "ts_mlm_weights": (1.0,)},
}
# Why a corpus plan reduces the SST plan (the report's list of cells not run gives it beside each setting).
CORPUS_PLAN_REASONS = {
    "imdb": "IMDB's reviews are long: the SST plan on all of it would take days of CPU time on a 2-core machine",
}
# The T&Š grid on every corpus but SST (``ReproducePlan.for_dataset``): T&Š Table 1's four variants with
# additive attention. T&Š publish the dot-attention and residual cells of AG News and IMDB too; the
# default plan leaves them out to save CPU time, and says so (OTHER_CORPORA_REASON) in the report.
OTHER_CORPORA_PLAN = {"ts_variants": ("base", "concat", "tying", "mlm"), "ts_attentions": ("additive",)}
OTHER_CORPORA_REASON = ("the default plan runs T&Š's dot attention and residual variant on SST only, to save CPU "
                        "time (no option runs them on another corpus)")
# Stages the pipeline runs for SST only (hf_attn.reproduce.pipeline.STAGES): J&W's NLI and QA rows, T&Š
# Table 6, the faithfulness table and the BERT-family section
SST_ONLY_STAGES = ("snli", "qa", "ts_layers", "faithfulness", "bert_family")
# The AG News CSV is not bundled: --agnews-path, else this environment variable (no machine path as a default).
AGNEWS_PATH_ENV = "HF_ATTN_AGNEWS_PATH"


@dataclass
class BertFamilyPlan:
    """The opt-in BERT-family section (``hf-attn reproduce --bert-family``, SST only): a
    BERT-family classifier fine-tuned on SST by :func:`hf_attn.training.transformer.train_transformer_classifier`
    from ``base_model`` (``epochs``, ``seed``; the other settings its defaults) into
    ``OUT/runs/sst/bert-family`` — or the existing folder ``model_dir`` (``--bert-model-dir``), reused
    as it is — then the J&W battery on its ``layer``'s ``[CLS]`` attention (``heads``: "mean" or a
    head index) over ``jw_instances`` test sentences (a seeded sample) (J&W's permutations and adversary
    steps of the plan), and, when hf_attn has the W&P transformer battery, its uniform-attention
    intervention (``wp_uniform``) on the same sentences, and the faithfulness table
    (:mod:`hf_attn.batteries.faithfulness`, the methods of ``ReproducePlan.faithfulness_methods``) on
    ``faithfulness_instances`` test sentences sampled by the same seeded rule (0: not run). Fine-tuning MiniLM takes
    ~7 min on one thread, hence opt-in."""

    base_model: str = "minilm-l6"
    model_dir: str | None = None
    epochs: float = 2.0
    seed: int = 0
    jw_instances: int = 500
    layer: int = -1
    heads: str | int = "mean"
    wp_uniform: bool = True
    # ~6.5 s a sentence on one thread (every method, NAOPC's search included): 50 sentences ~5.5 min
    faithfulness_instances: int = 50

    def validate(self) -> None:
        if not isinstance(self.faithfulness_instances, int) or self.faithfulness_instances < 0:
            raise ValueError(f"faithfulness_instances must be an int >= 0 (0: no faithfulness table), got "
                             f"{self.faithfulness_instances!r}")
        if self.jw_instances < 1 or not self.epochs > 0:
            raise ValueError(f"the BERT-family section needs jw_instances >= 1 and epochs > 0, got "
                             f"{self.jw_instances}, {self.epochs}")
        if self.heads != "mean" and not (isinstance(self.heads, int) and self.heads >= 0):
            raise ValueError(f"heads must be 'mean' or a head index, got {self.heads!r}")


@dataclass
class ReproducePlan:
    """Everything that sets how much is trained and analysed (recorded in report.json)."""

    quick: bool = False
    epochs: int = 8
    ts_seeds: int = 5  # T&Š averaged 5 runs (--datasets sst from scratch: ~30 min on 2 cores)
    ts_variants: tuple = ("base", "concat", "residual", "tying", "mlm")
    ts_attentions: tuple = ("additive", "dot")
    # T&Š's model selection (§3.1, Table 4): seed 0 of tying for every δ and of MLM for every η, per attention;
    # the grid then uses the value with the best dev F1 per cell. A single value: no selection, the grid uses it.
    ts_tying_deltas: tuple = (1.0, 10.0, 20.0, 30.0)
    ts_mlm_weights: tuple = (0.1, 0.3, 1.0, 3.0, 5.0)
    ts_permutation_draws: int = 10
    ts_adversary_limit: int = 500  # J&W adversary on the first N test instances of every grid run
    ts_fig1_cells: tuple = ("base-additive", "tying-additive", "mlm-additive")
    # T&Š Eq. 6 (TVD − λ·JSD, JSD ≤ ln 2): λ = 0.1 already drives both models' adversaries to JSD ≈ 0.68 on
    # SST (measured), so the useful range ends there
    ts_fig1_lambdas: tuple = (0.001, 0.01, 0.03, 0.1)
    mi_seeds: tuple = (0, 1, 2)  # MI (k = 1000 k-means, twice per method) on 3 seeds: a seed spread to grade with
    mi_variants: tuple = ("base", "residual", "tying", "mlm")
    mi_words: int = 1000
    mi_clusters: int = 1000
    mi_max_occurrences: int = 1_000_000
    wp_seeds: int = 8
    wp_lambdas: tuple = (0.001, 0.01, 0.1, 1.0, 10.0)
    wp_guide_lambda: float = 0.001
    wp_guide_seeds: int = 3  # the λ = 0.001 adversary is seed-sensitive: mean guided-MLP F1 over 3
    wp_adversary_steps: int = 500
    # consistent adversary: W&P's protocol (sarahwie/attention: ½·TVD, class-weighted, early stopping on the
    # training objective with patience 10) but capped at 40 epochs instead of W&P's 80 (run_adversarial.sh
    # --n_iters 80): 7 adversaries × 80 epochs × ~2.5 s would add ~21 min and push `--datasets sst` past
    # 60 min on 2 cores; 40 epochs add ~9 min. "fast" = the earlier protocol (base's 8 epochs, dev selection).
    wp_adversary_protocol: str = "wp"
    wp_adversary_max_epochs: int | None = 40
    jw_permutations: int = 100
    jw_steps: int = 500
    jw_max_instances: int | None = None
    eraser_cells: tuple = ("base-additive", "tying-additive", "mlm-additive")
    eraser_ig_steps: int = 50
    # the faithfulness stage's integrated gradients nodes: 16, as in the example report made with it (its
    # results record the completeness gap; the table's own default is 50)
    faithfulness_ig_steps: int = 16
    # J&W battery on more encoders / attentions (J&W Table 2's CNN column, appendix dot attention):
    # (run name, encoder, attention), trained with the J&W BiLSTM's settings otherwise
    # J&W's note that non-recurrent encoders and scaled dot-product attention give comparable results: the
    # CNN with both attentions, the BiLSTM and the Average encoder with dot (the Average + additive is the
    # J&W Average model itself)
    jw_extra_models: tuple = (("cnn-additive", "cnn", "additive"), ("lstm-dot", "lstm", "dot"),
                              ("average-dot", "average", "dot"), ("cnn-dot", "cnn", "dot"))
    # T&Š appendix B Table 6 (multi-layer LSTMs): the fragility grid again with 2- and 3-layer BiLSTMs
    # (additive, the variants of Table 6), on fewer seeds than the 1-layer grid
    ts_multilayer_layers: tuple = (2, 3)
    ts_multilayer_variants: tuple = ("base", "concat", "tying", "mlm")
    ts_multilayer_seeds: int = 2
    # SNLI pair battery (J&W §3–4): the first snli_train_pairs of the offline train subset (all 100,000 of
    # it; J&W: all 550k), snli_epochs epochs, the J&W battery on the first snli_jw_instances test pairs, on
    # snli_seeds models (seed 0 and snli_seeds − 1 more: the seed spread the SNLI verdicts take their
    # tolerances from). Runs only when the offline copy is found ($HF_ATTN_SNLI_DIR or snli_path; see
    # hf_attn.data.tasks.load_snli).
    snli_path: str | None = None
    snli_train_pairs: int = 100_000
    snli_dev_pairs: int = 2000
    snli_epochs: int = 3
    snli_jw_instances: int = 500
    snli_seeds: int = 3
    # J&W's QA rows on bAbI tasks 1–3 (part of the SST pipeline): generated data (the released files are not
    # available offline; hf_attn.data.babi), 1,000 training questions, the pair model with J&W's bAbI settings
    # (50-d embeddings from scratch, H = 30, batch 50), qa_epochs epochs, the J&W battery (ε = 0.05) on the
    # first qa_jw_instances test questions; one seed, shown beside J&W's numbers, not graded
    qa_tasks: tuple = ("babi1", "babi2", "babi3")
    qa_epochs: int = 50
    qa_jw_instances: int = 300
    eraser_max_instances: int | None = None
    quick_sizes: tuple = (240, 60, 80)  # train / validation / test rows in --quick
    # train / validation / test rows of a corpus's seeded subset (CORPUS_PLANS; None: the whole corpus)
    subset_sizes: tuple | None = None
    # --full-corpora: every corpus whole (CORPUS_PLANS' subsets lifted; their other reductions kept)
    full_corpora: bool = False
    # --quick DATASET …: these corpora run the --quick plan, the others this one
    quick_datasets: tuple = ()
    # the faithfulness table (hf_attn.batteries.faithfulness) of the J&W BiLSTM on SST: a seeded sample of
    # faithfulness_instances test sentences (0: not run). The optional captum methods (kernel_shap,
    # deeplift) are left out so the report does not depend on an optional extra.
    faithfulness_instances: int = 200
    faithfulness_methods: tuple = ("attention", "rollout", "attention_flow", "attention_norm", "alti",
                                   "value_zeroing", "saliency", "gradient_x_input", "integrated_gradients",
                                   "leave_one_out", "random")
    # the opt-in BERT-family section (None: not run, and absent from report.json's plan)
    bert_family: BertFamilyPlan | None = None

    @classmethod
    def for_mode(cls, quick: bool, seeds: int | None = None, wp_seeds: int | None = None) -> "ReproducePlan":
        plan = cls()
        if quick:
            plan = replace(plan, quick=True, epochs=1, ts_seeds=1, ts_attentions=("additive",),
                           ts_tying_deltas=(10.0,), ts_mlm_weights=(1.0,),
                           ts_adversary_limit=16, ts_fig1_cells=("base-additive", "mlm-additive"),
                           ts_fig1_lambdas=(0.01,), ts_permutation_draws=3, mi_words=40, mi_clusters=8,
                           mi_max_occurrences=2000, wp_seeds=2, wp_lambdas=(0.001, 1.0), wp_guide_seeds=1,
                           wp_adversary_steps=20, wp_adversary_max_epochs=2, jw_permutations=10, jw_steps=20,
                           ts_multilayer_seeds=1, snli_train_pairs=200, snli_dev_pairs=20, snli_epochs=1,
                           snli_jw_instances=20, snli_seeds=1, qa_tasks=("babi1",), qa_epochs=2, qa_jw_instances=20,
                           eraser_cells=("base-additive", "tying-additive"), eraser_ig_steps=4,
                           eraser_max_instances=40, faithfulness_instances=20)
        if seeds is not None:
            if seeds < 1:
                raise ValueError(f"--seeds must be >= 1, got {seeds}")
            plan = replace(plan, ts_seeds=seeds)
        if wp_seeds is not None:
            if wp_seeds < 1:
                raise ValueError(f"--wp-seeds must be >= 1, got {wp_seeds}")
            plan = replace(plan, wp_seeds=wp_seeds)
        return plan

    @classmethod
    def from_record(cls, record: dict) -> "ReproducePlan":
        """The plan a report.json recorded (its ``plan``: lists back to tuples, the BERT-family section
        back to a :class:`BertFamilyPlan`); fields the record lacks keep their defaults."""
        def tuples(value):
            return tuple(tuples(v) for v in value) if isinstance(value, list) else value

        names = {f.name for f in fields(cls)} - {"bert_family"}
        section = record.get("bert_family")
        return cls(**{k: tuples(v) for k, v in record.items() if k in names},
                   bert_family=BertFamilyPlan(**section) if section else None)

    def with_bert_family(self, model_dir: str | None = None, instances: int | None = None,
                         base_model: str | None = None) -> "ReproducePlan":
        """This plan with the BERT-family section (``--bert-family``): MiniLM fine-tuned on SST, or the
        folder ``model_dir``; the J&W battery on ``instances`` seeded-sampled test sentences (default 500;
        ``--quick``: one epoch, 40 sentences)."""
        section = (BertFamilyPlan(epochs=1.0, jw_instances=40, faithfulness_instances=5) if self.quick
                   else BertFamilyPlan())
        if model_dir is not None:
            section = replace(section, model_dir=model_dir)
        if instances is not None:
            section = replace(section, jw_instances=instances)
        if base_model is not None:
            section = replace(section, base_model=base_model)
        section.validate()
        return replace(self, bert_family=section)

    def for_dataset(self, dataset: str) -> "ReproducePlan":
        """The plan of one corpus: AG News and IMDB get T&Š Table 1's four variants with additive
        attention only (:data:`OTHER_CORPORA_PLAN`), and the corpus's :data:`CORPUS_PLANS` entry (IMDB: a
        seeded subset and fewer seeds on a 2-core machine; ``full_corpora`` keeps the whole corpus)."""
        if dataset in self.quick_datasets and not self.quick:
            quick = ReproducePlan.for_mode(True, None, None)
            return replace(quick, bert_family=self.bert_family, snli_path=self.snli_path,
                           quick_datasets=self.quick_datasets)
        if dataset == "sst" or self.quick:
            return self
        plan = replace(self, **OTHER_CORPORA_PLAN, eraser_max_instances=self.eraser_max_instances or 500)
        changes = dict(CORPUS_PLANS.get(dataset, {}))
        if self.full_corpora:
            changes.pop("subset_sizes", None)
        return replace(plan, **changes)


# Rough wall seconds on 2 idle cores for SST (for the per-stage estimate; scaled by what the
# first trainings actually take).
# per-item seconds, calibrated on the from-scratch run of 2026-11-21 (2 idle cores; 19.9 min with 3 seeds)
_SECONDS = {"train_lstm": 30, "train_small_lstm": 16, "train_mlm": 25, "train_average": 10,
            "train_adversary": 20, "jw_lstm": 5, "jw_average": 3, "wp_analysis": 40,
            # one epoch of the consistent adversary incl. its dev evaluation and checkpoint (train_adversary / 8)
            "adversary_epoch": 2.5,
            # J&W CNN (kernels 1/3/5/7 × 64) 8 epochs; its J&W battery (like jw_lstm) — not yet calibrated
            # on a from-scratch run: taken equal to the BiLSTM's (README: BiLSTM ~31 s, CNN of the same order)
            "train_cnn": 30, "jw_cnn": 5,
            # 2-layer T&Š grid run (H = 25): twice the 1-layer one (the LSTM dominates), not yet calibrated
            "train_small_lstm_2layer": 32, "train_mlm_2layer": 50,
            # SNLI pair model per 1000 train pairs and epoch (two BiLSTMs, ~22 tokens a pair: ~3.4× SST's tokens
            # per row at SST's ~35k tokens/s) + dev, and the pair J&W battery per 100 test pairs — not calibrated
            "snli_per_1000_pairs_epoch": 0.7, "snli_jw_per_100": 1.0,
            "ts_run": 2, "ts_mi": 15, "eraser": 6,
            # BERT-family section, measured on 22 Nov 2026 with one torch thread (docs/bert_family): MiniLM
            # fine-tuning 432 s for 2 epochs on SST + 40 s of dev/test evaluation; J&W battery 280 s for 500
            # test sentences
            "bert_epoch": 216, "bert_eval": 40, "bert_jw_per_instance": 0.56,
            # faithfulness table per sentence, from the tables of docs/faithfulness (200 SST test sentences,
            # CPU): the BiLSTM ~0.45 s; MiniLM ~8.4 s with Kernel SHAP, ~6.5 s without (the reproduction's methods)
            "faith_lstm_per_instance": 0.45, "faith_bert_per_instance": 6.5}


def snli_folder(plan: ReproducePlan) -> str | None:
    """The offline SNLI copy (``plan.snli_path`` or ``$HF_ATTN_SNLI_DIR``) if its files are there, else None."""
    from hf_attn.data.tasks import SNLI_ENV, _snli_files

    root = plan.snli_path or os.environ.get(SNLI_ENV)
    if not root:
        return None
    try:
        _snli_files(root)
    except FileNotFoundError:
        return None
    return root


def stage_estimates(plan: ReproducePlan) -> dict[str, float]:
    """Estimated wall seconds per stage on 2 idle cores (SST-sized data); ``bert_family`` only when
    the plan has the BERT-family section."""
    extra = {"bert_family": _bert_family_estimate(plan)} if plan.bert_family is not None else {}
    if plan.quick:
        return {"models": 20, "jw": 15, "jw_more": 20, "ts_select": 0, "qa": 20, "ts_layers": 20, "snli": 10 if snli_folder(plan) else 0, "wp": 60, "jw_seeds": 10, "ts_grid": 30, "ts": 40, "eraser": 15,
                "faithfulness": 15 if plan.faithfulness_instances else 0} | extra
    s = _SECONDS
    cells = len(plan.ts_variants) * len(plan.ts_attentions)
    grid = plan.ts_seeds * sum(s["train_mlm"] if v == "mlm" else s["train_small_lstm"]
                               for v in plan.ts_variants for _ in plan.ts_attentions)
    wp_lambdas = len(set(plan.wp_lambdas) | {plan.wp_guide_lambda})
    adversary = s["train_adversary"]
    if plan.wp_adversary_protocol != "fast":  # every epoch up to the cap (the early stop rarely fires)
        from hf_attn.training.wp import adversary_protocol
        adversary = s["adversary_epoch"] * adversary_protocol(plan.wp_adversary_protocol,
                                                              max_epochs=plan.wp_adversary_max_epochs)["max_epochs"]
    wp_train = (s["train_lstm"] * (1 + plan.wp_seeds)
                + adversary * (wp_lambdas + plan.wp_guide_seeds - 1)
                + (2 + plan.wp_guide_seeds) * s["train_average"])
    mi_runs = len(plan.mi_seeds) * len([v for v in plan.mi_variants if v in plan.ts_variants])
    jw_more = sum(s[f"train_{enc}"] + s[f"jw_{enc}"] for _, enc, _ in plan.jw_extra_models)
    # an L-layer run: (L / 2) × the 2-layer one (the LSTM dominates)
    layered = plan.ts_multilayer_seeds * sum(
        layers / 2 * (s["train_mlm_2layer"] if v == "mlm" else s["train_small_lstm_2layer"]) + s["ts_run"]
        for v in plan.ts_multilayer_variants for layers in layer_counts(plan)) if plan.ts_multilayer_seeds else 0
    snli = snli_seconds(plan) if snli_folder(plan) else 0
    return {"models": s["train_lstm"] + s["train_average"],
            "jw": s["jw_lstm"] + s["jw_average"],
            "jw_more": jw_more,
            "snli": snli,
            "ts_layers": layered,
            "wp": wp_train + s["wp_analysis"],
            "jw_seeds": plan.wp_seeds * s["jw_lstm"],
            # bAbI 1–3 at 1,000 questions, 50 epochs: 30 / 62 / 99 s of training and 15 / 66 / 397 s of battery per
            # 1,000 test questions (docs/benchmarks/babi_generated_jw.json)
            "qa": sum({"babi1": 30 + 0.015 * plan.qa_jw_instances, "babi2": 62 + 0.066 * plan.qa_jw_instances,
                       "babi3": 99 + 0.4 * plan.qa_jw_instances}.get(t, 100) * plan.qa_epochs / 50
                      for t in plan.qa_tasks),
            "ts_select": len(plan.ts_attentions) * (
                (s["train_small_lstm"] * len(plan.ts_tying_deltas) if len(plan.ts_tying_deltas) > 1 else 0)
                + (s["train_mlm"] * len(plan.ts_mlm_weights) if len(plan.ts_mlm_weights) > 1 else 0)),
            "ts_grid": grid,
            "ts": cells * plan.ts_seeds * s["ts_run"] + mi_runs * s["ts_mi"]
                  + len(plan.ts_fig1_cells) * len(plan.ts_fig1_lambdas) * s["train_adversary"],
            "eraser": len(plan.eraser_cells) * s["eraser"],
            "faithfulness": s["faith_lstm_per_instance"] * plan.faithfulness_instances} | extra


def snli_seconds(plan: ReproducePlan) -> float:
    """Estimated seconds of the SNLI stage on 2 idle cores: every seed's training and pair battery."""
    s = _SECONDS
    return plan.snli_seeds * (s["snli_per_1000_pairs_epoch"] * plan.snli_epochs
                              * (plan.snli_train_pairs + plan.snli_dev_pairs) / 1000
                              + s["snli_jw_per_100"] * plan.snli_jw_instances / 100)


def _bert_family_estimate(plan: ReproducePlan) -> float:
    """Seconds of the BERT-family stage: fine-tuning (none when a folder is reused; --quick: a small
    subset) and the J&W battery on the bounded test sentences."""
    section, s = plan.bert_family, _SECONDS
    train = 0.0 if section.model_dir else s["bert_epoch"] * section.epochs + s["bert_eval"]
    if plan.quick and not section.model_dir:
        train = train * plan.quick_sizes[0] / 6920 + 10
    return (train + s["bert_jw_per_instance"] * section.jw_instances
            + s["faith_bert_per_instance"] * min(section.faithfulness_instances, section.jw_instances))


STAGE_TITLES = {"models": "J&W BiLSTM (= W&P base) and J&W Average (= W&P trained-MLP guide)",
                "jw": "J&W battery on the BiLSTM and the Average model",
                "jw_more": "J&W's other encoders and attentions (CNN + additive / dot, BiLSTM + dot, Average + dot) "
                           "and their J&W battery",
                "snli": "J&W SNLI pair models (seeds) and their J&W pair battery",
                "qa": "J&W QA: bAbI tasks 1–3 (generated data), the pair model and its J&W battery (ε = 0.05)",
                "wp": "W&P battery (uniform, seeds, λ sweep of consistent adversaries, guided MLPs)",
                "jw_seeds": "J&W battery on the W&P seed models (the seed spread of τ, permutation, adversary)",
                "ts_select": "T&Š model selection: tying for every δ, MLM for every η (seed 0), best dev F1 per cell",
                "ts_grid": "T&Š variant grid training",
                "eraser": "ERASER / integrated gradients on T&Š base / tying / MLM (seed 0)",
                "ts": "T&Š battery on every grid run, MI on the MI seeds, Fig. 1 adversaries (T&Š Eq. 6)",
                "ts_layers": "T&Š Table 6: the fragility grid with 2- and 3-layer BiLSTMs (training + T&Š battery)",
                "faithfulness": "faithfulness table (attribution methods × faithfulness metrics) of the J&W BiLSTM",
                "bert_family": "BERT-family (opt-in): MiniLM fine-tuned on SST, the J&W battery on its [CLS] attention "
                               "and its faithfulness table"}


def dataset_source(dataset: str, output_dir: str, plan: ReproducePlan,
                   agnews_path: str | None = None) -> tuple[str, str | None]:
    """``(TrainSettings.dataset, data_path)`` for one dataset. ``--quick`` writes seeded random
    subsets of the real splits to ``OUT/data/<dataset>-quick/{train,validation,test}.jsonl``, a corpus
    plan's ``subset_sizes`` to ``OUT/data/<dataset>-subset/`` (the batteries reload the data from
    run.json, so the subset has to exist on disk)."""
    from hf_attn.data.tasks import load_task


    data_path = None
    if dataset == "agnews":
        data_path = agnews_path or os.environ.get(AGNEWS_PATH_ENV)
        if not data_path:
            raise FileNotFoundError(f"AG News needs its CSV (class,title,description rows): pass --agnews-path "
                                    f"or set {AGNEWS_PATH_ENV}")
        if not os.path.exists(data_path):
            raise FileNotFoundError(f"AG News CSV not found at {data_path!r}: pass --agnews-path")
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; choose from {DATASETS}")
    if plan.quick:
        folder, sizes = ReproductionLayout(output_dir).quick_data(dataset), plan.quick_sizes
    elif plan.subset_sizes:
        folder, sizes = ReproductionLayout(output_dir).subset_data(dataset), plan.subset_sizes
    else:
        return dataset, data_path
    if not os.path.exists(os.path.join(folder, "test.jsonl")):
        task = load_task(dataset, data_path=data_path)
        rng = np.random.default_rng(0)
        os.makedirs(folder, exist_ok=True)
        for split, n in zip(("train", "validation", "test"), sizes):
            data = task.splits[split]
            rows = np.sort(rng.choice(len(data), min(n, len(data)), replace=False))
            texts, labels = data["text"], data["label"]
            write_jsonl_atomic(os.path.join(folder, f"{split}.jsonl"),
                               ({"text": texts[i], "label": int(labels[i])} for i in rows.tolist()))
    return folder, None
