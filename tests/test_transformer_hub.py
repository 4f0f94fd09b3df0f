"""BERT-family classifiers on the Hub: ``hf-attn push`` of a folder written by ``hf-attn
train --base-model`` (an allow-list of files, a card with valid metadata, no machine path, no code),
loaded back from the loopback Hub (tests/hub_server.py) with plain
``AutoModelForSequenceClassification.from_pretrained(repo_id)`` where hf_attn is not installed; and the
explorer Space, run from a Hub snapshot of the Space repo, explaining a BERT-family model repo, with a
visitor-typed repo whose config has ``auto_map`` loaded without its code.

Everything runs on a tiny random BERT (tests/test_transformer.py's config) fine-tuned for one epoch on
a toy task by the real ``train_transformer_classifier``; no download. The committed MiniLM records
(docs/bert_family/train_run.json, jw_results.json) stand in for a real run's run.json and J&W analysis
in the card test."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from conftest import needs_minilm
from hub_server import card_errors, lfs_pointer
from test_hub import SECRET, run_client
from test_space_security import add_hub_repo, make_attack_folder
from test_transformer import SPECIALS, TEXTS, WORDS, bert_tokenizer, tiny_model

from hf_attn.hub.push import VERIFY_SENTENCE, HubError, build_model_folder

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCS = REPO_ROOT / "docs" / "bert_family"
MODEL_ID = "tester/tiny-bert-sst"
SPACE_ID = "tester/bert-explorer"
EVIL_ID = "tester/evil-bert"
SENTENCE = "the good movies and a dull plot"
MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
EXPECTED_FILES = {"README.md", "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                  "run.json", "eval_results.json", "special_tokens_map.json", "vocab.txt"}


def tiny_base_and_toy_task(root: Path):
    """A tiny random BERT saved with its tokenizer in ``root/base`` (the base model to fine-tune) and
    a toy task (the same 20 labelled texts as every split): ``(base folder, TaskData)``."""
    from datasets import Dataset, DatasetDict

    from hf_attn.data.tasks import TaskData

    tokenizer = bert_tokenizer()
    base = root / "base"
    tiny_model(tokenizer).save_pretrained(base)
    tokenizer.save_pretrained(base)
    rows = {"text": TEXTS * 4, "label": [1, 0, 0, 0, 1] * 4}
    task = TaskData(DatasetDict({s: Dataset.from_dict(rows) for s in ("train", "validation", "test")}),
                    ["negative", "positive"], "toy")
    return base, task


@pytest.fixture(scope="module")
def bert_run(tmp_path_factory) -> Path:
    """A tiny BERT fine-tuned one epoch on a toy task by ``train_transformer_classifier``: the folder
    ``hf-attn train --base-model`` writes (run.json kind "transformer")."""
    from hf_attn.training.transformer import train_transformer_classifier

    root = tmp_path_factory.mktemp("bert")
    base, task = tiny_base_and_toy_task(root)
    threads = torch.get_num_threads()
    try:
        train_transformer_classifier(str(base), task, str(root / "run"), epochs=1, seed=0, batch_size=8,
                                     learning_rate=1e-2, progress=False, num_threads=1)
    finally:
        torch.set_num_threads(threads)
    return root / "run"


def with_junk(run_dir: Path, target: Path) -> Path:
    """A copy of ``run_dir`` with what must never be uploaded: Trainer state, a pickle, modelling code,
    secrets, dotfiles; and what may be: special_tokens_map.json, vocab.txt."""
    shutil.copytree(run_dir, target)
    checkpoint = target / "checkpoints" / "checkpoint-3"
    checkpoint.mkdir(parents=True)
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin"):
        (checkpoint / name).write_bytes(b"\x80\x04" + b"\0" * 32)
    (checkpoint / "trainer_state.json").write_text("{}")
    (target / "training_args.bin").write_bytes(b"\x80\x04pickle")
    (target / "optimizer.pt").write_bytes(b"\x80\x04pickle")
    (target / "modeling_custom.py").write_text("raise SystemExit('never uploaded')\n")
    for name in (".env", "notes.txt", "secret.key"):
        (target / name).write_text(f"HF_TOKEN={SECRET}\n")
    (target / "special_tokens_map.json").write_text(json.dumps({"cls_token": "[CLS]", "sep_token": "[SEP]",
                                                                "pad_token": "[PAD]", "unk_token": "[UNK]",
                                                                "mask_token": "[MASK]"}))
    (target / "vocab.txt").write_text("".join(f"{t}\n" for t in SPECIALS + WORDS))
    return target


@pytest.fixture(scope="module")
def minilm_like_run(bert_run, tmp_path_factory) -> Path:
    """The tiny folder carrying the committed MiniLM run's run.json (SST, base model minilm-l6, the
    base model's folder in site-packages recorded as a fresh run records it) and
    its J&W analysis (analysis/jw: results.json, the per-layer figure), plus the junk of
    :func:`with_junk`."""
    from hf_attn.adapters.transformer_attention import resolve_base_model

    if needs_minilm.args[0]:
        pytest.skip(needs_minilm.kwargs["reason"])
    target = with_junk(bert_run, tmp_path_factory.mktemp("minilm-like") / "run")
    run = json.loads((DOCS / "train_run.json").read_text())
    run["base_model_path"] = resolve_base_model("minilm-l6")  # as a fresh run records it: a machine path
    (target / "run.json").write_text(json.dumps(run, indent=2))
    analysis = target / "analysis" / "jw"
    analysis.mkdir(parents=True)
    shutil.copyfile(DOCS / "jw_results.json", analysis / "results.json")
    shutil.copyfile(DOCS / "fig_tau_per_layer.png", analysis / "fig_tau_per_layer.png")
    (analysis / "instances.jsonl").write_text("{}\n")
    (analysis / "secret.key").write_text(SECRET)
    return target


def jw_rows(readme: str) -> dict[str, list[str]]:
    section = readme.split("### Jain & Wallace (2019)")[1].split("\n### ")[0].split("\n## ")[0]
    rows = [line.strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows}


# ------------------------------------------------------------------------------ the folder and its card
def test_transformer_folder_is_an_allow_list_with_a_valid_card(minilm_like_run, tmp_path):
    from huggingface_hub import ModelCard

    out = build_model_folder(minilm_like_run, tmp_path / "out", "tester/minilm-sst")
    files = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert files == EXPECTED_FILES | {"analysis/jw/results.json", "analysis/jw/fig_tau_per_layer.png"}
    for path in out.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert SECRET.encode() not in data, path
            assert str(tmp_path).encode() not in data and tempfile.gettempdir().encode() + b"/" not in data, path
            assert str(minilm_like_run).encode() not in data and b"/site-packages" not in data, path
    assert (out / "vocab.txt").read_bytes() == (minilm_like_run / "vocab.txt").read_bytes()
    assert (out / "tokenizer.json").read_bytes() == (minilm_like_run / "tokenizer.json").read_bytes()

    readme = (out / "README.md").read_text()
    assert card_errors(readme, "model") == []
    card = ModelCard(readme, ignore_metadata_errors=False)
    run = json.loads((DOCS / "train_run.json").read_text())
    assert card.data.license == "apache-2.0" and card.data.base_model == MINILM_HUB_ID
    assert card.data.pipeline_tag == "text-classification" and card.data.library_name == "transformers"
    assert card.data.datasets == ["stanfordnlp/sst"] and card.data.metrics == ["accuracy", "f1", "roc_auc"]
    values = {r.metric_type: r.metric_value for r in card.data.eval_results}
    assert values == {"accuracy": round(run["test"]["accuracy"], 4), "f1": round(run["test"]["f1"], 4),
                      "roc_auc": round(run["test"]["roc_auc"], 4)}
    assert all((r.dataset_type, r.dataset_split) == ("stanfordnlp/sst", "test") for r in card.data.eval_results)
    assert "None" not in readme and "<local path>" not in readme and "trust_remote_code=True" not in readme
    assert 'AutoModelForSequenceClassification.from_pretrained("tester/minilm-sst")' in readme
    assert "| train | 6,920 |" in readme and "not GLUE SST-2" in readme
    assert f"| accuracy | {run['test']['accuracy']:.4f} | {run['dev']['accuracy']:.4f} |" in readme
    assert f"Training took {run['seconds']['train']:.0f} s on CPU (1 torch thread)" in readme
    # the J&W analysis: MiniLM's numbers from its results.json, as new measurements, and which attention
    jw = json.loads((DOCS / "jw_results.json").read_text())["summary"]
    rows = jw_rows(readme)
    gradient = rows["τ(attention, gradient): mean ± std, share with p < 0.05"]
    assert gradient[0].startswith(f"{jw['tau_gradient']['per_class']['0']['mean']:.2f} ± ")
    assert gradient[1].startswith(f"{jw['tau_gradient']['per_class']['1']['mean']:.2f} ± ")
    assert gradient[-1] == "new measurement" and rows["τ(attention, LOO-TVD)"][-1] == "new measurement"
    assert "layer -1, [CLS] query row, mean over heads (over word pieces; 6 layers, 12 heads)" in readme
    assert f"at mean τ = {jw['tau_gradient']['overall']['mean']:.2f} and with leave-one-out" in readme
    assert "![analysis/jw/fig_tau_per_layer.png](analysis/jw/fig_tau_per_layer.png)" in readme
    assert json.loads((out / "run.json").read_text())["base_model_path"] == "<local path>"


def test_card_of_a_run_on_local_data_names_no_hub_dataset(bert_run, tmp_path):
    """The toy run: local data (no datasets:, no model-index), a local base model (no base_model:)."""
    from huggingface_hub import ModelCard

    out = build_model_folder(bert_run, tmp_path / "out", "me/tiny")
    readme = (out / "README.md").read_text()
    assert card_errors(readme, "model") == []
    data = ModelCard(readme).data
    assert data.base_model is None and data.datasets is None and data.eval_results is None
    assert "A local dataset (`toy`)" in readme and "a local BERT-family folder" in readme
    assert json.loads((out / "run.json").read_text())["settings"]["base_model"] == "<local path>"


@pytest.mark.parametrize("breakage, message", [
    ("auto_map", r"config.json of .* has an auto_map \(custom code loaded with trust_remote_code\)"),
    ("tokenizer_auto_map", r"tokenizer_config.json of .* has an auto_map"),
    ("pickle", r"pickled weights \(pytorch_model.bin\)"),
    ("no_run_json", r"without an hf_attn run.json \(kind 'transformer'\)"),
    ("no_tokenizer", r"lacks tokenizer.json"),
    ("mismatch", r"does not load with AutoModelForSequenceClassification|disagree"),
    ("wrong_tokenizer", r"does not run on a tokenized sentence"),
])
def test_broken_or_unsafe_transformer_folders_are_refused(bert_run, tmp_path, breakage, message):
    run_dir = tmp_path / "run"
    shutil.copytree(bert_run, run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    if breakage == "auto_map":
        config["auto_map"] = {"AutoModelForSequenceClassification": "someone/code--modeling.Evil"}
        (run_dir / "config.json").write_text(json.dumps(config))
    elif breakage == "tokenizer_auto_map":
        tokenizer_config = json.loads((run_dir / "tokenizer_config.json").read_text())
        tokenizer_config["auto_map"] = {"AutoTokenizer": ["evil.Tok", None]}
        (run_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    elif breakage == "pickle":
        torch.save({"x": torch.zeros(1)}, run_dir / "pytorch_model.bin")
    elif breakage == "no_run_json":
        (run_dir / "run.json").unlink()
    elif breakage == "no_tokenizer":
        (run_dir / "tokenizer.json").unlink()
    elif breakage == "mismatch":
        (run_dir / "config.json").write_text(json.dumps(config | {"hidden_size": 32, "intermediate_size": 64}))
    elif breakage == "wrong_tokenizer":  # a word of the verification sentence gets an id past the embeddings
        tokenizer = json.loads((run_dir / "tokenizer.json").read_text())
        assert "movie" in VERIFY_SENTENCE.split()
        tokenizer["model"]["vocab"]["movie"] = config["vocab_size"] + 50
        (run_dir / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(HubError, match=message) as refused:
        build_model_folder(run_dir, tmp_path / "out", "me/model")
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "out").exists()  # nothing half-built is left behind


# ------------------------------------------------------------------------------ the loopback Hub
@pytest.fixture(scope="module")
def pushed(hub, minilm_like_run, tmp_path_factory):
    """``hf-attn push RUN --repo-id tester/tiny-bert-sst`` as a user runs it (a subprocess talking to
    the loopback Hub)."""
    from test_space_from_hub import hub_env, run

    work = tmp_path_factory.mktemp("push")
    out = run([sys.executable, "-m", "hf_attn.cli", "push", str(minilm_like_run), "--repo-id", MODEL_ID,
               "--threads", "1"], hub_env(hub, work), work, "hf-attn push")
    return {"work": work, "commit_url": out.strip().splitlines()[-1]}


def test_pushed_repo_holds_the_allow_list_with_lfs_weights(hub, pushed, minilm_like_run):
    import hashlib

    assert pushed["commit_url"].startswith(f"{hub.endpoint}/{MODEL_ID}/commit/")
    files = hub.state.repos[("model", MODEL_ID)].resolve("main").files
    assert set(files) == {".gitattributes", *EXPECTED_FILES, "analysis/jw/results.json",
                          "analysis/jw/fig_tau_per_layer.png"}
    assert not [where for where, content in hub.state.stored_blobs() if SECRET.encode() in content]
    for name, stored in files.items():
        binary = name.endswith((".safetensors", ".png"))
        assert (stored.lfs_sha256 is not None) == binary, name
        if not binary:
            text = stored.content.decode("utf-8")
            assert str(minilm_like_run) not in text and str(pushed["work"]) not in text, name
    weights = (minilm_like_run / "model.safetensors").read_bytes()
    stored = files["model.safetensors"]
    assert stored.lfs_sha256 == hashlib.sha256(weights).hexdigest()
    assert stored.git_blob == lfs_pointer(stored.lfs_sha256, len(weights))
    assert card_errors(files["README.md"].content.decode(), "model") == []


def test_loads_from_the_hub_with_plain_transformers(hub, pushed, minilm_like_run):
    """Where hf_attn cannot even be imported: AutoModelForSequenceClassification / AutoTokenizer /
    pipeline on the repo id, no trust_remote_code, transformers' own BertForSequenceClassification,
    the same logits as the local folder; the Hub served no Python file."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    local = AutoModelForSequenceClassification.from_pretrained(minilm_like_run).eval()
    tokenizer = AutoTokenizer.from_pretrained(minilm_like_run)
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = local(**batch).logits
    target = pushed["work"] / "logits.pt"
    result = run_client(f"""
        import json, sys, torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline
        model = AutoModelForSequenceClassification.from_pretrained({MODEL_ID!r}).eval()
        tokenizer = AutoTokenizer.from_pretrained({MODEL_ID!r})
        batch = tokenizer({TEXTS!r}, padding=True, return_tensors="pt")
        with torch.no_grad():
            torch.save({{"logits": model(**batch).logits, "ids": batch["input_ids"]}}, {str(target)!r})
        clf = pipeline("text-classification", model={MODEL_ID!r})
        print(json.dumps({{"class": type(model).__module__ + "." + type(model).__name__,
                          "hf_attn": any(m.split(".")[0] == "hf_attn" for m in sys.modules),
                          "pipeline": clf({SENTENCE!r})[0]["label"]}}))
    """, hub, pushed["work"], block_hf_attn=True)
    assert result["class"] == "transformers.models.bert.modeling_bert.BertForSequenceClassification"
    assert result["hf_attn"] is False and result["pipeline"] in ("negative", "positive")
    got = torch.load(target)
    assert torch.equal(got["ids"], batch["input_ids"])
    torch.testing.assert_close(got["logits"], expected, atol=1e-6, rtol=0)
    fetched = {path for _, path, _ in hub.state.requests}
    assert any(path.startswith(f"/{MODEL_ID}/resolve/") for path in fetched)
    assert not any(path.endswith(".py") for path in fetched if path.startswith(f"/{MODEL_ID}/"))


