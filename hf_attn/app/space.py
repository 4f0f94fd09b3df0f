"""The explorer Space's own side: its request limits and its explain calls (its policy and model
cache are :mod:`hf_attn.app.models`, whose names are re-exported here). Everything it
shows is computed by :meth:`hf_attn.explainer.Explainer.explain` (the one explanation object,
:class:`hf_attn.explanation.SentenceExplanation`) and drawn by :mod:`hf_attn.explanation.render`, as in
a notebook; the Gradio page itself is ``spaces_app/app.py``.

- :func:`explain_sentence`: the main view (a visitor's sentence, checked, then ``Explainer.explain``
  on the model's adapter); :func:`compare_methods`: every attribution method side by side
  (``Explainer.attributions`` within a time budget). Any classifier the engine accepts is served:
  hf_attn's own models and transformers sequence classifiers; which attention rows are explained is
  said from the adapter's facts (:func:`explained_attention`).
- the input limit is the model's (:func:`model_max_tokens`: ``config.max_tokens``, a transformer's
  position table, at most :data:`MAX_TOKENS_LIMIT`), counted in the visitor's own tokens: the special
  tokens the model's tokenizer adds do not count (:func:`special_token_count`), and a longer sentence
  is refused, never cut; :func:`load_model`, :func:`find_local_model` and :func:`default_model` pick
  the model the app opens.
- the settings: the defaults are :class:`hf_attn.explanation.settings.ExplainSettings`' (the same as
  ``Explainer.explain`` and ``hf-attn explain``: one sentence gives the same numbers in all three
  views); the Space only bounds them more tightly for visitors (:data:`INT_LIMITS`).

The explorer runs as a public Space, so everything a visitor sends is untrusted:

- models (:mod:`hf_attn.app.models`): a :class:`ModelPolicy` (the operator's allow-list, :func:`model_policy`) decides which names
  may be opened at all, with one message for every refused name (so the app does not reveal which
  server paths exist); models are loaded only through hf_attn's own classes or transformers' own
  classes for the config's ``model_type`` (never remote code, never pickled weights);
  :class:`ModelCache` keeps at most a few; a visitor's Hub model is bounded in bytes before it is
  downloaded and visitors' downloads on disk in all (:class:`VisitorDownloads`);
- numbers: :func:`check_settings` bounds every numeric setting (steps, k, permutations, ε, …) on the
  server, whatever the widget allowed, so one request cannot keep a worker busy for hours;
- time: each request has a budget held inside its computations (:mod:`hf_attn.core.deadline`:
  :data:`EXPLAIN_SECONDS`, :data:`COMPARE_SECONDS`), and :class:`RequestGate` bounds how many
  requests run and wait, and for how long.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import weakref

import numpy as np

from hf_attn.app.models import (HUB_FILES, NOT_ALLOWED_MESSAGE, ExplainError, ModelCache,  # noqa: F401 (re-exported)
                                ModelNotAllowed, ModelPolicy, VisitorDownloads, _split_names, configured_models,
                                default_model, find_local_model, is_hub_id, load_model, model_policy,
                                names_hub_repo, quick_model_dir, train_quick_model)
from hf_attn.batteries.faithfulness import FaithfulnessSettings
from hf_attn.core import deadline
from hf_attn.explainer import explained_attention as adapter_explained_attention
from hf_attn.explanation import SentenceExplanation
from hf_attn.explanation.settings import DEFAULT_SETTINGS, ExplainSettings

LOGGER = logging.getLogger(__name__)

# Server-side bounds of every numeric setting of explain_sentence (name: (lowest, highest)). A visitor
# can call the API with any number, and the cost grows with k · steps and the permutations: these keep
# the worst request to seconds. The app's widgets show the same bounds.
# The defaults are ExplainSettings' (DEFAULT_SETTINGS); "steps" is its adversary_steps.
INT_LIMITS = {"steps": (0, 2000), "k": (1, 20), "num_permutations": (1, 1000), "seed": (0, 2**31 - 1),
              "ig_steps": (1, 200), "max_tokens": (1, 512)}
FLOAT_LIMITS = {"eps": (0.0, 1.0), "lam": (0.0, 1e5), "lr": (1e-6, 10.0)}
# The longest sentence explained: the model's config.max_tokens (hf_attn's default is 512), never more
# than this bound of the server's work.
MAX_TOKENS_LIMIT = INT_LIMITS["max_tokens"][1]
# Checked before tokenising (the token limit alone would tokenise any text first); generous enough
# that the token limit, not this one, stops any real sentence (512 tokens of English take ~2,500).
MAX_TEXT_CHARS = 20000


def _number_text(number: float) -> str:
    """A short rendering for messages: whole numbers in full (2000, 10000000), others with %g."""
    return str(int(number)) if number.is_integer() and abs(number) < 1e15 else f"{number:g}"


def _bounded(name: str, value, low: float, high: float, integer: bool) -> int | float:
    """``value`` as an int/float within [low, high]; :class:`ExplainError` naming ``name`` otherwise."""
    kind = "a whole number" if integer else "a number"
    span = f"from {_number_text(float(low))} to {_number_text(float(high))}"
    if value is None:
        raise ExplainError(f"{name} is missing: it must be {kind} {span}.")
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ExplainError(f"{name} must be {kind} {span} (got a {type(value).__name__}).")
    number = float(value)
    if not math.isfinite(number):
        raise ExplainError(f"{name} must be a finite number {span} (got {number}).")
    if integer and not number.is_integer():
        raise ExplainError(f"{name} must be a whole number {span} (got {number:g}).")
    if not low <= number <= high:
        raise ExplainError(f"{name} must be {span} (got {_number_text(number)}).")
    return int(value) if integer else number


D = DEFAULT_SETTINGS  # the defaults of every view


def check_settings(*, num_permutations=D.num_permutations, k=D.k, lam=D.lam, eps=D.eps, steps=D.adversary_steps,
                   lr=D.lr, seed=D.seed, ig=D.ig, ig_steps=D.ig_steps, max_tokens=None) -> dict:
    """The settings of :func:`explain_sentence` (defaults: :class:`~hf_attn.explanation.settings.ExplainSettings`'),
    checked against :data:`INT_LIMITS` and :data:`FLOAT_LIMITS` and returned as plain ints/floats
    (``ig``: True or False). Raises :class:`ExplainError` (a message for the visitor naming the setting
    and its range) for a missing, non-numeric, non-finite, fractional (integer settings) or
    out-of-range value. ``max_tokens=None`` (the model's own limit) stays None."""
    if not isinstance(ig, (bool, np.bool_)):
        raise ExplainError(f"ig (integrated gradients) must be on or off (True or False), got {ig!r}.")
    given = dict(num_permutations=num_permutations, k=k, lam=lam, eps=eps, steps=steps, lr=lr, seed=seed,
                 ig_steps=ig_steps, max_tokens=max_tokens)
    checked = {"ig": bool(ig)}
    for name, value in given.items():
        if name == "max_tokens" and value is None:
            checked[name] = None
            continue
        integer = name in INT_LIMITS
        low, high = INT_LIMITS[name] if integer else FLOAT_LIMITS[name]
        checked[name] = _bounded(name, value, low, high, integer)
    return checked


def _encode(tokenizer, text: str):
    """``(ids, offsets or None, special-token flags)`` of ``text``."""
    from hf_attn.adapters.contract import encode_as_text  # typed "[CLS]" is text, as the adapter reads it

    try:
        encoded = encode_as_text(tokenizer, text, add_special_tokens=True, truncation=False,
                                 return_offsets_mapping=True, return_special_tokens_mask=True)
        offsets = encoded["offset_mapping"]
    except (NotImplementedError, ValueError, TypeError, KeyError):  # a tokenizer without offsets
        encoded = encode_as_text(tokenizer, text, add_special_tokens=True, truncation=False,
                                 return_special_tokens_mask=True)
        offsets = None
    ids = list(encoded["input_ids"])
    special = [bool(f) for f in encoded.get("special_tokens_mask", [0] * len(ids))]
    return ids, offsets, special


def special_token_count(tokenizer) -> int:
    """How many special tokens ``tokenizer`` adds to one sentence ([CLS] and [SEP]: 2; BART's <s>
    and </s>: 2; T5's </s>, Llama's <s>: 1; GPT-2, Bloom: 0), from the tokenizer itself."""
    try:
        return int(tokenizer.num_special_tokens_to_add(pair=False))
    except (NotImplementedError, AttributeError, TypeError):  # a tokenizer without the count: encode nothing
        return len(tokenizer("", add_special_tokens=True)["input_ids"])


def model_input_limit(model, tokenizer) -> int:
    """The most tokens, special tokens included, the explorer gives ``model``: its
    ``config.max_tokens`` (the forward refuses more), for a transformers classifier the limit its
    adapter cuts at (:func:`hf_attn.adapters.contract.model_token_limit`: the position table, the
    tokenizer's ``model_max_length``), at most :data:`MAX_TOKENS_LIMIT`."""
    from hf_attn.adapters.contract import model_token_limit

    if is_transformer_model(model):
        limit = model_token_limit(model, tokenizer, MAX_TOKENS_LIMIT)
    else:
        limit = getattr(getattr(model, "config", None), "max_tokens", None)
    return min(int(limit), MAX_TOKENS_LIMIT) if limit else MAX_TOKENS_LIMIT


def model_max_tokens(model, tokenizer) -> int:
    """The longest sentence the explorer takes for ``model``, in the tokens of the visitor's text:
    :func:`model_input_limit` less the special tokens the tokenizer adds (:func:`special_token_count`),
    so that nothing the visitor typed is ever cut."""
    return max(model_input_limit(model, tokenizer) - special_token_count(tokenizer), 1)


def is_transformer_model(model) -> bool:
    """A transformers classifier (explained through its adapter), not one of hf_attn's own models."""
    from hf_attn.batteries.data import OWN_MODEL_TYPES

    return getattr(getattr(model, "config", None), "model_type", None) not in (None, *OWN_MODEL_TYPES)


_ADAPTERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _adapter_of(model, tokenizer):
    """One adapter per loaded model (building it probes the model once)."""
    from hf_attn.adapters import adapter_for

    adapter = _ADAPTERS.get(model)
    if adapter is None or adapter.tokenizer is not tokenizer:
        try:
            adapter = _ADAPTERS[model] = adapter_for(model, tokenizer, device="cpu")
        except ValueError as err:  # a model the engine refuses: the reason, in one line, for the visitor
            raise ExplainError(f"This model cannot be explained here: {' '.join(str(err).split())}") from None
    return adapter


NOTHING_TO_EXPLAIN = ("Nothing to explain: the text holds no words, only spaces or invisible characters "
                      "(zero-width spaces, joiners, control characters).")


def _checked_sentence(model, tokenizer, text: str, max_tokens: int | None):
    """``(ids, offsets, special flags, token limit)`` of a visitor's ``text``; :class:`ExplainError`
    (one line for the visitor) for empty text, text of only invisible characters, more than
    :data:`MAX_TEXT_CHARS` characters, no token of its own, or more tokens than the limit
    (``max_tokens``, at most the model's :func:`model_max_tokens`). The count is of the text's own
    tokens: the whole encoding less the special tokens this model's tokenizer adds (none for GPT-2,
    one for Llama or T5, two for BERT), so the sentence explained is always the whole sentence."""
    from hf_attn.adapters.base import _nothing_to_explain

    if not isinstance(text, str) or not text.strip():
        raise ExplainError("Please type a sentence: the text is empty.")
    if len(text) > MAX_TEXT_CHARS:
        raise ExplainError(f"The text is too long: {len(text)} characters, the limit is {MAX_TEXT_CHARS}. "
                           "Please shorten it.")
    if _nothing_to_explain(text):
        raise ExplainError(NOTHING_TO_EXPLAIN)
    ids, offsets, special = _encode(tokenizer, text)
    own = len(ids) - special_token_count(tokenizer)
    if own <= 0 or all(special):
        raise ExplainError("Nothing to explain: the sentence has no tokens of its own after tokenisation "
                           "(only punctuation or spaces?).")
    limit = model_max_tokens(model, tokenizer)
    limit = limit if max_tokens is None else min(max_tokens, limit)
    if own > limit:
        unit = "word pieces" if is_transformer_model(model) else "tokens"
        raise ExplainError(f"The sentence is too long: {own} {unit}, the limit is {limit}. Please shorten it.")
    return ids, offsets, special, limit


def explained_attention(model, tokenizer) -> str:
    """Which attention is explained for a transformers classifier, from its adapter's facts
    (:func:`hf_attn.explainer.explained_attention`)."""
    return adapter_explained_attention(_adapter_of(model, tokenizer))


# Time budget of one explanation (the main view), enforced inside its computations; one that needs
# more is refused with one line. MiniLM-L6 on one CPU thread: ~18 s at 128 word pieces, ~130 s at 507.
EXPLAIN_SECONDS = 60.0


def explain_sentence(model, tokenizer, text: str, max_tokens: int | None = None,
                     num_permutations: int = D.num_permutations, k: int = D.k, lam: float = D.lam,
                     eps: float = D.eps, steps: int = D.adversary_steps, lr: float = D.lr, seed: int = D.seed,
                     ig: bool = D.ig, ig_steps: int = D.ig_steps,
                     seconds: float = EXPLAIN_SECONDS) -> SentenceExplanation:
    """The Space's main view of one sentence: the visitor's request checked against the Space's limits
    (settings within :data:`INT_LIMITS` / :data:`FLOAT_LIMITS`, :func:`check_settings`; the text within
    :data:`MAX_TEXT_CHARS` characters and the model's token limit, ``max_tokens`` at most
    :func:`model_max_tokens`), then :meth:`hf_attn.explainer.Explainer.explain` on the model's adapter
    (one per loaded model) with the same :class:`~hf_attn.explanation.settings.ExplainSettings` (its
    defaults unless the visitor changed one; ``steps`` is its ``adversary_steps``): the same
    :class:`hf_attn.explanation.SentenceExplanation` a notebook and ``hf-attn explain`` show,
    integrated gradients included (``ig=False`` leaves them out). Raises :class:`ExplainError` with a
    message meant for the visitor. Seeded: the same call gives the same permutations and adversaries.
    The whole explanation, integrated gradients included, runs within ``seconds`` (enforced inside its
    computations, :mod:`hf_attn.core.deadline`); one that would take longer is refused with one line
    naming what to lower (an explanation is one whole: no part of it is shown)."""
    from hf_attn.explainer import Explainer

    checked = check_settings(num_permutations=num_permutations, k=k, lam=lam, eps=eps, steps=steps, lr=lr,
                             seed=seed, ig=ig, ig_steps=ig_steps, max_tokens=max_tokens)
    settings = ExplainSettings(ig=checked["ig"], ig_steps=checked["ig_steps"], k=checked["k"],
                               adversary_steps=checked["steps"], eps=checked["eps"], lam=checked["lam"],
                               lr=checked["lr"], num_permutations=checked["num_permutations"], seed=checked["seed"])
    ids, *_, limit = _checked_sentence(model, tokenizer, text, checked["max_tokens"])
    model.eval()
    explainer = Explainer.from_adapter(_adapter_of(model, tokenizer))
    try:
        with deadline.time_budget(seconds, "this request"):
            explanation = explainer.explain([text], settings)[0]
    except deadline.BudgetExceeded:
        unit = "word pieces" if is_transformer_model(model) else "tokens"
        lower = "the optimisation steps" + (" or switch off integrated gradients" if settings.ig else "")
        raise ExplainError(f"This explanation would take longer than the {seconds:g} s this explorer gives one "
                           f"request ({len(ids) - special_token_count(tokenizer)} {unit} on this model): please "
                           f"shorten the sentence or lower {lower}.") from None
    explanation.max_tokens = limit
    return explanation


# ------------------------------------------------------------------ every attribution method, side by side
# The rows of the method comparison (hf_attn.batteries.faithfulness.METHODS; each method's paper and
# equation are in its module): all that take well under a second for one sentence on a CPU. Kernel
# SHAP and DeepLift (optional captum extra) and the random floor are left out.
# Cheapest first: a long sentence spends the request's time budget on the costly ones last.
COMPARE_METHODS = ("attention", "rollout", "saliency", "gradient_x_input", "attention_norm", "alti",
                   "integrated_gradients", "leave_one_out", "value_zeroing", "attention_flow")
# Time budget of one compare request, enforced inside the running methods (hf_attn.core.deadline): a
# method that runs out, or could not finish in the time left, is listed as "not run: budget" with the
# reason, and so are the methods after it.
COMPARE_SECONDS = 10.0
COMPARE_IG_STEPS = FaithfulnessSettings.ig_steps  # Gauss–Legendre nodes of integrated gradients (the table's default)


def compare_methods(model, tokenizer, text: str, max_tokens: int | None = None, seconds: float = COMPARE_SECONDS):
    """Every method of :data:`COMPARE_METHODS` on one sentence, through
    :meth:`hf_attn.explainer.Explainer.attributions` on the model's adapter (one per loaded model):
    a :class:`hf_attn.explainer.MethodAttributions` of one text, the methods that do not apply to the
    model in its ``skipped``, and so the methods the time budget (``seconds``) did not leave room
    for, as "not run: budget" with the reason; no method's scores are partial. The same input checks
    and limits as :func:`explain_sentence` (:class:`ExplainError` for the visitor)."""
    from hf_attn.explainer import Explainer

    _checked_sentence(model, tokenizer, text, max_tokens)
    model.eval()
    explainer = Explainer.from_adapter(_adapter_of(model, tokenizer))
    return explainer.attributions([text], methods=COMPARE_METHODS, ig_steps=COMPARE_IG_STEPS, time_budget=seconds)


# ------------------------------------------------------------------------------- waiting under load
# Per view (explanation, comparison): requests computed at once, requests waiting for their turn and
# the longest wait; any request beyond them is refused at once, and a request that got no turn in
# REQUEST_MAX_WAIT seconds is refused then, so a visitor waits at most that long, never minutes.
MAX_REQUEST_WAIT = 86_400.0  # seconds: RequestGate's max_wait is finite, at most a day
REQUEST_RUNNING = 1
REQUEST_WAITING = 8
REQUEST_MAX_WAIT = 30.0
BUSY_MESSAGE = ("The explorer is busy with other visitors' requests right now; please try again in a "
                "minute.")


class RequestGate:
    """At most ``running`` requests computed at once and at most ``waiting`` more waiting for their
    turn, each for at most ``max_wait`` seconds; any other request is refused at once with
    :data:`BUSY_MESSAGE` (an :class:`ExplainError`), so under load a visitor either gets a turn
    within a bounded time or a clear message, never minutes in a queue. Thread-safe."""

    def __init__(self, running: int = REQUEST_RUNNING, waiting: int = REQUEST_WAITING,
                 max_wait: float = REQUEST_MAX_WAIT):
        from hf_attn.core.validation import check_number, check_whole

        # whole numbers (NumPy integers accepted), and a finite wait of at most a day: an infinite or
        # huge one would not bound the wait and overflows the lock's timeout
        running = check_whole("running", running, 1)
        waiting = check_whole("waiting", waiting, 0)
        max_wait = check_number("max_wait", max_wait, 0.0, MAX_REQUEST_WAIT, low_open=True)
        self.running, self.waiting, self.max_wait = running, waiting, float(max_wait)
        self._turns = threading.BoundedSemaphore(running)
        self._lock = threading.Lock()
        self._waiters = 0

    @property
    def capacity(self) -> int:
        """Requests the gate holds at once: computed and waiting."""
        return self.running + self.waiting

    @contextlib.contextmanager
    def turn(self):
        """Wait for a turn (the body then runs as one of the ``running``); :class:`ExplainError` with
        :data:`BUSY_MESSAGE` when ``waiting`` others already wait or no turn came in ``max_wait``."""
        if self._turns.acquire(blocking=False):
            got = True
        else:
            with self._lock:
                if self._waiters >= self.waiting:
                    raise ExplainError(BUSY_MESSAGE)
                self._waiters += 1
            try:
                got = self._turns.acquire(timeout=self.max_wait)
            finally:
                with self._lock:
                    self._waiters -= 1
        if not got:
            raise ExplainError(BUSY_MESSAGE)
        try:
            yield
        finally:
            self._turns.release()


__all__ = ["explain_sentence", "compare_methods", "explained_attention", "ExplainError", "ModelNotAllowed",
           "check_settings", "INT_LIMITS", "FLOAT_LIMITS", "MAX_TEXT_CHARS", "MAX_TOKENS_LIMIT", "COMPARE_METHODS",
           "COMPARE_SECONDS", "EXPLAIN_SECONDS", "BUSY_MESSAGE", "NOTHING_TO_EXPLAIN", "RequestGate",
           "model_max_tokens", "model_input_limit", "special_token_count", "is_transformer_model",
           "NOT_ALLOWED_MESSAGE", "is_hub_id", "names_hub_repo", "ModelPolicy", "model_policy", "configured_models",
           "load_model", "ModelCache", "VisitorDownloads", "find_local_model", "default_model", "train_quick_model"]
