"""Hub publishing against a loopback Hub (tests/hub_server.py): push a trained model, a metric
module and the Space with huggingface_hub, then load them back with transformers / evaluate; the
model card; and the Hub's rules the loopback server enforces (LFS, revisions, card metadata, Space
metadata), each tested against the server directly so that a too-lenient server fails.

huggingface_hub, transformers and evaluate read HF_ENDPOINT when they are imported and conftest has
imported them already (offline), so every client runs in a subprocess with HF_ENDPOINT pointing at
the loopback server. Xet is disabled (HF_HUB_DISABLE_XET=1): the server speaks regular base64 commits
and Git LFS basic transfers, not the Xet CAS protocol. Raw requests (what a client that skips
huggingface_hub's own checks would send) go through http.client in this process.
"""

import base64
import hashlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import torch

from conftest import SPACE_EXTRA, needs_space
from hub_server import HubServer, card_errors, lfs_pointer
from remote_code import BLOCK_HF_ATTN

from hf_attn.hub.push import build_model_folder, build_space_folder, HubError

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


def run_jw_battery(model_dir: Path, output_dir: Path) -> dict:
    """The real ``hf-attn analyze --battery jw`` on 40 test sentences (few permutations and adversary
    steps): the results.json and figures a user publishes."""
    from hf_attn.runs import run_battery
    from hf_attn.batteries.jw.battery import JWRunSettings, JWSettings

    settings = JWRunSettings(split="test", progress=False, max_instances=40, use_cache=False,
                             algorithm=JWSettings(num_permutations=20, steps=40, num_threads=1))
    return run_battery("jw", str(model_dir), str(output_dir), settings)


def request(hub: HubServer, method: str, path: str, body=None, headers=None, host: str | None = None):
    """One raw request (no redirect following): (status, headers, body)."""
    url = urlsplit(hub.endpoint)
    connection = http.client.HTTPConnection(host or url.hostname, url.port, timeout=30)
    if isinstance(body, (dict, list)):
        body, headers = json.dumps(body).encode(), {"Content-Type": "application/json", **(headers or {})}
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def raw_commit(hub: HubServer, repo: str, operations: list[dict], repo_type: str = "model", revision: str = "main"):
    """A commit sent straight to the commit endpoint, without huggingface_hub's preupload and
    validate-yaml calls: what the server itself must refuse."""
    lines = [{"key": "header", "value": {"summary": "raw commit", "description": ""}}, *operations]
    body = "\n".join(json.dumps(line) for line in lines).encode()
    return request(hub, "POST", f"/api/{repo_type}s/{repo}/commit/{revision}", body,
                   {"Content-Type": "application/x-ndjson"})


def regular_file(path: str, content: bytes) -> dict:
    return {"key": "file", "value": {"path": path, "encoding": "base64", "content": base64.b64encode(content).decode()}}


