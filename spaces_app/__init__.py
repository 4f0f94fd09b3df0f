"""The explorer Space's files, as ``hf-attn push-space`` uploads them: ``app.py`` (the Gradio app),
``requirements.txt`` and ``README.md`` (the Space card's template). Installed, this folder is
``hf_attn.spaces_app``: ``HF_ATTN_MODEL=runs/sst-lstm python -m hf_attn.spaces_app.app`` runs the app
locally."""
