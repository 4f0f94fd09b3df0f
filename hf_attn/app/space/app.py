"""Is attention explanation? — a Gradio explorer for hf_attn models.

Type a sentence; see the prediction and, aligned under the words as typed, the model's attention,
gradient and leave-one-out importance (normalised, on one colour scale with the attention), an
adversarial attention (with its Δŷ and JSD), the per-token prediction probabilities, the sentence's
Kendall τ of attention vs gradient and vs leave-one-out, and the permutation Δŷ distribution. All
computation lives in ``hf_attn.explorer``; this file only lays it out. The input limit is the model's
(``config.max_tokens``).

Models: visitors pick from the operator's allow-list (``HF_ATTN_MODEL``, ``HF_ATTN_MODELS``,
``space_config.json`` next to this file: ``"default_model"`` and ``"models"``); the first one opens.
``HF_ATTN_ALLOW_ANY_MODEL=1`` lets them type any other Hub id as well (still never a server path, and
never remote code). ``HF_ATTN_MODEL_CACHE_SIZE`` (default 4) bounds the models held in memory.
``GRADIO_SERVER_NAME`` / ``GRADIO_SERVER_PORT`` pick host and port (Gradio reads them); analytics
are off.
"""

import functools
import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

APP_DIR = Path(__file__).resolve().parent
if (APP_DIR / "hf_attn").is_dir():  # the Space carries its own copy of the package
    sys.path.insert(0, str(APP_DIR))

import gradio as gr  # noqa: E402
import torch  # noqa: E402

from hf_attn.explorer import (FLOAT_LIMITS, INT_LIMITS, MAX_TEXT_CHARS, ExplainError, ModelCache,  # noqa: E402
                             ModelPolicy, check_settings, default_model, explain_sentence, heatmap_html,
                             is_transformer_model,
                             model_max_tokens, model_policy, permutation_figure, summary_markdown)

LOGGER = logging.getLogger("hf_attn.app")
# What a visitor sees for an error we did not foresee; the traceback goes to the server log only
# (it may name server paths).
UNEXPECTED_MESSAGE = ("Something went wrong on the server while handling this request (the details were "
                      "logged). Please try again, or try another sentence or model.")

EXAMPLES = [
    "I don't like it, it isn't good.",
    "A gorgeous, witty, seductive movie.",
    "It's not a great monster movie, but it's a good one.",
    "The plot is nothing but boilerplate clichés from start to finish.",
]
SENTENCE_LABEL = "Sentence"


def visitor_errors(handler):
    """Every error of ``handler`` reaches the visitor as a clear :class:`gr.Error`: our
    :class:`ExplainError` messages as they are, anything else as :data:`UNEXPECTED_MESSAGE` with the
    traceback logged here (never Gradio's bare "upstream exception")."""
    @functools.wraps(handler)
    def wrapper(*args, **kwargs):
        try:
            return handler(*args, **kwargs)
        except gr.Error:
            raise
        except ExplainError as err:
            raise gr.Error(str(err)) from None
        except Exception:
            LOGGER.exception("unexpected error in %s", handler.__name__)
            raise gr.Error(UNEXPECTED_MESSAGE) from None
    return wrapper


def sentence_info(limit: int | None) -> str:
    return (f"at most {limit} tokens (the model's limit)" if limit
            else "the limit is the model's (shown once it is loaded)")


def clear_outputs():
    """Empty prediction, summary, heatmaps, plot and values: what a failed request leaves, so that the
    previous sentence's results are never shown under the new one."""
    return None, "", "", None, None


def make_handlers(cache: ModelCache):
    """``(describe_model, explain, sentence_box)``: the app's event handlers on the models of ``cache``
    (``sentence_box`` relabels the sentence box with the model's input limit)."""
    @visitor_errors
    def describe_model(name: str) -> str:
        model, _ = cache.get(name)
        c = model.config
        labels = ", ".join(str(v) for v in c.id2label.values())
        if is_transformer_model(model):
            return (f"Loaded **{name.strip()}**: BERT-family `{c.model_type}`, {c.num_hidden_layers} layers; "
                    f"explained: the last layer's [CLS] attention, mean over {c.num_attention_heads} heads; "
                    f"labels: {labels}; sentences of at most {model_max_tokens(model)} word pieces.")
        return (f"Loaded **{name.strip()}**: encoder `{c.encoder}`, attention `{c.attention}`, "
                f"variant `{c.variant}`, labels: {labels}; sentences of at most {model_max_tokens(model)} tokens.")

    def sentence_box(name: str):
        try:
            model, _ = cache.get(name)
            limit = model_max_tokens(model)
        except Exception:  # the error itself is shown by describe_model / explain
            limit = None
        return gr.update(info=sentence_info(limit))

    @visitor_errors
    def explain(model_name: str, text: str, eps: float, steps: float, seed: float):
        # Bounds first: a request with absurd settings is refused before any model is loaded.
        settings = check_settings(eps=eps, steps=steps, seed=seed)  # max_tokens: the model's own limit
        model, tokenizer = cache.get(model_name)
        explanation = explain_sentence(model, tokenizer, text, **settings)
        label = {name: float(p) for name, p in zip(explanation.label_names, explanation.probabilities)}
        return (label, summary_markdown(explanation), heatmap_html(explanation), permutation_figure(explanation),
                explanation.to_dict())

    return describe_model, explain, sentence_box


