"""The backward rules of AttnLRP and CP-LRP, applied to a ``transformers`` model for one forward in
the Gradient × Input form of LXT's efficient implementation (Achtibat et al. 2024, "AttnLRP:
Attention-Aware Layer-Wise Relevance Propagation for Transformers", ICML; code
rachtibat/LRP-eXplains-Transformers, ``lxt/efficient/rules.py`` and ``lxt/efficient/patches.py``).

Every rule is a change of the backward pass such that the relevance of a tensor is its value times
its modified gradient, R(x) = x ⊙ ∂̃f/∂x; the relevance of the input is then gradient × input at the
input embeddings. With ``mode``:

``"attnlrp"`` (AttnLRP)
    - **attention** (at the seam, :func:`lrp_attention`, LXT ``wrap_attention_forward``): the
      uniform rule on the two bilinear matmuls (Eq. 7): A·V gives half its relevance to A and half
      to V, Q·Kᵀ half to Q and half to K, so the gradients reaching Q and K are scaled by ¼ and V's
      by ½. The softmax keeps its own backward: gradient × input at its input x is
      x_i (R_i − s_i Σ_j R_j), the paper's softmax rule (Prop. 3.1, LXT ``explicit/functional.py``
      ``softmax_fn``), whose bias term is not conserved;
    - **normalisation** (``nn.LayerNorm``, ``*RMSNorm`` classes; LXT ``layer_norm_forward``,
      ``rms_norm_forward``): the identity rule — the normalisation factor σ detached;
    - **element-wise activations** (GELU, SiLU, tanh, …; LXT ``identity_rule_implicit``): the
      identity rule R_in = R_out (Eq. 9), the gradient replaced by f(x)/x — activation modules and
      the functions with f(0) = 0 called directly (RoBERTa's head: ``torch.tanh``); one with
      f(0) ≠ 0 (sigmoid, exp) is refused;
    - **products of two input-dependent tensors** outside attention (the gated MLPs
      act(W_g x) ⊙ W_u x; LXT ``gated_mlp_forward``): the uniform rule, half to each factor;
    - linear layers and residual sums: their own gradient — the ε-rule with ε → 0 (LRP-0), as in
      LXT's efficient implementation (no ε-rule there; the explicit one stabilises with ε = 1e-6);
      bias terms absorb their share of the relevance (not conserved).

``"cp"`` (CP-LRP, Ali et al. 2022, "XAI for Transformers: Better Explanations through Conservative
Propagation", ICML §3; LXT ``patch_cp_attention``)
    - the attention probabilities held constant (the "AH rule": Q and K detached at the seam);
    - the normalisation factor detached (the "LN rule", as above);
    - gated products: the gate held constant (LXT ``cp_gated_mlp_forward``); everything else, the
      activations included, its own gradient.

The norms and activations are found by type (``nn.LayerNorm``, classes named ``*RMSNorm``, the
activation modules of ``transformers.activations`` and ``torch.nn``) and get the rule through hooks
on their output for the duration of :func:`lrp_rules`, in the thread that entered it (another
thread's forwards through the same model keep their own backward) — the value is the module's own,
only the backward changes; the hooks are removed after. A guard (:class:`_Guard`, a torch function mode)
watches every other operation of the forward on input-dependent tensors: a non-linearity or a
product no rule covers (an unknown norm, an activation called as a function, a softmax outside the
attention seam, a recurrent cell) refuses the model in one line naming the operation and the module.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from hf_attn.adapters.base import UnsupportedModelError

MODES = ("attnlrp", "cp")
LABELS = {"attnlrp": "AttnLRP", "cp": "CP-LRP"}

# element-wise activations with f(0) = 0, whose identity rule f(x)/x is finite
_TORCH_ACTIVATIONS = ("GELU", "SiLU", "Tanh", "ReLU", "ReLU6", "Mish", "ELU", "LeakyReLU", "Hardswish", "Identity")
_HF_ACTIVATIONS = ("GELUActivation", "NewGELUActivation", "FastGELUActivation", "QuickGELUActivation",
                   "ClippedGELUActivation", "AccurateGELUActivation", "MishActivation", "LinearActivation",
                   "ReLUSquaredActivation", "GELUTanh", "PytorchGELUTanh", "SiLUActivation")


class _ScaleGradient(torch.autograd.Function):
    """Identity forward; the gradient times ``factor`` (LXT ``divide_gradient``)."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor, None


