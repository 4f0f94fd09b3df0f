"""``import hf_attn`` is quick: it loads neither torch nor transformers nor any of the heavy optional
libraries (the Space's gradio, the figures' matplotlib, datasets, evaluate, scipy, captum, pandas,
scikit-learn), each imported where it is used. The model types still reach transformers' Auto
classes: the configs when the Auto classes are imported (an import hook), the models on the first
hf_attn config made — so ``AutoModelForSequenceClassification.from_pretrained(dir)`` works after a
bare ``import hf_attn`` without ``trust_remote_code``, whichever of the two is imported first.

No test here measures seconds (scripts/bench/import_time.py does, into
docs/benchmarks/import_time.json); they pin which modules are loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "gradio", "matplotlib", "datasets", "evaluate", "scipy", "captum", "pandas",
         "sklearn", "numpy", "huggingface_hub", "safetensors", "accelerate")


def _python(code: str, cwd: str | None = None) -> dict:
    """Run ``code`` in a fresh interpreter (this checkout first on the path); its last stdout line is JSON."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=cwd,
                          env=dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_hf_attn_loads_no_heavy_library():
    loaded = _python("import json, sys\nimport hf_attn\nprint(json.dumps(sorted(sys.modules)))")
    tops = {name.split(".")[0] for name in loaded}
    assert "hf_attn" in tops
    assert not set(HEAVY) & tops, sorted(set(HEAVY) & tops)
    # hf_attn's own modules: the package, its import hook and the (empty) models package only
    assert sorted(m for m in loaded if m.startswith("hf_attn")) == [
        "hf_attn", "hf_attn.models", "hf_attn.models.auto_registration"]


def test_the_public_names_stay_reachable_lazily():
    out = _python("import json, sys\nimport hf_attn\n"
                  "names = [getattr(hf_attn, n).__name__ for n in ('AttnClassifierConfig', 'AttnPairClassifierConfig')]\n"
                  "configs_only = 'transformers.modeling_utils' not in sys.modules\n"
                  "names += [hf_attn.AttnClassifierForSequenceClassification.__name__, hf_attn.Explainer.__name__]\n"
                  "print(json.dumps([names, configs_only, hf_attn._registered, hf_attn.datasets.__name__]))")
    names, configs_only, registered, datasets = out
    assert names == ["AttnClassifierConfig", "AttnPairClassifierConfig", "AttnClassifierForSequenceClassification",
                     "Explainer"]
    assert configs_only  # a config class alone does not import transformers' modelling code
    assert registered and datasets == "hf_attn.datasets"


@pytest.fixture(scope="module")
def saved_folders(tmp_path_factory):
    """A tiny single-text and a tiny sentence-pair hf_attn model, saved with save_pretrained."""
    from hf_attn import (AttnClassifierConfig, AttnClassifierForSequenceClassification, AttnPairClassifierConfig,
                         AttnPairClassifierForSequenceClassification)

    root = tmp_path_factory.mktemp("saved")
    small = dict(vocab_size=10, embedding_dim=4, hidden_size=2)
    AttnClassifierForSequenceClassification(AttnClassifierConfig(**small)).save_pretrained(root / "single")
    AttnPairClassifierForSequenceClassification(AttnPairClassifierConfig(**small)).save_pretrained(root / "pair")
    return root


LOAD = """
import json, sys
{first}
hooked = any(type(f).__name__ == "_AfterImport" for f in sys.meta_path)
model_utils_before = "transformers.modeling_utils" in sys.modules
loaded = [type(AutoModelForSequenceClassification.from_pretrained(sys.argv[1] + "/" + name)).__name__
          for name in ("single", "pair")]
model = AutoModelForSequenceClassification.from_pretrained(sys.argv[1] + "/single")
model.save_pretrained(sys.argv[1] + "/again")  # save_pretrained writes auto_map: the model's auto class is registered
auto_map = json.load(open(sys.argv[1] + "/again/config.json"))["auto_map"]
print(json.dumps([loaded, model_utils_before, hooked, sorted(auto_map)]))
"""


@pytest.mark.parametrize("first", ["import hf_attn\nfrom transformers import AutoModelForSequenceClassification",
                                   "from transformers import AutoModelForSequenceClassification\nimport hf_attn"],
                         ids=["hf_attn-first", "transformers-first"])
def test_auto_classes_load_hf_attn_folders_after_a_bare_import(saved_folders, first):
    code = LOAD.format(first=first).replace("sys.argv[1]", repr(str(saved_folders)))
    loaded, model_utils_before, hooked, auto_map = _python(code)
    assert loaded == ["AttnClassifierForSequenceClassification", "AttnPairClassifierForSequenceClassification"]
    assert not hooked  # the hook leaves sys.meta_path once the Auto classes are imported
    assert auto_map == ["AutoConfig", "AutoModelForSequenceClassification"]
    if first.startswith("import hf_attn"):  # the Auto classes alone import no modelling code
        assert not model_utils_before


def test_from_config_and_for_model_see_both_model_types():
    out = _python("import json\nimport hf_attn\n"
                  "from transformers import AutoConfig, AutoModelForSequenceClassification as Auto\n"
                  "models = [type(Auto.from_config(AutoConfig.for_model(t, vocab_size=10, embedding_dim=4, "
                  "hidden_size=2))).__name__ for t in ('hf_attn', 'hf_attn_pair')]\n"
                  "print(json.dumps(models))")
    assert out == ["AttnClassifierForSequenceClassification", "AttnPairClassifierForSequenceClassification"]


def test_the_copy_of_the_config_file_registers_nothing(saved_folders):
    """The configuration file saved next to config.json (trust_remote_code=True) names no hf_attn
    import: transformers would require hf_attn to be installed to load it."""
    from transformers.dynamic_module_utils import get_imports

    for name in ("configuration_hf_attn.py", "modeling_hf_attn.py"):
        assert "hf_attn" not in get_imports(str(saved_folders / "single" / name)), name
