"""Gradio widget for the jw_adversary metric (JSON in, JSON out).

It loads the evaluate script beside it by file path, so it runs from any folder (a Space runs it
from ``app/``) and without hf_attn (the script needs only ``_hf_attn_measures.py`` beside it)."""

import json
from pathlib import Path

import evaluate
import gradio as gr

# `hf-attn push-metric` renames the quoted file when the Space's name differs from the module's
metric = evaluate.load(str(Path(__file__).resolve().with_name("jw_adversary.py")))
EXAMPLE = json.dumps({"adversary_tvd": [[0.005, 0.02], [0.03, 0.04]], "adversary_jsd": [[0.6, 0.69], [0.5, 0.4]], "max_attention": [0.3, 0.8], "predictions": [1, 0]})


def compute(payload: str, extra: float) -> dict:
    data = json.loads(payload)
    return metric.compute(adversary_tvd=data["adversary_tvd"], adversary_jsd=data["adversary_jsd"], max_attention=data["max_attention"], predictions=data["predictions"], eps=float(extra))


demo = gr.Interface(
    fn=compute,
    inputs=[gr.Textbox(label="JSON with adversary_tvd, adversary_jsd, max_attention, predictions", value=EXAMPLE, lines=6), gr.Number(label="eps", value=0.01)],
    outputs=gr.JSON(label="jw_adversary"),
    title="JW Adversary (Jain & Wallace 2019)",
    description="ε-max JSD of adversarial attention per class and by max attention (Jain & Wallace 2019, §4.2.2, Figs 4–5).")

if __name__ == "__main__":
    demo.launch()
