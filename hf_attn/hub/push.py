"""Publishing to the Hugging Face Hub: trained runs as model repos with a generated model
card, `evaluate` modules as metric Spaces, and the Gradio explorer as a Space.

Every push first builds the exact folder that is uploaded (``build_*_folder``); ``--to-dir`` /
``--dry-run`` stop there. Uploads go through ``huggingface_hub`` (``HfApi.create_repo`` +
``HfApi.upload_folder``), so ``HF_ENDPOINT`` / ``HF_TOKEN`` behave as everywhere in the ecosystem.

The pieces, one module each: :mod:`~hf_attn.hub.files` (what may be uploaded, the checked copy),
:mod:`~hf_attn.hub.scrub` (local paths), :mod:`~hf_attn.hub.analyses` and :mod:`~hf_attn.hub.cards`
(the model card), :mod:`~hf_attn.hub.verify` (the packaged model loads and runs),
:mod:`~hf_attn.hub.model_repo`, :mod:`~hf_attn.hub.metric_space` and :mod:`~hf_attn.hub.space` (one
kind of repo each) and :mod:`~hf_attn.hub.upload`. This module gathers their public names.
"""

from __future__ import annotations

from hf_attn.hub.files import (CARDS_DIR, PACKAGE_DIR, SPACE_APP_DIR, VENDOR_SKIP, HubError,  # noqa: F401 (re-exported)
                               _vendor_package)
from hf_attn.hub.scrub import LOCAL_PATH, _PathScrubber  # noqa: F401 (re-exported)
from hf_attn.hub.analyses import (ANALYSIS_RECORD, AnalysisSummary, check_analysis_belongs,  # noqa: F401 (re-exported)
                                  find_analyses, summarise_analysis)
from hf_attn.hub.cards import build_model_card, build_transformer_model_card  # noqa: F401 (re-exported)
from hf_attn.hub.verify import (VERIFY_SENTENCE, verify_model_folder,  # noqa: F401 (re-exported)
                                verify_transformer_folder)
from hf_attn.hub.space import (GRADIO_PIN, SPACE_EXTRA_INSTALL, build_space_folder,  # noqa: F401 (re-exported)
                               _gradio_version, push_space, render_space_card, require_space_extra)
from hf_attn.hub.metric_space import (METRICS_DIR, build_metric_space_folder,  # noqa: F401 (re-exported)
                                      _evaluate_imports, metric_module_dir, push_metric)
from hf_attn.hub.model_repo import (build_model_folder, build_transformer_model_folder,  # noqa: F401 (re-exported)
                                    push_model)

__all__ = ["build_model_folder", "build_model_card", "verify_model_folder", "push_model",
           "build_transformer_model_folder", "build_transformer_model_card", "verify_transformer_folder", "build_metric_space_folder",
           "push_metric", "build_space_folder", "push_space", "render_space_card", "find_analyses", "HubError"]