def create_raw_repo(hub: HubServer, name: str, repo_type: str = "model", sdk: str | None = None) -> int:
    status, _, _ = request(hub, "POST", "/api/repos/create", {"name": name, "type": repo_type, "sdk": sdk})
    return status


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
    run_jw_battery(run_dir, analysis)
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
        from hf_attn.hub.push import push_model, push_metric, push_space
        info = push_model({str(run_dir)!r}, "tester/lstm-sst")
        push_model({str(run_dir)!r}, "tester/lstm-sst")  # a second push is a no-op commit, not an error
        push_metric({str(tiny)!r}, "tester/tiny_accuracy")
        real = {{}}
        for path in {real_metrics!r}:
            name = path.rstrip("/").split("/")[-1]
            push_metric(path, "tester/" + name)
            real[name] = path
        if {SPACE_EXTRA!r}:  # the explorer Space needs the space extra
            push_space("tester/attention-explorer", default_model="tester/lstm-sst")
        print(json.dumps({{"commit_url": info.commit_url, "real_metrics": real}}))
    """, hub, work)
    return {"run_dir": run_dir, "work": work, **out}


@needs_space
def test_push_space_refuses_a_model_missing_from_the_hub(hub, published):
    """A Space whose model is not on the Hub would not start: push-space refuses it, one line, exit 2,
    and creates nothing."""
    out = run_client("""
        import contextlib, io, json
        from hf_attn.cli import main
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(["push-space", "--repo-id", "tester/explorer-missing", "--model", "tester/missing"])
        print(json.dumps({"code": code, "err": err.getvalue()}))
    """, hub, published["work"])
    assert out["code"] == 2
    lines = out["err"].strip().splitlines()
    assert len(lines) == 1 and "model tester/missing does not exist on the Hub" in lines[0]
    assert ("space", "tester/explorer-missing") not in hub.state.repos


def test_pushed_model_repo_contents(hub, published):
    model_repo = hub.state.repos[("model", "tester/lstm-sst")]
    files = model_repo.resolve("main").files
    assert published["commit_url"].startswith(f"{hub.endpoint}/tester/lstm-sst/commit/")
    for name in ("config.json", "model.safetensors", "modeling_hf_attn.py", "configuration_hf_attn.py",
                 "tokenizer.json", "tokenizer_config.json", "metrics.json", "run.json", "README.md",
                 "analysis/jw/results.json", "analysis/jw/figure.png"):
        assert name in files, name
    assert not any(p.startswith("checkpoint-") or p == "training_args.bin" for p in files)
    analysis = published["run_dir"] / "analysis" / "jw"  # results.json and figures; not instances.jsonl, secret.key
    published_analysis = {f"analysis/jw/{p.name}" for p in analysis.iterdir() if p.suffix == ".png"}
    assert len(published_analysis) >= 6 and (analysis / "instances.jsonl").exists()
    assert set(files) == {".gitattributes", "README.md", "config.json", "configuration_hf_attn.py",
                          "metrics.json", "model.safetensors", "modeling_hf_attn.py", "run.json", "tokenizer.json",
                          "tokenizer_config.json", "analysis/jw/results.json", *published_analysis}
    local_paths = (str(published["work"]), str(published["run_dir"]), tempfile.gettempdir() + "/")
    for path, stored in files.items():  # no local path in any text file of the repo
        if stored.lfs_sha256 is None:
            text = stored.content.decode("utf-8")
            assert not any(local in text for local in local_paths), (path, text[:500])
    assert json.loads(files["analysis/jw/results.json"].content)["model_dir"] == "."
    run = json.loads(files["run.json"].content)
    assert run["settings"]["data_path"] == "<local path>" and run["notes"] == ["trained in ."]
    assert not [where for where, content in hub.state.stored_blobs() if SECRET.encode() in content]
    for name, stored in files.items():  # binary → Git LFS; text → regular base64 blobs
        binary = name.endswith((".safetensors", ".png"))
        assert (stored.lfs_sha256 is not None) == binary, name
        if binary:
            local = (published["run_dir"] / name).read_bytes()
            assert stored.lfs_sha256 == hashlib.sha256(local).hexdigest(), name
            assert hub.state.lfs_objects[stored.lfs_sha256] == local == stored.content, name
            assert stored.git_blob == lfs_pointer(stored.lfs_sha256, len(local)), name  # git holds the pointer


def jw_rows(readme: str) -> dict[str, list[str]]:
    """The J&W table of the card: quantity → cells."""
    section = readme.split("### Jain & Wallace (2019)")[1].split("\n### ")[0].split("\n## ")[0]
    rows = [line.strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows}


def test_pushed_model_card(hub, published):
    """The README.md on the Hub: its YAML parses with huggingface_hub; model-index holds only test
    accuracy / F1 / ROC-AUC on the named SST dataset; datasets: names it; the J&W table shows the
    measured per-class values beside J&W's published ones with a sentence generated from the numbers;
    no None and no local path anywhere; the server's own validation accepts it."""
    from huggingface_hub import ModelCard

    from hf_attn.batteries.jw.summary import PUBLISHED_SST

    files = hub.state.repos[("model", "tester/lstm-sst")].resolve("main").files
    readme = files["README.md"].content.decode()
    assert card_errors(readme, "model") == []
    card = ModelCard(readme, ignore_metadata_errors=False)
    metrics = json.loads((published["run_dir"] / "metrics.json").read_text())
    assert card.data.datasets == ["stanfordnlp/sst"]
    results = card.data.eval_results
    assert sorted(r.metric_type for r in results) == ["accuracy", "f1", "roc_auc"]
    for r in results:
        assert (r.task_type, r.dataset_type, r.dataset_config, r.dataset_split) == (
            "text-classification", "stanfordnlp/sst", "ptb", "test")
        assert r.dataset_name.startswith("SST, binary sentences")
        key = {"accuracy": "test_accuracy", "f1": "test_f1", "roc_auc": "test_roc_auc"}[r.metric_type]
        assert r.metric_value == round(metrics[key], 4)
    assert "None" not in readme and "<local path>" not in readme
    config = json.loads(files["config.json"].content)
    assert f"| hidden_size | {config['hidden_size']} |" in readme
    assert "not GLUE SST-2" in readme
    # J&W: ours per predicted class beside J&W Table 2
    jw = json.loads(files["analysis/jw/results.json"].content)
    summary, names = jw["summary"], jw["label_names"]
    rows = jw_rows(readme)
    gradient = rows["τ(attention, gradient): mean ± std, share with p < 0.05"]
    for c, cell in zip(summary["tau_gradient"]["per_class"], gradient):
        assert cell.startswith(f"{summary['tau_gradient']['per_class'][c]['mean']:.2f} ± "), cell
    published_lstm = PUBLISHED_SST["lstm"]["tau_gradient"]
    assert gradient[-1] == " / ".join(f"{m:.2f} ± {s:.2f}, {100 * f:.0f} %" for m, s, f in zip(
        published_lstm["mean"], published_lstm["std"], published_lstm["fraction_significant"]))
    assert rows["τ(attention, LOO-TVD)"][-1].startswith(f"{PUBLISHED_SST['lstm']['tau_loo']['mean'][0]:.2f}, ")
    assert rows["τ(gradient, LOO-TVD)"][-1] == "new measurement"
    header = [line for line in readme.splitlines() if line.startswith("| quantity | this model: ")][0]
    assert all(f"this model: {n}" in header for n in names)  # class names, not ids
    overall = summary["tau_gradient"]["overall"]["mean"]
    assert f"Attention agrees with gradient importance at mean τ = {overall:.2f} (J&W: 0.34–0.36)" in readme
    assert "![analysis/jw/fig2_tau_gradient.png](analysis/jw/fig2_tau_gradient.png)" in readme


