"""Value zeroing (Mohebbi, Zuidema, Chrupała & Alishahi 2023, "Quantifying Context Mixing in
Transformers", EACL, §2).

At layer l, the value vector of token j is set to zero in every head (the rest of the forward
unchanged), and the context-mixing score of j for token i is how far i's layer-l output moves:
C^l_ij = 1 − cos(x̃^l_i(¬j), x^l_i) (the paper's value-zeroing equation, §2), each row normalised
to sum to 1. The layers are aggregated by rollout (§2, "multi-layer"): C = C^L ··· C^1, without an
added identity (the layer output already carries the residual); the importance of token j for the
classifier is C's query row(s). x^l_i is the output of the whole layer l (attention and
feed-forward sub-layers), as in the paper. The distance is computed without cancellation
(:func:`cosine_distance`): the small distances of weakly mixed tokens are then numbers, not
float32 rounding.

Mechanics: the zeroing is the adapter's intervention (``Intervention(layer=l, zero_values=…)``),
one variant per (instance, real position j), all variants of a layer in batched forwards. Where
the adapter's exact fast path holds (its layers take and return hidden states), the layers before
l return their cached output instead of recomputing it, and the forward stops after layer l.

The variants of one instance differ only from layer l's attention call on: what layer l computes
before it (the query, key and value projections) and the attention probabilities P are the same for
all of them. :class:`SharedZeroing` computes them once per instance, and a variant's attention
output is the instance's P·V less the zeroed token's term, P[:, :, j] ⊗ v_j (attention is linear in
the values: the same numbers up to rounding). :func:`sharing_check` compares it once per adapter
(and precision, device and replay) with the variant-by-variant forward on one chunk of the first
batch (a few variants of its first two texts, at the first and the last layer), and checks that
the attention output is P·V; a model that fails keeps the variant-by-variant forward, with the
reason. Merged self- and cross-attention rows (T5Gemma2) are zeroed variant by variant.
"""

from __future__ import annotations

import contextlib

import torch

from hf_attn.adapters.interface import Intervention, current
from hf_attn.adapters.internals import content_only, query_average, require_internals, this_thread_only
from hf_attn.adapters.placement import replaced_forwards, to_device
from hf_attn.core import deadline
from hf_attn.core.batching import forward_tokens


class _Stop(Exception):
    def __init__(self, output):
        super().__init__("stopped after the zeroed layer")
        self.output = output


def _tensor(output):
    return output[0] if isinstance(output, (tuple, list)) else output


@contextlib.contextmanager
def _hooks(adapter, layer: int, replay: torch.Tensor | None):
    """Stop the forward after ``layer`` (raising :class:`_Stop` with its output); with ``replay``,
    the layers before it return ``replay`` instead of computing."""
    handle = adapter.layers[layer].register_forward_hook(this_thread_only(  # another thread's forward runs on
        lambda module, args, output: (_ for _ in ()).throw(_Stop(_tensor(output)))))
    replaced = list(adapter.layers)[:layer] if replay is not None else []
    try:  # the forwards restored after (accelerate's wrappers of a dispatched model included)
        with replaced_forwards(replaced, lambda *args, **kwargs: replay):
            yield
    finally:
        handle.remove()