# ------------------------------------------------------------------------------ the explorer, in process
def test_explorer_loads_a_bert_folder_with_auto_map_without_its_code(bert_run, tmp_path):
    """An operator-listed BERT-family folder whose config and tokenizer config point auto_map at a
    Python file lying next to them: loaded with transformers' BertForSequenceClassification, the
    file never imported."""
    from hf_attn.app.space import ModelPolicy, explain_sentence, load_model

    marker = tmp_path / "MARKER-remote-code-ran"
    folder = make_attack_folder(tmp_path / "evil-bert", marker, model_type="bert", base=str(bert_run))
    assert (folder / "evil_code.py").is_file()
    model, tokenizer = load_model(str(folder), ModelPolicy((str(folder),)))
    assert type(model).__module__ == "transformers.models.bert.modeling_bert"
    explanation = explain_sentence(model, tokenizer, SENTENCE, num_permutations=4, k=2, steps=5)
    assert explanation.tokens[:3] == ["the", "good", "movie"]
    assert not marker.exists()


# ------------------------------------------------------------------------------ the Space from the Hub
@pytest.fixture(scope="module")
def space(hub, bert_run, pushed, tmp_path_factory):
    """``hf-attn push-space --model tester/tiny-bert-sst``, the Space repo snapshotted and started as
    the Hub runs it (tests/test_space_from_hub.py's RunningSpace: only the Space's own hf_attn and the
    distributions its requirements install), with the operator's HF_ATTN_ALLOW_ANY_MODEL=1 so that
    visitors may type any Hub id. The Hub also holds EVIL_ID: the tiny BERT with auto_map in its
    config and tokenizer config and evil_code.py, which writes a marker when imported."""
    import test_space_from_hub as sfh

    workdir = tmp_path_factory.mktemp("bert-space")
    sfh.run([sys.executable, "-m", "hf_attn.cli", "push-space", "--repo-id", SPACE_ID, "--model", MODEL_ID,
             "--threads", "1"], sfh.hub_env(hub, workdir), workdir, "hf-attn push-space")
    marker = workdir / "MARKER-remote-code-ran"
    add_hub_repo(hub, EVIL_ID, make_attack_folder(workdir / "evil-bert", marker, model_type="bert",
                                                  base=str(bert_run)))
    app = sfh.snapshot_space(hub, workdir, SPACE_ID)
    original = sfh.hub_env

    def operator_env(*args, **kwargs):
        return {**original(*args, **kwargs), "HF_ATTN_ALLOW_ANY_MODEL": "1"}

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sfh, "hub_env", operator_env)
        running = sfh.RunningSpace(app, hub, workdir)
    try:
        yield {"app": app, "running": running, "workdir": workdir, "marker": marker}
    finally:
        running.stop()


