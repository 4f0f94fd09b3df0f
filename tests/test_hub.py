"""Hub publishing against a loopback Hub (tests/hub_server.py): push a trained model, a metric
module and the Space with huggingface_hub, then load them back with transformers / evaluate.

huggingface_hub, transformers and evaluate read HF_ENDPOINT when they are imported and conftest has
imported them already (offline), so every client runs in a subprocess with HF_ENDPOINT pointing at
the loopback server. Xet is disabled (HF_HUB_DISABLE_XET=1): the server speaks regular base64 commits
and Git LFS basic transfers, not the Xet CAS protocol.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import torch

from hub_server import HubServer
from remote_code import BLOCK_HF_ATTN

from hf_attn.hub import build_model_folder, build_space_folder, HubError

REPO_ROOT = Path(__file__).resolve().parents[1]

TINY_METRIC = '''"""Token accuracy: a tiny evaluate module used to test publishing when none exists yet."""
import datasets
import evaluate


class tiny_accuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description="fraction of equal predictions and references", citation="", inputs_description="",
            features=datasets.Features({"predictions": datasets.Value("int64"),
                                        "references": datasets.Value("int64")}))

    def _compute(self, predictions, references):
        return {"accuracy": sum(p == r for p, r in zip(predictions, references)) / len(references)}
'''
TINY_APP = '''import gradio as gr
import evaluate

metric = evaluate.load("tiny_accuracy.py")
gr.Interface(fn=lambda p, r: metric.compute(predictions=[int(x) for x in p.split()],
                                            references=[int(x) for x in r.split()]),
             inputs=["text", "text"], outputs="json").launch()
'''
TINY_README = "---\ntitle: tiny accuracy\ntags:\n- evaluate\n---\n\n# tiny accuracy\n\nA test metric.\n"
SECRET = "hf_SECRET_never_on_the_hub_91c3"


@pytest.fixture(scope="module")
def hub():
    server = HubServer().start()
    yield server
    server.stop()


def run_client(script: str, hub: HubServer, workdir: Path, block_hf_attn: bool = False) -> dict:
    """Run ``script`` in a fresh interpreter talking to the loopback Hub; it prints one JSON line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_ENDPOINT=hub.endpoint, HF_TOKEN="hf_loopback_token", HF_HUB_DISABLE_XET="1",
               HF_HOME=str(workdir / "hf_home"), HF_MODULES_CACHE=str(workdir / "modules"),
               HF_HUB_DISABLE_TELEMETRY="1", GRADIO_ANALYTICS_ENABLED="False", TOKENIZERS_PARALLELISM="false",
               HF_HUB_DISABLE_PROGRESS_BARS="1")
    source = (BLOCK_HF_ATTN if block_hf_attn else "") + textwrap.dedent(script)
    result = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, env=env,
                            cwd=workdir, timeout=300)
    assert result.returncode == 0, f"{result.stderr[-4000:]}\nserver requests: {hub.state.requests[-15:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def metric_modules() -> list[Path]:
    root = REPO_ROOT / "hf_attn" / "metrics"
    return sorted(p for p in root.iterdir() if (p / f"{p.name}.py").is_file() and (p / "app.py").is_file())


