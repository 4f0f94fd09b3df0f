"""Gradio widget for the ts_mutual_information metric (JSON in, JSON out)."""

import json
import os

import evaluate
import gradio as gr

metric = evaluate.load(os.path.dirname(os.path.abspath(__file__)))
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
