"""Gradio widget for the wp_consistent_adversary metric (JSON in, JSON out).

It loads the evaluate script beside it by file path, so it runs from any folder (a Space runs it
from ``app/``) and without hf_attn (the script needs only ``_hf_attn_measures.py`` beside it)."""

import json
from pathlib import Path

import evaluate
import gradio as gr

# `hf-attn push-metric` renames the quoted file when the Space's name differs from the module's
metric = evaluate.load(str(Path(__file__).resolve().with_name("wp_consistent_adversary.py")))
EXAMPLE = json.dumps({"adversary_attention": [[0.1, 0.1, 0.8], [0.5, 0.5]],
                      "base_attention": [[0.7, 0.2, 0.1], [0.9, 0.1]],
                      "adversary_probabilities": [[0.2, 0.8], [0.75, 0.25]],
                      "base_probabilities": [[0.1, 0.9], [0.8, 0.2]]})


def compute(payload: str, lam: float) -> dict:
    data = json.loads(payload)
    return metric.compute(adversary_attention=data["adversary_attention"], base_attention=data["base_attention"],
                          adversary_probabilities=data["adversary_probabilities"],
                          base_probabilities=data["base_probabilities"], lam=float(lam))


demo = gr.Interface(
    fn=compute,
    inputs=[gr.Textbox(label="JSON with adversary_attention, base_attention, adversary_probabilities, "
                             "base_probabilities", value=EXAMPLE, lines=8),
            gr.Number(label="λ", value=0.001)],
    outputs=gr.JSON(label="wp_consistent_adversary"),
    title="WP Consistent Adversary (Wiegreffe & Pinter 2019)",
    description="JSD / TVD / KL of a model-consistent adversary to its base model and the objective "
                "TVD − λ·KL (W&P §4, Fig. 5).")

if __name__ == "__main__":
    demo.launch()
