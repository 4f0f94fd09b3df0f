#!/usr/bin/env python
"""Baseline-vs-new benchmark: runs the same commands with a baseline copy of the package
and with this checkout, ALTERNATELY on the same machine, and prints the medians, their ratio and the
load average around each run.

    mkdir /tmp/baseline && git archive d042f30 | tar -x -C /tmp/baseline      # once (no git state change)
    python scripts/bench/baseline.py [--baseline /tmp/baseline] [--epochs 8] [--repeats 2]
                                         [--tasks help train-300d train-glove analyze-jw]
                                         [--threads 1] [--output docs/benchmarks/baseline_comparison.txt]

Tasks (each a fresh process, as a user runs it):

* ``help``: ``hf-attn --help``;
* ``train-300d``: ``hf-attn train --embeddings random --embedding-dim 300`` (the papers' size, H = 128);
* ``train-300d-sparse``: the same with ``--sparse-embedding-updates`` (new code only; its ratio is
  against the baseline's exact training);
* ``train-300d-bf16``: the same with ``--bf16`` (bfloat16 autocast; new code only, as above);
* ``train-glove``: ``hf-attn train`` (GloVe-6B-50d, the default);
* ``analyze-jw``: ``hf-attn analyze MODEL --battery jw`` on a model trained once by the baseline
  (``--model-dir`` to give one).

The baseline runs from ``--baseline`` through ``PYTHONPATH`` (the export shadows the editable
install); the new code from the checkout holding this script. Both get ``OMP_NUM_THREADS`` =
``--threads`` (on a shared machine, one thread per job); the new code also ``--threads``. Training
rows also give the Trainer's own ``train_seconds`` and the test accuracy / ROC-AUC of both; every
row gives the peak RSS of its process (``wait4``'s ``ru_maxrss``, GiB). The
table is printed and written to ``--output`` (with the raw runs as JSON beside it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASKS = ("help", "train-300d", "train-300d-sparse", "train-300d-bf16", "train-glove", "analyze-jw")
# options the baseline may not have (they change the arithmetic): new code only, compared with the
# baseline's exact train-300d
NEW_ONLY = {"train-300d-sparse": "--sparse-embedding-updates", "train-300d-bf16": "--bf16"}


def load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def export_baseline(path: str, commit: str) -> None:
    """``git archive COMMIT`` unpacked into ``path`` (reads the repository, changes nothing in it)."""
    os.makedirs(path)
    archive = subprocess.run(["git", "-C", REPO, "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", path], input=archive, check=True)


class Runner:
    def __init__(self, baseline: str, threads: int, workdir: str):
        self.baseline, self.threads, self.workdir = baseline, threads, workdir
        self.runs: list[dict] = []

    def env(self, side: str) -> dict:
        env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS=str(self.threads),
                   MKL_NUM_THREADS=str(self.threads), TOKENIZERS_PARALLELISM="false",
                   GRADIO_ANALYTICS_ENABLED="False")
        env["PYTHONPATH"] = self.baseline if side == "baseline" else REPO
        return env

    def command(self, side: str, args: list[str]) -> list[str]:
        extra = [] if side == "baseline" or args[:1] == ["--help"] else ["--threads", str(self.threads)]
        return [sys.executable, "-m", "hf_attn.cli", *args, *extra]

    def run(self, task: str, side: str, args: list[str], output_dir: str | None = None) -> dict:
        load_before = load_average()
        start = time.perf_counter()
        with tempfile.TemporaryFile("w+") as stderr:
            process = subprocess.Popen(self.command(side, args), env=self.env(side), cwd=self.workdir,
                                       stdout=subprocess.DEVNULL, stderr=stderr, text=True)
            _, status, usage = os.wait4(process.pid, 0)  # this child's own peak RSS, not the max of all
            seconds = time.perf_counter() - start
            process.returncode = os.waitstatus_to_exitcode(status)
            if process.returncode != 0:
                stderr.seek(0)
                raise RuntimeError(f"{task} ({side}) failed ({process.returncode}):\n{stderr.read()[-3000:]}")
        run = {"task": task, "side": side, "seconds": seconds, "load_before": load_before,
               "load_after": load_average(), "peak_rss_gib": usage.ru_maxrss / 2**20}  # KiB on Linux
        metrics_path = os.path.join(output_dir, "metrics.json") if output_dir else None
        if metrics_path and os.path.exists(metrics_path):
            with open(metrics_path, encoding="utf-8") as f:
                metrics = json.load(f)
            run.update({k: metrics.get(k) for k in ("train_seconds", "test_accuracy", "test_roc_auc")})
        self.runs.append(run)
        extra = "".join(f", {k} {run[k]:.4g}" for k in ("train_seconds", "test_accuracy", "peak_rss_gib")
                        if run.get(k) is not None)
        print(f"  {task:18s} {side:8s} {seconds:8.2f} s  (load {load_before:.2f} → {run['load_after']:.2f}{extra})",
              flush=True)
        return run


def train_args(task: str, epochs: int, output_dir: str, side: str) -> list[str] | None:
    args = ["train", "--dataset", "sst", "--epochs", str(epochs), "--output-dir", output_dir, "--quiet"]
    if task.startswith("train-300d"):
        args += ["--embeddings", "random", "--embedding-dim", "300"]
    if task in NEW_ONLY:
        if side == "baseline":
            args = None  # the baseline has no such option: its exact training is the reference
        else:
            args += [NEW_ONLY[task]]
    return args


def run_task(runner: Runner, task: str, repeats: int, epochs: int, model_dir: str | None) -> None:
    order = ("baseline", "new")
    for r in range(repeats):
        for side in (order if r % 2 == 0 else order[::-1]):  # alternate who goes first
            if task == "help":
                runner.run(task, side, ["--help"])
            elif task.startswith("train"):
                out = tempfile.mkdtemp(prefix=f"{task}-{side}-", dir=runner.workdir)
                args = train_args(task, epochs, out, side)
                if args is not None:
                    runner.run(task, side, args, output_dir=out)
                shutil.rmtree(out, ignore_errors=True)
            elif task == "analyze-jw":
                out = tempfile.mkdtemp(prefix=f"jw-{side}-", dir=runner.workdir)
                shutil.rmtree(out)
                runner.run(task, side, ["analyze", model_dir, "--battery", "jw", "--output-dir", out, "--quiet"])
                shutil.rmtree(out, ignore_errors=True)


def table(runs: list[dict], tasks: list[str]) -> list[str]:
    lines = [f"{'task':18s} {'n':>3s} {'baseline s':>11s} {'new s':>9s} {'ratio':>7s}   "
             f"{'train_s base/new':>17s}   {'test acc base/new':>17s}   {'peak GiB base/new':>17s}   "
             "load avg (min–max)"]
    for task in tasks:
        rows = [r for r in runs if r["task"] == task]
        if not rows:
            continue
        base = [r for r in runs if r["task"] == task and r["side"] == "baseline"]
        if task in NEW_ONLY:
            base = [r for r in runs if r["task"] == "train-300d" and r["side"] == "baseline"]
        new = [r for r in rows if r["side"] == "new"]
        med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
        b, n = med([r["seconds"] for r in base]), med([r["seconds"] for r in new])
        loads = [x for r in rows for x in (r["load_before"], r["load_after"])]

        def pair(key, fmt):
            vb = [r[key] for r in base if r.get(key) is not None]
            vn = [r[key] for r in new if r.get(key) is not None]
            return f"{fmt.format(med(vb)) if vb else '–'}/{fmt.format(med(vn)) if vn else '–'}"

        lines.append(f"{task:18s} {len(new):3d} {b:11.2f} {n:9.2f} {b / n:6.2f}×   {pair('train_seconds', '{:.1f}'):>17s}   "
                     f"{pair('test_accuracy', '{:.3f}'):>17s}   {pair('peak_rss_gib', '{:.2f}'):>17s}   "
                     f"{min(loads):.2f}–{max(loads):.2f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="/tmp/baseline", help="exported baseline package (PYTHONPATH)")
    parser.add_argument("--baseline-commit", default="d042f30",
                        help="exported into --baseline with `git archive` if that folder does not exist")
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=1, help="runs per side of each training task")
    parser.add_argument("--fast-repeats", type=int, default=5, help="runs per side of help / analyze-jw")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model-dir", help="model for analyze-jw (default: train one with the baseline)")
    parser.add_argument("--analyze-model", choices=("glove", "300d"), default="glove",
                        help="the model the baseline trains for analyze-jw when --model-dir is not given: "
                             "GloVe-50d, 8 epochs, or the papers' size (300-d random, H = 128), 1 epoch "
                             "(the battery's work does not depend on the weights)")
    parser.add_argument("--workdir", default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--output", default=os.path.join(REPO, "docs", "benchmarks", "baseline_comparison.txt"))
    args = parser.parse_args()

    if not os.path.isdir(args.baseline):
        export_baseline(args.baseline, args.baseline_commit)
    workdir = args.workdir or tempfile.mkdtemp(prefix="hf-attn-bench-")
    os.makedirs(workdir, exist_ok=True)
    runner = Runner(os.path.abspath(args.baseline), args.threads, workdir)
    head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    header = [
        f"hf-attn benchmark, baseline vs new (scripts/bench/baseline.py), {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"machine: {os.cpu_count()} cores, {cpu_name()}, Python {platform.python_version()}; "
        f"{args.threads} torch thread(s) per job (OMP_NUM_THREADS; new code also --threads)",
        # no machine paths in the record: what was compared, not where it lay
        f"baseline: <baseline: git archive of {args.baseline_commit}> (commit {args.baseline_commit}); "
        f"new: <checkout> at {head}" + (" + uncommitted changes" if dirty else ""),
        f"training: SST, {args.epochs} epochs, seed 0, BiLSTM (H = 128) + additive; runs alternate baseline/new "
        f"(the first side swaps every repeat); seconds = wall time of the whole command",
        "analyze-jw model: " + ("given (--model-dir)" if args.model_dir else
                                {"glove": "GloVe-50d, 8 epochs", "300d": "300-d random embeddings, H = 128, 1 epoch"}
                                [args.analyze_model] + ", trained by the baseline"),
    ]
    print("\n".join(header), flush=True)
    model_dir = args.model_dir
    if "analyze-jw" in args.tasks and model_dir is None:
        model_dir = os.path.join(workdir, f"jw-model-{args.analyze_model}")
        if not os.path.exists(os.path.join(model_dir, "metrics.json")):
            size = (["--embeddings", "random", "--embedding-dim", "300", "--epochs", "1"]
                    if args.analyze_model == "300d" else [])
            print(f"training the analyze-jw model with the baseline ({args.analyze_model}) ...", flush=True)
            subprocess.run(runner.command("baseline", ["train", "--dataset", "sst", "--output-dir", model_dir,
                                                       "--quiet", *size]),
                           env=runner.env("baseline"), cwd=workdir, check=True, capture_output=True)
            # (cwd: `python -m` puts the working directory first on sys.path, before PYTHONPATH)
    for task in args.tasks:
        repeats = args.fast_repeats if task in ("help", "analyze-jw") else args.repeats
        run_task(runner, task, repeats, args.epochs, model_dir)
    lines = header + [""] + table(runner.runs, args.tasks) + [
        "", "ratio = baseline median / new median (> 1: the new code is faster); train-300d-sparse and "
            "train-300d-bf16 are compared with the baseline's exact train-300d.",
        "peak GiB = median peak RSS of the command's process (wait4 ru_maxrss).",
        "load avg = 1-minute load average before and after each run (the machine is shared)."]
    text = "\n".join(lines) + "\n"
    print("\n" + "\n".join(lines[len(header):]))
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.splitext(args.output)[0] + ".json", "w", encoding="utf-8") as f:
        json.dump({"header": header, "runs": runner.runs}, f, indent=1)
    print(f"written: {args.output}")


if __name__ == "__main__":
    main()
