#!/usr/bin/env python
"""Write ``examples/quickstart.ipynb`` (executed, with its outputs) and ``docs/quickstart.md`` (the same
notebook as a page) from the cells below. The notebook trains its BiLSTM in a ``tempfile`` folder of
its own and runs here in a temporary working folder, so nothing is left in the checkout. ``--check``
executes nothing and exits 1 when either file's cells differ from the ones here (a fast test);
``scripts/build_notebook.py --check`` executes the notebook and compares its stored outputs (a slow
test), and ``scripts/build_notebook.py`` rewrites both files as this script does.

    python scripts/build_quickstart.py            # about a minute on two CPU cores
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"
PAGE = ROOT / "docs" / "quickstart.md"

CELLS = [
    ("markdown", """\
# hf_attn quick start: is this classifier's attention an explanation?

This notebook loads the bundled Stanford Sentiment Treebank, trains the papers' BiLSTM with additive
attention for one epoch, explains one sentence with every importance measure, and runs the Jain &
Wallace (2019) battery on 100 test sentences, all in memory and offline. Any `transformers`
sequence classifier works the same way: `Explainer.from_pretrained("a/folder/or/hub-id")`.
Run it from a checkout with `pip install torch==2.13.0 -e .` done; `jupyter` itself is not needed
to read it, only to run it."""),
    ("code", """\
import os

import torch

import hf_attn
from hf_attn import Explainer

torch.set_num_threads(1)  # every run gives the numbers below (more threads add up in another order)
sst = hf_attn.datasets.load("sst")   # binary SST, Jain & Wallace's split, shipped inside the package
texts = sst.texts("test")[:100]      # a list of strings
sst"""),
    ("markdown", """\
## A model

A folder written by `hf-attn train` (`hf-attn train --dataset sst --output-dir runs/sst-lstm` trains the
papers' 8 epochs), any `save_pretrained` folder or a Hub id. Here one epoch (seed 0), in a temporary
folder that is deleted when the kernel stops: running the notebook writes nothing where it runs
(about half a minute on two CPU cores)."""),
    ("code", """\
import tempfile

from hf_attn.training.engine import TrainSettings, train

work = tempfile.TemporaryDirectory(prefix="hf-attn-quickstart-")  # deleted when the kernel stops
MODEL = os.path.join(work.name, "quickstart-lstm")
metrics = train(TrainSettings(dataset="sst", epochs=1, seed=0), MODEL, progress=False)
print(f"test accuracy {metrics['test_accuracy']:.3f}")
ex = Explainer.from_pretrained(MODEL)
ex.describe()"""),
    ("markdown", """\
## One sentence

Per token and per word: the attention, J&W's gradient (attention held fixed), leave-one-out as LOO-TVD,
integrated gradients and rollout, and how far an adversarial attention can move away without changing
the prediction. In a notebook it renders as a heatmap; `.to_pandas()` gives the numbers."""),
    ("code", """\
explanation = ex.explain("a gripping , beautifully acted film that never lets go")
explanation"""),
    ("code", """\
explanation.to_pandas(level="word")"""),
    ("markdown", """\
## The Jain & Wallace battery

Kendall τ of attention against the gradient and leave-one-out (LOO-TVD), the prediction change under permuted
attention, and the adversary's JSD, on the 100 sentences with their gold labels. `jw.save("out/jw")`
writes the same files as `hf-attn analyze`; `jw.plot()` draws J&W's figures."""),
    ("code", """\
jw = ex.jw(texts, sst.labels("test")[:100])
jw.summary()"""),
    ("code", """\
jw.to_pandas()[["text", "prediction", "tau_attention_gradient", "tau_attention_loo", "eps_max_jsd"]].head()"""),
]


def notebook():
    import nbformat

    cells = [nbformat.v4.new_markdown_cell(source) if kind == "markdown" else nbformat.v4.new_code_cell(source)
             for kind, source in CELLS]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def execute(nb, cwd: str | Path, timeout: int = 900):
    """Run ``nb`` in ``cwd`` with the current interpreter's kernel (nbclient); returns it with outputs."""
    from nbclient import NotebookClient

    # record_timing=False: no per-cell timestamps in the stored notebook (they differ on every run)
    NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def without_stderr(nb):
    """``nb`` without its stderr outputs (progress bars, library notices naming this machine's paths):
    what is kept is what the cells compute."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
    return nb


def _text_of(output) -> str | None:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    data = output.get("data", {})
    if "text/html" in data and data.get("text/plain", "").startswith("Explanation("):
        return None  # the heatmap: shown in the notebook only
    return data.get("text/plain")


def markdown_page(nb) -> str:
    """The executed notebook as a Markdown page: prose as it is, code in fences, text outputs below."""
    parts = ["<!-- generated by scripts/build_quickstart.py from examples/quickstart.ipynb: edit the script -->\n"]
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            parts.append(cell.source + "\n")
            continue
        parts.append(f"```python\n{cell.source}\n```\n")
        for output in cell.get("outputs", []):
            text = _text_of(output)
            if text is None:
                parts.append("*(a heatmap of the sentence: open the notebook to see it)*\n")
            elif text.strip():
                parts.append(f"```text\n{text.rstrip()}\n```\n")
    return "\n".join(parts)


def sources(nb) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in nb.cells]


def main(argv=None) -> int:
    import nbformat

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when the notebook or the page is stale; run nothing")
    args = parser.parse_args(argv)
    if args.check:
        stale = []
        if not NOTEBOOK.is_file() or sources(nbformat.read(NOTEBOOK, as_version=4)) != CELLS:
            stale.append(str(NOTEBOOK.relative_to(ROOT)))
        if not PAGE.is_file() or any(f"```python\n{source}\n```" not in PAGE.read_text()
                                     for kind, source in CELLS if kind == "code"):
            stale.append(str(PAGE.relative_to(ROOT)))
        if stale:
            print(f"stale: {', '.join(stale)} (run `python scripts/build_quickstart.py`)")
            return 1
        return 0
    with tempfile.TemporaryDirectory(prefix="hf-attn-quickstart-") as work:
        nb = without_stderr(execute(notebook(), work))
    NOTEBOOK.parent.mkdir(exist_ok=True)
    nbformat.write(nb, NOTEBOOK)
    PAGE.write_text(markdown_page(nb), encoding="utf-8")
    print(f"wrote {NOTEBOOK.relative_to(ROOT)} and {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