class _Ratio(torch.autograd.Function):
    """Forward: ``y`` (the module's own output, computed from ``x``); backward: the gradient times
    y/x — the identity rule of an element-wise y = f(x) (LXT ``identity_rule_implicit``: R_x = x ·
    g y/x = R_y), and of an RMS normalisation with its factor detached (y_i = x_i c w_i)."""

    @staticmethod
    def forward(ctx, x, y):
        zero = x == 0
        ratio = torch.where(zero, torch.zeros((), dtype=y.dtype, device=y.device),
                            y / torch.where(zero, torch.ones((), dtype=x.dtype, device=x.device), x))
        ctx.save_for_backward(ratio)
        return y.clone()

    @staticmethod
    def backward(ctx, grad):
        (ratio,) = ctx.saved_tensors
        return grad * ratio.to(grad.dtype), None


def scale_gradient(x: torch.Tensor, factor: float) -> torch.Tensor:
    return _ScaleGradient.apply(x, factor)


_GUARD: contextvars.ContextVar = contextvars.ContextVar("hf_attn_lrp_guard", default=None)


@contextlib.contextmanager
def exempt():
    """The operations inside are the rule's own (the seam's attention, a hooked module's forward)."""
    guard = _GUARD.get()
    if guard is None:
        yield
        return
    guard.depth += 1
    try:
        yield
    finally:
        guard.depth -= 1


def lrp_attention(iv, module, eager, query, key, value, attention_mask, args, kwargs):
    """The seam's attention call under ``iv.lrp`` (:mod:`hf_attn.adapters.interface`): the model's own
    eager attention on Q, K, V whose gradients carry the rule (module docstring); the seam has counted
    the call and checked the eval mode."""
    if iv.lrp not in MODES:
        raise ValueError(f"lrp must be one of {list(MODES)}, got {iv.lrp!r}")
    if iv.lrp == "attnlrp":
        query, key, value = scale_gradient(query, 0.25), scale_gradient(key, 0.25), scale_gradient(value, 0.5)
    else:
        query, key = query.detach(), key.detach()
    with exempt():
        return eager(module, query, key, value, attention_mask, *args, **kwargs)


def _requires_grad(value) -> bool:
    return isinstance(value, torch.Tensor) and value.requires_grad


def _flat(args):
    for a in args:
        if isinstance(a, (list, tuple)):
            yield from _flat(a)
        else:
            yield a


T = torch.Tensor
# element-wise activations called as functions, f(0) = 0: AttnLRP's identity rule applies to them directly
_ACTIVATION_FUNCTIONS = {torch.tanh, T.tanh, F.tanh, F.gelu, F.silu, F.mish, F.elu, F.relu, torch.relu, T.relu}
# element-wise, f(0) ≠ 0: no identity rule (AttnLRP refuses them); CP-LRP keeps their gradient
_OTHER_ELEMENTWISE = {torch.sigmoid, T.sigmoid, F.sigmoid, F.softplus, F.logsigmoid, torch.exp, T.exp, torch.log,
                      T.log, torch.erf, T.erf, torch.sin, torch.cos}
_NONLINEAR = {F.softmax, torch.softmax,
              T.softmax, F.log_softmax, torch.log_softmax, T.log_softmax, F.layer_norm, torch.layer_norm,
              F.group_norm, F.rms_norm, torch.rsqrt, T.rsqrt, torch.sqrt, T.sqrt, torch.pow, T.pow, T.__pow__,
              torch.square, T.square, torch.var, T.var, torch.std, T.std, F.normalize,
              F.scaled_dot_product_attention, torch.reciprocal, T.reciprocal}
_NONLINEAR |= {getattr(torch, name) for name in ("lstm", "gru", "rnn_tanh", "rnn_relu") if hasattr(torch, name)}
_MUL = {torch.mul, T.mul, T.__mul__, T.__rmul__}
_BILINEAR = {torch.matmul, T.matmul, T.__matmul__, T.__rmatmul__, torch.bmm, T.bmm, torch.einsum, torch.baddbmm,
             T.mul_, T.__imul__, torch.addcmul}