@pytest.fixture(scope="module")
def client(space):
    from gradio_client import Client

    return Client(space["running"].url, verbose=False)


@pytest.mark.slow
def test_space_from_hub_explains_a_bert_family_model(client, space, hub, minilm_like_run):
    """The Space as pushed (space_config.json names the BERT repo), the model downloaded from the Hub,
    the sentence explained with the model's last-layer [CLS] attention: the same numbers as
    explain_sentence on the pushed folder here."""
    import numpy as np

    from hf_attn.app.space import check_settings, explain_sentence, load_model

    assert json.loads((space["app"] / "space_config.json").read_text())["default_model"] == MODEL_ID
    assert not list(space["app"].rglob("model.safetensors"))
    status = client.predict(MODEL_ID, api_name="/load_model")
    assert f"Loaded **{MODEL_ID}**: transformers `bert`; explained: the last layer's attention (of 2)" in status
    assert "the first token's row" in status and "mean over 2 heads" in status
    label, summary, heatmaps, _, values = client.predict(MODEL_ID, SENTENCE, 0.01, 200, 0, api_name="/explain")
    model, tokenizer = load_model(str(minilm_like_run))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        expected = explain_sentence(model, tokenizer, SENTENCE, **check_settings(eps=0.01, steps=200, seed=0))
    finally:
        torch.set_num_threads(threads)
    assert values["tokens"] == expected.tokens and values["typed"] == expected.typed
    for name in ("attention", "gradient", "loo", "adversary_attention"):
        np.testing.assert_allclose(values[name], getattr(expected, name), atol=1e-5, err_msg=name)
    np.testing.assert_allclose(values["attention"], np.asarray(values["attention"]) / sum(values["attention"]))
    assert label["label"] == expected.label_names[expected.predicted]
    assert 'data-row="attention"' in heatmaps and "the first token's row" in summary
    fetched = {path for _, path, _ in hub.state.requests}
    assert any(p.startswith(f"/{MODEL_ID}/resolve/") and p.endswith("/model.safetensors") for p in fetched)