def build_demo(policy: ModelPolicy, initial_model: str | None = None, cache: ModelCache | None = None) -> gr.Blocks:
    """The explorer page: models from ``policy`` (``initial_model`` selected), loaded through
    ``cache`` (a new :class:`ModelCache` by default)."""
    describe_model, explain, sentence_box = make_handlers(cache or ModelCache(policy))
    initial_model = initial_model or (policy.models[0] if policy.models else None)
    steps_low, steps_high = INT_LIMITS["steps"]
    eps_low, eps_high = FLOAT_LIMITS["eps"]
    with gr.Blocks(title="Is attention explanation?") as demo:
        gr.Markdown("# Is attention explanation?\nAttention of an hf_attn classifier next to gradient and "
                    "leave-one-out importance with the sentence's Kendall τ, an adversarial attention and the "
                    "permutation Δŷ (Jain & Wallace 2019), and per-token predictions (Tutek & Šnajder 2020).")
        with gr.Row():
            # allow_custom_value=True only switches off Gradio's own choice check, whose message
            # differs from ours (it echoes the name): ModelPolicy in the handlers refuses every name
            # off the list with the same NOT_ALLOWED_MESSAGE.
            info = ("one of the listed models, or any Hub id USER/NAME" if policy.allow_any_hub_id
                    else "one of the models offered by this explorer")
            model_name = gr.Dropdown(choices=list(policy.models), value=initial_model, label="Model", info=info,
                                     allow_custom_value=True, scale=4, elem_id="model")
            load_button = gr.Button("Load model", scale=1)
        model_status = gr.Markdown(elem_id="model-status")
        text = gr.Textbox(label=SENTENCE_LABEL, info=sentence_info(None), lines=2,
                          placeholder="type a sentence, e.g. I don't like it, it isn't good.", elem_id="sentence",
                          max_length=MAX_TEXT_CHARS)
        with gr.Accordion("Adversary settings (J&W Alg. 3)", open=False):
            with gr.Row():
                # The ranges are enforced by the handler (check_settings), not by Gradio's
                # minimum/maximum: its message would not say which field is out of range.
                eps = gr.Number(value=0.01, label=f"ε, {eps_low:g}–{eps_high:g} (max TVD of the adversary's "
                                "prediction)")
                steps = gr.Number(value=500, label=f"optimisation steps, {steps_low}–{steps_high}", precision=0)
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
        # A failed request clears the previous results (they would otherwise stay under the new
        # sentence or model), and a failed load clears the "Loaded …" line.
        loaded = load_button.click(describe_model, inputs=[model_name], outputs=[model_status], api_name="load_model")
        loaded.failure(lambda: "", outputs=[model_status], api_visibility="private", queue=False)
        loaded.success(sentence_box, inputs=[model_name], outputs=[text], api_visibility="private")
        explained = explain_button.click(explain, inputs=[model_name, text, eps, steps, seed], outputs=outputs,
                                         api_name="explain")
        submitted = text.submit(explain, inputs=[model_name, text, eps, steps, seed], outputs=outputs,
                                api_visibility="private")
        for event in (explained, submitted):
            event.failure(clear_outputs, outputs=outputs, api_visibility="private", queue=False)
        if initial_model:
            opened = demo.load(describe_model, inputs=[model_name], outputs=[model_status], api_visibility="private")
            opened.success(sentence_box, inputs=[model_name], outputs=[text], api_visibility="private")
    return demo


def launch(demo: gr.Blocks, **kwargs) -> None:
    """Serve ``demo``: a bounded queue (one explanation at a time, at most ``HF_ATTN_QUEUE_SIZE``
    waiting, default 32) and errors shown to the visitor. Host/port: Gradio reads
    ``GRADIO_SERVER_NAME`` / ``GRADIO_SERVER_PORT`` itself; never share=True."""
    demo.queue(max_size=int(os.environ.get("HF_ATTN_QUEUE_SIZE", "32")), default_concurrency_limit=1)
    demo.launch(share=False, show_error=True, **kwargs)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # One sentence means tiny tensors: a single intra-op thread is much faster than a contended pool
    # (measured: 0.46 s vs 8 s for the 500-step adversary on 2 busy cores).
    torch.set_num_threads(int(os.environ.get("HF_ATTN_TORCH_THREADS", "1")))
    initial = default_model(APP_DIR)
    # The model opened first is allowed even when it was found or trained locally rather than configured.
    policy = model_policy(APP_DIR, extra=[initial] if initial else [])
    launch(build_demo(policy, initial))


if __name__ == "__main__":
    main()
