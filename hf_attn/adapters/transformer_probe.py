"""What :class:`~hf_attn.adapters.transformer.TransformersAdapter` finds out about a model when it is
built: the set-up half of the adapter, as a mixin it inherits (the forwards, the encoding and the
interventions stay in :mod:`hf_attn.adapters.transformer`, which re-exports the names here).

- :meth:`TransformersProbe._use_intervention_attention`: the model switched to the intervention
  attention implementation, or its own attention modules hooked (:mod:`hf_attn.adapters.own_attention`);
- :meth:`TransformersProbe._probe`: one forward of :data:`PROBE_TEXT` → the layers (attention calls in
  forward order), heads, the explained module, the rows the head reads (``pooling``: first / last /
  mean), the padding side, and the checks that an intervention changes the logits, that the exact
  fast path and the fused kernel give the eager forward's logits.

The mixin reads the adapter's own forward methods (``_model_call``, ``forward``, ``_full_logits``,
``_fast_logits``, ``_table``, ``from_token_lists``, ``_shift_function``); it is not used on its own.
"""

from __future__ import annotations

import contextlib

import torch

from hf_attn.adapters.base import UnsupportedModelError
from hf_attn.adapters.device import frozen_parameters
from hf_attn.adapters.interface import ATTN_IMPLEMENTATION, Intervention, eager_function_of, register

PROBE_TEXT = "the film is a gripping and wonderfully acted story"
# what to do instead, after the reason an architecture's attention cannot be explained
_INSTEAD = ("; use a classifier whose attention is a softmax over its tokens (docs/engine.md lists the architectures "
            "checked), or open an issue with its model_type")


