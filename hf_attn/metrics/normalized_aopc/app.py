"""Gradio widget for the normalized_aopc metric (JSON in, JSON out).

It loads the evaluate script beside it by file path, so it runs from any folder (a Space runs it
from ``app/``) and without hf_attn (the script needs only NumPy and SciPy)."""

import json
from pathlib import Path

import evaluate
import gradio as gr

# `hf-attn push-metric` renames the quoted file when the Space's name differs from the module's
metric = evaluate.load(str(Path(__file__).resolve().with_name("normalized_aopc.py")))
EXAMPLE = json.dumps({"aopc": [0.3, 0.2, 0.4], "aopc_min": [0.1, 0.0, 0.1], "aopc_max": [0.5, 0.4, 0.5]})


def compute(payload: str) -> dict:
    data = json.loads(payload)
    return metric.compute(**data)


demo = gr.Interface(fn=compute, inputs=[gr.Textbox(label="JSON input", value=EXAMPLE, lines=6)],
                    outputs=gr.JSON(label="normalized_aopc"), title="Normalized AOPC (Edin et al. 2024)", description="AOPC rescaled by the best and worst orderings of each instance's tokens.")

if __name__ == "__main__":
    demo.launch()
