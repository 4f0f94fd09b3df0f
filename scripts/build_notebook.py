#!/usr/bin/env python
"""Execute the quick-start notebook and keep its stored outputs true: ``examples/quickstart.ipynb``
and its page ``docs/quickstart.md`` regenerated in place, or (``--check``) compared with a fresh run.

    python scripts/build_notebook.py           # execute, write both files (about a minute on two cores)
    python scripts/build_notebook.py --check   # execute, exit 1 when a stored output differs

The cells are those of ``scripts/build_quickstart.py`` (whose own ``--check`` compares the cells only,
without running anything). Each run executes them with a Jupyter kernel of this interpreter (nbclient)
in a fresh, empty temporary working folder, and fails when that folder is not empty afterwards: the
notebook must write nothing where it runs (its model goes to a ``tempfile`` folder of its own).

What ``--check`` compares, per code cell in order: each output's type, its stream name, and its text
(``text/plain`` and ``text/html`` of results and displays, the text of stdout streams); and the page's
text. What is normalised first, and why (everything else must match character for character; the
notebook's numbers are seeded, so a changed number is a real change, never normalised away):

* stderr streams are dropped from both sides: progress bars and library notices, which carry this
  machine's paths and timings and are not what a cell computes (the stored notebook keeps none);
* cell metadata, execution counts and the notebook's metadata are not compared (kernel versions,
  timestamps: properties of the run, not of the results);
* a number after ``'seconds':`` / ``"seconds":`` / ``seconds=``, or every number of a ``{…}`` right after
  one of them, becomes ``<seconds>``: wall times (the battery's summary, the explanation's repr),
  different on every run;
* ``0x`` followed by 6 or more hex digits becomes ``0x<address>``: memory addresses in object reprs;
* a path inside the temporary folder (``…/hf-attn-quickstart-XXXX/…`` or the system temp folder's
  ``tmpXXXX``) becomes ``<tmp>``: a new random name on every run;
* carriage-return progress lines (text before the last ``\\r`` of a line) are dropped: a progress
  bar printed to stdout redraws itself with ``\\r``, the last state is what remains on screen.

Floating-point results are reproducible on one machine (same library versions, same CPU kind);
another CPU may differ in the last digits, in which case the check names the cell and the line.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _build_quickstart():
    """``scripts/build_quickstart.py`` as a module (the cells, the executor, the page)."""
    spec = importlib.util.spec_from_file_location("build_quickstart", ROOT / "scripts" / "build_quickstart.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
# `'seconds': 0.45` (a dict's key), `seconds=0.45` (a dataclass repr), or either holding a dict of wall times
_SECONDS = re.compile(r"""(\bseconds['"]?(?::\s*|=))(\{[^{}]*\}|""" + _NUMBER + ")")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_TMP_PATH = re.compile(r"""[^\s'"]*(?:hf-attn-quickstart-|/tmp/tmp)[A-Za-z0-9_]+[^\s'"]*""")


def normalise(text: str) -> str:
    """``text`` with its volatile parts replaced (see the module docstring): progress redraws,
    wall times after a ``seconds`` key, memory addresses and temporary paths."""
    text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))
    text = _SECONDS.sub(lambda m: m.group(1) + re.sub(_NUMBER + r"(?![^'\"]*['\"]:)", "<seconds>", m.group(2)), text)
    text = _ADDRESS.sub("0x<address>", text)
    return _TMP_PATH.sub("<tmp>", text)


def output_texts(nb) -> list[list[str]]:
    """Per code cell, its outputs as normalised text blocks: ``"stream stdout: …"``,
    ``"execute_result text/plain: …"`` (one block per text MIME type); stderr streams dropped."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        blocks = []
        for output in cell.get("outputs", []):
            kind = output.get("output_type")
            if kind == "stream":
                if output.get("name") != "stderr":
                    blocks.append(f"stream {output.get('name')}: {normalise(output.get('text', ''))}")
            elif kind == "error":
                blocks.append(f"error: {output.get('ename')}: {output.get('evalue')}")
            else:
                data = output.get("data", {})
                blocks += [f"{kind} {mime}: {normalise(data[mime])}" for mime in ("text/plain", "text/html")
                           if mime in data]
        cells.append(blocks)
    return cells


def _common_prefix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def differences(stored, fresh) -> list[str]:
    """Where ``stored``'s outputs (:func:`output_texts`) differ from ``fresh``'s: one line per differing
    code cell, naming it (1-based among code cells) and the first differing line of each side."""
    problems = []
    old, new = output_texts(stored), output_texts(fresh)
    if len(old) != len(new):
        return [f"{len(old)} code cells stored, {len(new)} in the run"]
    for number, (a, b) in enumerate(zip(old, new), 1):
        if a == b:
            continue
        a_lines, b_lines = "\n".join(a).splitlines(), "\n".join(b).splitlines()
        diff = [line for line in difflib.unified_diff(a_lines, b_lines, lineterm="", n=0)
                if line[:1] in "+-" and not line.startswith(("---", "+++"))]
        removed = next((line[1:] for line in diff if line.startswith("-")), "(nothing)")
        added = next((line[1:] for line in diff if line.startswith("+")), "(nothing)")
        start = max(0, _common_prefix(removed, added) - 40)  # long lines (HTML): from just before the change
        problems.append(f"code cell {number}: stored {removed[start:start + 120]!r}, "
                        f"a run gives {added[start:start + 120]!r}")
    return problems


def run_notebook(build, timeout: int = 900):
    """The notebook of ``build`` (:func:`_build_quickstart`) executed in a fresh temporary working
    folder, without stderr streams; a RuntimeError naming what it left there if that folder is not
    empty afterwards."""
    with tempfile.TemporaryDirectory(prefix="hf-attn-notebook-cwd-") as work:
        nb = build.without_stderr(build.execute(build.notebook(), work, timeout=timeout))
        left = sorted(p.name for p in Path(work).iterdir())
        if left:
            raise RuntimeError(f"the notebook wrote {', '.join(left)} into its working folder; "
                               "it must write only to a temporary folder of its own")
    return nb


def main(argv=None) -> int:
    import nbformat

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="execute the notebook and exit 1 when a stored output differs; write nothing")
    args = parser.parse_args(argv)
    build = _build_quickstart()
    try:
        fresh = run_notebook(build)
    except RuntimeError as error:
        print(f"error: {error}")
        return 1
    if not args.check:
        build.NOTEBOOK.parent.mkdir(exist_ok=True)
        nbformat.write(fresh, build.NOTEBOOK)
        build.PAGE.write_text(build.markdown_page(fresh), encoding="utf-8")
        print(f"wrote {build.NOTEBOOK.relative_to(ROOT)} and {build.PAGE.relative_to(ROOT)}")
        return 0
    if not build.NOTEBOOK.is_file():
        print(f"missing: {build.NOTEBOOK.relative_to(ROOT)} (run `python scripts/build_notebook.py`)")
        return 1
    stored = nbformat.read(build.NOTEBOOK, as_version=4)
    problems = [] if build.sources(stored) == build.CELLS else ["the stored cells are not the script's"]
    problems += differences(stored, fresh)
    page = build.PAGE.read_text(encoding="utf-8") if build.PAGE.is_file() else ""
    if normalise(page) != normalise(build.markdown_page(fresh)):
        problems.append(f"{build.PAGE.relative_to(ROOT)} is not the page of a fresh run")
    if problems:
        print(f"stale: {build.NOTEBOOK.relative_to(ROOT)} (run `python scripts/build_notebook.py`):")
        print("\n".join(f"  {p}" for p in problems))
        return 1
    print("the stored outputs are those of a fresh run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
