#!/usr/bin/env python
"""Where the wall time of one ``hf-attn`` command goes, stage by stage.

    OMP_NUM_THREADS=1 python scripts/profile_commands.py analyze MODEL_DIR --battery jw --output-dir OUT --threads 1
    OMP_NUM_THREADS=1 python scripts/profile_commands.py train --embeddings random --embedding-dim 300 \
        --epochs 2 --output-dir OUT --threads 1 --quiet
    ... [--record docs/benchmarks/profile_analyze.json] [--note "what MODEL_DIR is"]
                                   (this script's own flags, taken out of the command)

The command runs in this process through ``hf_attn.cli.main``. Named library functions are wrapped
by wall-clock timers (no profiler, so no profiler overhead); a stage's time includes the imports
made inside it. Stages nest (e.g. the training loop holds forward, backward and optimiser steps),
so the table gives each stage's share of the whole wall time, not a partition (the record gives
each stage by a short id, with its name in ``stage_names``). ``imports`` is the
time to import the CLI module and what it pulls (torch, transformers, the modelling code) before
the command starts. The J&W battery's own per-analysis seconds come from its results.json.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import resource
import sys
import time

START = time.perf_counter()

# (module, object path, stage id, stage name): the library functions timed, per command
STAGES = {
    "analyze": [
        ("hf_attn.batteries.jw.battery", "load_model_and_split", "load", "load model, tokenizer, data split"),
        ("hf_attn.batteries.jw.battery", "run_jw_battery", "battery", "J&W battery (all analyses)"),
        ("hf_attn.batteries.jw.figures", "write_jw_figures", "figures", "figures (matplotlib import included)"),
        ("hf_attn.core.io", "write_jsonl_atomic", "instances", "instances.jsonl"),
    ],
    "train": [
        ("hf_attn.training.engine", "_run_tokenizer", "vocabulary", "vocabulary (tokenizer built from the train texts)"),
        ("hf_attn.training.engine", "task_of", "data", "load the data set"),
        ("hf_attn.training.engine", "tokenize_splits", "tokenize", "tokenize the splits"),
        ("hf_attn.training.engine", "build_model", "model", "build the model"),
        ("transformers", "Trainer.train", "training_loop", "Trainer.train (the whole training loop)"),
        ("transformers", "Trainer.training_step", "training_steps", "  training steps (forward + loss + backward)"),
        ("hf_attn.training.engine", "AttnTrainer.compute_loss", "forward", "    forward + loss (also inside the evaluations)"),
        ("accelerate", "Accelerator.backward", "backward", "    backward"),
        ("hf_attn.training.engine", "AttnTrainer._clip_grad_norm", "clipping", "  gradient clipping"),
        ("torch.optim", "Adam.step", "optimiser", "  optimiser steps (fused Adam, amsgrad + L2)"),
        ("transformers", "Trainer.evaluate", "evaluation", "  dev evaluation per epoch"),
        ("transformers", "Trainer._save_checkpoint", "checkpoints", "  checkpoints (resume)"),
        ("transformers", "Trainer.predict", "test_predictions", "test predictions"),
        ("transformers", "Trainer.save_model", "save", "save the kept model"),
    ],
}


def wrap(module_name: str, path: str, stage: str, totals: dict) -> None:
    """Replace ``module_name``'s ``path`` (a function, or ``Class.method``) by a timed copy adding
    its wall time to ``totals[stage]``."""
    owner = importlib.import_module(module_name)
    parts = path.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part)
    original = getattr(owner, parts[-1])
    depth = {"n": 0}

    @functools.wraps(original)
    def timed(*args, **kwargs):
        depth["n"] += 1
        began = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            depth["n"] -= 1
            if depth["n"] == 0:  # recursion / super() calls counted once
                totals[stage] = totals.get(stage, 0.0) + time.perf_counter() - began
    setattr(owner, parts[-1], timed)
    # functions imported by name elsewhere (``from engine import build_model``) are patched there too
    for module in list(sys.modules.values()):
        if module is not None and module.__name__.startswith("hf_attn") and getattr(module, parts[-1], None) is original:
            setattr(module, parts[-1], timed)


def main() -> int:
    argv = sys.argv[1:]
    record, note = None, None
    if "--record" in argv:
        at = argv.index("--record")
        record = argv[at + 1]
        del argv[at:at + 2]
    if "--note" in argv:
        at = argv.index("--note")
        note = argv[at + 1]
        del argv[at:at + 2]
    if not argv or argv[0] not in STAGES:
        print(f"usage: profile_commands.py {{{'|'.join(STAGES)}}} ARGS... [--record FILE]", file=sys.stderr)
        return 2
    from hf_attn.cli import main as cli_main
    import hf_attn.batteries.jw.battery  # noqa: F401 (the modules whose functions are wrapped)
    import hf_attn.batteries.jw.figures  # noqa: F401
    import hf_attn.training.engine  # noqa: F401
    import transformers  # noqa: F401
    import accelerate  # noqa: F401
    imports = time.perf_counter() - START
    totals: dict[str, float] = {}
    for module_name, path, stage, _ in STAGES[argv[0]]:
        wrap(module_name, path, stage, totals)
    if argv[0] == "train":  # the task pieces hold their functions: rebuild them from the timed ones
        import dataclasses

        engine = sys.modules["hf_attn.training.engine"]
        engine.SINGLE_TEXT = dataclasses.replace(engine.SINGLE_TEXT, tokenize=engine.tokenize_splits,
                                                 build_model=engine.build_model)
    began = time.perf_counter()
    code = cli_main(argv)
    wall = time.perf_counter() - START
    labels = {"imports": "imports (CLI, torch, transformers, accelerate, modelling code)"}
    labels |= {stage: label for _, _, stage, label in STAGES[argv[0]]}
    rows = [("imports", imports)] + [(stage, totals.get(stage, 0.0)) for _, _, stage, _ in STAGES[argv[0]]]
    lines = [f"hf-attn {' '.join(argv)}", f"wall {wall:.2f} s (command {time.perf_counter() - began:.2f} s); "
             f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB; "
             f"load average {os.getloadavg()[0]:.2f}", f"{'stage':60s} {'seconds':>8s} {'% wall':>7s}"]
    lines += [f"{labels[stage]:60s} {seconds:8.2f} {100 * seconds / wall:6.1f}%" for stage, seconds in rows]
    battery = {}
    if argv[0] == "analyze" and "--output-dir" in argv:
        results = os.path.join(argv[argv.index("--output-dir") + 1], "results.json")
        if os.path.exists(results):
            with open(results, encoding="utf-8") as f:
                battery = json.load(f)["summary"].get("seconds", {})
        for name, seconds in battery.items():
            if name != "total":
                lines.append(f"{'  battery: ' + name:60s} {seconds:8.2f} {100 * seconds / wall:6.1f}%")
    print("\n".join(lines))
    if record:
        with open(record, "w", encoding="utf-8") as f:
            json.dump({"command": ["hf-attn", *[a if not os.path.isabs(a) else "<path>" for a in argv]], "note": note,
                       "wall_seconds": round(wall, 3), "stages": {k: round(v, 3) for k, v in rows},
                       "stage_names": {k: labels[k].strip() for k, _ in rows},
                       "battery_seconds": battery, "threads": os.environ.get("OMP_NUM_THREADS"),
                       "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3),
                       "load_average_after": round(os.getloadavg()[0], 2)}, f, indent=1)
    return code or 0


if __name__ == "__main__":
    sys.exit(main())
