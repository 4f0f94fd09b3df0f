"""Gradio widget for the ts_token_probability metric (JSON in, JSON out).

It loads the evaluate script beside it by file path, so it runs from any folder (a Space runs it
from ``app/``) and without hf_attn (the script needs only ``_hf_attn_measures.py`` beside it)."""

import json
from pathlib import Path

import evaluate
import gradio as gr

# `hf-attn push-metric` renames the quoted file when the Space's name differs from the module's
metric = evaluate.load(str(Path(__file__).resolve().with_name("ts_token_probability.py")))
EXAMPLE = json.dumps({"token_logits": [[[2.0], [-1.0]], [[0.5], [0.3], [-3.0]]],
                      "attentions": [[0.9, 0.1], [0.2, 0.2, 0.6]], "references": [1, 0]})


def compute(payload: str) -> dict:
    data = json.loads(payload)
    return metric.compute(token_logits=data["token_logits"], attentions=data["attentions"],
                          references=data["references"])


demo = gr.Interface(
    fn=compute,
    inputs=gr.Textbox(label="JSON with token_logits, attentions, references", value=EXAMPLE, lines=6),
    outputs=gr.JSON(label="per-token prediction probability"),
    title="TS Token Probability (Tutek & Šnajder 2020, Table 3)",
    description="Mean probability of the predicted class from each hidden state alone.")

if __name__ == "__main__":
    demo.launch()
