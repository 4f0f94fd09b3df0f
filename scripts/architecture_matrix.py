"""The architecture matrix: each transformers architecture of the test matrix (``tests/architectures.py``:
interface-routed encoders and decoders, encoder-decoders, models hooked in their own attention
modules, one refused; a tiny random classifier each, no download)
through ``hf-attn analyze DIR --battery jw`` and through the Python API (``Explainer``), with what the
engine found (layers, heads, query rows, padding, fast path) or the exact refusal text.

    python scripts/architecture_matrix.py [--record docs/benchmarks/architecture_matrix.json]

Prints a markdown table; the record holds the same rows.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", default=None)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(1)
    from architectures import ARCHITECTURES, ENCODER_DECODERS, OWN_ATTENTION, REFUSED, TEXTS, tiny_classifier

    from hf_attn import Explainer
    from hf_attn.cli import main as cli

    rows = []
    scratch = tempfile.mkdtemp(prefix="hf-attn-matrix-")
    data = os.path.join(scratch, "data.jsonl")
    with open(data, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"text": t, "label": i % 3}) + "\n" for i, t in enumerate(TEXTS))
    for name in ARCHITECTURES + ENCODER_DECODERS + OWN_ATTENTION + REFUSED:
        model, tokenizer = tiny_classifier(name)
        folder = os.path.join(scratch, name)
        with contextlib.redirect_stderr(io.StringIO()):
            model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        err = io.StringIO()
        out_dir = os.path.join(scratch, f"{name}-jw")
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = cli(["analyze", folder, "--battery", "jw", "--dataset", data, "--output-dir", out_dir,
                        "--jw-permutations", "10", "--jw-adversaries", "2", "--jw-steps", "20", "--device", "cpu",
                        "--quiet", "--threads", "1"])
        row = {"architecture": name, "model_class": type(model).__name__, "cli_exit": code}
        if code == 0:
            with open(os.path.join(out_dir, "results.json"), encoding="utf-8") as f:
                results = json.load(f)
            spec = results["attention_spec"]
            summary = results["summary"]
            row |= {"layers": results["model"]["num_layers"], "heads": results["model"]["num_heads"],
                    "query": spec["query"], "padding": spec["padding"], "fast_path": spec["fast_path"] is not None,
                    "cli_tau_gradient": summary["tau_gradient"]["overall"]["mean"]}
            explainer = Explainer.from_pretrained(folder, device="cpu")
            result = explainer.jw(TEXTS, [i % 3 for i in range(len(TEXTS))], num_permutations=10, k=2, steps=20)
            row["api_tau_gradient"] = result.summary()["tau_gradient"]
            api, cli_tau = row["api_tau_gradient"], row["cli_tau_gradient"]
            row["api_matches_cli"] = (api is None and cli_tau is None) or (
                api is not None and cli_tau is not None and abs(api - cli_tau) < 1e-9)
        else:
            lines = [line for line in err.getvalue().splitlines() if "Loading weights" not in line and line.strip()]
            row["refusal"] = lines[-1] if lines else ""
        rows.append(row)
    print("| architecture | class | CLI exit | layers | heads | query rows | padding | fast path | τ(att, grad) CLI = API |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["cli_exit"] == 0:
            def tau(value):  # undefined when every instance's importances tie
                return "n/a" if value is None else f"{value:.3f}"

            print(f"| {r['architecture']} | {r['model_class']} | 0 | {r['layers']} | {r['heads']} | {r['query']} | "
                  f"{r['padding']} | {'yes' if r['fast_path'] else 'no'} | {tau(r['cli_tau_gradient'])} = "
                  f"{tau(r['api_tau_gradient'])} |")
        else:
            print(f"| {r['architecture']} | {r['model_class']} | {r['cli_exit']} | refused: {r['refusal']} |||||| ")
    if args.record:
        with open(args.record, "w", encoding="utf-8") as f:
            json.dump({"rows": rows, "texts": len(TEXTS)}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
