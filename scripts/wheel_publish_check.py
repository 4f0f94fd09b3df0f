#!/usr/bin/env python
"""A stranger's install, end to end: build hf_attn's wheel, install it into a fresh virtual
environment outside the source tree and, from another folder, train a tiny model, analyze it,
publish the model and an evaluate module to a loopback Hub (``tests/hub_server.py``); check that the
library came without gradio and that ``push-space`` then names the ``space`` extra; install the wheel's
``space`` extra, publish the explorer Space, then load all three back.

    python scripts/wheel_publish_check.py [--work DIR] [--keep]

Every step is logged with its command and duration (to stdout and ``WORK/wheel_publish_check.log``);
the first failing step stops the check with exit code 1. Nothing is read from the checkout except
the wheel built from it and the loopback Hub server script. Run by ``.ci/run``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"  # pinned everywhere: an unpinned torch pulls gigabytes of CUDA packages


class Check:
    def __init__(self, work: Path):
        self.work = work
        self.log_path = work / "wheel_publish_check.log"
        self.log_file = self.log_path.open("w", encoding="utf-8")
        self.start = time.monotonic()

    def log(self, message: str) -> None:
        line = f"[{time.monotonic() - self.start:7.1f} s] {message}"
        print(line, flush=True)
        self.log_file.write(line + "\n")
        self.log_file.flush()

    def run(self, title: str, command: list[str], cwd: Path, env: dict | None = None, timeout: float = 1800,
            quiet: bool = False) -> str:
        shown_command = [("<script>" if i and command[i - 1] == "-c" else str(c)) for i, c in enumerate(command)]
        self.log(f"{title}: $ {' '.join(shown_command)}  (in {cwd})")
        began = time.monotonic()
        result = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True,
                                timeout=timeout)
        output = (result.stdout + result.stderr).rstrip()
        self.log_file.write(output + "\n")
        shown = output if not quiet else "\n".join(output.splitlines()[-3:])
        if shown:
            print(textwrap.indent(shown, "    "), flush=True)
        if result.returncode != 0:
            self.log(f"FAILED: {title} (exit code {result.returncode})")
            raise SystemExit(1)
        self.log(f"ok: {title} ({time.monotonic() - began:.1f} s)")
        return result.stdout

    def refused(self, title: str, command: list[str], cwd: Path, env: dict, expected: str) -> None:
        """``command`` must stop with exit code 2 and one line on stderr holding ``expected``."""
        self.log(f"{title}: $ {' '.join(str(c) for c in command)}  (in {cwd})")
        result = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True,
                                timeout=600)
        lines = result.stderr.strip().splitlines()
        self.log_file.write(result.stdout + result.stderr + "\n")
        if result.returncode != 2 or len(lines) != 1 or expected not in lines[0]:
            self.log(f"FAILED: {title}: expected exit code 2 and one line with {expected!r}, got exit code "
                     f"{result.returncode}:\n{result.stderr[-2000:]}")
            raise SystemExit(1)
        self.log(f"ok: {title}: {lines[0]}")


def clean_env(**extra) -> dict:
    """The environment without the checkout or a Hub configuration of the caller's."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(GRADIO_ANALYTICS_ENABLED="False", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.update(extra)
    return env


SAMPLE_DATA = """
import csv, sys
from hf_attn.data.tasks import load_sst
task = load_sst(binary=True)
for split, n in (("train", 240), ("validation", 60), ("test", 60)):
    rows = task.splits[split].shuffle(seed=0).select(range(n))
    with open(f"{sys.argv[1]}/{split}.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows(zip(rows["text"], rows["label"]))
import hf_attn, pathlib
print("hf_attn imported from", pathlib.Path(hf_attn.__file__).parent)
"""

