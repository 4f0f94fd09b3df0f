"""The copies of ``hf_attn/core/numpy_primitives.py`` + ``numpy_measures.py`` (+ ``plausibility.py``)
that the ``evaluate`` modules ship.

``evaluate.load`` downloads a module script and the files it imports relatively, nothing else, so
every folder ``hf_attn/metrics/<name>/`` holds its own ``_hf_attn_measures.py``: a regular file (no
symlink, so checkouts without symlink support and the Hub get the same bytes), generated from the
library's single source with a header that says so. A copy holds only what its folder needs, as
transformers' modular converter writes a model's files: the names the folder's scripts import
from ``._hf_attn_measures``, the constants, functions and classes those use (followed through the
sources until nothing new is needed) and the imports that these need, in the sources' order and
with their text. ``python scripts/generate_metric_copies.py`` writes them; ``--check`` lists stale
ones and fails (the pattern of transformers' ``utils/check_copies.py``). This module reads files
only: it imports nothing from ``hf_attn.metrics``.

The source is several modules (:data:`SOURCES`, lowest first): a later one may import names of an
earlier one (``from hf_attn.core.numpy_primitives import ...``); a copy inlines those definitions
instead, so it imports nothing of hf_attn. A name defined twice is refused, and so is a copy that
needs a name a source imports from hf_attn but no source defines (``plausibility.py`` imports
``merge_word_pieces`` for its word-piece helper, which no module copies). A copy is headed by the
docstring of the highest source it draws from, ``numpy_measures.py`` at least, and its header names
the sources up to that one.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

# lowest first; the docstring of the highest one a copy draws from (numpy_measures.py at least) heads it
SOURCES = (Path(__file__).resolve().with_name("numpy_primitives.py"),
           Path(__file__).resolve().with_name("numpy_measures.py"),
           Path(__file__).resolve().with_name("plausibility.py"))
BASE_SOURCES = 2  # every copy is headed as drawn from at least the first two (the measures)
LIBRARY = "hf_attn"  # the package the copies must not import
METRICS_DIR = Path(__file__).resolve().parents[1] / "metrics"
SHARED_MODULE = "_hf_attn_measures"
COPY_NAME = f"{SHARED_MODULE}.py"
HEADER = ("# by scripts/generate_metric_copies.py: do not edit.\n"
          "# It holds what this folder's scripts import from it and what that uses, nothing more.\n"
          "# Edit the sources and run `python scripts/generate_metric_copies.py` to update every copy.\n")


def _header(sources) -> str:
    """The generated-file header naming ``sources`` (``hf_attn/core/<name>``)."""
    named = [f"hf_attn/core/{Path(s).name}" for s in sources]
    listed = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    return f"# Generated from {listed}\n" + HEADER


@dataclass(frozen=True)
class _Piece:
    """One top-level statement of a source: the names it binds, the names it reads, its text
    (with the comments just above it), whether a blank line stands above it and what it is
    (``module``: what an import imports from, else ``""``)."""

    binds: frozenset[str]
    reads: frozenset[str]
    text: str
    blank_before: bool
    is_import: bool
    is_definition: bool  # a function or a class (two blank lines around it)
    module: str = ""

    @property
    def is_library_import(self) -> bool:
        """An import of hf_attn (another source's names): left out of a copy, its definitions inlined."""
        return self.is_import and self.module.split(".")[0] == LIBRARY


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name.split(".")[0]) for a in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return {n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)}


def _imported_module(node: ast.stmt) -> str:
    if isinstance(node, ast.ImportFrom):
        return "." * node.level + (node.module or "")
    if isinstance(node, ast.Import):
        return node.names[0].name
    return ""