def test_model_from_hub_registered_and_remote_code(hub, published, small_sst):
    import transformers

    from hf_attn import AttnClassifierForSequenceClassification

    local = AttnClassifierForSequenceClassification.from_pretrained(published["run_dir"]).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(published["run_dir"])
    texts = list(small_sst.splits["test"]["text"])[:8]
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    # Bitwise equality holds only for the same arithmetic: the LSTM's sums are split differently by
    # another thread count, so this process and the clients both run on one thread.
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            expected = local(**batch)
    finally:
        torch.set_num_threads(previous_threads)
    work = published["work"]
    script = f"""
        import json, torch
        torch.set_num_threads(1)
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
    assert registered["module"] == "hf_attn.models.modeling_hf_attn"
    assert remote["module"].startswith("transformers_modules")
    for name in ("reg.pt", "rc.pt"):
        got = torch.load(work / name)
        assert torch.equal(got["ids"], batch["input_ids"])
        assert torch.equal(got["logits"], expected.logits)
        assert torch.equal(got["attentions"], expected.attentions)


def test_pipeline_from_the_hub_without_hf_attn_reads_raw_english_like_sst(hub, published):
    """A user's path: ``pipeline`` on the pushed repo where hf_attn is not installed.
    Raw English gets the tokens and the prediction of its SST spelling (the PTB rules live in
    tokenizer.json)."""
    pairs = [("I don't like it, it isn't good.", "i do n't like it , it is n't good ."),
             ("It's not a great monster movie, but it's a good one.",
              "it 's not a great monster movie , but it 's a good one .")]
    result = run_client(f"""
        import json, sys
        from transformers import pipeline
        clf = pipeline("text-classification", model="tester/lstm-sst", trust_remote_code=True, top_k=None)
        pairs = {pairs!r}
        print(json.dumps({{"hf_attn": "hf_attn" in sys.modules,
                          "tokens": [[clf.tokenizer.tokenize(t) for t in pair] for pair in pairs],
                          "scores": [[clf(t)[0] for t in pair] for pair in pairs]}}))
    """, hub, published["work"], block_hf_attn=True)
    assert result["hf_attn"] is False
    assert result["tokens"][0][0] == ["i", "do", "n't", "like", "it", ",", "it", "is", "n't", "good", "."]
    for (raw_tokens, sst_tokens), (raw, sst) in zip(result["tokens"], result["scores"]):
        assert raw_tokens == sst_tokens and raw == sst


def test_metric_modules_from_hub(hub, published):
    """The tiny module computes after evaluate.load(repo_id); every real module under
    hf_attn/metrics loads from its Space with the same features as from its local folder."""
    space = hub.state.repos[("space", "tester/tiny_accuracy")]
    files = space.resolve("main").files
    assert {"tiny_accuracy.py", "app.py", "README.md", "requirements.txt"} <= set(files)
    assert not any(f.startswith("hf_attn/") for f in files)  # self-contained: no copy of the package
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
    import evaluate  # evaluate asks for its version tag first: 404 RevisionNotFound, then main

    tag = f"/spaces/tester/tiny_accuracy/resolve/v{evaluate.__version__}/tiny_accuracy.py"
    assert ("HEAD", tag, 404) in hub.state.requests
    assert ("GET", "/spaces/tester/tiny_accuracy/resolve/main/tiny_accuracy.py", 200) in hub.state.requests
    for name in real:
        readme = hub.state.repos[("space", f"tester/{name}")].resolve("main").files["README.md"].content.decode()
        assert "sdk: gradio" in readme and "app_file: app.py" in readme, name


@needs_space
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
    # exactly spaces_app/'s files at the top (README.md rendered from it), beside the model list and the
    # vendored package
    expected = {p.name for p in (REPO_ROOT / "spaces_app").iterdir() if p.is_file() and not p.name.startswith(".")}
    top = {name for name in result["files"] if "/" not in name} - {".gitattributes"}
    assert top == expected | {"space_config.json"}, sorted(top)
    assert not any(name.startswith(("hf_attn/spaces_app/", "hf_attn/hub_cards/")) for name in result["files"])
    assert "hf_attn/models/modeling_hf_attn.py" in result["files"]
    assert result["sdk"] == "gradio"
    assert result["config"] == {"default_model": "tester/lstm-sst", "models": ["tester/lstm-sst"]}
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
        from hf_attn.hub.push import HubError, push_model
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
    with pytest.raises(HubError, match="no app.py" if SPACE_EXTRA else "needs gradio"):
        build_space_folder(tmp_path / "space", app_dir=tmp_path)


# ------------------------------------------------------------------------ the card for other datasets
@pytest.mark.parametrize("dataset", ["imdb", "agnews", "local-csv", "hub-id", "sst-subset"])
def test_model_card_names_its_dataset_honestly(trained_model_dir, tmp_path, dataset):
    """IMDB / AG News name their Hub dataset and say how hf_attn's split differs; a Hub dataset id
    is itself; local data gets no `datasets:` id and no model-index (the Hub rejects results without
    a dataset); a subset of SST says so. Every card passes the loopback Hub's validation."""
    from huggingface_hub import ModelCard

    run_dir = tmp_path / "run"
    shutil.copytree(trained_model_dir, run_dir)
    run = json.loads((run_dir / "run.json").read_text())
    task, requested = {"imdb": ("imdb", "imdb"), "agnews": ("agnews", "agnews"),
                       "local-csv": ("reviews.csv", str(tmp_path / "data" / "reviews.csv")),
                       "hub-id": ("someone/movie-reviews", "someone/movie-reviews"),
                       "sst-subset": (run["task"], "sst")}[dataset]
    run["task"], run["settings"]["dataset"] = task, requested
    (run_dir / "run.json").write_text(json.dumps(run))
    readme = (build_model_folder(run_dir, tmp_path / "out", "me/model") / "README.md").read_text()
    assert card_errors(readme, "model") == []
    card = ModelCard(readme, ignore_metadata_errors=False)
    expected = {"imdb": "stanfordnlp/imdb", "agnews": "fancyzhx/ag_news", "local-csv": None,
                "hub-id": "someone/movie-reviews", "sst-subset": "stanfordnlp/sst"}[dataset]
    assert card.data.datasets == ([expected] if expected else None)
    if expected:
        assert {r.dataset_type for r in card.data.eval_results} == {expected}
        assert sorted(r.metric_type for r in card.data.eval_results) == ["accuracy", "f1", "roc_auc"]
    else:
        assert not card.data.eval_results and "model-index" not in readme.split("\n---\n")[0]
        assert "A local dataset (`reviews.csv`), not published on the Hub" in readme
    assert "None" not in readme and str(tmp_path) not in readme
    if dataset in ("imdb", "agnews"):
        assert "70 / 10 / 20 % with data seed 0" in readme
    if dataset == "sst-subset":
        sizes = run["split_sizes"]
        assert f"a subset of it ({sizes['train']:,} / {sizes['validation']:,} / {sizes['test']:,}" in readme


