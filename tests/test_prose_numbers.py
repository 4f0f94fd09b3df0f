"""Numbers in prose come from results.

Every result number quoted in ``README.md`` and ``docs/**/*.md`` (the generated ``REPORT.md``
files excepted) is tied to the committed record it comes from by an HTML comment right after it,
invisible on a rendered page:

    τ_g 0.49<!-- report: results.sst.jw.lstm.summary.tau_gradient.per_class.0.mean -->

``SOURCE: PATH [×100 | /60]`` names a committed JSON file (:data:`SOURCES`) and a path in it: keys
and list indices separated by dots, ``[key=value]`` picks the list item whose ``key`` is ``value``;
``×100`` turns a fraction into a percentage, ``/60`` seconds into minutes. The quoted number must
equal the value printed at the quoted number of decimals, so the test fails when the prose or the
JSON drifts.

A number measured once and kept in no record (a speed, a one-off experiment) is instead covered by

    <!-- measured: YYYY-MM-DD, MACHINE, HOW -->

after it; it covers every number since the previous marker in its paragraph, and the paragraph
must say the date in words (e.g. "21 Nov 2026") so that a reader sees it is a dated measurement.

Coverage: in those files, outside code, every decimal number and every percentage must carry one of
the two markers, unless it is a setting or threshold (right after ``=``, ``<``, ``>``, ``≤``,
``≥``, ``∈``, ``§``, ``^`` or inside ``{…}``) or listed in :data:`NOT_RESULTS` with the reason. Integers are checked where they carry a marker (counts such as "79 models").
"""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {
    "report": "docs/reproduction/report.json",  # hf-attn reproduce --datasets sst (REPORT.md)
    "benchmark": "docs/reproduction/benchmark_reproduce.json",  # scripts/bench/reproduce.py
    "jwpre": "docs/reproduction/jw_preprocessing/summary.json",  # scripts/jw_preprocessing_report.py
    "bert": "docs/bert_family/jw_results.json",  # scripts/finetune_minilm.py: the J&W battery on MiniLM
    "bertrun": "docs/bert_family/train_run.json",  # scripts/finetune_minilm.py: the fine-tuning run
    "bertwp": "docs/bert_family/wp_results.json",  # hf-attn analyze --battery wp on MiniLM
    "berteraser": "docs/bert_family/eraser_results.json",  # hf-attn eraser on MiniLM
    "decoderrun": "docs/decoder/train_run.json",  # hf-attn train --base-model smollm2-135m
    "archmatrix": "docs/benchmarks/architecture_matrix.json",  # scripts/architecture_matrix.py
    "archsweep": "docs/benchmarks/architecture_sweep.json",  # scripts/architecture_sweep.py
    "pretrained": "docs/benchmarks/pretrained_jw.json",  # hf-attn analyze --battery jw on MiniLM, SmolLM2, BiLSTM
    "checkpoints": "docs/benchmarks/pretrained_checkpoints.json",  # scripts/pretrained_checkpoints.py
    "bf16": "docs/benchmarks/bf16_training.json",  # scripts/bench/training.py --compare bf16
    "profile": "docs/benchmarks/profile_analyze.json",  # scripts/profile_commands.py analyze
    "trainprofile": "docs/benchmarks/profile_train.json",  # scripts/profile_commands.py train
    "peers": "docs/benchmarks/peers.json",  # scripts/bench/peers.py --quick
    "peerstable": "docs/benchmarks/peers_table.json",  # scripts/bench/peers.py --methods faithfulness_table
    "peersfull": "docs/benchmarks/peers_full.json",  # scripts/bench/peers.py --full
    "growth": "docs/benchmarks/growth.json",  # scripts/bench/peers.py --growth
    "igc": "docs/benchmarks/ig_completeness.json",  # scripts/ig_completeness.py
    "ignested": "docs/benchmarks/ig_nested.json",  # scripts/bench/ig_nested.py
    "bf16agree": "docs/benchmarks/bf16_agreement.json",  # scripts/bench/bf16_agreement.py --tiny llama bert
    "long": "docs/benchmarks/long_sentence.json",  # scripts/bench/long_sentence.py
    "longnow": "docs/benchmarks/long_sentence_latest.json",  # scripts/bench/long_sentence.py --lengths 510
    "commits": "docs/benchmarks/long_sentence_commits.json",  # scripts/bench/long_sentence_commits.py
    "heaptrim": "docs/benchmarks/heap_trim.json",  # scripts/bench/heap_trim.py --rounds 2
    "vz": "docs/benchmarks/value_zeroing.json",  # scripts/bench/value_zeroing.py --rounds 3
    "kernel": "docs/benchmarks/attention_kernel.json",  # scripts/bench/attention_kernel.py
    "imports": "docs/benchmarks/import_time.json",  # scripts/bench/import_time.py
    "refcheck": "docs/faithfulness/reference_check.json",  # scripts/faithfulness_references.py
    "training": "docs/benchmarks/training_vs_plain_loop.json",
    "plausibility": "docs/plausibility/sst_rationales.json",  # scripts/rationale_stats.py
    "gpu": "docs/benchmarks/gpu_check.json",
    "peersapi": "docs/benchmarks/peers_api.json",  # scripts/bench/peers.py through the public API
    "peersig": "docs/benchmarks/peers_api_ig.json",  # scripts/bench/peers.py --methods integrated_gradients …
    "peersprofile": "docs/benchmarks/peers_api_profile.json",  # scripts/profile_table.py  # scripts/gpu_check.py on a CUDA machine  # scripts/bench/training.py --epochs E
}
TRANSFORMS = {None: lambda v: v, "×100": lambda v: 100 * v, "/60": lambda v: v / 60}

