"""The Space's own side (:mod:`hf_attn.app.space`): its model policy, model cache and request limits;
the Gradio page is ``spaces_app/app.py``."""
