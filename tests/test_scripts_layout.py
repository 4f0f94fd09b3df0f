"""The benchmark scripts live in one folder, ``scripts/bench/``, and import each other without a
circle: a script imports its siblings by their bare module names (the folder is put first on
``sys.path``), so the graph read here is over those names."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scripts" / "bench"


def _sibling_imports(path: Path, siblings: set[str]) -> set[str]:
    """The sibling modules ``path`` imports anywhere in its body (module level or inside a function)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & siblings


def _graph() -> dict[str, set[str]]:
    paths = sorted(BENCH.glob("*.py"))
    siblings = {p.stem for p in paths}
    return {p.stem: _sibling_imports(p, siblings) for p in paths}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` as a path that returns to its start, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt]
            if nxt not in state:
                found = visit(nxt, path + [nxt])
                if found:
                    return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [start])
            if found:
                return found
    return None


def test_cycle_finder_on_hand_made_graphs():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert _cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"b"}}) == ["b", "c", "b"]
    assert _cycle({"a": {"a"}}) == ["a", "a"]


def test_every_benchmark_script_is_in_the_bench_folder():
    assert not sorted(p.name for p in (ROOT / "scripts").glob("benchmark*.py"))
    assert {"analyses", "faithfulness", "common", "peers", "baseline"} <= set(_graph())


def test_bench_scripts_import_each_other_without_a_circle():
    graph = _graph()
    assert _cycle(graph) is None, f"import circle in scripts/bench: {' -> '.join(_cycle(graph))}"
    # the shared driver sits below both of its users; neither user imports the other's driver
    assert graph["common"] == set()
    assert graph["faithfulness"] == {"common"}
    assert graph["analyses"] == {"common", "faithfulness"}


def test_analyses_loads_by_path_with_every_section():
    """Loaded by file path (as a test or another script would), the siblings still resolve."""
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("bench_analyses", BENCH / "analyses.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        assert list(module.SECTIONS) == ["jw_battery", "jw_gradient", "jw_leave_one_out", "jw_permutation",
                                         "jw_adversary", "eraser", "integrated_gradients"]
        assert module.Context is sys.modules["common"].Context
    finally:  # leave no bare sibling names behind for other tests
        sys.path[:] = [p for p in sys.path if Path(p) != BENCH]
        for name in ("common", "faithfulness"):
            sys.modules.pop(name, None)