def _layer_outputs(adapter, batch) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Inputs and outputs ``(B, T, D)`` of every layer in the unmodified forward."""
    inputs, outputs = [], []
    handles = [layer.register_forward_pre_hook(
        lambda m, args, kwargs: inputs.append(args[0] if args else kwargs["hidden_states"]), with_kwargs=True)
        for layer in adapter.layers]
    handles += [layer.register_forward_hook(lambda m, args, output: outputs.append(_tensor(output)))
                for layer in adapter.layers]
    try:
        adapter._model_call(batch.input_ids, batch.attention_mask, None, None, batch.position_ids)
    finally:
        for handle in handles:
            handle.remove()
    return inputs, outputs


class SharedZeroing:
    """The zeroed layer's work before its attention call, once per instance of a chunk of variants
    (module docstring): the outputs of the layer's linear maps called on the layer's sequence before
    the attention call (inside :meth:`linears`; keyed by the map, its call's order in the forward
    and the instance), and the attention (:meth:`attend`, called by the intervention). Its stores
    keep an instance until a chunk starts past it (the variants come in instance order).
    ``computed``: rows each linear map computed (instance-rows, not variant-rows); ``verify``: check
    that the attention output is its probabilities times the values (set by :func:`sharing_check`)."""

    def __init__(self, layer: int, modules: list[torch.nn.Module], verify: bool = False):
        self.layer, self.verify = layer, verify
        self.modules = [m for m in modules if isinstance(m, torch.nn.Linear)]
        self.outputs: dict = {}  # (module number, call in the forward, instance) -> (T, D_out)
        self.attention: dict = {}  # instance -> (output (T, H, d), probabilities (H, T, T), values (H, T, d))
        self.computed: dict[int, int] = {}
        self.instances: list[int] = []
        self.positions = None

    def chunk(self, instances: torch.Tensor, positions: torch.Tensor) -> None:
        """The next chunk's variants: their instance and zeroed position ``(N,)`` each."""
        self.instances = instances.tolist()
        self.positions = positions
        self.unique = list(dict.fromkeys(self.instances))
        self.first = {u: self.instances.index(u) for u in self.unique}
        slot = {u: i for i, u in enumerate(self.unique)}
        self.which = [slot[u] for u in self.instances]  # each variant's place in ``unique``
        self.calls: dict[int, int] = {}
        start = min(self.instances)
        for key in [k for k in self.outputs if k[2] < start]:
            del self.outputs[key]
        for key in [k for k in self.attention if k < start]:
            del self.attention[key]

    def _rows(self, instances, device) -> torch.Tensor:
        return torch.tensor([self.first[u] for u in instances], device=device)

    def _spread(self, parts: list[torch.Tensor]) -> torch.Tensor:
        """Per-instance ``parts`` (in :attr:`unique`'s order) as one row per variant: a view when the
        chunk holds several variants of one instance (an in-place write then fails instead of
        changing the store), else a copy."""
        if len(parts) == 1 and len(self.instances) > 1:
            return parts[0].unsqueeze(0).expand(len(self.instances), *parts[0].shape)
        stacked = torch.stack(parts)
        if len(parts) == len(self.instances):
            return stacked
        return stacked[torch.tensor(self.which, device=stacked.device)]

    @contextlib.contextmanager
    def linears(self):
        """The layer's linear maps, before its attention call, compute once per instance."""
        with contextlib.ExitStack() as stack:
            for number, module in enumerate(self.modules):
                stack.enter_context(replaced_forwards([module], self._shared_linear(number, module.forward)))
            yield

    def _shared_linear(self, number: int, own):
        def forward(x, *args, **kwargs):
            iv = current()
            if (iv is None or iv.shared_values is not self or iv.calls != self.layer or args or kwargs
                    or x.dim() != 3 or x.shape[0] != len(self.instances)):
                return own(x, *args, **kwargs)
            call = self.calls[number] = self.calls.get(number, -1) + 1  # a map called twice: two entries
            missing = [u for u in self.unique if (number, call, u) not in self.outputs]
            if missing:
                for instance, rows in zip(missing, own(x[self._rows(missing, x.device)])):
                    self.outputs[(number, call, instance)] = rows
                self.computed[number] = self.computed.get(number, 0) + len(missing)
            return self._spread([self.outputs[(number, call, u)] for u in self.unique])
        return forward

    def attend(self, module, eager, query, key, value, attention_mask, args, kwargs):
        """``(output (N, T, H, d), probabilities (N, H, T, T))`` of the zeroed layer's attention for
        the chunk's variants: each instance's eager attention once (with its rows of every argument
        that holds one row per variant: the mask, position ids, …), less the zeroed token's term."""
        from hf_attn.adapters.interface import InterventionError, _repeat_heads

        n = len(self.instances)
        missing = [u for u in self.unique if u not in self.attention]
        if missing:
            rows = self._rows(missing, query.device)

            def own_rows(a):  # the mask, position ids, a position bias, …: the computed instances' rows
                return a[rows.to(a.device)] if isinstance(a, torch.Tensor) and a.dim() > 0 and a.shape[0] == n else a

            output, probs = eager(module, query[rows], key[rows], value[rows], own_rows(attention_mask),
                                  *[own_rows(a) for a in args], **{k: own_rows(v) for k, v in kwargs.items()})
            values = _repeat_heads(value[rows], query.shape[1])
            if self.verify:  # attention linear in its values: the output is probabilities @ values
                product = torch.matmul(probs.to(values.dtype), values).transpose(1, 2)
                gap = float((product - output).abs().max())
                if not gap <= 1e-5 * (1.0 + float(output.abs().max())):
                    raise InterventionError(f"{type(module).__name__}'s attention output is not its probabilities "
                                            f"times its values (off by {gap:.2e})")
            for i, instance in enumerate(missing):
                self.attention[instance] = (output[i], probs[i], values[i])
        kept = [self.attention[u] for u in self.unique]
        probs = torch.stack([part[1] for part in kept])  # (U, H, T, T)
        values = torch.stack([part[2] for part in kept])  # (U, H, T, d)
        which = torch.tensor(self.which, device=probs.device)
        j = self.positions.to(probs.device)
        weight = probs[which, :, :, j]  # (N, H, T): every query row's weight of the zeroed key
        zeroed = values[which, :, j]  # (N, H, d)
        output = self._spread([part[0] for part in kept])  # (N, T, H, d)
        less = (weight.unsqueeze(-1) * zeroed.unsqueeze(2)).transpose(1, 2).to(output.dtype)  # (N, T, H, d)
        return output - less, self._spread([part[1] for part in kept])