def test_model_card_survives_an_unexpected_results_file(trained_model_dir, tmp_path):
    """A results.json of an unknown analysis or an unexpected layout is pointed to, never dumped."""
    run_dir = tmp_path / "run"
    shutil.copytree(trained_model_dir, run_dir)
    for name, payload in (("jw", {"battery": "jw", "summary": {"tau_gradient": {"negative": {"mean": 0.3125}}}}),
                          ("mine", {"summary": {"a": {"b": 0.5}}})):
        (run_dir / "analysis" / name).mkdir(parents=True)
        (run_dir / "analysis" / name / "results.json").write_text(json.dumps(payload))
    readme = (build_model_folder(run_dir, tmp_path / "out", "me/model") / "README.md").read_text()
    assert "This card does not summarise `analysis/jw/results.json` (an unexpected layout)" in readme
    assert "This card does not summarise `analysis/mine/results.json` (an unknown analysis)" in readme
    assert "0.3125" not in readme and "a.b" not in readme and card_errors(readme, "model") == []


# ------------------------------------------------------------------------ the Hub's rules: LFS
def test_preupload_answers_lfs_for_binary_large_and_gitattributes_files(hub, published):
    """The preupload answer, as the Hub gives it: lfs for *.safetensors / *.gz (the repo's
    .gitattributes), binary samples (PNG, NUL bytes, invalid UTF-8) and files of 10 MB or more;
    regular for text, including UTF-8 cut inside a character at the sample's end; the oid of an
    existing LFS file is its sha256."""
    assert create_raw_repo(hub, "preupload") == 200
    cases = {"model.safetensors": (b'{"a": 1}', 8, "lfs"), "data/x.gz": (b"text really", 11, "lfs"),
             "fig.png": (b"\x89PNG\r\n\x1a\n" + b"\0" * 8, 16, "lfs"), "weights.dat": (b"\0\1\2", 3, "lfs"),
             "latin1.txt": ("café".encode("latin-1"), 4, "lfs"), "big.txt": (b"a" * 512, 10 * 1024 * 1024, "lfs"),
             "README.md": (b"# hello", 7, "regular"), "cut.txt": ("é".encode()[:1], 600, "regular"),
             "config.json": (b'{"a": 1}', 8, "regular")}
    payload = {"files": [{"path": p, "sample": base64.b64encode(sample).decode(), "size": size}
                         for p, (sample, size, _) in cases.items()]}
    status, _, body = request(hub, "POST", "/api/models/tester/preupload/preupload/main", payload)
    assert status == 200, body
    modes = {f["path"]: f["uploadMode"] for f in json.loads(body)["files"]}
    assert modes == {p: mode for p, (_, _, mode) in cases.items()}
    stored = hub.state.repos[("model", "tester/lstm-sst")].resolve("main").files
    status, _, body = request(hub, "POST", "/api/models/tester/lstm-sst/preupload/main", {"files": [
        {"path": p, "sample": "", "size": 1} for p in ("model.safetensors", "config.json")]})
    assert [f["oid"] for f in json.loads(body)["files"]] == [stored["model.safetensors"].lfs_sha256,
                                                            stored["config.json"].oid]