LOAD_BACK = """
import json, sys
import torch
import evaluate
from huggingface_hub import HfApi, snapshot_download
from transformers import AutoModelForSequenceClassification, AutoTokenizer

# the model, without importing hf_attn: its own modelling code through trust_remote_code
assert "hf_attn" not in sys.modules
tokenizer = AutoTokenizer.from_pretrained("tester/tiny-sst", trust_remote_code=True)
model = AutoModelForSequenceClassification.from_pretrained("tester/tiny-sst", trust_remote_code=True)
batch = tokenizer(["a gorgeous , witty , seductive movie ."], return_tensors="pt")
with torch.no_grad():
    out = model(**batch)
probs = out.logits.softmax(-1)[0].tolist()
assert abs(sum(probs) - 1) < 1e-5 and out.attentions.shape == batch["input_ids"].shape
card = open(snapshot_download("tester/tiny-sst") + "/README.md").read()
assert "pip install hf_attn" not in card and "/tmp/" not in card and "analysis/" in card
print("model: probabilities", [round(p, 4) for p in probs], "; card", len(card), "chars")

# the evaluate module, from the Hub, without hf_attn
metric = evaluate.load("tester/jw-correlation")
result = metric.compute(attention=[[0.5, 0.3, 0.2], [0.1, 0.6, 0.3]], importance=[[0.4, 0.35, 0.25], [0.2, 0.5, 0.3]],
                        predictions=[1, 0])
print("metric: jw-correlation keys", sorted(result)[:6])
assert "hf_attn" not in sys.modules, "the metric pulled hf_attn in"

# the Space: app.py, its requirements, the vendored hf_attn, the configured model
space = snapshot_download("tester/attention-explorer", repo_type="space", local_dir=sys.argv[1])
files = {p for p in HfApi().list_repo_files("tester/attention-explorer", repo_type="space")}
config = json.load(open(space + "/space_config.json"))
assert {"app.py", "requirements.txt", "README.md", "hf_attn/app/space.py"} <= files, sorted(files)[:20]
assert config["models"] == ["tester/tiny-sst"], config
print("space:", len(files), "files; models", config["models"])
print(space)
"""

NO_GRADIO = """
import importlib.util
import hf_attn, hf_attn.explainer, hf_attn.datasets
assert importlib.util.find_spec("gradio") is None, "gradio came with the library"
print("library without gradio:", hf_attn.datasets.load("sst"))
"""

SPACE_RUN = """
import sys
sys.path.insert(0, ".")
import app  # the Space's app.py, next to its vendored hf_attn
import hf_attn
from pathlib import Path
assert Path(hf_attn.__file__).resolve().parent == (Path.cwd() / "hf_attn").resolve(), hf_attn.__file__
from hf_attn.app.space import explain_sentence
policy, cache, because = app.startup()  # as the Space starts: its space_config.json names the model
print("space serves:", policy.models, because)
model, tokenizer = cache.get("tester/tiny-sst")
explanation = explain_sentence(model, tokenizer, "A gorgeous, witty, seductive movie.", steps=20)
print("space explains:", explanation.label_names, [round(float(p), 4) for p in explanation.probabilities])
demo = app.build_demo(policy, policy.models[0], cache, served_because=because)
print("space app builds:", type(demo).__name__, sorted(demo.get_api_info()["named_endpoints"]))
"""


_SKIPPED_EVERYWHERE = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                                            ".hypothesis")
_SKIPPED_AT_TOP = {"runs", "out", "test-artifacts"}  # run outputs of the checkout; hf_attn/runs is code