def _layer_chunk(adapter, batch, inputs, layer: int, index, zero, position, replay_ok: bool,
                 shared: SharedZeroing | None) -> torch.Tensor:
    """Layer ``layer``'s output ``(N, T', D)`` for one chunk of variants (``index``: their instances;
    ``zero`` ``(N, T)``: the zeroed position), variant by variant or with ``shared``."""
    replay = inputs[layer][index.to(inputs[layer].device)] if replay_ok and layer > 0 else None
    intervention = Intervention(layer=layer, zero_values=zero, calls=layer if replay is not None else 0,
                                shared_values=shared)
    positions = None if batch.position_ids is None else batch.position_ids[index]
    sharing = contextlib.nullcontext()
    if shared is not None:
        shared.chunk(index, position)
        sharing = shared.linears()
    try:
        with _hooks(adapter, layer, replay), sharing:
            adapter._model_call(batch.input_ids[index], batch.attention_mask[index], None, intervention, positions)
        raise RuntimeError(f"layer {layer} was never reached")
    except _Stop as stop:  # a dispatched model: the layer's output on the layer's device, moved to the inputs'
        return to_device(stop.output.float(), batch.input_ids.device)


def _out_of_memory(error: BaseException) -> bool:
    return isinstance(error, (MemoryError, torch.OutOfMemoryError)) or "out of memory" in str(error).lower()


def sharing_check(adapter, batch, inputs, replay_ok: bool, per_chunk: int) -> tuple[bool, str]:
    """Whether :class:`SharedZeroing` may serve this model: the interface's attention (not hooked
    modules of the model's own), and, on the first batch it meets, layer 0's and the last layer's
    outputs for one chunk of at most ``per_chunk`` variants — the first instance's first positions
    and the second instance's first, so that a chunk holds two instances — within a tolerance of
    their scale (1e-5 in float32, 8 units in the last place of a half precision) of the variant-by-
    variant forward's, and the attention's output its probabilities times its values. Kept on the
    adapter for its precision, device and replay; an out-of-memory error is raised, not kept."""
    setting = (str(getattr(adapter, "dtype", None)), str(getattr(adapter, "device", None)), replay_ok)
    known = getattr(adapter, "_value_zeroing_sharing", None)
    if known is not None and (len(known) < 3 or known[2] == setting):
        return known[:2]
    if getattr(adapter, "own_attention", None):
        result = (False, "the attention is computed in the model's own modules (hooked), not through the interface")
    else:
        real = batch.attention_mask.bool()
        picks = [(0, int(p)) for p in real[0].nonzero().flatten()[:3]]
        if len(batch) > 1:
            picks.append((1, int(real[1].nonzero().flatten()[0])))
        picks = picks[:max(1, per_chunk)]
        device = real.device
        index = torch.tensor([i for i, _ in picks], device=device)
        position = torch.tensor([p for _, p in picks], device=device)
        zero = torch.zeros((len(picks), real.shape[1]), dtype=torch.bool, device=device)
        zero[torch.arange(len(picks), device=device), position] = True
        dtype = getattr(adapter, "dtype", torch.float32)
        tolerance = max(1e-5, 8 * torch.finfo(dtype).eps) if dtype.is_floating_point else 1e-5
        result = (True, "the variants of an instance share the layer's work before the zeroing (checked)")
        for layer in sorted({0, len(adapter.layers) - 1}):
            try:
                plain = _layer_chunk(adapter, batch, inputs, layer, index, zero, position, replay_ok, None)
                shared = _layer_chunk(adapter, batch, inputs, layer, index, zero, position, replay_ok,
                                      SharedZeroing(layer, list(adapter.layers[layer].modules()), verify=True))
            except Exception as error:  # noqa: BLE001 — any failure keeps the variant-by-variant forward
                if _out_of_memory(error):
                    raise
                result = (False, f"the shared forward failed ({type(error).__name__}: {str(error)[:120]})")
                break
            gap = float((shared - plain).abs().max())
            if not gap <= tolerance * (1.0 + float(plain.abs().max())):
                result = (False, f"the shared forward differs from the variant-by-variant one by {gap:.2e}")
                break
    adapter._value_zeroing_sharing = (*result, setting)
    return result


