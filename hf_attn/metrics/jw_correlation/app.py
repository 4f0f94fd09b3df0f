"""Gradio widget for the jw_correlation metric (JSON in, JSON out)."""

import json
import os

import evaluate
import gradio as gr

metric = evaluate.load(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = json.dumps({"attention": [[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.5, 0.5]], "importance": [[0.9, 0.05, 0.3], [0.2, 0.1, 0.8], [0.4, 0.1]], "predictions": [1, 0, 1]})


def compute(payload: str, extra: float) -> dict:
    data = json.loads(payload)
    return metric.compute(attention=data["attention"], importance=data["importance"], predictions=data["predictions"], alpha=float(extra))


demo = gr.Interface(
    fn=compute,
    inputs=[gr.Textbox(label="JSON with attention, importance, predictions", value=EXAMPLE, lines=6), gr.Number(label="alpha", value=0.05)],
    outputs=gr.JSON(label="jw_correlation"),
    title="JW Correlation (Jain & Wallace 2019)",
    description="Kendall τ between attention and gradient / leave-one-out importance per predicted class (Jain & Wallace 2019, Table 2, Fig. 2).")

if __name__ == "__main__":
    demo.launch()