@pytest.mark.slow
def test_space_never_runs_the_code_of_a_typed_bert_repo(client, space, hub):
    """A visitor types a BERT-family repo whose config.json and tokenizer_config.json carry auto_map
    (and which holds evil_code.py): the Space downloads only config, weights and tokenizer files and
    loads transformers' own BertForSequenceClassification; the code is never fetched nor run."""
    status = client.predict(EVIL_ID, api_name="/load_model")
    assert f"Loaded **{EVIL_ID}**: transformers `bert`" in status
    label, *_ = client.predict(EVIL_ID, SENTENCE, 0.01, 20, 0, api_name="/explain")
    assert label["label"] in ("negative", "positive")
    fetched = {path for _, path, _ in hub.state.requests}
    assert any(p.startswith(f"/{EVIL_ID}/resolve/") and p.endswith("/config.json") for p in fetched)
    assert not any(path.endswith(".py") and EVIL_ID in path for path in fetched)
    assert not space["marker"].exists()
    assert not list((space["workdir"] / "space_hf_home").rglob("*.py"))


@pytest.mark.slow
def test_bert_space_ran_on_its_own_files(space):
    """Keep last: the Space imported the hf_attn it ships, nothing blocked was attempted."""
    report = space["running"].stop()
    assert report is not None, space["running"].log.read_text()[-3000:]
    assert report["hf_attn"] == str(space["app"].resolve() / "hf_attn" / "__init__.py")
    assert report["attempts"] == []