def test_commit_refuses_binary_and_large_files_outside_lfs(hub):
    """A commit carrying a PNG, a *.safetensors file or a 10 MB file as a regular base64 blob is
    rejected as the Hub rejects pushes of binary files outside LFS; an lfsFile naming an object that
    was never uploaded is rejected; the branch does not move. A text file commits."""
    assert create_raw_repo(hub, "binary") == 200
    repo = hub.state.repos[("model", "tester/binary")]
    head = repo.branches["main"]
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    for path, content in (("figure.png", png), ("model.safetensors", b'{"__metadata__": {}}'),
                          ("big.txt", b"a" * (10 * 1024 * 1024))):
        status, headers, body = raw_commit(hub, "tester/binary", [regular_file(path, content)])
        assert status == 400 and "must be stored with Git LFS" in json.loads(body)["error"], (path, body[:300])
    missing = hashlib.sha256(png).hexdigest()
    status, _, body = raw_commit(hub, "tester/binary", [{"key": "lfsFile", "value": {
        "path": "figure.png", "algo": "sha256", "oid": missing, "size": len(png)}}])
    assert status == 422 and b"does not exist" in body
    assert repo.branches["main"] == head and missing not in hub.state.lfs_objects
    status, _, body = raw_commit(hub, "tester/binary", [regular_file("notes.md", "naïve text\n".encode())])
    assert status == 200 and repo.branches["main"] == json.loads(body)["commitOid"] != head


