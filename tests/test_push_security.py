"""What `hf-attn push` / `push-metric` / `push-space` may publish: an allow-list of
files, no symlink out of the published folder, no local absolute path in any uploaded file, no pickled
weights, and a model folder that loads with from_pretrained and runs before anything is uploaded.
Builder-level tests (the folder that is uploaded is exactly the built one); the loopback-Hub
counterparts live in test_hub.py."""

import json
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from conftest import needs_space

import hf_attn.hub.push as hub
from hf_attn.hub.push import HubError, build_metric_space_folder, build_model_folder, build_space_folder

SECRET = "hf_SECRET_do_not_publish_4b1d"
# What a trained run folder publishes (+ the generated README.md), nothing else.
MODEL_REPO_FILES = {"README.md", "config.json", "configuration_hf_attn.py", "metrics.json", "model.safetensors",
                    "modeling_hf_attn.py", "run.json", "tokenizer.json", "tokenizer_config.json"}


@pytest.fixture
def run_dir(trained_model_dir, tmp_path) -> Path:
    run = tmp_path / "runs" / "my run"  # a space in the path: literal matching must still catch it
    shutil.copytree(trained_model_dir, run)
    return run


@pytest.fixture
def secret_file(tmp_path) -> Path:
    path = tmp_path / "elsewhere" / "credentials.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"token": SECRET}))
    return path


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def add_analysis(folder: Path, model_dir: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(
        {"battery": "jw", "model_dir": str(model_dir), "cache": str(folder / "cache"),
         "summary": {"tau_gradient": {"negative": {"mean": 0.3125}}}}))
    (folder / "figure.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 32)
    from hf_attn.core.io import file_sha256

    # what hf-attn analyze records: the analysed model's weights checksum (push checks it)
    (folder / ".hf_attn-analysis.json").write_text(json.dumps(
        {"battery": "jw", "model": {"name": model_dir.name,
                                     "model.safetensors": file_sha256(model_dir / "model.safetensors")}}))


# --------------------------------------------------------------------------------------- symlinks
@pytest.mark.parametrize("link", ["notes.txt", "metrics.json", "analysis/jw/results.json",
                                  "analysis/jw/figure.png"])
def test_symlink_out_of_the_run_folder_is_refused(run_dir, secret_file, tmp_path, link):
    """A link to a file outside the run folder is refused whether its name is on the allow-list or not,
    at the top level or in an analysis folder; nothing is written."""
    add_analysis(run_dir / "analysis" / "jw", run_dir)
    (run_dir / link).unlink(missing_ok=True)
    (run_dir / link).symlink_to(secret_file)
    out = tmp_path / "out"
    with pytest.raises(HubError, match=rf"{Path(link).name} is a symlink to .*credentials.json, outside"):
        build_model_folder(run_dir, out, "me/model")
    assert not out.exists()


def test_symlink_inside_the_run_folder_is_copied_as_a_file(run_dir, tmp_path):
    (run_dir / "saved").mkdir()
    shutil.move(run_dir / "tokenizer_config.json", run_dir / "saved" / "tokenizer_config.json")
    (run_dir / "tokenizer_config.json").symlink_to(Path("saved") / "tokenizer_config.json")
    (run_dir / "best.safetensors").symlink_to(Path("checkpoints") / "gone.safetensors")  # dangling, not uploaded
    out = build_model_folder(run_dir, tmp_path / "out", "me/model")
    assert not (out / "tokenizer_config.json").is_symlink()
    assert (out / "tokenizer_config.json").read_bytes() == (run_dir / "saved" / "tokenizer_config.json").read_bytes()


def test_extra_analysis_folder_may_not_link_out_either(run_dir, secret_file, tmp_path):
    extra = tmp_path / "analyses" / "wp"
    add_analysis(extra, run_dir)
    (extra / "summary.md").symlink_to(secret_file)
    with pytest.raises(HubError, match="summary.md is a symlink"):
        build_model_folder(run_dir, tmp_path / "out", "me/model", analysis_dirs=[extra])


# --------------------------------------------------------------------------------------- allow-list
def test_only_allow_listed_files_are_packaged(run_dir, tmp_path):
    for name in (".env", "notes.txt", "secret.key", "optimizer.pt", "id_rsa", "README.md", "data.csv"):
        (run_dir / name).write_text(SECRET)
    add_analysis(run_dir / "analysis" / "jw", run_dir)
    for name in ("instances.jsonl", "secret.key", ".env"):
        (run_dir / "analysis" / "jw" / name).write_text(SECRET)
    (run_dir / "analysis" / "jw" / "cache").mkdir()
    (run_dir / "analysis" / "jw" / "cache" / "grads.json").write_text(SECRET)
    out = build_model_folder(run_dir, tmp_path / "out", "me/model")
    files = files_of(out)
    assert set(files) == MODEL_REPO_FILES | {"analysis/jw/results.json", "analysis/jw/figure.png"}
    assert (run_dir / "training_args.bin").exists()  # a pickle the Trainer writes: stays local
    assert not any(SECRET.encode() in content for content in files.values())


# --------------------------------------------------------------------------------------- local paths
def test_no_local_path_in_any_packaged_file(run_dir, tmp_path):
    run = json.loads((run_dir / "run.json").read_text())
    data_dir = Path.home() / "datasets" / "sst"
    run["settings"].update(dataset=str(data_dir), data_path=str(data_dir / "train.csv"))
    run["notes"] = [f"read {tmp_path}/data/train.csv and ~/more/data.csv, cache in {run_dir}/cache."]
    (run_dir / "run.json").write_text(json.dumps(run))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    metrics["best_checkpoint"] = str(run_dir / "checkpoints" / "checkpoint-19")
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    add_analysis(run_dir / "analysis" / "jw", run_dir)
    (run_dir / "analysis" / "jw" / "summary.md").write_text(f"J&W battery: {run_dir} [test]\n")
    (run_dir / "analysis" / "jw" / "table.csv").write_text(f"model,tau\n{run_dir},0.3\n")
    extra = tmp_path / "analyses" / "wp"
    add_analysis(extra, run_dir)

    out = build_model_folder(run_dir, tmp_path / "out", "me/model", analysis_dirs=[extra])
    local = {str(run_dir), str(run_dir.resolve()), str(tmp_path), str(Path.home()), tempfile.gettempdir() + "/",
             "~/more", str(data_dir)}
    for name, content in files_of(out).items():
        if name.endswith((".safetensors", ".png")):  # binary (the weights are checked byte-equal below)
            continue
        for path in local:
            assert path.encode() not in content, (name, path)
    run_out = json.loads((out / "run.json").read_text())
    assert run_out["settings"]["data_path"] == run_out["settings"]["dataset"] == hub.LOCAL_PATH
    assert run_out["notes"] == ["read <local path> and <local path>, cache in cache."]
    assert json.loads((out / "metrics.json").read_text())["best_checkpoint"] == "checkpoints/checkpoint-19"
    jw = json.loads((out / "analysis" / "jw" / "results.json").read_text())
    assert jw["model_dir"] == "." and jw["cache"] == "analysis/jw/cache"
    assert json.loads((out / "analysis" / "wp" / "results.json").read_text())["model_dir"] == "."
    assert (out / "analysis" / "jw" / "summary.md").read_text() == "J&W battery: . [test]\n"
    # untouched: the weights, the vocabulary, the modelling code; numbers and other strings of the JSON
    for name in ("model.safetensors", "tokenizer.json", "modeling_hf_attn.py", "config.json"):
        assert (out / name).read_bytes() == (run_dir / name).read_bytes(), name
    assert json.loads((out / "metrics.json").read_text())["test_accuracy"] == metrics["test_accuracy"]


def test_scrubber_leaves_urls_and_ratios_alone(tmp_path):
    scrub = hub._PathScrubber(tmp_path / "run")
    for text in ("https://aclanthology.org/N19-1357/", "tokens/s, 1/2, a / b, tau_gradient.negative.mean",
                 "arxiv:1902.10186", "![analysis/jw/figure.png](analysis/jw/figure.png)", "<local path>"):
        assert scrub.text(text) == text
    assert scrub.text("see /srv/data/x.csv.") == "see <local path>."
    assert scrub.value(str(tmp_path / "run" / "a b" / "c.json")) == "a b/c.json"
    assert scrub.value("C:\\Users\\me\\run") == hub.LOCAL_PATH


# --------------------------------------------------------------------------------------- loads + runs
def test_config_and_weights_mismatch_is_refused(run_dir, tmp_path):
    config = json.loads((run_dir / "config.json").read_text())
    (run_dir / "config.json").write_text(json.dumps(config | {"hidden_size": config["hidden_size"] // 2}))
    with pytest.raises(HubError) as err:
        build_model_folder(run_dir, tmp_path / "out", "me/model")
    message = str(err.value)
    assert message.startswith("config.json and model.safetensors disagree: ")
    assert "decoder.weight: weights [1, 256] vs config [1, 128]" in message and "\n" not in message

    (run_dir / "config.json").write_text(json.dumps(config | {"encoder": "cnn"}))
    with pytest.raises(HubError, match=r"disagree: .*encoder.convs.0.bias missing from the weights"):
        build_model_folder(run_dir, tmp_path / "out2", "me/model")


def test_tokenizer_that_does_not_fit_the_model_is_refused(run_dir, tmp_path):
    weights = load_file(run_dir / "model.safetensors")
    vocab = weights["embedding.weight"].shape[0]
    tokenizer = json.loads((run_dir / "tokenizer.json").read_text())
    token = "."
    assert token in tokenizer["model"]["vocab"] and token in hub.VERIFY_SENTENCE.split()
    tokenizer["model"]["vocab"][token] = vocab + 10  # an id past the embedding matrix
    (run_dir / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(HubError, match="does not run on a tokenized sentence"):
        build_model_folder(run_dir, tmp_path / "out", "me/model")


@pytest.mark.parametrize("keep_safetensors", [False, True])
def test_pickled_weights_are_refused(run_dir, tmp_path, keep_safetensors):
    torch.save(load_file(run_dir / "model.safetensors"), run_dir / "pytorch_model.bin")
    if not keep_safetensors:
        (run_dir / "model.safetensors").unlink()
    with pytest.raises(HubError, match=r"pickled weights \(pytorch_model.bin\).*re-save the model with safetensors"):
        build_model_folder(run_dir, tmp_path / "out", "me/model")


@pytest.mark.parametrize("breakage", ["symlink", "mismatch", "pickle"])
def test_cli_refuses_with_one_line_and_exit_code_2(run_dir, secret_file, tmp_path, capsys, breakage):
    from hf_attn.cli import main

    expected = {"symlink": "notes.txt is a symlink to", "mismatch": "config.json and model.safetensors disagree",
                "pickle": "pickled weights (pytorch_model.bin)"}[breakage]
    if breakage == "symlink":
        (run_dir / "notes.txt").symlink_to(secret_file)
    elif breakage == "mismatch":
        config = json.loads((run_dir / "config.json").read_text())
        (run_dir / "config.json").write_text(json.dumps(config | {"embedding_dim": 7}))
    else:
        torch.save(load_file(run_dir / "model.safetensors"), run_dir / "pytorch_model.bin")
    capsys.readouterr()
    for mode in (["--dry-run"], ["--to-dir", str(tmp_path / "out")]):
        assert main(["push", str(run_dir), "--repo-id", "me/model", *mode]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("hf-attn push: error: ") and expected in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------- Spaces
def test_metric_space_folder_allow_list(tmp_path, secret_file):
    module = tmp_path / "tiny_accuracy"
    module.mkdir()
    (module / "tiny_accuracy.py").write_text("# the module\n")
    (module / "helpers.py").write_text("# imported by the module\n")
    (module / "app.py").write_text("# the app\n")
    (module / "requirements.txt").write_text("scipy\n")
    for name in ("notes.txt", "secret.key", ".env", "tiny_accuracy.pyc"):
        (module / name).write_text(SECRET)
    (module / "__pycache__").mkdir()
    (module / "__pycache__" / "x.pyc").write_text(SECRET)
    out = build_metric_space_folder(module, tmp_path / "out", "me/tiny_accuracy", vendor_package=False)
    assert set(files_of(out)) == {"tiny_accuracy.py", "helpers.py", "app.py", "requirements.txt", "README.md"}
    (module / "link.py").symlink_to(secret_file)
    with pytest.raises(HubError, match="link.py is a symlink"):
        build_metric_space_folder(module, tmp_path / "out2", "me/tiny_accuracy", vendor_package=False)


@needs_space
def test_space_folder_allow_list(tmp_path, secret_file):
    app = tmp_path / "app"
    app.mkdir()
    (app / "app.py").write_text("print('hi')\n")
    (app / "requirements.txt").write_text("torch\n")
    for name in ("notes.txt", "secret.key", ".env"):
        (app / name).write_text(SECRET)
    out = build_space_folder(tmp_path / "out", "me/model", app_dir=app, vendor_package=False)
    assert set(files_of(out)) == {"app.py", "requirements.txt", "README.md", "space_config.json"}
    (app / "README.md").symlink_to(secret_file)
    with pytest.raises(HubError, match="README.md is a symlink"):
        build_space_folder(tmp_path / "out2", app_dir=app, vendor_package=False)
    with pytest.raises(HubError, match="Hub model id"):
        hub.push_space("me/space", default_model=str(tmp_path / "run"))


def test_vendored_package_is_source_and_package_data_only(tmp_path, secret_file):
    package = tmp_path / "pkg" / "hf_attn"
    shutil.copytree(hub.PACKAGE_DIR, package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))
    expected = {p.relative_to(package).as_posix() for p in package.rglob("*")
                if p.is_file() and (p.suffix == ".py" or p.parent.parent.name == "data"
                                    or (p.parent.parent.name == "metrics" and p.name == "README.md"))
                and p.relative_to(package).parts[0] not in hub.VENDOR_SKIP}  # the Space app sits beside it
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "hub.cpython-311.pyc").write_bytes(b"\0")
    (package / "runs" / "__pycache__").mkdir()
    (package / "runs" / "__pycache__" / "jw.cpython-311.pyc").write_bytes(b"\0")
    for name in ("notes.txt", "secret.key", ".env", "metrics/stray.log", "metrics/jw_correlation/secret.key",
                 "data/.DS_Store", "data/sst/.~lock.train.txt#"):
        (package / name).write_text(SECRET)
    out = tmp_path / "out"
    hub._vendor_package(out, package)
    vendored = files_of(out / "hf_attn")
    assert set(vendored) == expected
    assert "hub/push.py" in vendored and "data/sst/train.txt.gz" in vendored
    assert "metrics/jw_correlation/README.md" in vendored
    (package / "data" / "extra.csv").symlink_to(secret_file)
    with pytest.raises(HubError, match="extra.csv is a symlink"):
        hub._vendor_package(tmp_path / "out2", package)
