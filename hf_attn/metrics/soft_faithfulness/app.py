"""Gradio widget for the soft_faithfulness metric (JSON in, JSON out).

It loads the evaluate script beside it by file path, so it runs from any folder (a Space runs it
from ``app/``) and without hf_attn (the script needs only NumPy and SciPy)."""

import json
from pathlib import Path

import evaluate
import gradio as gr

# `hf-attn push-metric` renames the quoted file when the Space's name differs from the module's
metric = evaluate.load(str(Path(__file__).resolve().with_name("soft_faithfulness.py")))
EXAMPLE = json.dumps({"full_probability": [0.9, 0.8, 0.7], "null_probability": [0.5, 0.4, 0.6], "soft_removed_probability": [[0.6, 0.7], [0.5, 0.6], [0.65, 0.6]], "soft_kept_probability": [[0.85, 0.8], [0.75, 0.8], [0.7, 0.68]]})


def compute(payload: str) -> dict:
    data = json.loads(payload)
    return metric.compute(**data)


demo = gr.Interface(fn=compute, inputs=[gr.Textbox(label="JSON input", value=EXAMPLE, lines=6)],
                    outputs=gr.JSON(label="soft_faithfulness"), title="Soft-NC / Soft-NS (Zhao & Aletras 2023)", description="Soft normalised comprehensiveness and sufficiency from the probabilities of soft-masked inputs.")

if __name__ == "__main__":
    demo.launch()