_DIVIDE = {torch.div, T.div, T.__truediv__, torch.true_divide, T.div_, T.__itruediv__}


class _Guard(TorchFunctionMode):
    """Applies the rule of a product of two input-dependent tensors met outside the rules' own code
    and refuses every other operation on input-dependent tensors that no rule covers."""

    def __init__(self, mode: str, stack: list):
        super().__init__()
        self.mode, self.stack, self.depth = mode, stack, 0

    def _where(self) -> str:
        return f" in {self.stack[-1]}" if self.stack else ""

    def _refuse(self, what: str):
        raise UnsupportedModelError(f"{LABELS[self.mode]} has no rule for {what}{self._where()}: this model is not "
                                    "explained by it")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.depth > 0 or not torch.is_grad_enabled():
            return func(*args, **kwargs)
        if func in _MUL and len(args) == 2 and _requires_grad(args[0]) and _requires_grad(args[1]):
            return self._product(func, args, kwargs)
        if func in _ACTIVATION_FUNCTIONS and args and _requires_grad(args[0]):
            out = func(*args, **kwargs)
            out = _Ratio.apply(args[0], out) if self.mode == "attnlrp" else out
            out._hf_attn_gate = True
            return out
        if func in _OTHER_ELEMENTWISE and args and _requires_grad(args[0]):
            if self.mode == "attnlrp":
                self._refuse(f"{getattr(func, '__name__', func)} (f(0) ≠ 0: no identity rule)")
            out = func(*args, **kwargs)
            out._hf_attn_gate = True
            return out
        if func in _NONLINEAR and any(_requires_grad(a) for a in _flat(list(args) + list(kwargs.values()))):
            if func in (torch.pow, T.pow, T.__pow__) and len(args) > 1 and isinstance(args[1], (int, float)) \
                    and args[1] == 1:
                return func(*args, **kwargs)
            self._refuse(f"{getattr(func, '__name__', func)}")
        if func in _BILINEAR and sum(_requires_grad(a) for a in _flat(list(args) + list(kwargs.values()))) >= 2:
            self._refuse(f"the product {getattr(func, '__name__', func)} of two input-dependent tensors")
        if func in _DIVIDE and len(args) > 1 and _requires_grad(args[1]):
            self._refuse("a division by an input-dependent tensor")
        if func is T.__rtruediv__ and _requires_grad(args[0]):
            self._refuse("a division by an input-dependent tensor")
        return func(*args, **kwargs)

    def _product(self, func, args, kwargs):
        a, b = args
        if self.mode == "attnlrp":  # the uniform rule: half of the product's relevance to each factor
            return scale_gradient(func(a, b, **kwargs), 0.5)
        gate_a, gate_b = getattr(a, "_hf_attn_gate", False), getattr(b, "_hf_attn_gate", False)
        if gate_a == gate_b:
            self._refuse("a product of two input-dependent tensors that is not an activation's gate")
        return func(a.detach() if gate_a else a, b.detach() if gate_b else b, **kwargs)


def _is_norm(module) -> str | None:
    """``"layer"``, ``"rms"``, ``"unknown"`` (a class named like a norm without a rule) or None."""
    name = type(module).__name__
    if isinstance(module, torch.nn.LayerNorm):
        return "layer"
    if name.endswith("RMSNorm"):
        return "rms"
    if "Norm" in name and not isinstance(module, (torch.nn.modules.batchnorm._BatchNorm,)):
        return "unknown"
    return None


def _is_activation(module) -> str | None:
    """``"known"``, ``"unknown"`` (an activation module without an identity rule) or None."""
    name, where = type(module).__name__, type(module).__module__
    if where == "transformers.activations":
        return "known" if name in _HF_ACTIVATIONS else "unknown"
    if where == "torch.nn.modules.activation":
        return "known" if name in _TORCH_ACTIVATIONS else "unknown"
    return None


