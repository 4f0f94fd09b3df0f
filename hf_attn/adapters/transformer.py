"""The adapter for any ``transformers`` ``*ForSequenceClassification`` whose attention goes through
transformers' attention interface (BERT, RoBERTa, XLM-R, ELECTRA, DistilBERT, ALBERT, ModernBERT,
GPT-2, Llama, Qwen2, Mistral, …).

What it finds out when it is built (:meth:`TransformersAdapter._probe`, one tiny forward; the set-up
checks live in :mod:`hf_attn.adapters.transformer_probe`):

- the **layers**: attention calls are counted in forward order (call i = layer i);
- the **query rows** the classification head reads: the rows of the last layer's output through
  which the logits have a non-zero gradient — the first position (``[CLS]``-pooled encoders), the
  last non-pad token (decoders), or every real row (mean-pooled heads such as ModernBERT with
  ``classifier_pooling="mean"``);
- that an intervention **really changes** the logits: a one-hot row on the explained layer must
  move them, or the model is refused (an override that silently does nothing is the failure this
  guards against);
- whether the **exact fast path** applies (below), checked against the full forward.

Padding: encoders are padded on the right; decoders on the left, with position ids counted from
each sentence's first token, so every instance gets the logits it has alone (the classifier of
a decoder reads the last position, which left padding makes the last real token for the
``input_ids`` and the ``inputs_embeds`` paths alike).

The exact fast path (last layer, one query row): everything before the last layer and the last
layer's values do not depend on the last layer's query row, so the logits under a replaced row are
computed by re-running the model on the query position alone, with the earlier layers replaced by
their cached output at that position and the attention of the last layer returning
``weights @ V`` over the cached values (:func:`hf_attn.adapters.interface.intervened_attention`,
query-only mode). The rest of the last layer and the head then run for one position instead of T,
in any architecture, with the architecture's own modules.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from hf_attn.adapters.base import AttentionSpec, Batch, Forward, UnsupportedModelError, checked_texts
from hf_attn.adapters.contract import check_adapter_counts, check_model_contract, model_token_limit, tokenize_texts
from hf_attn.core.batching import forward_tokens
from hf_attn.adapters.device import (autocast, check_weights_dtype, dtype_name, running_dtype, frozen_parameters, resolve_device,
                                    resolve_precision)
from hf_attn.adapters.interface import INTERVENTION_KWARG, Intervention, active
from hf_attn.adapters.readout import model_lock, pruned_model_call, read_rows, replaying
from hf_attn.adapters.placement import input_device, map_summary, placed_by_map, replaced_forwards, to_device
from hf_attn.adapters.streaming import forward_maps
# the set-up checks (the adapter's mixin); the names stay importable from here
from hf_attn.adapters.transformer_probe import PROBE_TEXT, TransformersProbe, _first_tensor, _INSTEAD, _quiet  # noqa: F401


@dataclass
class _Cache:
    """What the fast path reuses from the unmodified forward: the last layer's values
    ``(B, H, T, d)``, its input at the query row ``(B, D)`` and the query position ``(B,)``."""

    values: torch.Tensor
    hidden: torch.Tensor
    position: torch.Tensor


@dataclass
class _Prefix:
    """What the layer replay reuses where the query-only fast path does not apply: the explained
    layer's input ``(B, T, D)`` from the unmodified forward (the layers before it do not depend on
    its attention, so a replaced row re-runs only the explained layer and those after it)."""

    hidden: torch.Tensor


def _right_aligned_rows(ids: torch.Tensor, mask: torch.Tensor, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows whose real tokens are contiguous (either padding side) → left-padded rows."""
    real = mask.bool()
    steps = ids.shape[1]
    lengths = real.sum(1, keepdim=True)
    first = torch.where(real, torch.arange(steps, device=ids.device), steps).min(1, keepdim=True).values
    target = torch.arange(steps, device=ids.device).unsqueeze(0)
    source = (first + target - (steps - lengths)).clamp(0, steps - 1)
    keep = target >= steps - lengths
    new_ids = torch.where(keep, ids.gather(1, source), torch.full_like(ids, pad_id))
    return new_ids, keep.to(mask.dtype)


