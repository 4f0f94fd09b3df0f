"""``evaluate`` modules published as metric Spaces: the folder ``evaluate.load("USER/NAME")`` loads
without hf_attn (the script under the repo's name, the files it imports relatively, the Space's
app, card and requirements), every refusal made before anything is written, and the push."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from hf_attn.core import metric_copies
from hf_attn.hub.files import (CARDS_DIR, METRIC_FILES, PACKAGE_DIR, HubError, _allowed_files, _remove_partial,
                               _vendor_package)
from hf_attn.hub.space import _space_metadata
from hf_attn.hub.upload import _upload

# The NumPy measures every hf_attn evaluate module imports relatively (``from ._hf_attn_measures import``):
# the part of the NumPy sources (hf_attn.core.metric_copies.SOURCES: numpy_primitives.py, numpy_measures.py,
# plausibility.py) that the module uses, generated into each module folder and uploaded with the script.
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
    ``scripts/generate_metric_copies.py`` writes from the NumPy sources (``metric_copies.SOURCES``)."""
    try:
        expected = metric_copies.copy_text(module_dir)
    except ValueError as err:  # the script imports a name the measures do not define
        raise HubError(f"{module_dir.name}: {err} (its script imports it from {SHARED_MEASURES})") from err
    if copy.read_text(encoding="utf-8") != expected:
        raise HubError(f"{module_dir.name}/{SHARED_MEASURES}.py is stale: it differs from what "
                       f"{' + '.join('hf_attn/core/' + p.name for p in metric_copies.SOURCES)}, its sources, give "
                       "this module "
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