def _pieces(source_text: str) -> tuple[str, list[_Piece]]:
    """(the module docstring's text, every other top-level statement as a :class:`_Piece`)."""
    lines = source_text.splitlines(keepends=True)
    tree = ast.parse(source_text)
    body = list(tree.body)
    docstring = ""
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        docstring = "".join(lines[:body[0].end_lineno])
        previous_end = body[0].end_lineno
        body = body[1:]
    else:
        previous_end = 0
    pieces = []
    for node in body:
        raw = lines[previous_end:node.end_lineno]  # the comment lines just above a statement belong to it
        reads = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        pieces.append(_Piece(frozenset(_bound_names(node)), frozenset(reads), "".join(raw).strip("\n") + "\n",
                             bool(raw) and not raw[0].strip(),
                             isinstance(node, (ast.Import, ast.ImportFrom)),
                             isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)),
                             _imported_module(node)))
        previous_end = node.end_lineno
    return docstring, pieces


def imported_names(folder: Path) -> list[str]:
    """The names the scripts of ``folder`` import from ``._hf_attn_measures`` (``*``: all of them)."""
    names: set[str] = set()
    for script in sorted(Path(folder).glob("*.py")):
        if script.name == COPY_NAME:
            continue
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == SHARED_MODULE:
                names.update(a.name for a in node.names)
    return sorted(names)


def _definers(pieces: list[_Piece], sources) -> dict[str, int]:
    """name → index of the piece that defines it, over every source; a name defined twice is refused
    (a ``ValueError`` naming it)."""
    definers: dict[str, int] = {}
    for i, piece in enumerate(pieces):
        if piece.is_import:
            continue
        for name in piece.binds:
            if name in definers:
                raise ValueError(f"{name} is defined twice in the sources of the metric copies "
                                 f"({', '.join(Path(s).name for s in sources)}); keep one definition")
            definers[name] = i
    return definers


def _needed(names, pieces: list[_Piece], sources=SOURCES) -> set[int]:
    """Indices of the pieces that define ``names`` and, transitively, what those read; a chosen piece
    that reads a name a source imports from hf_attn and no source defines is refused."""
    definers = _definers(pieces, sources)
    wanted = set(definers) if "*" in names else set(names)
    missing = sorted(wanted - set(definers))
    if missing:
        raise ValueError(f"{' + '.join(Path(s).name for s in sources)} defines no {', '.join(missing)}")
    chosen: set[int] = set()
    todo = [definers[name] for name in wanted]
    while todo:
        index = todo.pop()
        if index in chosen:
            continue
        chosen.add(index)
        todo.extend(definers[name] for name in pieces[index].reads if name in definers)
    read = set().union(*(pieces[i].reads for i in chosen)) if chosen else set()
    for piece in pieces:
        missing = ", ".join(sorted((piece.binds - set(definers)) & read)) if piece.is_library_import else ""
        if missing:
            raise ValueError(f"a source of the metric copies imports {missing} from {piece.module}, which no source "
                             "defines: the copies would import hf_attn; move it into a source or list its module "
                             "in SOURCES")
    return chosen


