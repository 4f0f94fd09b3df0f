"""Gradio widget for the ts_token_probability metric (JSON in, JSON out)."""

import json
import os

import evaluate
import gradio as gr

metric = evaluate.load(os.path.dirname(os.path.abspath(__file__)))
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
