"""``--threads N|auto`` on every command."""

import json
import subprocess
import sys

import pytest

from hf_attn.cli import build_parser
from hf_attn.core.threads import auto_threads, resolve_threads


@pytest.mark.parametrize("cores, load, expected", [(2, 0.0, 2), (2, 0.4, 2), (2, 0.6, 1), (2, 1.2, 1),
                                                    (2, 5.0, 1), (8, 3.2, 5), (1, 0.0, 1)])
def test_auto_takes_the_cores_the_load_average_leaves_free(cores, load, expected):
    assert auto_threads(cores, load) == expected


def test_every_command_takes_threads():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    assert {"train", "analyze", "eraser", "reproduce"} <= set(commands)
    for name, sub in commands.items():
        option = next((a for a in sub._actions if "--threads" in a.option_strings), None)
        assert option is not None and option.default == "auto", name
    assert resolve_threads("auto") >= 1 and resolve_threads(3) == 3 and resolve_threads(None) is None


def test_bad_threads_value_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["train", "--output-dir", "x", "--threads", "many"])
    assert exit_info.value.code == 2
    assert "--threads: must be a positive integer or 'auto', got 'many'" in capsys.readouterr().err


def test_train_records_the_threads_it_used(data_folder, tmp_path):
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "hf_attn.cli", "train", "--dataset", data_folder, "--embeddings",
                           "random", "--embedding-dim", "16", "--hidden-size", "8", "--epochs", "1", "--quiet",
                           "--threads", "1", "--output-dir", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads((out / "run.json").read_text())
    assert run["torch_threads"] == 1 and run["model"]["embedding_dim"] == 16
