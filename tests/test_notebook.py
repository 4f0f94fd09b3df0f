"""The quick-start notebook's stored outputs are those of a fresh run (scripts/build_notebook.py):
the normalisation of volatile text, the comparison, and the refusal of a notebook that writes where
it runs; the full execute-and-compare check is the slow test."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _build_notebook():
    spec = importlib.util.spec_from_file_location("build_notebook", ROOT / "scripts" / "build_notebook.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _notebook(*cells):
    """A notebook of code cells, each given as its list of outputs."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook()
    for outputs in cells:
        cell = nbformat.v4.new_code_cell("x")
        cell.outputs = [nbformat.from_dict(o) for o in outputs]
        nb.cells.append(cell)
    return nb


def _result(text: str) -> dict:
    return {"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": {"text/plain": text}}


def _stdout(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def test_normalise_replaces_only_the_volatile_parts():
    normalise = _build_notebook().normalise
    # wall times: a `seconds` key's number, and every value (not key) of a `seconds=` dict
    assert normalise("{'accuracy': 0.83,\n 'seconds': 0.5941}") == "{'accuracy': 0.83,\n 'seconds': <seconds>}"
    assert (normalise("p=0.25, seconds={'prediction': 0.0024, 'layer_0': 5e-3}, q=0.5")
            == "p=0.25, seconds={'prediction': <seconds>, 'layer_0': <seconds>}, q=0.5")
    assert normalise('"seconds": 12') == '"seconds": <seconds>'
    assert normalise("<Figure at 0x7f3a2b1c9d00>") == "<Figure at 0x<address>>"
    assert normalise("saved to /tmp/hf-attn-quickstart-k2j_9x/quickstart-lstm.") == "saved to <tmp>"
    assert normalise("/tmp/tmpab12cd/x 3") == "<tmp> 3"
    assert normalise(" 10%|█\r 50%|█████\r100%|██████████\ndone") == "100%|██████████\ndone"
    # results stay as they are: a median, a count, a short hex-looking token
    kept = "'permutation_median_tvd': 0.02742, n=100, 0xff"
    assert normalise(kept) == kept


def test_a_stale_number_is_a_difference_and_a_timing_is_not():
    build = _build_notebook()
    stored = _notebook([_stdout("test accuracy 0.730\n")],
                       [_result("{'permutation_median_tvd': 0.02600,\n 'seconds': 0.45}")])
    fresh = _notebook([_stdout("test accuracy 0.730\n"),
                       {"output_type": "stream", "name": "stderr", "text": "100%|████| 7/7 [00:01]\n"}],
                      [_result("{'permutation_median_tvd': 0.02742,\n 'seconds': 0.59}")])
    # the lines agree on their first 58 characters ("execute_result text/plain: {'…_tvd': 0.02"): each
    # side is shown from 40 characters before the change, character 18
    assert build.differences(stored, fresh) == [
        "code cell 2: stored \"t/plain: {'permutation_median_tvd': 0.02600,\", "
        "a run gives \"t/plain: {'permutation_median_tvd': 0.02742,\""]
    same = _notebook([_stdout("test accuracy 0.730\n")],
                     [_result("{'permutation_median_tvd': 0.02600,\n 'seconds': 1.5}")])
    assert build.differences(stored, same) == []
    assert build.differences(stored, _notebook([])) == ["2 code cells stored, 1 in the run"]


def test_a_notebook_that_writes_where_it_runs_is_refused(tmp_path):
    build = _build_notebook()

    def execute(nb, cwd, timeout=900):  # stands in for the kernel: the old notebook's model folder
        (Path(cwd) / "runs").mkdir()
        return nb

    fake = SimpleNamespace(notebook=lambda: _notebook([]), execute=execute, without_stderr=lambda nb: nb)
    with pytest.raises(RuntimeError, match="wrote runs into its working folder"):
        build.run_notebook(fake)


@pytest.mark.slow  # about 25 s on two cores: a kernel, a one-epoch training, the battery
def test_the_stored_notebook_outputs_are_a_fresh_runs():
    """scripts/build_notebook.py --check: the notebook executed in an empty folder leaves it empty and
    gives, after normalisation, exactly the stored outputs (and page)."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    assert _build_notebook().main(["--check"]) == 0