@torch.no_grad()
def value_zeroing_matrices(adapter, batch) -> torch.Tensor:
    """``(B, L, T, T)`` the raw scores 1 − cos(x̃^l_i(¬j), x^l_i) of every layer l, row i, zeroed
    token j (before row normalisation); 0 on pad rows and columns. Needs the model's list of layers
    (refused otherwise)."""
    require_internals(adapter, "value zeroing")
    if getattr(adapter, "layers", None) is None:
        from hf_attn.adapters.base import UnsupportedModelError
        raise UnsupportedModelError("value zeroing needs each layer's output: the layers share modules, are not one "
                                    "list, or are called past their forward hooks")
    inputs, outputs = _layer_outputs(adapter, batch)
    real = batch.attention_mask.bool()
    outputs = [to_device(output, real.device) for output in outputs]  # a dispatched model's layers: to the inputs'
    instance, position = real.nonzero(as_tuple=True)  # one variant per (instance, real position)
    count, steps = real.shape
    zero = torch.zeros((len(instance), steps), dtype=torch.bool, device=real.device)
    zero[torch.arange(len(instance), device=real.device), position] = True
    replay_ok = bool(getattr(adapter, "fast_path", False))
    # the CPU's forward cap (hf_attn.core.batching.forward_tokens): on MiniLM at 256 tokens, one thread,
    # 22.2 s at 1,024 tokens per forward against 31.4 s at 8,192, the same scores
    per_chunk = max(1, forward_tokens(adapter.token_budget, getattr(adapter, "device", None)) // max(steps, 1))
    scores = torch.zeros((count, len(adapter.layers), steps, steps), dtype=torch.float32, device=real.device)
    # every (layer, chunk of variants), paced by a time budget if one is set (hf_attn.core.deadline)
    chunks = [(layer, start) for layer in range(len(adapter.layers)) for start in range(0, len(instance), per_chunk)]
    share = sharing_check(adapter, batch, inputs, replay_ok, per_chunk)[0]
    shared = None
    for layer, start in deadline.paced(chunks):
        rows = slice(start, start + per_chunk)
        index = instance[rows]
        if share and (shared is None or shared.layer != layer):
            shared = SharedZeroing(layer, list(adapter.layers[layer].modules()))
        changed = _layer_chunk(adapter, batch, inputs, layer, index, zero[rows], position[rows], replay_ok, shared)
        # the input's rows (Longformer's layers run on the input padded to a multiple of its window)
        distance = cosine_distance(changed[:, :steps], outputs[layer][index][:, :steps]).float()
        distance = distance * batch.attention_mask[index].float()  # (N, T_i)
        scores[index, layer, :, position[rows]] = distance
    return scores


def cosine_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """1 − cos(a, b) over the last axis, as ½‖a/‖a‖ − b/‖b‖‖² in float64: the same number, without
    the cancellation of 1 − cos when the two vectors nearly agree (a token whose zeroed value moves
    the output by 10⁻⁴ of its norm has a distance of ~10⁻⁸, below float32's resolution of 1 − cos,
    so a float32 1 − cos is rounding — and rounding that differs between a CPU and a GPU)."""
    device = a.device
    if device.type == "mps":  # no float64 there
        a, b = a.cpu(), b.cpu()
    a, b = a.double(), b.double()
    unit_a = a / a.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    unit_b = b / b.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    return (0.5 * (unit_a - unit_b).pow(2).sum(-1)).to(device)


@torch.no_grad()
def value_zeroing(adapter, batch) -> torch.Tensor:
    """``(B, T)`` value zeroing importance (module docstring): rows of each layer's score matrix
    normalised to sum to 1, rolled out over the layers, the query row(s) read; 0 on pads and special
    tokens."""
    scores = value_zeroing_matrices(adapter, batch)
    normalised = scores / scores.sum(-1, keepdim=True).clamp_min(1e-30)
    total = None
    for layer in range(normalised.shape[1]):
        total = normalised[:, layer] if total is None else normalised[:, layer] @ total
    return content_only(batch, query_average(batch, total))


__all__ = ["value_zeroing", "value_zeroing_matrices"]
