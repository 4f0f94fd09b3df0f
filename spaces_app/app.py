"""Is attention explanation? — a Gradio explorer for hf_attn models.

Type a sentence; see the prediction and, aligned over its tokens, the model's attention, gradient
and leave-one-out importance, an adversarial attention (with its Δŷ and JSD), the permutation Δŷ
distribution and the per-token prediction probabilities. All computation lives in
``hf_attn.explain``; this file only lays it out.

Environment: ``HF_ATTN_MODEL`` (folder or Hub id) picks the first model; ``GRADIO_SERVER_NAME`` /
``GRADIO_SERVER_PORT`` pick host and port (Gradio reads them); analytics are off.
"""

import os
import sys
import threading
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

APP_DIR = Path(__file__).resolve().parent
if (APP_DIR / "hf_attn").is_dir():  # the Space carries its own copy of the package
    sys.path.insert(0, str(APP_DIR))

import gradio as gr  # noqa: E402
import torch  # noqa: E402

from hf_attn.explain import (DEFAULT_MAX_TOKENS, ExplainError, default_model, explain_sentence,  # noqa: E402
                             heatmap_html, load_model, permutation_figure, summary_markdown)

# One sentence means tiny tensors: a single intra-op thread is much faster than a contended pool
# (measured: 0.46 s vs 8 s for the 500-step adversary on 2 busy cores).
torch.set_num_threads(int(os.environ.get("HF_ATTN_TORCH_THREADS", "1")))

EXAMPLES = [
    "a gorgeous , witty , seductive movie .",
    "the plot is nothing but boilerplate clichés from start to finish , and the script assumes that not "
    "only would subtlety be lost on the target audience , but that it 's also too stupid to realize",
    "it 's not a great monster movie , but it 's a good one .",
]

_models: dict[str, tuple] = {}
_lock = threading.Lock()


def get_model(name: str):
    """Load (once) and cache models by name."""
    name = (name or "").strip()
    with _lock:
        if name not in _models:
            _models[name] = load_model(name)
        return _models[name]


def describe_model(name: str) -> str:
    try:
        model, _ = get_model(name)
    except ExplainError as err:
        raise gr.Error(str(err))
    c = model.config
    labels = ", ".join(str(v) for v in c.id2label.values())
    return (f"Loaded **{name}**: encoder `{c.encoder}`, attention `{c.attention}`, variant `{c.variant}`, "
            f"labels: {labels}.")


def explain(model_name: str, text: str, eps: float, steps: float, seed: float):
    try:
        model, tokenizer = get_model(model_name)
        explanation = explain_sentence(model, tokenizer, text, max_tokens=DEFAULT_MAX_TOKENS, eps=float(eps),
                                       steps=int(steps), seed=int(seed))
    except ExplainError as err:
        raise gr.Error(str(err))
    label = {name: float(p) for name, p in zip(explanation.label_names, explanation.probabilities)}
    return (label, summary_markdown(explanation), heatmap_html(explanation), permutation_figure(explanation),
            explanation.to_dict())


def build_demo(initial_model: str | None) -> gr.Blocks:
    with gr.Blocks(title="Is attention explanation?") as demo:
        gr.Markdown("# Is attention explanation?\nAttention of an hf_attn classifier next to gradient and "
                    "leave-one-out importance, an adversarial attention (Jain & Wallace 2019) and per-token "
                    "predictions (Tutek & Šnajder 2020).")
        with gr.Row():
            model_name = gr.Textbox(value=initial_model, label="Model (local folder or Hub id USER/NAME)",
                                    scale=4)
            load_button = gr.Button("Load model", scale=1)
        model_status = gr.Markdown(elem_id="model-status")
        text = gr.Textbox(label=f"Sentence (at most {DEFAULT_MAX_TOKENS} tokens)", lines=2,
                          placeholder="type a sentence …", elem_id="sentence")
        with gr.Accordion("Adversary settings (J&W Alg. 3)", open=False):
            with gr.Row():
                eps = gr.Number(value=0.01, label="ε (max TVD of the adversary's prediction)", minimum=0)
                steps = gr.Number(value=500, label="optimisation steps", minimum=0, precision=0)
                seed = gr.Number(value=0, label="seed", precision=0)
        explain_button = gr.Button("Explain", variant="primary", elem_id="explain")
        with gr.Row():
            prediction = gr.Label(label="Prediction ŷ", elem_id="prediction")
            summary = gr.Markdown(elem_id="summary")
        heatmaps = gr.HTML(label="Token heatmaps", elem_id="heatmaps")
        permutations = gr.Plot(label="Permutation Δŷ", elem_id="permutations")
        with gr.Accordion("All values (JSON)", open=False):
            values = gr.JSON(label="explanation")
        gr.Examples(EXAMPLES, inputs=[text])

        outputs = [prediction, summary, heatmaps, permutations, values]
        load_button.click(describe_model, inputs=[model_name], outputs=[model_status], api_name="load_model")
        explain_button.click(explain, inputs=[model_name, text, eps, steps, seed], outputs=outputs,
                             api_name="explain")
        text.submit(explain, inputs=[model_name, text, eps, steps, seed], outputs=outputs, api_visibility="private")
        if initial_model:
            demo.load(describe_model, inputs=[model_name], outputs=[model_status], api_visibility="private")
    return demo


def main() -> None:
    initial = default_model(APP_DIR)
    demo = build_demo(initial)
    # host/port: Gradio reads GRADIO_SERVER_NAME / GRADIO_SERVER_PORT itself; never share=True.
    demo.launch(share=False)


if __name__ == "__main__":
    main()
