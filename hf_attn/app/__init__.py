"""The Space's own side: its request limits and explain calls (:mod:`hf_attn.app.space`), its model
policy and model cache (:mod:`hf_attn.app.models`), the human rationale shown under an explanation
(:mod:`hf_attn.app.rationale`); the Gradio page is ``spaces_app/app.py``."""