@pytest.fixture(scope="module")
def published(hub, trained_model_dir, tmp_path_factory):
    """One client process pushes: the trained run (with a checkpoint folder, stray files holding a
    secret, local paths in run.json and an analysis folder added to check what is and is not
    uploaded), a tiny metric module, the real metric modules and the explorer Space."""
    work = tmp_path_factory.mktemp("hub")
    run_dir = work / "run"
    shutil.copytree(trained_model_dir, run_dir)
    (run_dir / "checkpoint-7").mkdir(exist_ok=True)
    (run_dir / "checkpoint-7" / "optimizer.pt").write_bytes(b"\0" * 64)
    for name in (".env", "notes.txt", "secret.key"):
        (run_dir / name).write_text(f"HF_TOKEN={SECRET}\n")
    run = json.loads((run_dir / "run.json").read_text())
    run["settings"]["data_path"] = str(work / "data" / "train.csv")
    run["notes"] = [f"trained in {run_dir}"]
    (run_dir / "run.json").write_text(json.dumps(run))
    analysis = run_dir / "analysis" / "jw"
    analysis.mkdir(parents=True)
    (analysis / "results.json").write_text(json.dumps(
        {"battery": "jw", "model_dir": str(run_dir), "summary": {"tau_gradient": {"negative": {"mean": 0.3125}}},
         "per_instance": [1, 2]}))
    (analysis / "figure.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 32)
    (analysis / "secret.key").write_text(SECRET)
    tiny = work / "tiny_accuracy"
    tiny.mkdir()
    (tiny / "tiny_accuracy.py").write_text(TINY_METRIC)
    (tiny / "app.py").write_text(TINY_APP)
    (tiny / "README.md").write_text(TINY_README)
    real_metrics = [str(p) for p in metric_modules()]
    out = run_client(f"""
        import json
        from hf_attn.hub import push_model, push_metric, push_space
        info = push_model({str(run_dir)!r}, "tester/lstm-sst")
        push_model({str(run_dir)!r}, "tester/lstm-sst")  # a second push is a no-op commit, not an error
        push_metric({str(tiny)!r}, "tester/tiny_accuracy")
        real = {{}}
        for path in {real_metrics!r}:
            name = path.rstrip("/").split("/")[-1]
            push_metric(path, "tester/" + name)
            real[name] = path
        push_space("tester/attention-explorer", default_model="tester/lstm-sst")
        print(json.dumps({{"commit_url": info.commit_url, "real_metrics": real}}))
    """, hub, work)
    return {"run_dir": run_dir, "work": work, **out}


def test_pushed_model_repo_contents(hub, published):
    model_repo = hub.state.repos[("model", "tester/lstm-sst")]
    files = model_repo.resolve("main").files
    assert published["commit_url"].startswith(f"{hub.endpoint}/tester/lstm-sst/commit/")
    for name in ("config.json", "model.safetensors", "modeling_hf_attn.py", "configuration_hf_attn.py",
                 "tokenizer.json", "tokenizer_config.json", "metrics.json", "run.json", "README.md",
                 "analysis/jw/results.json", "analysis/jw/figure.png"):
        assert name in files, name
    assert not any(p.startswith("checkpoint-") or p == "training_args.bin" for p in files)
    assert set(files) == {".gitattributes", "README.md", "config.json", "configuration_hf_attn.py",
                          "metrics.json", "model.safetensors", "modeling_hf_attn.py", "run.json", "tokenizer.json",
                          "tokenizer_config.json", "analysis/jw/results.json", "analysis/jw/figure.png"}
    local_paths = (str(published["work"]), str(published["run_dir"]), tempfile.gettempdir() + "/")
    for path, stored in files.items():  # no local path in any text file of the repo
        if stored.lfs_sha256 is None:
            text = stored.content.decode("utf-8")
            assert not any(local in text for local in local_paths), (path, text[:500])
    assert json.loads(files["analysis/jw/results.json"].content)["model_dir"] == "."
    run = json.loads(files["run.json"].content)
    assert run["settings"]["data_path"] == "<local path>" and run["notes"] == ["trained in ."]
    assert not [where for where, content in hub.state.stored_blobs() if SECRET.encode() in content]
    assert files["model.safetensors"].lfs_sha256 is not None  # binary → went through Git LFS
    assert files["config.json"].lfs_sha256 is None  # text → regular base64 commit
    assert files["model.safetensors"].content == (published["run_dir"] / "model.safetensors").read_bytes()
    readme = files["README.md"].content.decode()
    metrics = json.loads((published["run_dir"] / "metrics.json").read_text())
    assert f"value: {round(metrics['test_accuracy'], 4)}" in readme
    assert "config: tau_gradient.negative.mean" in readme and "value: 0.3125" in readme
    assert "![analysis/jw/figure.png](analysis/jw/figure.png)" in readme


def test_model_from_hub_registered_and_remote_code(hub, published, small_sst):
    import transformers

    from hf_attn import AttnClassifierForSequenceClassification

    local = AttnClassifierForSequenceClassification.from_pretrained(published["run_dir"]).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(published["run_dir"])
    texts = list(small_sst.splits["test"]["text"])[:8]
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = local(**batch)
    work = published["work"]
    script = f"""
        import json, torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        {{imports}}
        model = AutoModelForSequenceClassification.from_pretrained("tester/lstm-sst", {{kwargs}}).eval()
        tokenizer = AutoTokenizer.from_pretrained("tester/lstm-sst", trust_remote_code=True)
        batch = tokenizer({texts!r}, padding=True, return_tensors="pt")
        with torch.no_grad():
            out = model(**batch)
        torch.save({{{{"logits": out.logits, "attentions": out.attentions, "ids": batch["input_ids"]}}}},
                   {{target!r}})
        print(json.dumps({{{{"module": type(model).__module__}}}}))
    """
    registered = run_client(script.format(imports="import hf_attn", kwargs="", target=str(work / "reg.pt")),
                            hub, work)
    remote = run_client(script.format(imports="", kwargs="trust_remote_code=True", target=str(work / "rc.pt")),
                        hub, work, block_hf_attn=True)
    assert registered["module"] == "hf_attn.modeling_hf_attn"
    assert remote["module"].startswith("transformers_modules")
    for name in ("reg.pt", "rc.pt"):
        got = torch.load(work / name)
        assert torch.equal(got["ids"], batch["input_ids"])
        assert torch.equal(got["logits"], expected.logits)
        assert torch.equal(got["attentions"], expected.attentions)


def test_metric_modules_from_hub(hub, published):
    """The tiny module computes after evaluate.load(repo_id); every real module under
    hf_attn/metrics loads from its Space with the same features as from its local folder."""
    space = hub.state.repos[("space", "tester/tiny_accuracy")]
    files = space.resolve("main").files
    assert {"tiny_accuracy.py", "app.py", "README.md", "requirements.txt", "hf_attn/__init__.py"} <= set(files)
    readme = files["README.md"].content.decode()
    assert "sdk: gradio" in readme and "app_file: app.py" in readme and "- metric" in readme
    real = published["real_metrics"]
    result = run_client(f"""
        import json, evaluate
        metric = evaluate.load("tester/tiny_accuracy")
        out = {{"tiny": metric.compute(predictions=[1, 0, 1, 1], references=[1, 1, 1, 0]), "real": {{}}}}
        for name, path in {real!r}.items():
            hub_module, local_module = evaluate.load("tester/" + name), evaluate.load(path)
            out["real"][name] = str(hub_module.features) == str(local_module.features)
        print(json.dumps(out))
    """, hub, published["work"])
    assert result["tiny"] == {"accuracy": 0.5}
    assert result["real"] == {name: True for name in real}
    for name in real:
        readme = hub.state.repos[("space", f"tester/{name}")].resolve("main").files["README.md"].content.decode()
        assert "sdk: gradio" in readme and "app_file: app.py" in readme, name


def test_space_repo(hub, published):
    result = run_client("""
        import json
        from huggingface_hub import HfApi, hf_hub_download
        api = HfApi()
        files = api.list_repo_files("tester/attention-explorer", repo_type="space")
        readme = open(hf_hub_download("tester/attention-explorer", "README.md", repo_type="space")).read()
        config = json.load(open(hf_hub_download("tester/attention-explorer", "space_config.json",
                                                repo_type="space")))
        print(json.dumps({"files": files, "readme": readme, "config": config,
                          "sdk": api.space_info("tester/attention-explorer").sdk}))
    """, hub, published["work"])
    expected = {p.name for p in (REPO_ROOT / "spaces_app").iterdir() if p.is_file()}
    assert expected <= set(result["files"])
    assert "hf_attn/modeling_hf_attn.py" in result["files"]
    assert result["sdk"] == "gradio"
    assert result["config"] == {"default_model": "tester/lstm-sst"}
    assert "app_file: app.py" in result["readme"] and "sdk: gradio" in result["readme"]
    assert "`tester/lstm-sst`" in result["readme"]


def test_dry_run_and_to_dir(trained_model_dir, tmp_path, capsys):
    from hf_attn.cli import main

    run_dir = tmp_path / "run"
    shutil.copytree(trained_model_dir, run_dir)
    (run_dir / "checkpoint-3").mkdir(exist_ok=True)
    (run_dir / "checkpoint-3" / "model.safetensors").write_bytes(b"x")
    assert main(["push", str(run_dir), "--repo-id", "me/model", "--dry-run"]) == 0
    listed = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines() if "\t" in line]
    assert "model.safetensors" in listed and "README.md" in listed
    assert not any("checkpoint" in p or p == "training_args.bin" for p in listed)
    assert main(["push", str(run_dir), "--repo-id", "me/model", "--to-dir", str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(listed)
    assert main(["push", str(run_dir), "--repo-id", "not a repo id", "--dry-run"]) == 2
    assert main(["push", str(tmp_path), "--repo-id", "me/model", "--dry-run"]) == 2


def test_push_refuses_leaks_and_broken_models_before_uploading(hub, trained_model_dir, tmp_path):
    """push_model against the Hub: a symlink to a secret outside the run folder, a config that does not
    fit the weights and pickled weights are each refused with a one-line HubError before any repo is
    created, and the secret is nowhere on the Hub."""
    secret = tmp_path / "elsewhere" / "token.txt"
    secret.parent.mkdir()
    secret.write_text(SECRET)
    runs = {}
    for case in ("symlink", "mismatch", "pickle"):
        run_dir = runs[case] = tmp_path / case
        shutil.copytree(trained_model_dir, run_dir)
    (runs["symlink"] / "metrics.json").unlink()
    (runs["symlink"] / "metrics.json").symlink_to(secret)
    config = json.loads((runs["mismatch"] / "config.json").read_text())
    (runs["mismatch"] / "config.json").write_text(json.dumps(config | {"hidden_size": 64}))
    from safetensors.torch import load_file
    torch.save(load_file(runs["pickle"] / "model.safetensors"), runs["pickle"] / "pytorch_model.bin")
    (runs["pickle"] / "model.safetensors").unlink()
    paths = {case: str(path) for case, path in runs.items()}
    result = run_client(f"""
        import json
        from hf_attn.hub import HubError, push_model
        out = {{}}
        for case, path in {paths!r}.items():
            try:
                push_model(path, "tester/refused-" + case)
                out[case] = "uploaded"
            except HubError as err:
                out[case] = str(err)
        print(json.dumps(out))
    """, hub, tmp_path)
    assert "metrics.json is a symlink to" in result["symlink"] and "outside" in result["symlink"]
    assert result["mismatch"].startswith("config.json and model.safetensors disagree: ")
    assert "pickled weights (pytorch_model.bin)" in result["pickle"]
    assert all("\n" not in message for message in result.values())
    assert not [key for key in hub.state.repos if key[1].startswith("tester/refused-")]
    assert not [where for where, content in hub.state.stored_blobs() if SECRET.encode() in content]


def test_bad_inputs(tmp_path):
    with pytest.raises(HubError, match="no config.json"):
        build_model_folder(tmp_path, tmp_path / "out", "me/x")
    with pytest.raises(HubError, match="no app.py"):
        build_space_folder(tmp_path / "space", app_dir=tmp_path)