@pytest.mark.slow
def test_analyze_and_eraser_take_a_hub_id(hub, pushed):
    """``hf-attn analyze REPO --battery jw|wp`` and ``hf-attn eraser REPO`` on a BERT-family *Hub id*
    (a classifier not trained on this machine), with ``--dataset`` and its own columns: the weights
    come from the loopback Hub, no Python file is fetched, results.json is written."""
    from test_space_from_hub import hub_env, run

    work = pushed["work"]
    data = work / "reviews.csv"
    words = SENTENCE.split()
    data.write_text("review,stars\n" + "".join(f"{' '.join(words[i:] + words[:i])},{i % 2}\n" for i in range(6)))
    env, cli = hub_env(hub, work), [sys.executable, "-m", "hf_attn.cli"]
    columns = ["--dataset", str(data), "--text-column", "review", "--label-column", "stars", "--threads", "1",
               "--quiet"]
    run([*cli, "analyze", MODEL_ID, "--battery", "jw", "--output-dir", str(work / "jw"), "--jw-permutations", "4",
         "--jw-adversaries", "2", "--jw-steps", "3", *columns], env, work, "hf-attn analyze REPO --battery jw")
    run([*cli, "eraser", MODEL_ID, "--output-dir", str(work / "eraser"), "--ig-steps", "4", *columns], env, work,
        "hf-attn eraser REPO")
    jw_results = json.loads((work / "jw" / "results.json").read_text())
    eraser_results = json.loads((work / "eraser" / "results.json").read_text())
    assert jw_results["summary"]["num_instances"] == 6 and eraser_results["num_instances"] == 6
    fetched = {path for _, path, _ in hub.state.requests}
    assert any(path.startswith(f"/{MODEL_ID}/resolve/") and path.endswith("model.safetensors") for path in fetched)
    assert not any(path.endswith(".py") for path in fetched if path.startswith(f"/{MODEL_ID}/"))
