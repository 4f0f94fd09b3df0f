"""Gradio widget for the jw_correlation metric (JSON in, JSON out).

It loads the evaluate script beside it by file path, so it runs from any folder (a Space runs it
from ``app/``) and without hf_attn (the script needs only ``_hf_attn_measures.py`` beside it)."""

import json
from pathlib import Path

import evaluate
import gradio as gr

# `hf-attn push-metric` renames the quoted file when the Space's name differs from the module's
metric = evaluate.load(str(Path(__file__).resolve().with_name("jw_correlation.py")))
EXAMPLE = json.dumps({"attention": [[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.5, 0.5]], "importance": [[0.9, 0.05, 0.3], [0.2, 0.1, 0.8], [0.4, 0.1]], "predictions": [1, 0, 1]})


def compute(payload: str, extra: float) -> dict:
    data = json.loads(payload)
    return metric.compute(attention=data["attention"], importance=data["importance"], predictions=data["predictions"], alpha=float(extra))


demo = gr.Interface(
    fn=compute,
    inputs=[gr.Textbox(label="JSON with attention, importance, predictions", value=EXAMPLE, lines=6), gr.Number(label="alpha", value=0.05)],
    outputs=gr.JSON(label="jw_correlation"),
    title="JW Correlation (Jain & Wallace 2019)",
    description="Kendall τ between attention and gradient / leave-one-out (LOO-TVD) importance per predicted class (Jain & Wallace 2019, Table 2, Fig. 2).")

if __name__ == "__main__":
    demo.launch()
