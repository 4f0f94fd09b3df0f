"""hf_attn's model types in transformers' Auto classes, registered when they are first needed.

``import hf_attn`` imports neither torch nor transformers: :func:`register_when_auto_classes_load`
waits for transformers' ``configuration_auto`` module (the home of ``AutoConfig``, imported by every
Auto class: ``AutoModel*``, ``AutoTokenizer``, ``pipeline``) and registers the two configs with
``AutoConfig`` right after that module has run; the model classes follow when the first hf_attn config
is made (``AttnClassifierConfig.__init__`` calls :func:`hf_attn.register_auto_classes`), which
``from_pretrained(dir)`` does before it looks the model class up. So
``AutoModelForSequenceClassification.from_pretrained(dir)`` works after a bare ``import hf_attn``
without ``trust_remote_code``, and ``import hf_attn`` costs no more than the modules it really uses.

This module imports nothing heavy (tests/test_import_time.py checks what ``import hf_attn`` loads)."""

from __future__ import annotations

import importlib.abc
import sys

AUTO_CONFIG_MODULE = "transformers.models.auto.configuration_auto"


class _AfterImport(importlib.abc.MetaPathFinder):
    """A finder that finds nothing itself: when ``module`` is imported, it lets the other finders find
    it and runs ``callback(module_object)`` right after the module's code has run, then leaves
    ``sys.meta_path``."""

    def __init__(self, module: str, callback) -> None:
        self.module = module
        self.callback = callback

    def find_spec(self, fullname, path, target=None):
        if fullname != self.module:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module  # this spec's own loader object: only this import is wrapped

        def exec_module(module):
            run(module)
            self.remove()
            self.callback(module)

        loader.exec_module = exec_module
        return spec

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def register_when_auto_classes_load(callback) -> None:
    """``callback(configuration_auto)`` now if transformers' Auto classes are already imported, else
    right after they are (once)."""
    module = sys.modules.get(AUTO_CONFIG_MODULE)
    if module is not None and hasattr(module, "AutoConfig"):
        callback(module)
        return
    if not any(isinstance(finder, _AfterImport) and finder.module == AUTO_CONFIG_MODULE for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(AUTO_CONFIG_MODULE, callback))