class TransformersAdapter(TransformersProbe):
    """Adapter over a ``transformers`` sequence classifier (see the module docstring).

    ``model``, ``tokenizer`` (a fast tokenizer: word ids come from its offsets); ``spec``: which
    attention is explained; ``device``: ``"auto" | "cpu" | "cuda" | "mps"``; ``precision``:
    ``"float32" | "bfloat16" | "float16"`` for the forwards (autocast; results in float32): the model's
    weights must be float32 or of that precision, never silently converted
    (:func:`hf_attn.adapters.device.check_weights_dtype`; :meth:`describe` reports both);
    ``token_budget``: padded tokens per forward when many rows are scored at once; ``max_length``:
    tokens per text, at most the model's own limit (:func:`hf_attn.adapters.contract.model_token_limit`);
    longer texts are cut with a :class:`~hf_attn.adapters.contract.TruncationWarning`, keeping the
    start for encoders and the end for decoders (the token their head reads). Regression and
    multi-label models are refused (:func:`hf_attn.adapters.contract.check_model_contract`).
    ``prune_readout``: forwards that only want the logits run the last layer for the row the head
    reads (:mod:`hf_attn.adapters.readout`), where the check at set-up finds the logits and gradients
    unchanged; ``False`` keeps the whole forward (``describe()`` says which, and why). The
    model is moved to the device, put in eval mode and switched to the intervention attention
    implementation in place."""

    def __init__(self, model, tokenizer, spec: AttentionSpec | None = None, device="auto", precision="float32",
                 token_budget: int = 8192, max_length: int | None = 512, prune_readout: bool = True):
        if not getattr(tokenizer, "is_fast", False):
            raise UnsupportedModelError(f"{type(tokenizer).__name__} is not a fast tokenizer: word spans need the "
                                        "offsets of a tokenizers-backed tokenizer (tokenizer.json); load it with "
                                        "AutoTokenizer.from_pretrained(..., use_fast=True)")
        token_budget, max_length = check_adapter_counts(token_budget, max_length, 2)  # within bounds, the reason told
        check_model_contract(model)
        self.spec = spec or AttentionSpec()
        # a model placed by a device_map stays where the map put it; inputs go to its embedding's device
        self.placed = placed_by_map(model)
        self.device = input_device(model, device) if self.placed else resolve_device(device)
        self.dtype = resolve_precision(precision, self.device)
        self.weights_dtype = check_weights_dtype(model, self.dtype, self.device)  # refused if it cannot run in dtype
        self.token_budget = token_budget
        self.max_length = model_token_limit(model, tokenizer, max_length)
        self.tokenizer = tokenizer
        self.model = (model if self.placed else model.to(self.device)).eval()
        self.name = getattr(model.config, "_name_or_path", "") or type(model).__name__
        self.model_type = getattr(model.config, "model_type", type(model).__name__)
        self._lock = model_lock(model)  # shared by every adapter over this model (hf_attn.adapters.readout)
        self._use_intervention_attention()
        self.pad_id = self._pad_id()
        self.pass_kwarg = True  # the intervention as a keyword argument (else only through `active`)
        self.embeds_by_hook = False  # input embeddings swapped in at the embedding module (see _model_call)
        self.embeddings_swapped = 0  # calls of the embedding module given the swapped-in embeddings
        self.prune_readout = bool(prune_readout)
        self.readout_pruning, self.readout_reason, self.readout_tuple = False, "not checked yet", False
        self.readout_calls = 0  # pruned forwards run (hf_attn.adapters.readout)
        try:
            self._probe()
        except (UnsupportedModelError, ValueError):
            raise
        except Exception as error:  # noqa: BLE001 - one line with what to do, never a raw traceback
            first = (str(error).strip().splitlines() or [""])[0][:200]
            raise UnsupportedModelError(
                f"{type(self.model).__name__} ({self.model_type}): the adapter's probe forward failed "
                f"({type(error).__name__}: {first}); check that the model runs on a plain tokenized sentence, "
                "or open an issue with its model_type") from None

    # ------------------------------------------------------------------------------------------
    # set-up helpers the forwards use (the checks are in transformer_probe.py)

    def _shift_function(self):
        """The model's own shift of the ids to the decoder's inputs, or ``None``."""
        for name in ("prepare_decoder_input_ids_from_labels", "_shift_right"):
            shift = getattr(self.model, name, None)
            if callable(shift):
                return shift
        return None

    def _decoder_inputs(self, input_ids, mask) -> torch.Tensor:
        """The decoder inputs of :meth:`_check_decoder_padding`: the model's shift of ``input_ids``, pad
        ids where ``mask`` is 0 (right padding: from the first padding position on)."""
        shifted = self._shift_function()(input_ids)
        return torch.where(mask.bool(), shifted, torch.full_like(shifted, self.pad_id))

    def _plain(self) -> Intervention | None:
        """The intervention argument of a forward that changes and records nothing, with gradients or
        without (``logits``, ``logits_from_embeddings``, ``logits_with_embedding_output``): the fused
        kernel where the adapter checked it, else ``None`` (the eager arithmetic)."""
        return Intervention(fused=True) if self.fused else None

    @contextlib.contextmanager
    def _swapped_embeddings(self, input_ids, embeds):
        """The embedding module returns ``embeds`` ``(B, T, E)`` when it is called on ``input_ids``,
        and, when it is called on ``input_ids`` shifted right by one (an encoder–decoder's decoder
        inputs), the same shift of ``embeds`` after its own first row — so the gradients to the
        input embeddings reach the logits through the encoder and the decoder alike. Every module
        holding the input embedding table is hooked (BART's shared table, T5's encoder and decoder
        copies of it); a decoder with a table of its own (T5Gemma) keeps its inputs, held fixed. A
        call on ``input_ids`` padded on the right by the model itself (Longformer pads to a multiple
        of its attention window) gets ``embeds`` for its first T rows and keeps its own for the padding.
        Every swap is counted (``embeddings_swapped``): a model that never calls the module on its ids
        is refused when the adapter is built."""
        table = self.model.get_input_embeddings()
        weight = getattr(table, "weight", None)
        modules = [table] + [m for m in self.model.modules() if m is not table and isinstance(m, torch.nn.Embedding)
                             and weight is not None and m.weight is weight]

        steps = input_ids.shape[1]

        def hook(mod, args, output):
            ids = args[0] if args else None
            if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[0] != input_ids.shape[0]:
                return output
            rows, rest = (output[0], output[1:]) if isinstance(output, tuple) else (output, None)
            swapped = to_device(embeds, rows.device)  # a dispatched model: the table's own device
            here = to_device(input_ids, ids.device)
            if ids.shape[1] > steps and torch.equal(ids[:, :steps], here):
                # the input padded on the right by the model itself (Longformer: to a multiple of its window)
                new = torch.cat([swapped.to(rows.dtype), rows[:, steps:]], 1)
            elif ids.shape[1] != steps:
                return output
            elif torch.equal(ids, here):
                new = swapped.to(rows.dtype)
            elif ids.shape[1] > 1 and torch.equal(ids[:, 1:], here[:, :-1]):
                new = torch.cat([rows[:, :1], swapped[:, :-1].to(rows.dtype)], 1)
            elif ids.shape[1] > 1 and bool(((ids[:, 1:] == here[:, :-1]) | (ids[:, 1:] == self.pad_id)).all()):
                # the decoder inputs cut at the padding (_check_decoder_padding): the cut positions keep their rows
                same = (ids[:, 1:] == here[:, :-1]).unsqueeze(-1)
                new = torch.cat([rows[:, :1], torch.where(same, swapped[:, :-1].to(rows.dtype), rows[:, 1:])], 1)
            else:
                return output
            self.embeddings_swapped += 1
            return new if rest is None else (new, *rest)

        handles = [module.register_forward_hook(hook) for module in modules]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    # ------------------------------------------------------------------------------------------
    # encoding

    def encode(self, texts, max_length: int | None = None, first_index: int = 0) -> Batch:
        """Texts → a padded :class:`Batch` on the device, each cut to ``max_length`` tokens (default
        and at most the adapter's limit) keeping the end the head reads (decoders: the end; others:
        the start), with a :class:`~hf_attn.adapters.contract.TruncationWarning` naming the texts cut
        (numbered from ``first_index``)."""
        texts = checked_texts(texts)
        limit = self.max_length if max_length is None else (
            max_length if self.max_length is None else min(max_length, self.max_length))
        sequences, word_ids = self.tokenize(texts, limit, first_index)
        return self._pad(sequences, word_ids, texts)

    @property
    def kept_end(self) -> str:
        """Which end of a long text is kept: ``"end"`` for heads that read the last token."""
        return "end" if self.pooling == "last" else "start"

    def tokenize(self, texts, limit: int | None = None, first_index: int = 0):
        """``(token id lists, word id lists)`` of ``texts`` cut to ``limit`` (default: the adapter's)
        the way :meth:`encode` cuts them (:func:`hf_attn.adapters.contract.tokenize_texts`)."""
        return tokenize_texts(self.tokenizer, list(texts), self.max_length if limit is None else limit,
                              self.kept_end, first_index)

    def from_token_lists(self, sequences, texts=None, word_ids=None) -> Batch:
        """Token id lists → a padded :class:`Batch`; content = the tokens that are not special tokens
        (``word_ids`` given: the tokens with a word)."""
        sequences = [list(map(int, s)) for s in sequences]
        if word_ids is None:
            special = set(self.tokenizer.all_special_ids)
            word_ids = [[None if t in special else j for j, t in enumerate(s)] for s in sequences]
        return self._pad(sequences, word_ids, texts)

    def batch_from_tensors(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Batch:
        """Padded ``(N, T)`` ids and mask (either padding side) → a :class:`Batch` trimmed to the
        columns some row uses, with the query rows, position ids and content (non-special tokens)
        recomputed. Encoders keep the rows' padding; for decoders every row's tokens are moved to the
        right end (left padding), whatever padding the rows came with."""
        used = attention_mask.bool().any(0).nonzero().flatten()
        if len(used) == 0:
            raise ValueError("every row is padding")
        span = slice(int(used.min()), int(used.max()) + 1)
        ids, mask = input_ids[:, span].to(self.device), attention_mask[:, span].to(self.device)
        if self.left_padding:  # decoders read the last position: move each row's tokens to the right end
            ids, mask = _right_aligned_rows(ids, mask, self.pad_id)
        special = torch.as_tensor(sorted(set(self.tokenizer.all_special_ids)), dtype=ids.dtype, device=ids.device)
        content = mask.bool() & ~torch.isin(ids, special)
        position_ids = (mask.cumsum(-1) - 1).clamp_min(0) if self.left_padding else None
        return Batch(input_ids=ids, attention_mask=mask, content=content, query=self._query_rows(mask),
                     position_ids=position_ids)

    def _pad(self, sequences, word_ids, texts) -> Batch:
        if not sequences:
            raise ValueError("no texts to encode")
        width = max(len(s) for s in sequences)
        if width == 0:
            raise ValueError("every text encodes to zero tokens")
        if self.max_length is not None and width > self.max_length:
            raise ValueError(f"a token list of {width} tokens is longer than the model's limit of "
                             f"{self.max_length} tokens (its position table); cut it first")
        count = len(sequences)
        ids = torch.full((count, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((count, width), dtype=torch.long)
        content = torch.zeros((count, width), dtype=torch.bool)
        padded_words = []
        for i, (s, w) in enumerate(zip(sequences, word_ids)):
            start = width - len(s) if self.left_padding else 0
            ids[i, start:start + len(s)] = torch.as_tensor(s, dtype=torch.long)
            mask[i, start:start + len(s)] = 1
            content[i, start:start + len(s)] = torch.as_tensor([x is not None for x in w], dtype=torch.bool)
            padded_words.append([None] * start + list(w) + [None] * (width - start - len(s)))
        query = self._query_rows(mask)
        position_ids = (mask.cumsum(-1) - 1).clamp_min(0) if self.left_padding else None
        device = self.device
        return Batch(input_ids=ids.to(device), attention_mask=mask.to(device), content=content.to(device),
                     query=query.to(device), position_ids=None if position_ids is None else position_ids.to(device),
                     word_ids=padded_words, texts=None if texts is None else list(texts))

    def _query_rows(self, mask: torch.Tensor) -> torch.Tensor:
        if self.query_rule == "mean":
            return mask.bool()
        positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
        return positions == read_rows(mask, self.query_rule).unsqueeze(1)

    def tokens(self, batch: Batch, index: int) -> list[str]:
        """The content tokens of instance ``index`` as strings."""
        ids = batch.input_ids[index][batch.content[index]].tolist()
        return self.tokenizer.convert_ids_to_tokens(ids)

    # ------------------------------------------------------------------------------------------
    # forwards

    def _takes_position_ids(self) -> bool:
        """Whether the model's forward takes ``position_ids`` (models with relative positions only,
        such as XLNet, take none: left padding changes nothing for them)."""
        import inspect

        if not hasattr(self, "_position_ids_taken"):
            parameters = inspect.signature(self.model.forward).parameters
            self._position_ids_taken = "position_ids" in parameters or any(
                p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        return self._position_ids_taken

    @contextlib.contextmanager
    def _last_position_pooling(self, always: bool = False):
        """A decoder classifier without a pad token refuses several rows ("Cannot handle batch sizes
        > 1 if no padding token is defined") although the adapter pads on the left, so every row's
        last position is its last real token, the one the head reads. For the call, its
        ``config.pad_token_id`` is set to −1, an id no input holds: the head then reads the last
        position of every row, as it does for one row; the config is restored after. ``always``:
        also for a model with a pad token (:meth:`logits_at_last_position`)."""
        config = self.model.config
        has_pad = getattr(config, "pad_token_id", 0) is not None
        if not getattr(self, "left_padding", False) or (has_pad and not always):
            yield
            return
        with self._lock:
            saved = config.pad_token_id
            config.pad_token_id = -1
            try:
                yield
            finally:
                config.pad_token_id = saved

    def _model_call(self, input_ids, mask, embeds, intervention, position_ids=None, prune: bool = False, **kwargs):
        """One forward: from ``input_ids``, or from input embeddings ``embeds`` (``input_ids`` then
        also given where the model needs them: :meth:`_swapped_embeddings`), with ``intervention``
        passed as a keyword argument and held in :func:`~hf_attn.adapters.interface.active`.
        ``prune``: the caller reads only the logits and passes no intervention or the plain one, so
        the last layer may run for the row the head reads alone where the adapter checked it
        (:mod:`hf_attn.adapters.readout`)."""
        if prune and self.readout_pruning and not kwargs:
            out = pruned_model_call(self, input_ids, mask, embeds, intervention, position_ids)
            if out is not None:
                return out
        if self.model.training:  # analyses always run the model in eval mode (no dropout)
            self.model.eval()
        inputs = {"attention_mask": mask}
        if self.pass_kwarg:
            inputs[INTERVENTION_KWARG] = intervention
        swap = contextlib.nullcontext()
        if embeds is not None and embeds.is_leaf and embeds.requires_grad:
            embeds = embeds.clone()  # some models scale their inputs_embeds in place (CTRL)
        if embeds is not None and self.embeds_by_hook:
            if input_ids is None:
                raise ValueError(f"{type(self.model).__name__} takes no input embeddings: pass the ids with them")
            inputs["input_ids"] = input_ids
            swap = self._swapped_embeddings(input_ids, embeds)
        elif embeds is not None:
            inputs["inputs_embeds"] = embeds
        else:
            inputs["input_ids"] = input_ids
        if position_ids is not None and self._takes_position_ids():
            inputs["position_ids"] = position_ids
        if getattr(self, "decoder_padding", False):
            if input_ids is None:
                raise ValueError(f"{type(self.model).__name__}: its decoder inputs are made from the ids: pass them")
            inputs["decoder_input_ids"] = self._decoder_inputs(input_ids, mask)
        if getattr(self.model.config, "use_cache", None) is not None:
            inputs["use_cache"] = False
        with autocast(self.device, self.dtype), active(intervention), swap, self._last_position_pooling():
            try:
                out = self.model(**inputs, **kwargs)
            except TypeError as error:  # a forward without **kwargs: the intervention goes through `active`
                if not self.pass_kwarg or INTERVENTION_KWARG not in str(error):
                    raise
                self.pass_kwarg = False
                inputs.pop(INTERVENTION_KWARG)
                out = self.model(**inputs, **kwargs)
        if self.placed and isinstance(getattr(out, "logits", None), torch.Tensor):
            out.logits = to_device(out.logits, self.device)  # a dispatched model's head may sit on another device
        return out

    @torch.no_grad()
    def logits(self, batch: Batch, prune: bool = True) -> torch.Tensor:
        """``(B, C)`` logits of the unmodified model, in chunks of the token budget; ``prune=False``:
        the whole forward even where read-out pruning applies (a check of what the head reads)."""
        out = []
        for rows in self._chunks(len(batch), batch.input_ids.shape[1]):
            out.append(self._model_call(batch.input_ids[rows], batch.attention_mask[rows], None, self._plain(),
                                        self._positions(batch, rows), prune=prune).logits.float())
        return torch.cat(out)

    @torch.no_grad()
    def logits_at_last_position(self, batch: Batch) -> torch.Tensor:
        """``(B, C)`` logits of :meth:`logits` with a head that reads the last token reading every
        row's last real position whatever ids the row holds. Such a head (GPT-2, Llama, Qwen2, …)
        looks for the last id that is not the pad id; in an input whose ids are all the pad id
        (the soft metrics' null input, every id 0, on a model whose pad id is 0) it finds none and
        reads position 0 — padding in a left-padded batch, the first token alone. Decoders are
        padded on the left, so the last position is each row's last real token: for the call the
        head is told that no id is padding (``config.pad_token_id`` −1, restored after). Encoders
        (their head reads the first row) are unchanged."""
        with self._last_position_pooling(always=True):
            return self.logits(batch)

    def _positions(self, batch: Batch, rows):
        return None if batch.position_ids is None else batch.position_ids[rows]

    def _chunks(self, count: int, width: int):
        """Row slices of the no-gradient forwards: ``token_budget`` padded tokens each, capped on a CPU
        (:func:`hf_attn.core.batching.forward_tokens`)."""
        step = max(1, forward_tokens(self.token_budget, self.device) // max(width, 1))
        return [slice(start, start + step) for start in range(0, count, step)]

    @torch.no_grad()
    def forward(self, batch: Batch, rollout: bool = True) -> Forward:
        """The unmodified forward (one model call): logits, the explained attention, the query rows
        of every head and every layer, the rollout and the fast path's cache."""
        hidden = {}
        handle = None
        if self.fast_path or self.replay_path:
            def pre_hook(module, args, kwargs):
                hidden["in"] = args[0] if args else kwargs["hidden_states"]
            handle = self.layers[self.layer].register_forward_pre_hook(pre_hook, with_kwargs=True)
        try:
            # the maps streamed in slices of query rows where checked (hf_attn.adapters.streaming)
            out, maps = forward_maps(self, batch, rollout)
        finally:
            if handle is not None:
                handle.remove()
        head_rows, layer_rows, rolled = maps.head_rows, maps.layer_rows, maps.rollout
        attention = head_rows.mean(1) if self.spec.heads == "mean" else head_rows[:, self.spec.heads]
        cache = None
        if self.fast_path:
            position = batch.query.float().argmax(-1)
            here = hidden["in"]  # the explained layer's input, on the device of the layer before it
            rows = torch.arange(len(batch), device=here.device)
            cache = _Cache(values=maps.values, hidden=here[rows, position.to(here.device)],
                           position=position)
        elif self.replay_path:
            cache = _Prefix(hidden=hidden["in"])
        logits = to_device(out.logits.float(), self.device)
        return Forward(logits=logits, probabilities=logits.softmax(-1), attention=attention, head_rows=head_rows,
                       layer_rows=layer_rows, rollout=rolled, cache=cache)

    def logits_under(self, batch: Batch, weights: torch.Tensor, per_head: bool,
                     forward: Forward | None = None) -> torch.Tensor:
        """Logits ``(B, R, C)`` with the explained layer's query rows replaced by each of R candidate
        rows: ``weights`` ``(B, R, H, T)`` with ``per_head``, else ``(B, R, T)`` shared by the heads
        (``heads="mean"``) or replacing only the explained head (``heads=int``; the other heads keep
        their rows, taken from ``forward``). Weights must be 0 on padding keys. Differentiable in
        ``weights``. Uses the exact fast path when it applies and ``forward`` carries its cache."""
        if weights.dim() != (4 if per_head else 3):
            raise ValueError(f"weights must be (B, R, {'H, ' if per_head else ''}T), got {tuple(weights.shape)}")
        if not per_head and self.spec.heads != "mean":
            if forward is None:
                raise ValueError("replacing one head's row needs the forward's own rows of the other heads")
            own = forward.head_rows.unsqueeze(1).expand(-1, weights.shape[1], -1, -1)
            select = (torch.arange(self.num_heads, device=weights.device) == self.spec.heads).view(1, 1, -1, 1)
            weights = torch.where(select, weights.unsqueeze(2), own.to(weights.dtype))
            per_head = True
        if forward is not None and isinstance(forward.cache, _Cache) and self.fast_path:
            return self._fast_logits(batch, forward, weights if per_head else weights.unsqueeze(2))
        if forward is not None and isinstance(forward.cache, _Prefix) and self.replay_path:
            return self._full_logits(batch, weights, per_head, prefix=forward.cache.hidden)
        return self._full_logits(batch, weights, per_head)

    @torch.no_grad()
    def logits_under_every_layer(self, batch: Batch, weights: torch.Tensor) -> torch.Tensor:
        """``(B, C)`` logits with the query rows of **every** layer replaced by ``weights`` ``(B, T)``
        (every head; W&P §3.2's uniform attention everywhere)."""
        out = []
        for rows in self._chunks(len(batch), batch.input_ids.shape[1]):
            intervention = Intervention(query=batch.query[rows], weights=weights[rows], every_layer=True)
            out.append(self._model_call(batch.input_ids[rows], batch.attention_mask[rows], None, intervention,
                                        self._positions(batch, rows)).logits.float())
        return torch.cat(out)

    def _full_logits(self, batch: Batch, weights: torch.Tensor, per_head: bool,
                     prefix: torch.Tensor | None = None) -> torch.Tensor:
        """Whole forwards with the explained rows replaced; with ``prefix`` (the explained layer's
        input ``(B, T, D)``, :class:`_Prefix`) the layers before it return their cached output
        instead of computing (the layer replay)."""
        count, rows = weights.shape[:2]
        flat = weights.reshape(count * rows, *weights.shape[2:])
        expand = torch.arange(count, device=self.device).repeat_interleave(rows)
        out = []
        for chunk in self._chunks(len(expand), batch.input_ids.shape[1]):
            index = expand[chunk]
            position_ids = self._positions(batch, index)
            # the replayed layers make no attention call: counting starts at the explained layer
            intervention = Intervention(layer=self.layer, query=batch.query[index], weights=flat[chunk],
                                        calls=0 if prefix is None else self.layer)
            with contextlib.ExitStack() as stack:
                if prefix is not None:
                    stack.enter_context(self._lock)
                    stack.enter_context(self._replayed(prefix[index.to(prefix.device)]))
                out.append(self._model_call(batch.input_ids[index], batch.attention_mask[index], None, intervention,
                                            position_ids).logits.float())
        return torch.cat(out).view(count, rows, -1)

    def _fast_logits(self, batch: Batch, forward: Forward, weights: torch.Tensor) -> torch.Tensor:
        """The exact query-only forward (module docstring); ``weights`` ``(B, R, H, T)``."""
        cache: _Cache = forward.cache
        count, rows = weights.shape[:2]
        rows_index = torch.arange(count, device=self.device)
        query_ids = batch.input_ids[rows_index, cache.position]
        if self.pooling == "last" and bool((query_ids == getattr(self.model.config, "pad_token_id", -1)).any()):
            return self._full_logits(batch, weights, per_head=True)  # the head would skip a pad-valued token
        n = count * rows
        hidden = cache.hidden.repeat_interleave(rows, 0).unsqueeze(1)  # (N, 1, D)
        ids = query_ids.repeat_interleave(rows, 0).unsqueeze(1)
        mask = torch.ones_like(ids)
        positions = None
        if batch.position_ids is not None:
            positions = batch.position_ids[rows_index, cache.position].repeat_interleave(rows, 0).unsqueeze(1)
        # the replayed layers make no attention call: counting starts at the explained layer
        intervention = Intervention(layer=self.layer, weights=weights.reshape(n, *weights.shape[2:]),
                                    cached_values=cache.values, calls=self.layer)
        with self._lock, self._replayed(hidden):
            logits = self._model_call(ids, mask, None, intervention, positions).logits.float()
        return logits.view(count, rows, -1)

    @contextlib.contextmanager
    def _replayed(self, hidden: torch.Tensor, upto: int | None = None, size: int | bool | None = None):
        """The layers before the explained one (before layer ``upto`` when given) return ``hidden``
        instead of computing; ``size``: the length of the tuple such a layer returns (its hidden
        states then Nones), or False for a tensor (default: what the layer replay's check found)."""
        if size is None:
            size = getattr(self, "replay_tuple", False)  # a layer returning (hidden, None, ...): its length
        upto = self.layer if upto is None else upto
        wrapped = (hidden,) + (None,) * (size - 1) if size else hidden

        def cached(*args, **kwargs):
            return wrapped

        with replaced_forwards(list(self.layers)[:upto], cached):  # accelerate's own wrappers restored
            yield

    # ------------------------------------------------------------------------------------------
    # embeddings (gradients, integrated gradients)

    def embeddings(self, batch: Batch) -> torch.Tensor:
        """``(B, T, E)`` input embeddings (the token embedding table's rows, before position
        embeddings and normalisation)."""
        return self._table(batch.input_ids)

    def _table(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The input embedding table's rows of ``input_ids`` (I-BERT's quantised table returns them
        with a scaling factor: the rows alone)."""
        rows = self.model.get_input_embeddings()(input_ids)
        return rows[0] if isinstance(rows, tuple) else rows

    def logits_from_embeddings(self, batch: Batch, embeddings: torch.Tensor,
                               detach_attention: bool = False) -> torch.Tensor:
        """``(B, C)`` logits from input embeddings ``(B, T, E)``; with ``detach_attention`` no gradient
        flows through the explained attention rows (J&W Alg. 1 holds attention fixed). Without a
        gradient to the embeddings the forwards run in chunks of the token budget (:meth:`_chunks`;
        many perturbed copies of a long text); a caller that takes gradients sizes its own passes."""
        if embeddings.requires_grad and torch.is_grad_enabled():
            chunks = [slice(None)]
        else:
            chunks = self._chunks(len(batch), batch.input_ids.shape[1])
        head = None if self.spec.heads == "mean" else int(self.spec.heads)
        out = []
        # decoders warn that inputs_embeds hide pads (left padding); the weights need no gradient here
        with _quiet(type(self.model).__module__), frozen_parameters(self.model):
            for rows in chunks:
                intervention = self._plain() if not detach_attention else Intervention(
                    layer=self.layer, query=None if batch.query is None else batch.query[rows], detach=True, head=head)
                out.append(self._model_call(batch.input_ids[rows], batch.attention_mask[rows], embeddings[rows],
                                            intervention, self._positions(batch, rows),
                                            prune=not detach_attention).logits.float())
        return out[0] if len(out) == 1 else torch.cat(out)

    @torch.no_grad()
    def logits_with_embedding_output(self, batch: Batch, transform) -> torch.Tensor:
        """``(B, C)`` logits with the embedding layer's output ``h`` — word, position and token-type
        embeddings summed and normalised, the input of the first layer — replaced by
        ``transform(h, rows)`` (``h`` ``(b, T, E)`` for the batch rows ``rows``, a slice: forwards run
        in chunks of the token budget). Zhao & Aletras 2023 perturb the input there. Hooked on the
        base model's ``embeddings`` module when it has one (BERT family; ALBERT's narrower output
        included), else on the input of the first layer (decoders add positions inside the model)."""
        embeddings = getattr(self.model.base_model, "embeddings", None)
        if not isinstance(embeddings, torch.nn.Module) and self.layers is None:
            raise UnsupportedModelError(f"{type(self.model).__name__} has neither an embeddings module nor a list of "
                                        "layers: the embedding layer's output cannot be reached")
        out = []
        for rows in self._chunks(len(batch), batch.input_ids.shape[1]):
            if isinstance(embeddings, torch.nn.Module):
                def hook(module, args, output, rows=rows):
                    if replaying():  # a pruned forward's one-token replay: its embedding is not read
                        return None
                    if isinstance(output, tuple):
                        return (transform(output[0], rows),) + tuple(output[1:])
                    return transform(output, rows)
                handle = embeddings.register_forward_hook(hook)
            else:
                def hook(module, args, kwargs, rows=rows):
                    if replaying():
                        return None
                    if args:
                        return (transform(args[0], rows),) + tuple(args[1:]), kwargs
                    return args, {**kwargs, "hidden_states": transform(kwargs["hidden_states"], rows)}
                handle = self.layers[0].register_forward_pre_hook(hook, with_kwargs=True)
            try:
                out.append(self._model_call(batch.input_ids[rows], batch.attention_mask[rows], None, self._plain(),
                                            self._positions(batch, rows), prune=True).logits.float())
            finally:
                handle.remove()
        return torch.cat(out)

    def describe(self) -> dict:
        """What is explained, for results files and summaries."""
        heads = "mean over heads" if self.spec.heads == "mean" else f"head {self.spec.heads}"
        return {"model_type": self.model_type, "layer": self.spec.layer, "num_layers": self.num_layers,
                "num_heads": self.num_heads, "heads": self.spec.heads, "query": self.query_rule,
                "pooling": self.pooling, "padding": "left" if self.left_padding else "right",
                "fast_path": self.fast_path, "fast_path_reason": self.fast_path_reason,
                "layer_replay": self.replay_path, "layer_replay_reason": self.replay_reason,
                "readout_pruning": self.readout_pruning, "readout_pruning_reason": self.readout_reason,
                "max_length": self.max_length,
                "fused_attention": self.fused, "fused_attention_reason": self.fused_reason,
                "device": str(self.device), **({"device_map": map_summary(self.model)} if self.placed else {}),
                "precision": dtype_name(running_dtype(self.dtype, self.weights_dtype)),
                "weights_dtype": dtype_name(self.weights_dtype),
                "explained_module": self.explained_module,
                "padding_changes_logits": bool(getattr(self, "padding_changes_logits", False)),
                "attention_seam": ("hooks on the model's own attention modules (" + ", ".join(self.own_attention) + ")"
                                   if self.own_attention else "transformers' attention interface"),
                "text": f"layer {self.spec.layer}, {self.query_rule} query row(s), {heads}"}