def test_lfs_files_are_pointers_in_the_tree_and_downloads_go_through_the_cdn(hub, published):
    """huggingface_hub's tree listing shows the safetensors / PNG files as LFS (sha256 and size of the
    content, git oid of the pointer); hf_hub_download follows the Hub's 302 to the CDN host and gets
    the exact bytes."""
    run_dir = published["run_dir"]
    result = run_client("""
        import json
        from huggingface_hub import HfApi, hf_hub_download
        tree = {f.path: {"lfs": None if f.lfs is None else {"sha256": f.lfs.sha256, "size": f.lfs.size},
                         "blob_id": f.blob_id}
                for f in HfApi().list_repo_tree("tester/lstm-sst", recursive=True) if hasattr(f, "lfs")}
        path = hf_hub_download("tester/lstm-sst", "analysis/jw/fig2_tau_gradient.png")
        print(json.dumps({"tree": tree, "png": open(path, "rb").read().hex()}))
    """, hub, published["work"])
    for name in ("model.safetensors", "analysis/jw/fig2_tau_gradient.png"):
        content = (run_dir / name).read_bytes()
        sha256 = hashlib.sha256(content).hexdigest()
        assert result["tree"][name]["lfs"] == {"sha256": sha256, "size": len(content)}
        pointer = lfs_pointer(sha256, len(content))
        assert result["tree"][name]["blob_id"] == hashlib.sha1(b"blob %d\0" % len(pointer) + pointer).hexdigest()
    assert result["tree"]["config.json"]["lfs"] is None
    assert bytes.fromhex(result["png"]) == (run_dir / "analysis/jw/fig2_tau_gradient.png").read_bytes()
    status, headers, _ = request(hub, "HEAD", "/tester/lstm-sst/resolve/main/model.safetensors")
    assert status == 302 and headers["Location"].startswith(hub.cdn_endpoint + "/_cdn/")
    assert headers["X-Linked-Size"] == str((run_dir / "model.safetensors").stat().st_size)
    assert any(path.startswith("/_cdn/") and status == 200 for _, path, status in hub.state.requests)


