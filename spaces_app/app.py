"""Is attention explanation? — a Gradio explorer for hf_attn models and transformers classifiers.

Type a sentence; see the prediction and, aligned under the words as typed, the model's attention,
gradient, leave-one-out importance (J&W's LOO-TVD) and integrated gradients (raw values, as
``hf-attn explain`` prints them; a checkbox shows gradient and LOO-TVD as shares of their sum, on one
colour scale with the attention), an adversarial attention (with its Δŷ and JSD), the per-token prediction probabilities,
the sentence's Kendall τ of attention vs gradient and vs LOO-TVD, and the permutation Δŷ
distribution; under the heatmaps, for a model trained on a data set with human rationales (SST), the
sentence's human rationale when it is one of that data's sentences (``hf_attn.app.rationale``; a few
of its test sentences are offered as examples); on request, every attribution method side by side (one heatmap row per method:
attention, rollout, attention flow / norm, ALTI, value zeroing, saliency, gradient × input,
integrated gradients, the leave-one-out drop LOO-drop, through ``hf_attn.Explainer``). The
explanation is ``hf_attn.Explainer``'s, drawn by
``hf_attn.explanation.render`` as in a notebook, with the same settings
(``hf_attn.explanation.settings.ExplainSettings``: the defaults of ``Explainer.explain`` and
``hf-attn explain``); the Space's request limits are ``hf_attn.app.space``, its policy and model cache
``hf_attn.app.models``; this file only lays it out. The input limit is the model's
(``config.max_tokens``, a transformer's position table), counted without the special tokens its
tokenizer adds; a longer sentence is refused, never cut. Each request has a time budget held inside
its computations (an explanation 60 s, the comparison 10 s), and each view runs one request at a
time with a few waiting at most 30 s; any other is refused at once with one line.

Models: visitors pick from the operator's allow-list (``HF_ATTN_MODEL``, ``HF_ATTN_MODELS``,
``space_config.json`` next to this file: ``"default_model"`` and ``"models"``); the first one opens,
and the page says which model it serves and where that choice comes from. Without a model, or when
the first one cannot be loaded, the app refuses to start with one line on stderr (exit code 2): it
never picks or trains a model by itself. Visitors see model names (a Hub id, or ``local:<folder>``
for a server folder), never server paths. Visitor errors are logged as one line each.
Run it locally with ``HF_ATTN_MODEL=runs/sst-lstm python -m hf_attn.spaces_app.app`` (from a checkout,
``python spaces_app/app.py`` too).
``HF_ATTN_ALLOW_ANY_MODEL=1`` lets them type any other Hub id as well (still never a server path, and
never remote code; at most ``HF_ATTN_MAX_MODEL_BYTES`` each, default 2 GB, and
``HF_ATTN_VISITOR_DISK_BYTES`` in all, default 8 GB, the least recently used removed from disk first).
``HF_ATTN_MODEL_CACHE_SIZE`` (default 4) bounds the models held in memory.
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

try:
    import gradio as gr  # noqa: E402
except ImportError:  # the library installs without the Space's dependencies
    print('the explorer Space needs gradio, which is not installed: pip install "hf_attn[space]"', file=sys.stderr)
    raise SystemExit(2) from None
import torch  # noqa: E402

from hf_attn.app.space import (FLOAT_LIMITS, INT_LIMITS, MAX_TEXT_CHARS, ExplainError, ModelCache,  # noqa: E402
                               ModelPolicy, RequestGate, check_settings, compare_methods, explain_sentence,
                               explained_attention, is_transformer_model, model_max_tokens, model_policy,
                               names_hub_repo)
from hf_attn.app.rationale import model_dataset, rationale_examples, rationale_html, served_dataset  # noqa: E402
from hf_attn.explanation.render import (SHARES_LABEL, heatmap_html, markdown_text,  # noqa: E402
                                        methods_heatmap_html, permutation_figure, summary_markdown)
from hf_attn.explanation.settings import DEFAULT_SETTINGS  # noqa: E402

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
# Workers Gradio gives an explanation or a comparison beyond the requests its gate holds: they refuse
# at once.
REFUSERS = 4


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def visitor_errors(handler):
    """Every error of ``handler`` reaches the visitor as a clear :class:`gr.Error`: our
    :class:`ExplainError` messages as they are, anything else as :data:`UNEXPECTED_MESSAGE` (never
    Gradio's bare "upstream exception"). The server log gets one line per error: the visitor's
    mistakes at INFO, the unexpected ones at ERROR with the exception's type and message (which
    may name server paths, so they never reach the page); Gradio prints no traceback of them
    (``print_exception=False``)."""
    @functools.wraps(handler)
    def wrapper(*args, **kwargs):
        try:
            return handler(*args, **kwargs)
        except gr.Error:
            raise
        except ExplainError as err:
            LOGGER.info("visitor error in %s: %s", handler.__name__, _one_line(err))
            raise gr.Error(str(err), print_exception=False) from None
        except Exception as err:
            LOGGER.error("unexpected error in %s: %s: %s", handler.__name__, type(err).__name__, _one_line(err))
            raise gr.Error(UNEXPECTED_MESSAGE, print_exception=False) from None
    return wrapper


def display_names(models) -> dict[str, str]:
    """``{name shown to visitors: model}``: a Hub id as it is, a server folder as ``local:<folder name>``
    (numbered when two folders share a name), so that no server path reaches the page."""
    shown: dict[str, str] = {}
    for model in models:
        name = model if names_hub_repo(model) else f"local:{Path(model.rstrip('/')).name or 'model'}"
        base, n = name, 2
        while name in shown:
            name, n = f"{base} ({n})", n + 1
        shown[name] = model
    return shown


def model_source(model: str, app_dir=APP_DIR) -> str:
    """Why the app serves ``model`` (the first of the operator's list): which setting names it."""
    from hf_attn.app.models import _split_names

    if model in _split_names(os.environ.get("HF_ATTN_MODEL")):
        return "set by the HF_ATTN_MODEL variable"
    if model in _split_names(os.environ.get("HF_ATTN_MODELS")):
        return "first of the HF_ATTN_MODELS variable"
    if (Path(app_dir) / "space_config.json").is_file():
        return "named in this Space's space_config.json (hf-attn push-space --model)"
    return "chosen by whoever runs this app"


def sentence_info(limit: int | None) -> str:
    return (f"at most {limit} tokens (the model's limit)" if limit
            else "the limit is the model's (shown once it is loaded)")


def clear_outputs():
    """Empty prediction, summary, heatmaps, plot and values: what a failed request leaves, so that the
    previous sentence's results are never shown under the new one."""
    return None, "", "", None, None


def make_handlers(cache: ModelCache, names: dict[str, str] | None = None, gate: RequestGate | None = None):
    """``(describe_model, explain, sentence_box)``: the app's event handlers on the models of ``cache``
    (``sentence_box`` relabels the sentence box with the model's input limit). ``names``: the names
    shown to visitors and the models they stand for (:func:`display_names`); any other name is
    passed to the cache as it is (the policy decides). An explanation runs within its time budget
    when ``gate`` (default: a new :class:`~hf_attn.app.space.RequestGate`) gives it a turn; under
    load it is refused at once with one line (``explain.gate``)."""
    names = names or {}
    gate = gate or RequestGate()
    shown = {model: name for name, model in names.items()}

    def model_of(name):
        return names.get(name.strip(), name) if isinstance(name, str) else name

    @visitor_errors
    def describe_model(name: str) -> str:
        model, tokenizer = cache.get(model_of(name))
        name = shown.get(model_of(name), name)
        c = model.config
        labels = ", ".join(markdown_text(v) for v in c.id2label.values())
        name = markdown_text(name)
        if is_transformer_model(model):  # what is explained comes from the adapter's facts about this model
            return (f"Loaded **{name.strip()}**: transformers `{c.model_type}`; explained: "
                    f"{explained_attention(model, tokenizer)}; labels: {labels}; sentences of at most "
                    f"{model_max_tokens(model, tokenizer)} word pieces.")
        return (f"Loaded **{name.strip()}**: encoder `{c.encoder}`, attention `{c.attention}`, "
                f"variant `{c.variant}`, labels: {labels}; sentences of at most "
                f"{model_max_tokens(model, tokenizer)} tokens.")

    def sentence_box(name: str):
        try:
            model, tokenizer = cache.get(model_of(name))
            limit = model_max_tokens(model, tokenizer)
        except Exception:  # the error itself is shown by describe_model / explain
            limit = None
        return gr.update(info=sentence_info(limit))

    @visitor_errors
    def explain(model_name: str, text: str, eps: float = DEFAULT_SETTINGS.eps,
                steps: float = DEFAULT_SETTINGS.adversary_steps, seed: float = DEFAULT_SETTINGS.seed,
                ig: bool = DEFAULT_SETTINGS.ig, shares: bool = False):
        """The main view: ``(prediction, summary, heatmaps, permutation plot, JSON)``; every setting not
        shown defaults to ``ExplainSettings``' (as ``Explainer.explain``); ``shares``: gradient and
        LOO-TVD as shares of their sum in the heatmaps (the JSON holds both)."""
        # Bounds first: a request with absurd settings is refused before any model is loaded.
        settings = check_settings(eps=eps, steps=steps, seed=seed, ig=ig)  # max_tokens: the model's own limit
        if not isinstance(shares, bool):
            raise ExplainError(f"shares must be on or off (True or False), got {shares!r}.")
        model, tokenizer = cache.get(model_of(model_name))
        with gate.turn():
            explanation = explain_sentence(model, tokenizer, text, **settings)
        label = {name: float(p) for name, p in zip(explanation.label_names, explanation.probabilities)}
        # under the heatmaps: the human rationale of the sentence when the model's data set has one
        heatmaps = heatmap_html(explanation, shares=shares) + rationale_html(model_dataset(model), text)
        return (label, summary_markdown(explanation), heatmaps, permutation_figure(explanation), explanation.to_dict())

    explain.gate = gate
    return describe_model, explain, sentence_box


def make_compare_handler(cache: ModelCache, names: dict[str, str] | None = None, gate: RequestGate | None = None):
    """The handler of the method comparison: ``(model name, sentence)`` → the HTML of
    :func:`hf_attn.explanation.render.methods_heatmap_html` (one heatmap row per attribution method), with the
    explorer's input checks; ``names`` as in :func:`make_handlers`. The comparison runs within its
    time budget (:data:`~hf_attn.app.space.COMPARE_SECONDS`) when ``gate`` (default: a new
    :class:`~hf_attn.app.space.RequestGate`) gives it a turn; under load it is refused at once with
    one line."""
    names = names or {}
    gate = gate or RequestGate()

    @visitor_errors
    def compare(model_name: str, text: str) -> str:
        name = names.get(model_name.strip(), model_name) if isinstance(model_name, str) else model_name
        model, tokenizer = cache.get(name)
        with gate.turn():
            return methods_heatmap_html(compare_methods(model, tokenizer, text))

    compare.gate = gate
    return compare


def examples_for(cache: ModelCache, model: str | None) -> list[str]:
    """The example sentences offered for the served ``model``: a few test sentences of its data set's
    human rationale data when it has some (their rationale is shown under the explanation), then
    :data:`EXAMPLES`; only :data:`EXAMPLES` otherwise. Nothing is loaded or downloaded to decide."""
    return [*rationale_examples(served_dataset(cache, model)), *EXAMPLES] if model else list(EXAMPLES)


def build_demo(policy: ModelPolicy, initial_model: str | None = None, cache: ModelCache | None = None,
               served_because: str | None = None) -> gr.Blocks:
    """The explorer page: models from ``policy`` (``initial_model`` selected), loaded through
    ``cache`` (a new :class:`ModelCache` by default); ``served_because`` says why the first model is
    the one served (:func:`model_source`). Visitors see :func:`display_names`, never server paths."""
    names = display_names(policy.models)
    cache = cache or ModelCache(policy)
    describe_model, explain, sentence_box = make_handlers(cache, names)
    compare = make_compare_handler(cache, names)
    # Gradio hands the explanations and the comparisons to more workers than their gates hold, so that
    # a request beyond a gate is refused at once (BUSY_MESSAGE) instead of waiting in Gradio's queue.
    explain_workers = explain.gate.capacity + REFUSERS
    compare_workers = compare.gate.capacity + REFUSERS
    initial_model = initial_model or (policy.models[0] if policy.models else None)
    initial_name = next((name for name, model in names.items() if model == initial_model), initial_model)
    steps_low, steps_high = INT_LIMITS["steps"]
    eps_low, eps_high = FLOAT_LIMITS["eps"]
    with gr.Blocks(title="Is attention explanation?") as demo:
        gr.Markdown("# Is attention explanation?\nAttention of the classifier (hf_attn or transformers) next to gradient, "
                    "leave-one-out importance (LOO-TVD: TVD(ŷ(x₋t), ŷ(x)), J&W §4.1) and integrated gradients "
                    "(raw values, as hf-attn explain prints them) with the sentence's Kendall "
                    "τ, an adversarial attention and the permutation Δŷ (Jain & Wallace 2019), and per-token "
                    "predictions (Tutek & Šnajder 2020).")
        if initial_name:
            gr.Markdown(f"Serving **{initial_name}**" + (f", {served_because}" if served_because else "")
                        + (f"; {len(names) - 1} other model(s) to choose from." if len(names) > 1 else "."),
                        elem_id="served-model")
        with gr.Row():
            # allow_custom_value=True only switches off Gradio's own choice check, whose message
            # differs from ours (it echoes the name): ModelPolicy in the handlers refuses every name
            # off the list with the same NOT_ALLOWED_MESSAGE.
            info = ("one of the listed models, or any Hub id USER/NAME" if policy.allow_any_hub_id
                    else "one of the models offered by this explorer")
            model_name = gr.Dropdown(choices=list(names), value=initial_name, label="Model", info=info,
                                     allow_custom_value=True, scale=4, elem_id="model")
            load_button = gr.Button("Load model", scale=1)
        model_status = gr.Markdown(label="model", elem_id="model-status")
        text = gr.Textbox(label=SENTENCE_LABEL, info=sentence_info(None), lines=2,
                          placeholder="type a sentence, e.g. I don't like it, it isn't good.", elem_id="sentence",
                          max_length=MAX_TEXT_CHARS)
        with gr.Accordion("Adversary settings (J&W Alg. 3)", open=False):
            with gr.Row():
                # The ranges are enforced by the handler (check_settings), not by Gradio's
                # minimum/maximum: its message would not say which field is out of range.
                eps = gr.Number(value=DEFAULT_SETTINGS.eps, label=f"ε, {eps_low:g}–{eps_high:g} (max TVD of the "
                                "adversary's prediction)")
                steps = gr.Number(value=DEFAULT_SETTINGS.adversary_steps,
                                  label=f"optimisation steps, {steps_low}–{steps_high}", precision=0)
                seed = gr.Number(value=DEFAULT_SETTINGS.seed, label="seed", precision=0)
        with gr.Row():
            ig = gr.Checkbox(value=DEFAULT_SETTINGS.ig, label="integrated gradients (within the request's time budget)",
                             elem_id="ig")
            shares = gr.Checkbox(value=False, label=SHARES_LABEL, elem_id="shares")
        explain_button = gr.Button("Explain", variant="primary", elem_id="explain")
        with gr.Row():
            prediction = gr.Label(label="Prediction ŷ", elem_id="prediction")
            summary = gr.Markdown(label="summary", elem_id="summary")
        heatmaps = gr.HTML(label="Token heatmaps", elem_id="heatmaps")
        permutations = gr.Plot(label="Permutation Δŷ", elem_id="permutations")
        with gr.Accordion("Every attribution method side by side", open=False, elem_id="compare-methods"):
            gr.Markdown("For the sentence above: one row per attribution method (attention, rollout, attention "
                        "flow, attention norm, ALTI, value zeroing, saliency, gradient × input, integrated gradients, "
                        "the leave-one-out drop LOO-drop: ŷ_c(x) − ŷ_c(x₋t), Li et al. 2016 §3, not the LOO-TVD "
                        "above), each on its own colour scale; methods that need transformer layers are "
                        "listed as not shown for the other models.")
            compare_button = gr.Button("Compare the methods", elem_id="compare")
            methods = gr.HTML(label="Attribution methods", elem_id="methods")
        with gr.Accordion("All values (JSON)", open=False):
            values = gr.JSON(label="explanation")
        gr.Examples(examples_for(cache, initial_model), inputs=[text])

        outputs = [prediction, summary, heatmaps, permutations, values]
        # A failed request clears the previous results (they would otherwise stay under the new
        # sentence or model), and a failed load clears the "Loaded …" line.
        loaded = load_button.click(describe_model, inputs=[model_name], outputs=[model_status], api_name="load_model")
        loaded.failure(lambda: "", outputs=[model_status], api_visibility="private", queue=False)
        loaded.success(sentence_box, inputs=[model_name], outputs=[text], api_visibility="private")
        inputs = [model_name, text, eps, steps, seed, ig, shares]
        explained = explain_button.click(explain, inputs=inputs, outputs=outputs,
                                         api_name="explain", concurrency_limit=explain_workers,
                                         concurrency_id="explain")
        submitted = text.submit(explain, inputs=inputs, outputs=outputs,
                                api_visibility="private", concurrency_limit=explain_workers,
                                concurrency_id="explain")
        for event in (explained, submitted):
            event.failure(clear_outputs, outputs=outputs, api_visibility="private", queue=False)
        compared = compare_button.click(compare, inputs=[model_name, text], outputs=[methods],
                                        api_name="compare_methods", concurrency_limit=compare_workers,
                                        concurrency_id="compare_methods")
        compared.failure(lambda: "", outputs=[methods], api_visibility="private", queue=False)
        for changed in (text, model_name):  # the comparison shown is always the current sentence's
            changed.change(lambda: "", outputs=[methods], api_visibility="private", queue=False)
        if initial_model:
            opened = demo.load(describe_model, inputs=[model_name], outputs=[model_status], api_visibility="private")
            opened.success(sentence_box, inputs=[model_name], outputs=[text], api_visibility="private")
    return demo


def queued(demo: gr.Blocks) -> gr.Blocks:
    """``demo`` with its bounded queue: at most ``HF_ATTN_QUEUE_SIZE`` requests waiting in all
    (default 32: Gradio refuses any more at once), loading a model one at a time; explanations and
    comparisons each take turns through their :class:`~hf_attn.app.space.RequestGate` (one at a
    time, a few waiting at most 30 s, any more refused at once with one line)."""
    return demo.queue(max_size=int(os.environ.get("HF_ATTN_QUEUE_SIZE", "32")), default_concurrency_limit=1)


def launch(demo: gr.Blocks, **kwargs) -> None:
    """Serve ``demo`` with its bounded queue (:func:`queued`) and errors shown to the visitor.
    Host/port: Gradio reads ``GRADIO_SERVER_NAME`` / ``GRADIO_SERVER_PORT`` itself; never share=True."""
    queued(demo).launch(share=False, show_error=True, **kwargs)


class OneLineFormatter(logging.Formatter):
    """Log records as single lines: an exception adds ``: Type: message``, never a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text
        exc = record.exc_info[1] if record.exc_info else None
        record.exc_info, record.exc_text = None, None
        try:
            line = super().format(record)
        finally:
            record.exc_info, record.exc_text = saved
        if exc is not None:
            line += f": {type(exc).__name__}: {exc}"
        return _one_line(line)


NO_MODEL_MESSAGE = ("no model to serve: set HF_ATTN_MODEL to a Hub model id (USER/NAME) or a model folder, "
                    "or add space_config.json (hf-attn push-space --model USER/NAME)")


def startup(app_dir=APP_DIR) -> tuple[ModelPolicy, ModelCache, str]:
    """The operator's policy, a cache holding the first model (loaded now) and why it is served;
    ValueError with one line when there is no model or the first one cannot be loaded."""
    policy = model_policy(app_dir)
    if not policy.models:
        raise ValueError(NO_MODEL_MESSAGE)
    initial = policy.models[0]
    cache = ModelCache(policy)
    shown = next(name for name, model in display_names(policy.models).items() if model == initial)
    try:
        cache.get(initial)
    except ExplainError as err:
        raise ValueError(f"cannot serve {shown}: {_one_line(err)}") from None
    return policy, cache, model_source(initial, app_dir)


def main() -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(OneLineFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    # One sentence means tiny tensors: a single intra-op thread is much faster than a contended pool
    # (measured: 0.46 s vs 8 s for the 500-step adversary on 2 busy cores).
    torch.set_num_threads(int(os.environ.get("HF_ATTN_TORCH_THREADS", "1")))
    try:
        policy, cache, because = startup()
    except ValueError as err:
        print(f"hf_attn explorer: {err}", file=sys.stderr)
        sys.exit(2)
    launch(build_demo(policy, policy.models[0], cache, served_because=because))


if __name__ == "__main__":
    main()
