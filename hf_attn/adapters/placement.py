"""Models larger than one device: a classifier placed by a ``device_map`` (accelerate's dispatch,
through transformers' ``from_pretrained(device_map=..., max_memory=..., offload_folder=...)``).

A dispatched model keeps each block where the map put it (a GPU, the CPU, or the disk, whose
weights accelerate reads in just before the block runs and drops after); accelerate's hooks move
each block's inputs to the block's device. What hf_attn adds, so that every method runs on such a
model as on a model on one device:

- the adapter's device is the **input embedding's** execution device (:func:`input_device`): the
  ids, masks, baselines and embeddings the methods make are created there, and the outputs of a
  dispatched model come back there (the top-level hook returns them on the inputs' device);
- the intervention tensors (replacement rows, value-zeroing masks, cached values) are moved to the
  device of the attention call that reads them (:func:`hf_attn.adapters.interface.intervened_attention`),
  and what a recording forward returns is moved back to the adapter's device by its readers;
- a weight read outside a forward (the output projection and layer norm of ALTI and the norm-based
  attention, the finite-weights check at load time) is read from accelerate's offload map when the
  module holds only its ``meta`` placeholder (:func:`materialised`);
- a layer's ``forward`` replaced for a replay (the fast path, value zeroing) is restored to
  accelerate's own wrapper after, never deleted (:func:`replaced_forwards`).

:func:`check_device_map` refuses, in one line naming the argument, what cannot work: an unknown
strategy or device, ``"disk"`` without an ``offload_folder``, ``max_memory`` / ``offload_folder``
without a ``device_map``, and a missing ``accelerate``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import threading

import torch

STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")


def check_device_map(device_map, max_memory=None, offload_folder=None) -> None:
    """``ValueError`` (one line, naming the argument) for a device map hf_attn cannot load with:
    ``device_map`` is one of :data:`STRATEGIES` or a dict ``{module name: device}`` with devices
    ``"cpu"``, ``"disk"``, ``"cuda"``, ``"cuda:N"``, ``N`` (a GPU index) or ``"mps"``; ``"disk"``
    needs ``offload_folder``; ``max_memory`` (``{device: size}``) and ``offload_folder`` need a
    ``device_map``; accelerate must be installed."""
    if device_map is None:
        for name, value in (("max_memory", max_memory), ("offload_folder", offload_folder)):
            if value is not None:
                raise ValueError(f"{name} applies only with device_map= (a model placed across devices)")
        return
    if importlib.util.find_spec("accelerate") is None:
        raise ValueError("device_map needs accelerate, which is not installed: pip install accelerate")
    if isinstance(device_map, str):
        if device_map not in STRATEGIES:
            raise ValueError(f"device_map must be one of {', '.join(STRATEGIES)} or a dict {{module name: device}}, "
                             f"got {device_map!r}")
        devices = []
    elif isinstance(device_map, dict) and device_map:
        for key in device_map:
            if not isinstance(key, str):
                raise ValueError(f"device_map keys must be module names (strings), got {key!r}")
        devices = list(device_map.values())
    else:
        raise ValueError(f"device_map must be one of {', '.join(STRATEGIES)} or a non-empty dict {{module name: "
                         f"device}}, got {device_map!r}")
    for device in devices:
        _check_map_device(device)
    if "disk" in devices and offload_folder is None:
        raise ValueError("device_map puts modules on 'disk': pass offload_folder= (a folder for their weights)")
    if max_memory is not None and not isinstance(max_memory, dict):
        raise ValueError(f"max_memory must be a dict {{device: size}}, e.g. {{0: '20GiB', 'cpu': '60GiB'}}, got "
                         f"{max_memory!r}")
    if offload_folder is not None and not isinstance(offload_folder, (str, bytes)) and not hasattr(
            offload_folder, "__fspath__"):
        raise ValueError(f"offload_folder must be a folder path, got {offload_folder!r}")


def _check_map_device(device) -> None:
    if isinstance(device, bool) or not isinstance(device, (str, int, torch.device)):
        raise ValueError(f"device_map devices must be 'cpu', 'disk', 'cuda:N', a GPU index or 'mps', got {device!r}")
    if device == "disk":
        return
    if device == "meta" or (isinstance(device, torch.device) and device.type == "meta"):
        raise ValueError("device_map: 'meta' holds no weights; use 'disk' with offload_folder= to keep a module's "
                         "weights off every device")
    if isinstance(device, int):
        if device < 0:
            raise ValueError(f"device_map: a GPU index must be ≥ 0, got {device}")
        device = f"cuda:{device}"
    from hf_attn.adapters.device import resolve_device

    try:
        resolve_device(device)
    except ValueError as error:
        raise ValueError(f"device_map: {error}") from None


def loading_kwargs(device_map, max_memory=None, offload_folder=None) -> dict:
    """The keyword arguments of transformers' ``from_pretrained`` for a device map (empty without)."""
    check_device_map(device_map, max_memory, offload_folder)
    if device_map is None:
        return {}
    out = {"device_map": device_map}
    if max_memory is not None:
        out["max_memory"] = max_memory
    if offload_folder is not None:
        out["offload_folder"] = str(offload_folder)
    return out