# (file, exact text containing the number, why it is not a result number)
NOT_RESULTS = [
    ("docs/performance.md", "accuracy within 0.02, ROC-AUC within 0.01",
     "tolerances of a test (tests/test_multiprocess.py), not measured values"),
    ("docs/faithfulness.md", "95 % Student-t", "the confidence level of the intervals, a setting"),
    ("docs/plausibility.md", "same mean, 95 % interval", "the confidence level of the intervals, a setting"),
    ("docs/faithfulness.md", "RSS granularity (0.00)", "what a value below the resolution prints as, not a result"),
    ("docs/faithfulness.md", "its 95 % intervals", "the confidence level of the intervals, a setting"),
    ("docs/models.md", "10 % of those", "the share of the SNLI train pairs carved out as dev, a setting"),
    ("docs/methods.md", "(ε vs 0.05)", "the J&W code's accepted TVD, a setting"),
    ("docs/reproduction/README.md", '"around or below 0.5 in',
     "J&W's words (a threshold the finding JWX-1 tests), not a measured value"),
    ("docs/reproduction/README.md", "~0.375 gain",
     "J&W's published number (the value JWX-3 tests), not a measured value"),
]

NUMBER = r"[−-]?\d[\d,]*(?:\.\d+)?"
MARKER = re.compile(r"<!--\s*(?P<kind>" + "|".join([*SOURCES, "measured"]) + r"):\s*(?P<body>.*?)\s*-->", re.S)
MARKED = re.compile(r"(?P<number>" + NUMBER + r")(?P<unit>\s?%)?(?:\*\*)?\s*<!--\s*(?P<source>"
                    + "|".join(SOURCES) + r"):\s*(?P<path>[^\s>]+)(?:\s+(?P<transform>×100|/60))?\s*-->")
CANDIDATE = re.compile(r"(?<![\w./])(?<!\w-)(?P<number>\d+\.\d+|\d+(?:\.\d+)?\s?%)(?![\w.]\d)")
SETTING_BEFORE = re.compile(r"(?:[=<>≤≥∈§^]|\{[^}]*)\s*$")
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


GENERATED = "<!-- generated by "  # first line of a Markdown file written by code from results files


def prose_files() -> list[Path]:
    """Hand-written Markdown: REPORT.md and files whose first line says they are generated (from
    results files, by the command it names) are left out — their numbers come from the data."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [f for f in files if f.name != "REPORT.md" and not f.read_text(encoding="utf-8").startswith(GENERATED)]


def _load(source: str):
    return json.loads((ROOT / SOURCES[source]).read_text())


def lookup(data, path: str):
    """``a.b.0.c`` / ``findings[id=JW-1].measured`` → the value in ``data``."""
    value = data
    for part in re.findall(r"\[[^\]]+\]|[^.\[\]]+", path):
        if part.startswith("["):
            key, wanted = part[1:-1].split("=", 1)
            matches = [item for item in value if str(item.get(key)) == wanted]
            assert len(matches) == 1, f"{path}: {len(matches)} items with {key}={wanted}"
            value = matches[0]
        elif isinstance(value, list):
            value = value[int(part)]
        else:
            assert part in value, f"{path}: no key {part!r} (keys: {sorted(value)[:20]})"
            value = value[part]
    return value


def _without_code(text: str) -> str:
    """Fenced blocks and inline code blanked out (same length, so offsets still match)."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # noqa: E731
    text = re.sub(r"```.*?```", blank, text, flags=re.S)
    return re.sub(r"`[^`\n]*`", blank, text)