# ------------------------------------------------------------------------ the Hub's rules: revisions
def test_revisions_branches_tags_and_unknown_revisions(hub, tmp_path):
    """Files, repo info and listings are served by branch, tag and full commit sha; an unknown
    revision (a name, an abbreviated sha) is RevisionNotFoundError for huggingface_hub, an OSError
    naming the revision for transformers, and committing to it fails the same way."""
    result = run_client("""
        import json
        from huggingface_hub import HfApi, hf_hub_download
        from huggingface_hub.errors import RevisionNotFoundError
        api = HfApi()
        api.create_repo("tester/revisions")
        def put(text, revision=None):
            return api.upload_file(path_or_fileobj=text.encode(), path_in_repo="a.txt", repo_id="tester/revisions",
                                   revision=revision).oid
        first = put("one")
        api.create_tag("tester/revisions", tag="v1", revision=first)
        second = put("two")
        api.create_branch("tester/revisions", branch="dev", revision="v1")
        dev = put("dev", revision="dev")
        read = lambda rev: open(hf_hub_download("tester/revisions", "a.txt", revision=rev)).read()
        out = {"main": read("main"), "tag": read("v1"), "first": read(first), "second": read(second),
               "dev": read("dev"), "info_dev": api.model_info("tester/revisions", revision="dev").sha == dev,
               "refs": sorted(b.name for b in api.list_repo_refs("tester/revisions").branches),
               "tags": [t.name for t in api.list_repo_refs("tester/revisions").tags], "errors": {}}
        calls = {"download": lambda r: hf_hub_download("tester/revisions", "a.txt", revision=r),
                 "info": lambda r: api.model_info("tester/revisions", revision=r),
                 "files": lambda r: api.list_repo_files("tester/revisions", revision=r),
                 "upload": lambda r: put("x", revision=r)}
        for rev in ("nope", first[:7]):
            for name, call in calls.items():
                try:
                    call(rev)
                    out["errors"][f"{name}@{rev}"] = "no error"
                except RevisionNotFoundError:
                    out["errors"][f"{name}@{rev}"] = "RevisionNotFoundError"
        from transformers import AutoConfig
        try:
            AutoConfig.from_pretrained("tester/lstm-sst", revision="nope")
        except OSError as err:
            out["transformers"] = str(err)
        print(json.dumps(out))
    """, hub, tmp_path)
    assert (result["main"], result["tag"], result["first"], result["second"], result["dev"]) == (
        "two", "one", "one", "two", "dev")
    assert result["info_dev"] and result["refs"] == ["dev", "main"] and result["tags"] == ["v1"]
    assert set(result["errors"].values()) == {"RevisionNotFoundError"}, result["errors"]
    assert "nope" in result["transformers"] and "not a valid git identifier" in result["transformers"]
    status, headers, _ = request(hub, "HEAD", "/tester/revisions/resolve/nope/a.txt")
    assert status == 404 and headers["X-Error-Code"] == "RevisionNotFound"


# ------------------------------------------------------------------------ the Hub's rules: card metadata
BROKEN_CARDS = {
    "model-index without a dataset": "---\nmodel-index:\n- name: m\n  results:\n  - task: {type: text-classification}\n"
                                     "    metrics: [{type: accuracy, value: 0.9}]\n---\n# m\n",
    "model-index value not a number": "---\nmodel-index:\n- name: m\n  results:\n"
                                      "  - task: {type: text-classification}\n"
                                      "    dataset: {type: stanfordnlp/sst, name: SST}\n"
                                      "    metrics: [{type: accuracy, value: [0.9]}]\n---\n# m\n",
    "YAML syntax error": "---\ntags: [a, b\nlicense: mit\n---\n# m\n",
    "YAML list, not a mapping": "---\n- a\n- b\n---\n# m\n",
    "datasets not strings": "---\ndatasets:\n- {name: sst}\n---\n# m\n",
}


@pytest.mark.parametrize("case", sorted(BROKEN_CARDS))
def test_invalid_model_card_metadata_is_rejected(hub, case):
    """validate-yaml answers 400 with the errors (huggingface_hub then raises "Invalid metadata in
    README.md"), and a commit carrying the card is rejected even when the client skipped validate-yaml;
    the branch does not move."""
    content = BROKEN_CARDS[case]
    status, _, body = request(hub, "POST", "/api/validate-yaml", {"content": content, "repoType": "model"})
    assert status == 400 and json.loads(body)["errors"], body
    name = "card-" + "".join(c if c.isalnum() else "-" for c in case)
    assert create_raw_repo(hub, name) == 200
    head = hub.state.repos[("model", f"tester/{name}")].branches["main"]
    status, _, body = raw_commit(hub, f"tester/{name}", [regular_file("README.md", content.encode())])
    assert status == 400 and "Invalid metadata in README.md" in json.loads(body)["error"]
    assert hub.state.repos[("model", f"tester/{name}")].branches["main"] == head
    good = "---\nlicense: mit\ndatasets:\n- stanfordnlp/sst\n---\n# m\n"
    assert request(hub, "POST", "/api/validate-yaml", {"content": good, "repoType": "model"})[0] == 200
    assert raw_commit(hub, f"tester/{name}", [regular_file("README.md", good.encode())])[0] == 200


