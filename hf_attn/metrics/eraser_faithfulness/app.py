"""Gradio widget for the eraser_faithfulness metric (JSON in, JSON out).

It loads the evaluate script beside it by file path, so it runs from any folder (a Space runs it
from ``app/``) and without hf_attn (the script needs only ``_hf_attn_measures.py`` beside it)."""

import json
from pathlib import Path

import evaluate
import gradio as gr

# `hf-attn push-metric` renames the quoted file when the Space's name differs from the module's
metric = evaluate.load(str(Path(__file__).resolve().with_name("eraser_faithfulness.py")))
EXAMPLE = json.dumps({"comprehensiveness": [[0.2, 0.2, 0.3, 0.4, 0.5], [0.0, 0.1, 0.1, 0.3, 0.6]],
                      "sufficiency": [[0.3, 0.3, 0.2, 0.1, 0.0], [0.4, 0.2, 0.2, 0.1, 0.05]],
                      "fractions": [0.01, 0.05, 0.1, 0.2, 0.5]})


def compute(payload: str, include_zero_bin: bool) -> dict:
    data = json.loads(payload)
    return metric.compute(comprehensiveness=data["comprehensiveness"], sufficiency=data["sufficiency"],
                          fractions=data.get("fractions"), include_zero_bin=bool(include_zero_bin))


demo = gr.Interface(
    fn=compute,
    inputs=[gr.Textbox(label="JSON with comprehensiveness, sufficiency (per instance, per bin), fractions",
                       value=EXAMPLE, lines=6),
            gr.Checkbox(label="include_zero_bin (AOPC normaliser |B|+1)", value=False)],
    outputs=gr.JSON(label="eraser_faithfulness"),
    title="ERASER faithfulness (DeYoung et al. 2020)",
    description="Comprehensiveness, sufficiency and their AOPC over 1/5/10/20/50 % bins for any "
                "per-token importance ranking (ERASER §4).")

if __name__ == "__main__":
    demo.launch()
