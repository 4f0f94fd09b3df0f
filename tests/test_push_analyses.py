"""What a model push publishes as "this model's" analyses: only analyses of this model (the weights
checksum each analysis records is checked), and after a re-push exactly the analyses the card lists
(stale analysis files of an earlier push are deleted), against the loopback Hub."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from test_hub import run_client

from hf_attn.core.io import file_sha256
from hf_attn.hub.push import ANALYSIS_RECORD, HubError, build_model_folder


def _analysis(folder: Path, checksum: str | None) -> Path:
    """A finished analysis folder: results.json and, unless ``checksum`` is None, the record
    hf-attn analyze writes (battery, settings, the analysed model's weights checksum)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps({"battery": "jw", "summary": {}}))
    if checksum is not None:
        (folder / ANALYSIS_RECORD).write_text(json.dumps(
            {"battery": "jw", "model": {"name": "lstm", "model.safetensors": checksum}, "settings": {}}))
    return folder


@pytest.fixture()
def run_dir(trained_model_dir, tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(trained_model_dir, run)
    return run


def test_an_analysis_of_another_model_is_refused(run_dir, tmp_path):
    other = _analysis(tmp_path / "other-jw", "0" * 64)
    with pytest.raises(HubError, match="computed on another model"):
        build_model_folder(run_dir, tmp_path / "out1", "tester/x", [other])
    unrecorded = _analysis(tmp_path / "bare-jw", None)
    with pytest.raises(HubError, match=f"has no {ANALYSIS_RECORD}"):
        build_model_folder(run_dir, tmp_path / "out2", "tester/x", [unrecorded])
    inside = _analysis(run_dir / "stale-jw", "f" * 64)  # inside the run folder, but of other weights
    with pytest.raises(HubError, match="computed on another model"):
        build_model_folder(run_dir, tmp_path / "out3", "tester/x")
    shutil.rmtree(inside)
    own = _analysis(tmp_path / "own-jw", file_sha256(run_dir / "model.safetensors"))
    out = build_model_folder(run_dir, tmp_path / "out4", "tester/x", [own])
    assert (Path(out) / "analysis" / "own-jw" / "results.json").is_file()


def test_cli_push_refuses_another_models_analysis_in_one_line(run_dir, tmp_path, capsys):
    from hf_attn.cli import main

    other = _analysis(tmp_path / "other-jw", "0" * 64)
    capsys.readouterr()
    code = main(["push", str(run_dir), "--repo-id", "tester/x", "--analysis", str(other), "--to-dir",
                 str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "computed on another model" in err and len(err.strip().splitlines()) == 1


def test_a_re_push_leaves_exactly_the_analyses_the_card_lists(hub, run_dir, tmp_path):
    checksum = file_sha256(run_dir / "model.safetensors")
    first = _analysis(run_dir / "analysis" / "jw", checksum)
    (first / "fig_old.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 32)
    out = run_client(f"""
        import json, shutil, pathlib
        from huggingface_hub import HfApi
        from hf_attn.hub.push import push_model
        run = pathlib.Path({str(run_dir)!r})
        push_model(str(run), "tester/repush")
        before = HfApi().list_repo_files("tester/repush")
        shutil.rmtree(run / "analysis" / "jw")
        (run / "analysis" / "wp").mkdir(parents=True)
        (run / "analysis" / "wp" / "results.json").write_text(json.dumps({{"battery": "wp", "summary": {{}}}}))
        push_model(str(run), "tester/repush")
        api = HfApi()
        after = api.list_repo_files("tester/repush")
        card = pathlib.Path(api.hf_hub_download("tester/repush", "README.md")).read_text()
        print(json.dumps({{"before": before, "after": after, "card": card}}))
    """, hub, tmp_path)
    assert "analysis/jw/fig_old.png" in out["before"]
    analyses = sorted(f for f in out["after"] if f.startswith("analysis/"))
    assert analyses and all(f.startswith("analysis/wp/") for f in analyses)
    assert "analysis/jw" not in out["card"] and "analysis/wp" in out["card"]
