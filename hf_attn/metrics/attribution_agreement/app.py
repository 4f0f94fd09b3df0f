"""Gradio widget for the attribution_agreement metric (JSON in, JSON out).

It loads the evaluate script beside it by file path, so it runs from any folder (a Space runs it
from ``app/``) and without hf_attn (the script needs only NumPy and SciPy)."""

import json
from pathlib import Path

import evaluate
import gradio as gr

# `hf-attn push-metric` renames the quoted file when the Space's name differs from the module's
metric = evaluate.load(str(Path(__file__).resolve().with_name("attribution_agreement.py")))
EXAMPLE = json.dumps({"attributions": [[0.9, 0.1, 0.5], [0.2, 0.3, 0.1, 0.4]], "references": [[0.8, 0.3, 0.2], [0.1, 0.3, 0.2, 0.4]], "top_k_fraction": 0.5})


def compute(payload: str) -> dict:
    data = json.loads(payload)
    return metric.compute(**data)


demo = gr.Interface(fn=compute, inputs=[gr.Textbox(label="JSON input", value=EXAMPLE, lines=6)],
                    outputs=gr.JSON(label="attribution_agreement"), title="Attribution agreement (Kendall tau-b, top-k)", description="How similarly two attribution methods rank the tokens of the same inputs.")

if __name__ == "__main__":
    demo.launch()
