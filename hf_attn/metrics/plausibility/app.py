"""Gradio widget for the plausibility metric (JSON in, JSON out).

It loads the evaluate script beside it by file path, so it runs from any folder (a Space runs it
from ``app/``) and without hf_attn (the script needs only ``_hf_attn_measures.py`` beside it)."""

import json
from pathlib import Path

import evaluate
import gradio as gr

# `hf-attn push-metric` renames the quoted file when the Space's name differs from the module's
metric = evaluate.load(str(Path(__file__).resolve().with_name("plausibility.py")))
EXAMPLE = json.dumps({"predictions": [[0.9, 0.1, 0.8, 0.2], [0.5, 0.5, 0.2, 0.9], [0.1, 0.3, 0.2]],
                      "references": [[1, 0, 1, 0], [1, 0, 1, 0], [0, 0, 0]], "k_fraction": 0.5})


def compute(payload: str, per_instance_k: bool, iou_threshold: float) -> dict:
    data = json.loads(payload)
    return metric.compute(predictions=data["predictions"], references=data["references"],
                          k_fraction=data.get("k_fraction"), per_instance_k=bool(per_instance_k),
                          iou_threshold=float(iou_threshold))


demo = gr.Interface(
    fn=compute,
    inputs=[gr.Textbox(label="JSON with predictions (word scores per text), references (0/1 marks per word), "
                             "k_fraction (null: the rationales' mean share)", value=EXAMPLE, lines=6),
            gr.Checkbox(label="per_instance_k (k = the text's own number of marked words)", value=False),
            gr.Number(label="iou_threshold (ERASER: 0.5)", value=0.5)],
    outputs=gr.JSON(label="plausibility"),
    title="Plausibility against human rationales (ERASER, DeYoung et al. 2020)",
    description="AUPRC, average precision, token F1 of the top-k words and IOU F1 of word scores against "
                "0/1 human rationales, as ERASER's metrics.py computes them.")

if __name__ == "__main__":
    demo.launch()