def _paragraphs(text: str):
    start = 0
    for m in re.finditer(r"\n\s*\n", text):
        yield start, text[start:m.start()]
        start = m.end()
    yield start, text[start:]


def marked_numbers():
    for path in prose_files():
        text = _without_code(path.read_text())
        for m in MARKED.finditer(text):
            yield path.relative_to(ROOT).as_posix(), m


MARKED_NUMBERS = list(marked_numbers())


def test_markers_are_found():
    files = {name for name, _ in MARKED_NUMBERS}
    assert {"docs/methods.md", "docs/models.md", "docs/performance.md", "docs/reproduction/README.md"} <= files
    assert len(MARKED_NUMBERS) >= 60


@pytest.mark.parametrize("name,match", MARKED_NUMBERS,
                         ids=[f"{n}:{m.group('path')}" for n, m in MARKED_NUMBERS])
def test_quoted_number_equals_the_record_at_its_rounding(name, match):
    value = lookup(_load(match.group("source")), match.group("path"))
    assert isinstance(value, (int, float)) and not isinstance(value, bool), (match.group("path"), value)
    value = TRANSFORMS[match.group("transform")](value)
    number = match.group("number")
    decimals = len(number.split(".")[1]) if "." in number else 0
    printed = f"{value:,.{decimals}f}" if "," in number else f"{value:.{decimals}f}"
    assert printed == number.replace("−", "-"), (
        f"{name}: the prose says {number} but {match.group('source')}:{match.group('path')} is {value!r} "
        f"(printed {printed})")


def test_every_marker_is_well_formed():
    for path in prose_files():
        text = _without_code(path.read_text())
        record_ends = {m.end() for m in MARKED.finditer(text)}
        for m in MARKER.finditer(text):
            kind, body = m.group("kind"), m.group("body")
            where = f"{path.relative_to(ROOT)}: <!-- {kind}: {body} -->"
            if kind == "measured":
                day, machine, *how = [p.strip() for p in body.split(",")]
                date.fromisoformat(day)
                assert machine and how, where
                continue
            assert kind in SOURCES, where
            assert m.end() in record_ends, f"{where}: no number right before it, or a malformed path"


def test_every_result_number_in_prose_is_marked():
    """Decimals and percentages outside code carry a record marker, a dated measured marker, or are
    settings / thresholds / listed exceptions."""
    unmarked = []
    for path in prose_files():
        name = path.relative_to(ROOT).as_posix()
        text = _without_code(path.read_text())
        allowed = [(m.start(), m.end()) for f, phrase, _ in NOT_RESULTS if f == name
                   for m in re.finditer(re.escape(phrase), text)]
        record_marked = {i for m in MARKED.finditer(text) for i in range(*m.span("number"))}
        for offset, paragraph in _paragraphs(text):
            measured = [m for m in MARKER.finditer(paragraph) if m.group("kind") == "measured"]
            for m in measured:  # a dated measurement says its date in words too
                day = date.fromisoformat(m.group("body").split(",")[0].strip())
                words = f"{day.day} {MONTHS[day.month - 1]} {day.year}"
                assert words in re.sub(r"<!--.*?-->", "", paragraph, flags=re.S), (
                    f"{name}: a paragraph measured on {day} does not say '{words}'")
            for c in CANDIDATE.finditer(paragraph):
                at = offset + c.start("number")
                if at in record_marked or SETTING_BEFORE.search(paragraph[:c.start()][-30:]):
                    continue
                if any(lo <= at < hi for lo, hi in allowed):
                    continue
                # covered when the next marker in its paragraph is a measured one
                following = [m for m in MARKER.finditer(paragraph) if m.start() > c.end()]
                if following and following[0].group("kind") == "measured":
                    continue
                line = text.count("\n", 0, at) + 1
                unmarked.append(f"{name}:{line}: {paragraph[max(0, c.start() - 50):c.end() + 10]!r}")
    assert not unmarked, "result numbers without a marker:\n" + "\n".join(unmarked)


def test_not_results_exceptions_still_exist():
    for name, phrase, _ in NOT_RESULTS:
        assert phrase in (ROOT / name).read_text(), (name, phrase)