def test_client_upload_of_an_invalid_card_fails(hub, tmp_path):
    """Through huggingface_hub: upload_file of a README with a broken model-index raises ValueError
    ("Invalid metadata in README.md"); a Space README without sdk or app_file too; creating a Space
    without an sdk fails."""
    result = run_client(f"""
        import json
        from huggingface_hub import HfApi
        api = HfApi()
        api.create_repo("tester/client-card")
        api.create_repo("tester/client-space", repo_type="space", space_sdk="gradio")
        out = {{}}
        cards = {{"model": {BROKEN_CARDS["model-index without a dataset"]!r},
                 "space-no-sdk": "---\\ntitle: x\\napp_file: app.py\\n---\\n",
                 "space-no-app-file": "---\\ntitle: x\\nsdk: gradio\\n---\\n",
                 "space-bad-colour": "---\\nsdk: gradio\\napp_file: app.py\\ncolorFrom: mauve\\n---\\n"}}
        for case, content in cards.items():
            repo, kind = ("tester/client-card", "model") if case == "model" else ("tester/client-space", "space")
            try:
                api.upload_file(path_or_fileobj=content.encode(), path_in_repo="README.md", repo_id=repo,
                                repo_type=kind)
                out[case] = "uploaded"
            except ValueError as err:
                out[case] = str(err)
        try:
            api.create_repo("tester/no-sdk", repo_type="space")
            out["no-sdk"] = "created"
        except Exception as err:
            out["no-sdk"] = type(err).__name__ + ": " + str(err)
        print(json.dumps(out))
    """, hub, tmp_path)
    for case in ("model", "space-no-sdk", "space-no-app-file", "space-bad-colour"):
        assert result[case].startswith("Invalid metadata in README.md"), (case, result[case])
    assert "sdk" in result["no-sdk"] and "created" not in result["no-sdk"]
    assert ("space", "tester/no-sdk") not in hub.state.repos


@needs_space
def test_space_repos_keep_their_sdk_metadata(hub, published):
    """A new Space starts with the Hub's README (sdk, app_file); a commit deleting README.md or
    replacing it with one without sdk is rejected; repo info reports the README's sdk."""
    assert create_raw_repo(hub, "bare-space", "space", sdk="gradio") == 200
    readme = hub.state.repos[("space", "tester/bare-space")].resolve("main").files["README.md"].content.decode()
    assert card_errors(readme, "space") == [] and "sdk: gradio" in readme and "app_file: app.py" in readme
    status, _, body = raw_commit(hub, "tester/bare-space", [{"key": "deletedFile", "value": {"path": "README.md"}}],
                                 repo_type="space")
    assert status == 400 and b"sdk" in body
    status, _, body = raw_commit(hub, "tester/bare-space", [regular_file("README.md", b"---\ntitle: t\n---\n")],
                                 repo_type="space")
    assert status == 400 and b"sdk" in body
    status, _, body = request(hub, "GET", "/api/spaces/tester/attention-explorer")
    assert json.loads(body)["sdk"] == "gradio" and json.loads(body)["cardData"]["app_file"] == "app.py"
    for repo_id in ("tester/attention-explorer", "tester/tiny_accuracy"):  # what push_space / push_metric wrote
        files = hub.state.repos[("space", repo_id)].resolve("main").files
        assert card_errors(files["README.md"].content.decode(), "space") == []
    explorer = hub.state.repos[("space", "tester/attention-explorer")].resolve("main").files
    archives = [stored for path, stored in explorer.items() if path.endswith(".gz")]  # the vendored SST trees
    assert archives and all(stored.lfs_sha256 for stored in archives)
