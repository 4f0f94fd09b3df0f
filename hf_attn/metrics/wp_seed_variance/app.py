"""Gradio widget for the wp_seed_variance metric (JSON in, JSON out).

It loads the evaluate script beside it by file path, so it runs from any folder (a Space runs it
from ``app/``) and without hf_attn (the script needs only ``_hf_attn_measures.py`` beside it)."""

import json
from pathlib import Path

import evaluate
import gradio as gr

# `hf-attn push-metric` renames the quoted file when the Space's name differs from the module's
metric = evaluate.load(str(Path(__file__).resolve().with_name("wp_seed_variance.py")))
EXAMPLE = json.dumps({"base_attention": [[0.7, 0.2, 0.1], [0.5, 0.5]],
                      "seed_attentions": [[[0.6, 0.3, 0.1], [0.2, 0.4, 0.4]], [[0.5, 0.5], [0.9, 0.1]]],
                      "base_probabilities": [[0.1, 0.9], [0.8, 0.2]],
                      "seed_probabilities": [[[0.2, 0.8], [0.1, 0.9]], [[0.7, 0.3], [0.6, 0.4]]],
                      "labels": [1, 0]})


def compute(payload: str, statistic: str) -> dict:
    data = json.loads(payload)
    return metric.compute(base_attention=data["base_attention"], seed_attentions=data["seed_attentions"],
                          base_probabilities=data["base_probabilities"],
                          seed_probabilities=data["seed_probabilities"], labels=data["labels"],
                          statistic=statistic)


demo = gr.Interface(
    fn=compute,
    inputs=[gr.Textbox(label="JSON with base_attention, seed_attentions, base_probabilities, "
                             "seed_probabilities, labels", value=EXAMPLE, lines=8),
            gr.Radio(["max", "median"], value="max", label="statistic over seeds")],
    outputs=gr.JSON(label="wp_seed_variance"),
    title="WP Seed Variance (Wiegreffe & Pinter 2019)",
    description="JSD of seed models' attention to the base attention and TVD of predictions, max or "
                "median over seeds, by class and max attention (W&P §3.3, Fig. 3).")

if __name__ == "__main__":
    demo.launch()