def _import_text(piece: _Piece, used: set[str], bound: set[str]) -> str | None:
    """An import statement as the source writes it, or with only the names in ``used`` that an
    earlier import has not bound yet (``bound``: updated with the names kept)."""
    node = ast.parse(piece.text).body[-1]
    names = [(a.asname or a.name.split(".")[0]) for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module == "__future__":
        kept = [a for a, name in zip(node.names, names) if name not in bound]
    else:
        kept = [a for a, name in zip(node.names, names) if name in used and name not in bound]
    bound.update(a.asname or a.name.split(".")[0] for a in kept)
    if not kept:
        return None
    if len(kept) == len(node.names):
        return piece.text
    node.names = kept
    return ast.unparse(node) + "\n"


def _covering(imports: list[_Piece]) -> list[_Piece]:
    """``imports`` less each ``from`` import whose names another ``from`` import of the same module
    binds too (``from dataclasses import dataclass`` beside ``from dataclasses import asdict,
    dataclass``): one line per module where a source writes one."""
    def is_from(piece: _Piece) -> bool:
        return isinstance(ast.parse(piece.text).body[-1], ast.ImportFrom) and piece.module != "__future__"

    return [p for p in imports if not (is_from(p) and any(q.module == p.module and is_from(q) and p.binds < q.binds
                                                          for q in imports))]


def _import_group(piece: _Piece) -> int:
    """0: ``__future__``, 1: the standard library, 2: the rest (a blank line between groups)."""
    top = piece.module.split(".")[0]
    return 0 if top == "__future__" else 1 if top in sys.stdlib_module_names else 2


def _gather(sources) -> tuple[list[str], list[_Piece], list[int]]:
    """(each source's docstring, the pieces of every source in order, the index of each piece's source)."""
    docstrings, pieces, owner = [], [], []
    for index, source in enumerate(sources):
        docstring, more = _pieces(Path(source).read_text(encoding="utf-8"))
        docstrings.append(docstring)
        pieces.extend(more)
        owner.extend([index] * len(more))
    return docstrings, pieces, owner


def _top_source(names, sources=SOURCES) -> int:
    """The index of the highest source the copy for ``names`` draws from, ``BASE_SOURCES - 1`` at least."""
    _, pieces, owner = _gather(sources)
    chosen = _needed(names, pieces, sources)
    return max([min(BASE_SOURCES, len(sources)) - 1] + [owner[i] for i in chosen])


def select(names, sources=SOURCES) -> str:
    """The sources' text reduced to the definitions of ``names``, what they use and the imports they
    need (each once, grouped and ordered as the sources write them: plain imports, then ``from``
    imports, by module), under the docstring of the highest source it draws from (:func:`_top_source`);
    hf_attn imports are left out."""
    docstrings, pieces, _ = _gather(sources)
    chosen = _needed(names, pieces, sources)
    docstring = docstrings[_top_source(names, sources)]
    used = set().union(*(pieces[i].reads for i in chosen)) if chosen else set()
    parts = [docstring] if docstring else []
    imports = sorted((p for p in pieces if p.is_import and not p.is_library_import),
                     key=lambda p: (_import_group(p), isinstance(ast.parse(p.text).body[-1], ast.ImportFrom), p.module))
    bound: set[str] = set()
    group = None
    for piece in _covering(imports):
        text = _import_text(piece, used, bound)
        if text:  # the import groups stay apart
            apart = _import_group(piece) != group if group is not None else bool(docstring)
            parts.append(("\n" if apart else "") + text)
            group = _import_group(piece)
    previous = None
    for i in sorted(chosen):
        piece = pieces[i]
        if piece.is_definition or (previous is not None and previous.is_definition):
            gap = "\n\n"
        else:  # constants: apart or together as in the source
            gap = "\n" if piece.blank_before or previous is None else ""
        parts.append(gap + piece.text)
        previous = piece
    return "".join(parts)


def copy_text(folder: Path, sources=SOURCES) -> str:
    """The exact text ``folder``'s ``_hf_attn_measures.py`` must hold."""
    names = imported_names(folder)
    return _header(sources[:_top_source(names, sources) + 1]) + select(names, sources)


def module_folders(metrics_dir: Path = METRICS_DIR) -> list[Path]:
    """Every ``evaluate`` module folder whose script imports the shared measures: a sub-folder holding
    ``<folder name>.py`` that imports ``_hf_attn_measures`` (a module whose script holds all of its
    own code needs no copy)."""
    metrics_dir = Path(metrics_dir)
    return sorted(p for p in metrics_dir.iterdir() if p.is_dir() and (p / f"{p.name}.py").is_file()
                  and SHARED_MODULE in (p / f"{p.name}.py").read_text(encoding="utf-8"))


def stale_copies(metrics_dir: Path = METRICS_DIR, sources=SOURCES) -> list[Path]:
    """The copies that are missing, symlinks or differ from :func:`copy_text`."""
    stale = []
    for folder in module_folders(metrics_dir):
        target = folder / COPY_NAME
        if (target.is_symlink() or not target.is_file()
                or target.read_text(encoding="utf-8") != copy_text(folder, sources)):
            stale.append(target)
    return stale


def write_copies(metrics_dir: Path = METRICS_DIR, sources=SOURCES) -> list[Path]:
    """(Re)write every stale copy as a regular file; returns the files written."""
    written = stale_copies(metrics_dir, sources)
    for target in written:
        if target.is_symlink() or target.exists():
            target.unlink()
        target.write_text(copy_text(target.parent, sources), encoding="utf-8")
    return written
