"""Gradio widget for the ts_mutual_information metric (JSON in, JSON out).

It loads the evaluate script beside it by file path, so it runs from any folder (a Space runs it
from ``app/``) and without hf_attn (the script needs only ``_hf_attn_measures.py`` beside it)."""

import json
from pathlib import Path

import evaluate
import gradio as gr

# `hf-attn push-metric` renames the quoted file when the Space's name differs from the module's
metric = evaluate.load(str(Path(__file__).resolve().with_name("ts_mutual_information.py")))
EXAMPLE = json.dumps({"input_vectors": [[0, 0], [0, 0.1], [5, 5], [5, 5.1]],
                      "hidden_vectors": [[1, 1], [1, 1.1], [-4, 2], [-4, 2.1]]})


def compute(payload: str, clusters: float, seed: float) -> dict:
    data = json.loads(payload)
    return metric.compute(input_vectors=data["input_vectors"], hidden_vectors=data["hidden_vectors"],
                          n_clusters=int(clusters), seed=int(seed))


demo = gr.Interface(
    fn=compute,
    inputs=[gr.Textbox(label="JSON with input_vectors, hidden_vectors", value=EXAMPLE, lines=6),
            gr.Number(label="clusters k", value=2), gr.Number(label="seed", value=0)],
    outputs=gr.JSON(label="mutual information (nats)"),
    title="TS Mutual Information (Tutek & Šnajder 2020, Table 2)",
    description="MI between k-means clusters of input embeddings and of hidden states.")

if __name__ == "__main__":
    demo.launch()