def _skipped_in_copy(folder: str, names: list[str]) -> set[str]:
    """``shutil.copytree`` ignore rule for the clean copy: build leftovers anywhere, and the top-level
    output folders (``runs/``, ``out/``) of the checkout only, never the package's ``hf_attn/runs``."""
    skipped = set(_SKIPPED_EVERYWHERE(folder, names))
    if Path(folder).resolve() == Path(REPO_ROOT).resolve():
        skipped |= _SKIPPED_AT_TOP & set(names)
    return skipped


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", help="working folder (default: a new temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the working folder")
    args = parser.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="hf-attn-wheel-check-")).resolve()
    if work.is_relative_to(REPO_ROOT):
        parser.error("--work must lie outside the source tree")
    work.mkdir(parents=True, exist_ok=True)
    check = Check(work)
    server = None
    try:
        check.log(f"working folder {work}")
        dist, venv, user = work / "dist", work / "venv", work / "user"
        user.mkdir(exist_ok=True)
        # from a clean copy of the project's files: no build/ or *.egg-info left in the checkout, and
        # nothing stale from an earlier build in the wheel
        source = work / "source"
        shutil.copytree(REPO_ROOT, source, ignore=_skipped_in_copy)
        check.run("build the wheel", [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", dist, source],
                  cwd=work, env=clean_env(), quiet=True)
        wheels = sorted(dist.glob("hf_attn-*.whl"))
        check.log(f"wheel: {wheels[-1].name} ({wheels[-1].stat().st_size / 1e6:.1f} MB)")
        check.run("create a fresh virtual environment", [sys.executable, "-m", "venv", venv], cwd=work)
        python, hf_attn = venv / "bin" / "python", venv / "bin" / "hf-attn"
        check.run("install the wheel", [python, "-m", "pip", "install", "-q", TORCH, wheels[-1]], cwd=work,
                  env=clean_env(), timeout=3600, quiet=True)
        offline = clean_env(HF_HUB_OFFLINE="1", HF_HOME=str(work / "hf_home"))
        check.run("hf-attn --version", [hf_attn, "--version"], cwd=user, env=offline)
        (user / "data").mkdir(exist_ok=True)
        check.run("write a small dataset from the packaged SST", [python, "-c", SAMPLE_DATA, user / "data"],
                  cwd=user, env=offline)
        check.run("train a tiny model", [hf_attn, "train", "--dataset", "data", "--epochs", "1", "--hidden-size", "8",
                                         "--threads", "1", "--quiet", "--output-dir", "runs/tiny"],
                  cwd=user, env=offline)
        check.run("analyze it (J&W battery)", [hf_attn, "analyze", "runs/tiny", "--battery", "jw", "--split", "test",
                                               "--jw-max-instances", "30", "--jw-permutations", "10",
                                               "--jw-adversaries", "2", "--jw-steps", "20", "--threads", "1",
                                               "--quiet", "--output-dir", "runs/tiny/jw"], cwd=user, env=offline)
        # the loopback Hub (the test suite's), in the fresh environment
        server = subprocess.Popen([python, REPO_ROOT / "tests" / "hub_server.py", "--port", "0"],
                                  stdout=subprocess.PIPE, text=True, env=clean_env(), cwd=work)
        endpoint = server.stdout.readline().strip()
        check.log(f"loopback Hub at {endpoint}")
        hub = clean_env(HF_ENDPOINT=endpoint, HF_TOKEN="hf_loopback_token", HF_HUB_DISABLE_XET="1",
                        HF_HOME=str(work / "hf_home"), HF_MODULES_CACHE=str(work / "modules"),
                        HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1")
        check.run("push the model", [hf_attn, "push", "runs/tiny", "--repo-id", "tester/tiny-sst"], cwd=user, env=hub)
        check.run("push an evaluate module by name", [hf_attn, "push-metric", "jw_correlation", "--repo-id",
                                                      "tester/jw-correlation"], cwd=user, env=hub)
        check.run("the library came without gradio", [python, "-c", NO_GRADIO], cwd=user, env=offline)
        check.refused("push-space without the space extra", [hf_attn, "push-space", "--model", "tester/tiny-sst",
                                                             "--repo-id", "tester/attention-explorer"], cwd=user,
                      env=hub, expected='pip install "hf_attn[space]"')
        check.run("install the space extra", [python, "-m", "pip", "install", "-q", TORCH, f"{wheels[-1]}[space]"],
                  cwd=work, env=clean_env(), timeout=3600, quiet=True)
        check.run("push the explorer Space", [hf_attn, "push-space", "--model", "tester/tiny-sst", "--repo-id",
                                              "tester/attention-explorer"], cwd=user, env=hub)
        out = check.run("load model, metric and Space back", [python, "-c", LOAD_BACK, work / "space"], cwd=user,
                        env=hub)
        space = Path(out.strip().splitlines()[-1])
        check.run("run the Space's app from its snapshot", [python, "-c", SPACE_RUN], cwd=space, env=hub)
        check.log("wheel publish check passed")
        return 0
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        check.log_file.close()
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
