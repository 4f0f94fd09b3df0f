"""Typed settings of the wp and ts batteries: ``hf-attn analyze --battery wp|ts`` shows the dataclass
defaults, parses to exactly the dataclass defaults when no flag is given, flags map onto fields, and
the registry takes the typed settings only. Plus the training engine's task pieces: the sentence-pair
module does not import the engine (no import loop)."""

import argparse
import ast
import dataclasses
import os
import subprocess
import sys

import pytest

from hf_attn.runs import get_battery, run_battery
from hf_attn.cli.analyze import add_parser
from hf_attn.batteries.ts.battery import TSSettings
from hf_attn.batteries.wp.battery import WPSettings

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _parse(*argv):
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"), argv=["analyze", *argv])
    return parser.parse_args(["analyze", *argv])


@pytest.mark.parametrize("name, settings_class", [("wp", WPSettings), ("ts", TSSettings)])
def test_no_flag_gives_the_dataclass_defaults(name, settings_class):
    battery = get_battery(name)
    assert battery.settings_class is settings_class
    args = _parse("MODEL", "--battery", name, "--output-dir", "OUT")
    assert battery.settings_from_args(args) == settings_class()


def test_wp_flags_set_their_fields():
    args = _parse("MODEL", "--battery", "wp", "--output-dir", "OUT", "--wp-num-seeds", "3", "--wp-lambdas",
                  "0.1,1", "--wp-guide-lambda", "0.1", "--wp-no-train", "--wp-skip-per-instance-adversary",
                  "--wp-adversary-protocol", "wp", "--wp-adversary-max-epochs", "30", "--quiet", "--seed", "4",
                  "--split", "validation", "--wp-runs-dir", "R", "--wp-epochs", "2")
    assert get_battery("wp").settings_from_args(args) == dataclasses.replace(
        WPSettings(), num_seeds=3, lambdas=(0.1, 1.0), guide_lambda=0.1, train_missing=False,
        per_instance_adversary=False, adversary_protocol="wp", adversary_max_epochs=30, progress=False, seed=4,
        split="validation", runs_dir="R", epochs=2)


def test_ts_flags_set_their_fields():
    args = _parse("MODEL", "--battery", "ts", "--output-dir", "OUT", "--ts-permutation-draws", "3",
                  "--ts-mi-split", "test", "--ts-mi-words", "50", "--ts-mi-clusters", "7",
                  "--ts-mi-max-occurrences", "99", "--ts-skip-mi", "--ts-skip-adversary", "--ts-adversary-limit", "9")
    assert get_battery("ts").settings_from_args(args) == dataclasses.replace(
        TSSettings(), permutation_draws=3, mi_split="test", mi_words=50, mi_clusters=7, mi_max_occurrences=99,
        mi=False, adversary=False, adversary_limit=9)


def _help(battery: str) -> str:
    done = subprocess.run([sys.executable, "-m", "hf_attn.cli", "analyze", "--help"], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "COLUMNS": "400"}, check=True)
    text = done.stdout
    start = text.index(f"{battery} battery (")
    return " ".join(text[start:].split())


def test_help_shows_the_dataclass_defaults():
    """Each generated option's help ends with its type, the dataclass default and the allowed values."""
    wp_help, ts_help = _help("wp"), _help("ts")
    d = WPSettings()
    assert f"seed models (int ≥ 1, default {d.num_seeds})" in wp_help
    assert "(comma-separated numbers ≥ 0, default " + ",".join(f"{x:g}" for x in d.lambdas) + ")" in wp_help
    assert f"(as W&P) (number ≥ 0, default {d.guide_lambda})" in wp_help
    assert f"(int ≥ 1, default {d.guide_seeds})" in wp_help
    assert f"({{max,median}}, default {d.seed_statistic})" in wp_help
    assert f"(int ≥ 0, default {d.adversary_steps})" in wp_help and f"({{fast,wp}}, default {d.adversary_protocol})" in wp_help
    t = TSSettings()
    assert f"(F1 averaged over draws) (int ≥ 1, default {t.permutation_draws})" in ts_help
    assert f"({{train,validation,test}}, default {t.mi_split})" in ts_help
    assert f"(int ≥ 1, default {t.mi_max_occurrences})" in ts_help
    assert f"(as T&Š) (int ≥ 1, default {t.mi_words})" in ts_help and f"(int ≥ 1, default {t.mi_clusters})" in ts_help
    assert f"split (int ≥ 1, default {t.adversary_limit})" in ts_help


def test_settings_validate_and_registry_takes_typed_settings_only(tmp_path):
    with pytest.raises(ValueError, match="seed_statistic"):
        WPSettings(seed_statistic="mean").validate()
    with pytest.raises(ValueError, match="guide_seeds"):
        WPSettings(guide_seeds=0).validate()
    with pytest.raises(ValueError, match="protocol"):
        WPSettings(adversary_protocol="slow").validate()
    with pytest.raises(ValueError, match="mi_split"):
        TSSettings(mi_split="dev").validate()
    with pytest.raises(TypeError, match="TSSettings"):
        run_battery("ts", str(tmp_path), str(tmp_path / "out"), argparse.Namespace())
    with pytest.raises(TypeError, match="WPSettings"):
        run_battery("wp", str(tmp_path), str(tmp_path / "out"), TSSettings())


def test_engine_task_pieces_without_an_import_loop():
    """training/pair.py imports nothing from training/engine.py (the engine imports it), and no
    function of the engine imports a training module at call time."""
    from hf_attn.training import engine, pair

    pair_tree = ast.parse(open(pair.__file__, encoding="utf-8").read())
    imported = {node.module for node in ast.walk(pair_tree) if isinstance(node, ast.ImportFrom)}
    assert "hf_attn.training.engine" not in imported
    engine_tree = ast.parse(open(engine.__file__, encoding="utf-8").read())
    for function in (n for n in ast.walk(engine_tree) if isinstance(n, ast.FunctionDef)):
        for node in ast.walk(function):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("hf_attn.training"), (function.name, node.module)
    for is_pair, pieces in ((False, engine.SINGLE_TEXT), (True, engine.SENTENCE_PAIR)):
        task = type("Task", (), {"is_pair": is_pair})()
        assert engine.task_pieces(task) is pieces
    assert engine.SENTENCE_PAIR.build_model is pair.build_pair_model