@contextlib.contextmanager
def _quiet(logger_name: str):
    """transformers' loggers of one modelling module (and of the shared classifier heads) at ERROR
    level for the duration."""
    from transformers.utils import logging as hf_logging

    loggers = [hf_logging.get_logger(name) for name in (logger_name, "transformers.modeling_layers")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(hf_logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _first_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    return getattr(value, "last_hidden_state", None)


def _returned_form(output) -> int | bool | None:
    """What a layer returned, for the layer replay: ``False`` its hidden states (a tensor), the
    tuple's length for its hidden states followed by Nones, ``None`` anything else."""
    if isinstance(output, torch.Tensor):
        return False
    if (isinstance(output, tuple) and output and isinstance(output[0], torch.Tensor)
            and all(part is None for part in output[1:])):
        return len(output)
    return None


def _gap_beyond(a: torch.Tensor, b: torch.Tensor, tolerance: float) -> float | None:
    """The largest |a − b| where it exceeds ``tolerance`` × (max |b| + 1), or is not a number; else
    ``None`` (the set-up checks' comparison of a shortcut's logits with the whole forward's)."""
    gap = float((a.float() - b.float()).abs().max())
    return None if gap <= tolerance * (float(b.float().abs().max()) + 1.0) else gap


class TransformersProbe:
    """The set-up checks of :class:`~hf_attn.adapters.transformer.TransformersAdapter` (module docstring):
    each sets attributes of the adapter (``num_layers``, ``num_heads``, ``layer``, ``layers``,
    ``pooling``, ``query_rule``, ``left_padding``, ``fast_path``, ``fused``, …) or refuses the model
    with a one-line :class:`~hf_attn.adapters.base.UnsupportedModelError`."""

    def _use_intervention_attention(self) -> None:
        register()
        self.own_attention: list[str] = []  # families hooked in their own modules (own_attention.py)
        refusal = (f"{type(self.model).__name__} ({self.model_type}) does not route its attention through "
                   "transformers' attention interface, so its attention rows cannot be replaced")
        instead = ("; use a classifier of an architecture that does (docs/engine.md lists the ones checked), "
                   "or open an issue with its model_type")
        # transformers' own test of the modelling file (an attention module that calls
        # ALL_ATTENTION_FUNCTIONS.get_interface), not `_supports_attention_backend`, which only
        # declares custom kernels: many interface-routed models (BART, T5, StableLM) leave it False.
        can_set = getattr(type(self.model), "_can_set_attn_implementation", None)
        routed = can_set() if callable(can_set) else True
        try:
            with _quiet("transformers.modeling_utils"):
                self.model.set_attn_implementation(ATTN_IMPLEMENTATION)
        except (ValueError, TypeError, AttributeError, NotImplementedError) as error:
            raise UnsupportedModelError(f"{refusal} ({str(error).splitlines()[0][:200]}){instead}") from None
        if not routed or getattr(self.model.config, "_attn_implementation", None) != ATTN_IMPLEMENTATION:
            from hf_attn.adapters.own_attention import install, not_explained

            families = install(self.model)  # attention computed in the model's own modules: hooks there
            if not families:
                reason = not_explained(self.model)
                if reason:
                    raise UnsupportedModelError(f"{refusal} ({reason}){_INSTEAD}")
                raise UnsupportedModelError(f"{refusal} (its attention module computes attention itself, and hf_attn "
                                            f"has no hook for {type(self.model).__name__}'s attention class){instead}")
            self.own_attention = families

    def _pad_id(self) -> int:
        for candidate in (self.tokenizer.pad_token_id, getattr(self.model.config, "pad_token_id", None),
                          self.tokenizer.eos_token_id):
            if isinstance(candidate, int):
                return candidate
        return 0

    def _probe(self) -> None:
        self.fused, self.fused_reason = False, "not checked yet"  # eager until _check_fused says otherwise
        ids = self.tokenizer(PROBE_TEXT)["input_ids"][: self.max_length]
        if len(ids) < 3:
            raise UnsupportedModelError(f"the tokenizer turns a 9-word probe sentence into {len(ids)} tokens; "
                                        "use the tokenizer the model was trained with")
        input_ids = torch.tensor([ids], device=self.device)
        mask = torch.ones_like(input_ids)
        record: list = []
        with torch.no_grad():
            self._model_call(input_ids, mask, None, Intervention(record=record))
        if not record and self.own_attention:
            raise UnsupportedModelError(
                f"{type(self.model).__name__} ({self.model_type}): its attention modules are hooked "
                f"({', '.join(self.own_attention)}), but with this configuration they compute attention on a path "
                "without the hooked dropout, so interventions would silently do nothing; open an issue with its "
                "model_type and configuration")
        if not record:
            from hf_attn.adapters.own_attention import not_explained

            reason = not_explained(self.model)
            if reason:
                raise UnsupportedModelError(f"{type(self.model).__name__} ({self.model_type}): {reason}{_INSTEAD}")
            raise UnsupportedModelError(
                f"{type(self.model).__name__} ({self.model_type}): no attention call reached transformers' attention "
                "interface with the intervention argument, so interventions would silently do nothing; use a model "
                "whose attention modules call the interface (docs/engine.md lists the architectures checked), or open "
                "an issue with its model_type")
        from hf_attn.adapters.own_attention import is_hooked

        modules = [m for _, m, _, _ in record]
        for module in set(modules):
            if eager_function_of(module) is None and not is_hooked(module):
                raise UnsupportedModelError(f"{type(module).__name__} has no eager attention function in "
                                            f"{type(module).__module__}: its attention cannot be recomputed; open an "
                                            "issue with its model_type")
        self.num_layers = len(record)
        self.num_heads = int(record[-1][2].shape[1])
        self.layer = self.spec.layer_index(self.num_layers)
        names = {id(m): n for n, m in self.model.named_modules()}
        self.explained_module = names.get(id(record[self.layer][1]), type(record[self.layer][1]).__name__)
        heads_here = int(record[self.layer][2].shape[1])
        if self.spec.heads != "mean" and self.spec.heads >= heads_here:
            raise ValueError(f"heads={self.spec.heads}: layer {self.spec.layer} has {heads_here} heads")
        self.num_heads = heads_here
        for _, module, probs, values in record:  # the attention output must be probabilities × values
            if probs.dim() != 4 or probs.shape[-1] != input_ids.shape[1] or (
                    values is not None and values.shape[2] != input_ids.shape[1]):
                raise UnsupportedModelError(f"{type(module).__name__}: attention of shape {tuple(probs.shape)} is "
                                            "not (batch, heads, queries, keys) over the input tokens, so its rows are not "
                                            "rows over the text; open an issue with its model_type")
        self.layers = self._find_layers(modules)
        self.pooling = self._find_pooling(input_ids, mask)
        if self.spec.query == "auto":
            self.query_rule = self.pooling
        else:
            self.query_rule = self.spec.query
        # decoders are padded on the left; encoder-decoders (BART, T5) find their end-of-sentence token
        # in the ids themselves and keep their right padding
        self.left_padding = self.pooling == "last" and not getattr(self.model.config, "is_encoder_decoder", False)
        self._check_decoder_padding(input_ids)
        self.fast_path = self.replay_path = self.replay_tuple = False
        self._check_effective(input_ids, mask)
        self.fast_path = True  # the check's forward fills the fast path's cache
        self.fast_path, self.fast_path_reason = self._check_fast_path(input_ids, mask)
        if self.fast_path:
            self.replay_reason = "not needed: the query-only fast path applies"
        else:
            self.replay_path, self.replay_reason = self._check_replay_path(input_ids, mask)
        self.fused, self.fused_reason = self._check_fused(input_ids, mask)
        self.readout_pruning, self.readout_reason = self._check_readout(input_ids)

    def _check_decoder_padding(self, input_ids) -> None:
        """An encoder–decoder whose head reads the decoder's last position that is not a pad token of
        its decoder inputs (T5Gemma2) derives those inputs from the right-padded ids: shifted right,
        the last real id lands on the first padding position, so in a padded batch the head reads a
        row one position later than for the text alone. Found by running the probe sentence alone and
        followed by two padding positions; the decoder inputs are then passed explicitly — the
        model's own shift of the ids, with pad ids from the first padding position on (the decoder is
        causal: the rows before are unchanged) — where that gives the text's logits alone. Where it
        does not (T5Gemma reads one position past the ids' last real token whatever the decoder
        inputs), the model keeps its own padding behaviour and :meth:`describe` says that padding
        changes its logits (``padding_changes_logits``)."""
        self.decoder_padding = False
        self.padding_changes_logits = False
        if not getattr(self.model.config, "is_encoder_decoder", False):
            return
        padded = torch.cat([input_ids, torch.full_like(input_ids[:, :2], self.pad_id)], 1)
        mask = torch.cat([torch.ones_like(input_ids), torch.zeros_like(input_ids[:, :2])], 1)

        def gap() -> float:
            with torch.no_grad():
                alone = self._model_call(input_ids, torch.ones_like(input_ids), None, None).logits.float()
                extra = self._model_call(padded, mask, None, None).logits.float()
            return float((alone - extra).abs().max()) / (1.0 + float(alone.abs().max()))

        if gap() <= 1e-5:
            return
        if self._shift_function() is not None:
            self.decoder_padding = True
            if gap() <= 1e-5:
                return
            self.decoder_padding = False
        self.padding_changes_logits = True

    def _check_fused(self, input_ids, mask) -> tuple[bool, str]:
        """Whether the forwards that change and record nothing can run transformers' fused attention
        kernel: the gradients to the input embeddings (saliency, gradient × input, integrated
        gradients; the kernel keeps no (T × T) probabilities for the backward) and the no-gradient
        forwards of ``logits`` and ``logits_with_embedding_output`` (deletions, erasures, the soft
        metrics' draws; faster than the eager arithmetic on long texts, ``docs/performance.md``). It
        must run on this model and give the eager forward's logits (within 1e-4 of their scale);
        otherwise all of them stay eager, with the reason. Either way they all take the same path, so
        every difference of two such forwards (leave-one-out, comprehensiveness) compares like with
        like."""
        if self.own_attention:
            return False, "the attention is computed in the model's own modules (hooked), not through the interface"
        if not getattr(self.model, "_supports_sdpa", False):
            return False, f"{type(self.model).__name__} does not declare support for transformers' sdpa kernel"
        padded = self._probe_batch(input_ids)
        probes = (("the probe sentence", input_ids, mask, None),
                  ("a padded probe batch", padded.input_ids, padded.attention_mask, padded.position_ids))
        try:
            with torch.no_grad():
                for where, ids, rows, positions in probes:
                    fused = self._model_call(ids, rows, None, Intervention(fused=True), positions).logits
                    eager = self._model_call(ids, rows, None, None, positions).logits
                    if not bool(torch.isfinite(fused).all()) or _gap_beyond(fused, eager, 1e-4) is not None:
                        return False, f"the fused kernel's logits differ from the eager forward's on {where}"
        except Exception as error:  # noqa: BLE001 - any failure means: stay eager, and say why
            return False, f"the fused kernel fails on this model ({type(error).__name__}: {str(error)[:160]})"
        return True, ("the forwards that change and record nothing (gradients to the inputs, deletions, erasures) "
                      "use transformers' sdpa kernel (checked on a probe sentence and a padded batch)")

    def _find_layers(self, modules):
        """The ``ModuleList`` whose i-th layer holds the i-th attention call's module (None when
        layers share modules, as ALBERT's do, or no such list exists)."""
        if len(set(map(id, modules))) != len(modules):
            return None
        for _, candidate in self.model.named_modules():
            if not isinstance(candidate, torch.nn.ModuleList) or len(candidate) != len(modules):
                continue
            if all(any(sub is module for sub in layer.modules()) for layer, module in zip(candidate, modules)):
                return candidate
        return None

    def _find_pooling(self, input_ids, mask) -> str:
        """Which rows of the last layer's output the logits depend on: "first", "last" or "mean"."""
        captured = {}
        handle = None
        if self.layers is not None:
            def hook(module, args, output):
                if not torch.is_grad_enabled():  # the no-gradient check forward of _embeds_forward
                    return
                tensor = _first_tensor(output)
                if tensor is not None and tensor.requires_grad:
                    tensor.retain_grad()
                captured["out"] = tensor
            handle = self.layers[-1].register_forward_hook(hook)
        try:
            with torch.enable_grad():
                embeds = self._table(input_ids).detach().requires_grad_(True)
                out = self._embeds_forward(input_ids, mask, embeds, output_hidden_states=self.layers is None)
                target = captured.get("out")
                if target is None and self.layers is not None:
                    # layers called past their hooks (SqueezeBERT calls layer.forward): no hook on them
                    # sees their output, so none of the methods that hook them may use them
                    self.layers = None
                    out = self._embeds_forward(input_ids, mask, embeds, output_hidden_states=True)
                if target is None:
                    hidden = getattr(out, "decoder_hidden_states", None) or getattr(out, "hidden_states", None)
                    target = hidden[-1] if hidden else None
                if target is None:
                    raise UnsupportedModelError(f"{type(self.model).__name__}: cannot see the last layer's output, so "
                                                "the rows its head reads are unknown; open an issue with its model_type")
                (grad,) = torch.autograd.grad(out.logits.float().sum(), target, allow_unused=True)
        finally:
            if handle is not None:
                handle.remove()
        if grad is None:
            raise UnsupportedModelError(f"{type(self.model).__name__}: the logits do not depend on the last layer; "
                                        "open an issue with its model_type")
        if grad.dim() == 3 and grad.shape[0] == input_ids.shape[1] and grad.shape[1] == input_ids.shape[0] != grad.shape[0]:
            grad = grad.transpose(0, 1)  # sequence-first layers (XLNet): (T, B, D) → (B, T, D)
        read = grad[0].abs().sum(-1) > 0  # (T,)
        steps = read.shape[0]
        positions = read.nonzero().flatten().tolist()
        if positions == [0]:
            return "first"
        if positions == [steps - 1]:
            return "last"
        if len(positions) == steps:
            return "mean"
        raise UnsupportedModelError(f"{type(self.model).__name__}: the classification head reads rows {positions} of "
                                    f"{steps}; only the first, the last or all rows are supported: open an issue with "
                                    "its model_type")

    def _embeds_forward(self, input_ids, mask, embeds, **kwargs):
        """The probe's forward from input embeddings: ``inputs_embeds`` where the model takes them;
        a model that refuses them (BART, T5 and other encoder–decoders, whose heads find the
        end-of-sentence token in ``input_ids``) switches the adapter to swapping the embeddings in at
        its embedding module (:meth:`_swapped_embeddings`), checked to give the ``input_ids``
        forward's logits."""
        try:
            with _quiet(type(self.model).__module__):
                return self._model_call(input_ids, mask, embeds, None, **kwargs)
        except (NotImplementedError, ValueError, TypeError, AttributeError):
            if self.embeds_by_hook:
                raise
        self.embeds_by_hook = True
        self.embeddings_swapped = 0
        with _quiet(type(self.model).__module__):
            out = self._model_call(input_ids, mask, embeds, None, **kwargs)
        with torch.no_grad():
            plain = self._model_call(input_ids, mask, None, None).logits.float()
        gap = float((out.logits.detach().float() - plain).abs().max())
        if not out.logits.requires_grad or not self.embeddings_swapped:
            why = ("its logits do not depend on the output of its input embedding module" if self.embeddings_swapped
                   else "its input embedding module is never called on the input ids (as given, shifted right or "
                        "padded on the right)")
            raise UnsupportedModelError(
                f"{type(self.model).__name__} ({self.model_type}) takes no input embeddings, and {why}; use a model "
                "that accepts inputs_embeds, or open an issue with its model_type")
        if gap > 1e-5 * (1.0 + float(plain.abs().max())):
            raise UnsupportedModelError(
                f"{type(self.model).__name__} ({self.model_type}) takes no input embeddings, and swapping them in at "
                f"its embedding module changes its logits by {gap:.1e}; use a model that accepts inputs_embeds, or "
                "open an issue with its model_type")
        return out

    def _check_effective(self, input_ids, mask) -> None:
        batch = self.from_token_lists([input_ids[0].tolist()])
        forward = self.forward(batch, rollout=False)
        weights = torch.zeros_like(forward.attention)
        own = forward.attention[0]
        candidates = batch.content[0].nonzero().flatten()
        target = candidates[own[candidates].argmin()] if len(candidates) else own.argmin()
        weights[0, target] = 1.0
        with torch.no_grad():
            changed = self._full_logits(batch, weights.unsqueeze(1), per_head=False)[:, 0]
        if torch.equal(changed.float(), forward.logits.float()):
            raise UnsupportedModelError(
                f"{type(self.model).__name__}: replacing layer {self.layer}'s query row by a one-hot row left the "
                "logits exactly unchanged: the intervention does not reach the classifier; explain another layer "
                "(layer=...) or open an issue with its model_type")

    def _probe_batch(self, input_ids):
        """The probe sentence and a shorter copy (two tokens less): a padded batch."""
        return self.from_token_lists([input_ids[0].tolist(), input_ids[0, : max(2, input_ids.shape[1] - 2)].tolist()])

    def _probe_rows(self, input_ids):
        """``(batch, forward, weights)`` of the fast path's and the replay's checks: the probe sentence
        and a shorter copy (a padded batch), their unmodified forward and three seeded random rows per
        head ``(B, 3, H, T)``, 0 on padding."""
        batch = self._probe_batch(input_ids)
        forward = self.forward(batch, rollout=False)
        generator = torch.Generator().manual_seed(0)
        noise = torch.rand((len(batch), 3, self.num_heads, batch.input_ids.shape[1]), generator=generator)
        noise = noise.to(self.device) * batch.attention_mask[:, None, None, :]
        return batch, forward, noise / noise.sum(-1, keepdim=True)

    def _check_readout(self, input_ids) -> tuple[bool, str]:
        """Whether forwards that only want the logits may run the last layer for the row the head
        reads (:mod:`hf_attn.adapters.readout`): the head must read one row, the layers must be one
        list whose second-to-last returns its hidden states alone, the attention must go through the
        interface, and on the probe sentence and a shorter copy (a padded batch) the pruned logits
        and their gradients to the input embeddings must equal the whole forward's (within 1e-4 of
        their scale, or 8 rounding units of the running precision where that is coarser)."""
        if not self.prune_readout:
            return False, "turned off (prune_readout=False)"
        if self.pooling not in ("first", "last"):
            return False, "the head reads every row"
        if self.own_attention:
            return False, "the attention is computed in the model's own modules"
        if self.layers is None or len(self.layers) != self.num_layers or self.num_layers < 2:
            return False, "the layers are not one list of one attention call each, or there is one layer"
        if getattr(self.model.config, "is_encoder_decoder", False):
            return False, "an encoder-decoder"
        if self.embeds_by_hook:
            return False, "the model takes no input embeddings (they are swapped in at its embedding module)"
        rope = getattr(self.model.config, "rope_scaling", None) or getattr(self.model.config, "rope_parameters", None)
        rope_type = rope.get("rope_type", rope.get("type")) if isinstance(rope, dict) else None
        if self.pooling == "first" and rope_type in ("dynamic", "longrope"):
            return False, (f"{rope_type} rotary scaling reads the longest position of the call, which the one-token "
                           "replay of the first row does not hold")
        seen = {}
        handle = self.layers[-2].register_forward_hook(lambda module, args, output: seen.setdefault("output", output))
        try:
            batch = self._probe_batch(input_ids)
            full, full_grad = self._readout_probe(batch, prune=False)
        finally:
            handle.remove()
        form = _returned_form(seen.get("output"))
        if form is None:
            return False, f"layer {self.num_layers - 2} returns {type(seen.get('output')).__name__}, not its hidden states"
        self.readout_tuple, self.readout_pruning = form, True
        before = self.readout_calls
        try:
            pruned, pruned_grad = self._readout_probe(batch, prune=True)
        except Exception as error:  # noqa: BLE001 — any failure keeps the whole forward, with the reason
            return False, f"the pruned forward failed ({type(error).__name__}: {str(error)[:120]})"
        finally:
            self.readout_pruning = False
        if self.readout_calls - before != 2:  # the check must have run the pruned path, not its fallback
            return False, "the probe's forwards fell back to the whole forward, so the pruning is unchecked"
        tolerance = max(1e-4, 8 * torch.finfo(self.dtype).eps)
        for name, a, b in (("logits", pruned, full), ("gradients", pruned_grad, full_grad)):
            gap = _gap_beyond(a, b, tolerance)
            if gap is not None:
                return False, f"the pruned forward's {name} differ from the whole one's by {gap:.2e}"
        return True, "the last layer runs for the row the head reads (checked)"

    def _readout_probe(self, batch, prune: bool):
        """``(B, 2C)``: the logits from the ids and from the input embeddings, and ``(B, T, E)`` the
        latter's sum's gradient to the embeddings, with or without pruning (the adapter's own
        forwards, which prune where ``readout_pruning`` is set). A last-token head reads the last
        position whatever its id (as :meth:`logits_at_last_position` has it), so that a read token equal
        to the pad id (a tokenizer ending texts with an end token that is also the pad token) does not
        send the check to the whole forward."""
        with torch.enable_grad(), frozen_parameters(self.model), self._last_position_pooling(always=True):
            embeds = self.embeddings(batch).detach().requires_grad_(True)
            logits = self._model_call(batch.input_ids, batch.attention_mask, embeds, self._plain(),
                                      batch.position_ids, prune=prune).logits.float()
            (grad,) = torch.autograd.grad(logits.sum(), embeds)
        with torch.no_grad(), self._last_position_pooling(always=True):
            plain = self._model_call(batch.input_ids, batch.attention_mask, None, self._plain(), batch.position_ids,
                                     prune=prune).logits.float()
        return torch.cat([plain, logits.detach()], -1), grad.float()

    def _check_replay_path(self, input_ids, mask) -> tuple[bool, str]:
        """Whether logits under replaced rows may skip the layers before the explained one (their
        output, the explained layer's input, cached by the unmodified forward): the layers must be
        one list, the explained one not the first, the layer before it must return its hidden states
        alone (a tensor, or a tuple of it and Nones), and the replayed logits must equal the whole forward's under
        random rows (within 1e-4 of their scale) on the probe sentence and a padded batch."""
        if self.layers is None:
            return False, "the layers share modules or are not one list"
        if self.layer == 0:
            return False, "the explained layer is the first one"
        seen = {}

        def hook(module, args, output):  # what the layer before the explained one returns
            seen["output"] = output

        self.replay_path = True  # the probe's forward fills the replay's cache
        handle = self.layers[self.layer - 1].register_forward_hook(hook)
        try:
            batch, forward, weights = self._probe_rows(input_ids)
        except Exception as error:  # noqa: BLE001 — any failure disables the replay, with the reason
            self.replay_path = False
            return False, f"the replayed forward failed ({type(error).__name__}: {str(error)[:120]})"
        finally:
            handle.remove()
        output = seen.get("output")
        form = _returned_form(output)
        if form:
            self.replay_tuple = form  # the hidden states, then as many Nones as the layer returns
        elif form is None:
            self.replay_path = False
            return False, f"layer {self.layer - 1} returns {type(output).__name__}, not its hidden states alone"
        try:
            with torch.no_grad():
                replayed = self._full_logits(batch, weights, per_head=True, prefix=forward.cache.hidden)
                full = self._full_logits(batch, weights, per_head=True)
        except Exception as error:  # noqa: BLE001 — any failure disables the replay, with the reason
            self.replay_path = self.replay_tuple = False
            return False, f"the replayed forward failed ({type(error).__name__}: {str(error)[:120]})"
        gap = _gap_beyond(replayed, full, 1e-4)
        if gap is not None:
            self.replay_path = self.replay_tuple = False
            return False, f"the replayed forward differs from the whole one by {gap:.2e}"
        return True, f"the layers before layer {self.layer} replayed from the unmodified forward (checked)"

    def _check_fast_path(self, input_ids, mask) -> tuple[bool, str]:
        if self.own_attention:
            return False, "the attention is computed in the model's own modules: the query-only replay needs the interface"
        if self.layer != self.num_layers - 1:
            return False, "the explained layer is not the last one"
        if self.query_rule not in ("first", "last") or self.query_rule != self.pooling:
            return False, "the head reads several rows"
        if self.layers is None:
            return False, "the layers share modules or are not one list"
        if self.layer == 0:
            return False, "a one-layer model"
        if self.pooling == "last" and getattr(self.model.config, "pad_token_id", None) is None:
            return False, "the model has no pad_token_id"
        batch, forward, weights = self._probe_rows(input_ids)
        try:
            with torch.no_grad():
                fast = self._fast_logits(batch, forward, weights)
                full = self._full_logits(batch, weights, per_head=True)
        except Exception as error:  # noqa: BLE001 — any failure disables the fast path, with the reason
            return False, f"the query-only forward failed ({type(error).__name__}: {str(error)[:120]})"
        gap = _gap_beyond(fast, full, 1e-4)
        if gap is not None:
            return False, f"the query-only forward differs from the full one by {gap:.2e}"
        return True, "exact query-only forward of the last layer"