def placed_by_map(model) -> bool:
    """Whether ``model`` was placed by a device map (``hf_device_map``): the adapter then never
    moves it (moving a dispatched model would break accelerate's placement)."""
    return bool(getattr(model, "hf_device_map", None))


def _as_device(device) -> torch.device:
    if isinstance(device, int):
        return torch.device("cuda", device)
    return torch.device(device)


def _hooks(module) -> list:
    hook = getattr(module, "_hf_hook", None)
    if hook is None:
        return []
    return list(getattr(hook, "hooks", None) or [hook])


def module_device(module: torch.nn.Module) -> torch.device | None:
    """Where ``module`` runs: its accelerate hook's execution device, else the device of its first
    parameter or buffer that is not a ``meta`` placeholder (``None`` when it has neither)."""
    for hook in _hooks(module):
        device = getattr(hook, "execution_device", None)
        if device is not None:
            return _as_device(device)
    for tensor in list(module.parameters()) + list(module.buffers()):
        if tensor.device.type != "meta":
            return tensor.device
    return None


def input_device(model, device="auto") -> torch.device:
    """The adapter's device for a model placed by a device map: where its input embedding runs.
    ``device`` must be ``"auto"`` (or that same device): the map decided, and the model is never moved."""
    where = module_device(model.get_input_embeddings()) if hasattr(model, "get_input_embeddings") else None
    if where is None:
        where = module_device(model) or torch.device("cpu")
    if device is None or device == "auto":
        return where
    try:
        asked = torch.device(device) if not isinstance(device, torch.device) else device
    except (RuntimeError, TypeError):
        asked = None
    if asked is None or asked.type != where.type or (asked.index is not None and asked.index != (where.index or 0)):
        raise ValueError(f"device {device!r}: the model was placed by its device_map (its inputs go to {where}); "
                         "pass device='auto', or load it without device_map")
    return where


def map_summary(model) -> dict:
    """``{device: number of device-map entries}`` of a placed model, for :meth:`describe`."""
    counts: dict[str, int] = {}
    for device in (getattr(model, "hf_device_map", None) or {}).values():
        key = f"cuda:{device}" if isinstance(device, int) else str(device)
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def materialised(module: torch.nn.Module, name: str = "weight", root: torch.nn.Module | None = None):
    """``module``'s parameter or buffer ``name`` as a real tensor: itself, or, when it is a ``meta``
    placeholder of a disk- or CPU-offloaded module, its value from accelerate's offload map on the
    module's execution device. With ``root`` (the model), a map held by an enclosing module's hook is
    read too (``dispatch_model(..., preload_module_classes=...)`` loads a whole block in its own hook,
    under names relative to it). ``None`` when the module has no such tensor."""
    tensor = getattr(module, name, None)
    if not isinstance(tensor, torch.Tensor) or tensor.device.type != "meta":
        return tensor
    holders = [(module, name)]
    if root is not None:
        qualified = next((n for n, m in root.named_modules() if m is module), None)
        if qualified is not None:
            for prefix, ancestor in root.named_modules():
                if ancestor is not module and (prefix == "" or qualified.startswith(prefix + ".")):
                    relative = qualified[len(prefix) + 1:] if prefix else qualified
                    holders.append((ancestor, f"{relative}.{name}"))
    for holder, key in holders:
        for hook in _hooks(holder):
            weights = getattr(hook, "weights_map", None)
            if weights is not None and key in weights:
                device = getattr(hook, "execution_device", None)
                value = weights[key]
                return value.to(_as_device(device)) if device is not None else value
    raise ValueError(f"{type(module).__name__}.{name} is offloaded and its value cannot be read outside a forward")


def named_real_parameters(model: torch.nn.Module):
    """``(name, tensor)`` of every parameter, offloaded ones read from accelerate's offload map
    (:func:`materialised`), one at a time."""
    for module_name, module in model.named_modules():
        for name, parameter in module.named_parameters(recurse=False):
            full = f"{module_name}.{name}" if module_name else name
            yield full, (materialised(module, name, model) if parameter.device.type == "meta" else parameter)


@contextlib.contextmanager
def replaced_forwards(modules, forward):
    """Each of ``modules`` calls ``forward`` instead of its own forward inside the block, in the thread
    that entered it (another thread's forward through the same model meanwhile runs the modules' own);
    after, the forward it had is restored — accelerate's wrapper of a dispatched module included
    (deleting the attribute would unhook the module from its device)."""
    owner = threading.get_ident()
    saved = []
    for module in modules:
        saved.append((module, module.__dict__.get("forward")))
        own = module.forward  # the bound forward, or accelerate's wrapper

        def dispatched(*args, _own=own, **kwargs):
            return forward(*args, **kwargs) if threading.get_ident() == owner else _own(*args, **kwargs)
        module.forward = dispatched
    try:
        yield
    finally:
        for module, own in saved:
            if own is None:
                module.__dict__.pop("forward", None)
            else:
                module.forward = own


def to_device(tensor, device: torch.device):
    """``tensor`` on ``device`` (itself when already there; ``None`` stays ``None``)."""
    if tensor is None or tensor.device == device:
        return tensor
    return tensor.to(device)
