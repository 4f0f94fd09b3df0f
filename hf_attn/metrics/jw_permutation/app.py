"""Gradio widget for the jw_permutation metric (JSON in, JSON out).

It loads the evaluate script beside it by file path, so it runs from any folder (a Space runs it
from ``app/``) and without hf_attn (the script needs only ``_hf_attn_measures.py`` beside it)."""

import json
from pathlib import Path

import evaluate
import gradio as gr

# `hf-attn push-metric` renames the quoted file when the Space's name differs from the module's
metric = evaluate.load(str(Path(__file__).resolve().with_name("jw_permutation.py")))
EXAMPLE = json.dumps({"permutation_tvd": [[0.01, 0.02, 0.0], [0.3, 0.1, 0.2]], "max_attention": [0.4, 0.9], "predictions": [1, 0]})


def compute(payload: str) -> dict:
    data = json.loads(payload)
    return metric.compute(permutation_tvd=data["permutation_tvd"], max_attention=data["max_attention"], predictions=data["predictions"])


demo = gr.Interface(
    fn=compute,
    inputs=[gr.Textbox(label="JSON with permutation_tvd, max_attention, predictions", value=EXAMPLE, lines=6)],
    outputs=gr.JSON(label="jw_permutation"),
    title="JW Permutation (Jain & Wallace 2019)",
    description="Median output change Δŷ_med under random permutations of attention, per class and by max attention (Jain & Wallace 2019, §4.2.1, Fig. 3).")

if __name__ == "__main__":
    demo.launch()