def check_components(model: torch.nn.Module, mode: str) -> None:
    """Refuse, in one line naming it, a component of ``model`` that has no rule of ``mode``: a
    recurrent cell, a norm other than LayerNorm / RMSNorm, an activation module without the identity
    rule (softmax-like or f(0) ≠ 0)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    label = LABELS[mode]
    for name, module in model.named_modules():
        kind = type(module).__name__
        if isinstance(module, torch.nn.RNNBase):
            raise UnsupportedModelError(f"{label} has no rule for the recurrent cell of {kind} ({name}): this "
                                        "model is not explained by it")
        if _is_norm(module) == "unknown":
            raise UnsupportedModelError(f"{label} has no rule for the normalisation {kind} ({name}): only "
                                        "LayerNorm and *RMSNorm classes have the identity rule here")
        if _is_activation(module) == "unknown" and kind not in ("Softmax",):
            raise UnsupportedModelError(f"{label} has no rule for the activation {kind} ({name}): the identity "
                                        "rule needs f(0) = 0")


def _first_tensor(args, kwargs):
    if args and isinstance(args[0], torch.Tensor):
        return args[0]
    return next((v for v in kwargs.values() if isinstance(v, torch.Tensor)), None)


def _norm_rule(module, x: torch.Tensor, y: torch.Tensor, kind: str) -> torch.Tensor:
    """``y`` (the module's output) with the backward of the norm with its factor detached."""
    if kind == "rms":
        return _Ratio.apply(x, y)
    dims = tuple(range(-len(module.normalized_shape), 0))
    xf = x if x.dtype in (torch.float32, torch.float64) else x.float()
    mean = xf.mean(dims, keepdim=True)
    std = (xf.var(dims, keepdim=True, unbiased=False) + module.eps).sqrt()
    rule = (xf - mean) / std.detach()
    if module.weight is not None:
        rule = rule * module.weight.to(xf.dtype)
    rule = rule.to(y.dtype)
    return y.detach() + (rule - rule.detach())  # the module's own value, the rule's gradient


@contextlib.contextmanager
def lrp_rules(model: torch.nn.Module, mode: str):
    """The rules of ``mode`` on ``model``'s norms, activations and products for the forwards inside
    (module docstring); the attention rules are the seam's (an :class:`Intervention` with ``lrp``).
    Components without a rule are refused before (:func:`check_components`) or during the forward."""
    check_components(model, mode)
    stack: list[str] = []
    guard = _Guard(mode, stack)
    handles = []
    # the hooks act on this thread's forwards only: another thread running the same model meanwhile (a
    # gradient method, another LRP call with its own rules) keeps its own backward
    owner = threading.get_ident()
    kinds: dict = {}  # module → its rule ("layer", "rms", "activation"), for this call only

    def enter(name):
        def pre(module, args, kwargs):
            if threading.get_ident() != owner:
                return
            stack.append(f"{name or 'the model'} ({type(module).__name__})")
            if kinds.get(module):
                guard.depth += 1
        return pre

    def leave(module, args, kwargs, output):
        if threading.get_ident() != owner:
            return None
        kind = kinds.get(module)
        if stack:
            stack.pop()
        if not kind:
            return None
        try:
            x = _first_tensor(args, kwargs)
            if not isinstance(output, torch.Tensor) or x is None or not x.requires_grad:
                return None
            if kind in ("layer", "rms"):
                return _norm_rule(module, x, output, kind)
            if mode == "attnlrp":
                output = _Ratio.apply(x, output)
            output._hf_attn_gate = True  # a product with it: CP-LRP holds the gate constant
            return output
        finally:
            guard.depth -= 1

    for name, module in model.named_modules():
        kind = _is_norm(module) or ("activation" if _is_activation(module) == "known" else None)
        if kind:
            kinds[module] = kind
        handles.append(module.register_forward_pre_hook(enter(name), with_kwargs=True))
        handles.append(module.register_forward_hook(leave, with_kwargs=True))
    token = _GUARD.set(guard)
    try:
        with guard:
            yield
    finally:
        _GUARD.reset(token)
        for handle in handles:
            handle.remove()


__all__ = ["LABELS", "MODES", "check_components", "exempt", "lrp_attention", "lrp_rules", "scale_gradient"]
