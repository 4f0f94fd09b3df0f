"""The package layout is the architecture: every module of ``hf_attn`` sits on a floor and imports
only its own floor or lower ones, and no two modules import each other, directly or round a circle.

Floors, lowest first (docs/layout.md draws them):

    core                                   helpers with no hf_attn dependency above them
    data, models, datasets                 datasets, tokenizers; our BiLSTM/CNN/Average models; the public loader
    adapters                               the one seam between a model and the methods
    methods                                one file per attribution / diagnostic method
    training, hub                          Trainer runs of the models; publishing to the Hub
    batteries                              jw, wp, ts, eraser, faithfulness: in memory, typed results
    explainer, explanation                 Explainer = adapter + batteries; the one explanation object and its renderings
    runs                                   batteries on folders: registry, resume, grid (and reproduce's plan, layout, collect, machine)
    reporting                              REPORT.md, findings, published numbers
    cli, app, spaces_app, reproduce        argparse commands, the Space (its policy, cache, limits; its Gradio page), the reproduction pipeline

Every ``import`` counts, at module level and inside functions alike (a function-level import must not
hide an upward dependency or a circle); imports of third-party packages are not ruled here, so
heavy optional packages (gradio, matplotlib, captum, datasets) may stay lazy. The evaluate modules
under ``hf_attn/metrics`` are shipped to the Hub on their own and import nothing of ``hf_attn``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "hf_attn"

FLOORS = {
    "core": 0,
    "data": 1, "models": 1, "datasets": 1,
    "adapters": 2,
    "methods": 3,
    "training": 4, "hub": 4,
    "batteries": 5,
    "explainer": 6, "explanation": 6,
    "runs": 7,
    "reporting": 8,
    "cli": 9, "app": 9, "spaces_app": 9, "reproduce": 9,
}
# Modules of a folder that sit on a lower floor than the folder: the reproduction's plan, layout,
# collection and machine facts are read by the reporting; its pipeline (the folder's floor) drives both.
MODULE_FLOORS = {f"reproduce.{name}": FLOORS["runs"] for name in ("plan", "layout", "collect", "machine")}
# ``hf_attn/__init__.py`` registers the models' auto classes (it imports models only) and holds
# ``__version__``, which any floor may read.
ROOT_FLOOR = FLOORS["models"]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


# Top-level folders that the build maps into the package (setup.py): the Space's files.
MAPPED_FOLDERS = {"spaces_app": "hf_attn.spaces_app"}


def _modules() -> dict[str, Path]:
    modules = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}
    for folder, package in MAPPED_FOLDERS.items():
        for path in sorted((PACKAGE.parent / folder).glob("*.py")):
            modules[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return modules


MODULES = _modules()


def _floor(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return ROOT_FLOOR
    return MODULE_FLOORS.get(".".join(parts[1:3]), FLOORS[parts[1]])


def _target(name: str) -> str | None:
    """The hf_attn module an imported dotted name refers to (the longest known prefix)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str) -> list[tuple[str, int, bool, list[str]]]:
    """``(imported hf_attn module, line, inside a function, imported names)`` of every import statement."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.split(".")[0] == "hf_attn":
                        found.append((_target(alias.name), child.lineno, in_function, []))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[:len(base) - (child.level - 1)]
                    source = ".".join(base + ([child.module] if child.module else []))
                else:
                    source = child.module or ""
                if source.split(".")[0] == "hf_attn":
                    names = [a.name for a in child.names]
                    # ``from hf_attn.pkg import submodule`` imports the submodule
                    targets = {_target(f"{source}.{n}") if f"{source}.{n}" in MODULES else _target(source)
                               for n in names}
                    for target in sorted(t for t in targets if t):
                        found.append((target, child.lineno, in_function, names))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return [(target, line, inner, names) for target, line, inner, names in found if target and target != module]


IMPORTS = {module: _imports(module) for module in MODULES}


def test_every_module_has_a_floor():
    unplaced = sorted({m.split(".")[1] for m in MODULES if "." in m} - set(FLOORS) - {"metrics"})
    assert not unplaced, f"place these in FLOORS (tests/test_layout.py) and docs/layout.md: {unplaced}"


def test_no_module_imports_a_higher_floor():
    upward = []
    for module, imports in IMPORTS.items():
        if module.startswith("hf_attn.metrics"):
            continue
        for target, line, inner, names in imports:
            if target == "hf_attn" and set(names) <= {"__version__"}:
                continue
            if _floor(target) > _floor(module):
                where = "in a function" if inner else "at module level"
                upward.append(f"{MODULES[module].relative_to(PACKAGE.parent)}:{line} imports {target} ({where})")
    assert not upward, "imports of a higher floor:\n" + "\n".join(upward)


@pytest.mark.parametrize("lower, higher", [("methods", "batteries"), ("batteries", "runs"), ("batteries", "cli"),
                                           ("hub", "runs"), ("hub", "cli"), ("hub", "app"), ("hub", "reporting"),
                                           ("adapters", "methods"), ("models", "adapters")])
def test_the_named_rules_follow_from_the_floors(lower, higher):
    assert FLOORS[lower] < FLOORS[higher]


def test_metrics_are_self_contained():
    """The evaluate modules load from the Hub without hf_attn installed: each imports only the files
    of its own folder (its copy of the NumPy measures)."""
    offending = [f"{MODULES[m].relative_to(PACKAGE.parent)}:{line} imports {target}"
                 for m, imports in IMPORTS.items() if m.startswith("hf_attn.metrics.")
                 for target, line, _, _ in imports
                 if target.split(".")[:3] != m.split(".")[:3] or len(m.split(".")) < 4]
    assert not offending, "\n".join(offending)


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``edges`` (module → modules it imports), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = walk(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state:
            found = walk(start)
            if found:
                return found
    return None


def _edges(include_functions: bool) -> dict[str, set[str]]:
    edges = {}
    for module, imports in IMPORTS.items():
        targets = {t for t, _, inner, _ in imports if include_functions or not inner}
        # importing a module runs its parent packages first: a package's own submodules are not a circle
        edges[module] = {t for t in targets if not module.startswith(t + ".")}
    return edges


def test_no_import_circle_at_module_level():
    cycle = _cycle(_edges(include_functions=False))
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_no_import_circle_hidden_in_functions():
    cycle = _cycle(_edges(include_functions=True))
    assert cycle is None, "import circle (through a function-level import): " + " -> ".join(cycle)


def test_the_checker_sees_function_level_and_relative_imports(tmp_path):
    """The parser itself: a relative import inside a function of a package module is found."""
    assert any(inner for imports in IMPORTS.values() for _, _, inner, _ in imports)
    assert ("hf_attn.runs.folder" in {t for t, _, inner, _ in IMPORTS["hf_attn.runs"] if inner})



MAX_MODULE_LINES = 800


def _long_modules(paths, root: Path, limit: int = MAX_MODULE_LINES) -> list[str]:
    """``"path: N lines"`` (path relative to ``root``) for each file of ``paths`` over ``limit`` lines."""
    counts = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in paths}
    return [f"{path.relative_to(root)}: {n} lines" for path, n in counts.items() if n > limit]


def test_the_line_counter_on_hand_made_files(tmp_path):
    (tmp_path / "at_limit.py").write_text("x = 1\n" * 800)
    (tmp_path / "over.py").write_text("x = 1\n" * 800 + "y = 2")  # 801 lines, the last without a newline
    paths = sorted(tmp_path.glob("*.py"))
    assert _long_modules(paths, tmp_path) == ["over.py: 801 lines"]
    assert _long_modules(paths, tmp_path, limit=801) == []


def test_every_library_module_is_at_most_800_lines():
    """Every module of hf_attn (and of spaces_app, the Space's files) stays at most 800 lines: a longer
    one is split along a seam, its public names re-exported where callers import them."""
    long = _long_modules(sorted(MODULES.values()), PACKAGE.parent)
    assert not long, "split these modules (at most 800 lines each):\n" + "\n".join(long)
