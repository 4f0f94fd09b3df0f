"""``hf-attn analyze`` options generated from the typed settings dataclasses
(:mod:`hf_attn.core.settings_cli`): the parser has exactly the flags the fields declare, the help
shows each option's type, default and choices from the dataclass, one ``--threads`` feeds the
batteries, and ``--config FILE`` (JSON or YAML) sets the defaults that the command line overrides;
a bad file is a one-line error naming the file and the key (exit code 2)."""

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hf_attn.cli import build_parser, main
from hf_attn.core.settings_cli import OPTION, SettingsFileError, read_settings_file
from hf_attn.runs import available_batteries

ROOT = Path(__file__).resolve().parents[1]
PREFIXES = {"jw": "jw", "wp": "wp", "ts": "ts", "faithfulness": "faith"}


def _declared(settings_class, prefix):
    """(flags added by the battery's group, command options read) from the fields' metadata, walked here
    independently of the generator."""
    flags, commands = set(), set()
    for f in dataclasses.fields(settings_class):
        factory = f.default_factory
        if factory is not dataclasses.MISSING and dataclasses.is_dataclass(factory):
            inner_flags, inner_commands = _declared(factory, prefix)
            flags |= inner_flags
            commands |= inner_commands
            continue
        cli = f.metadata.get(OPTION)
        if cli is None:
            continue
        if cli.command:
            commands.add("--" + cli.command)
            continue
        name = cli.flag or f.name.replace("_", "-")
        flags |= {name if name.startswith("--") else f"--{prefix}-{name}", *cli.aliases}
    return flags, commands


def _analyze_parser(argv):
    parser = build_parser("analyze", argv)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["analyze"]


@pytest.mark.parametrize("name", list(PREFIXES))
def test_the_parser_has_exactly_the_flags_of_the_dataclass_fields(name):
    battery = available_batteries([name])[name]
    assert battery.prefix == PREFIXES[name]
    parser = _analyze_parser(["analyze", "M", "--battery", name])
    group = next(g for g in parser._action_groups if g.title.startswith(f"{name} battery ("))
    generated = {flag for action in group._group_actions for flag in action.option_strings}
    flags, commands = _declared(battery.settings_class, battery.prefix)
    assert generated == flags
    assert commands <= set(parser._option_string_actions)  # --split, --seed, --quiet, --threads
    assert not any(flag.startswith(f"--{battery.prefix}-") for flag in commands)


def test_the_existing_jw_flag_spellings_are_kept():
    parser = _analyze_parser(["analyze", "M", "--battery", "jw"])
    group = next(g for g in parser._action_groups if g.title.startswith("jw battery ("))
    generated = {flag for action in group._group_actions for flag in action.option_strings}
    assert generated == {"--jw-permutations", "--jw-adversaries", "--jw-lambda", "--jw-eps", "--jw-steps", "--jw-lr",
                         "--jw-token-budget", "--jw-gradient-token-budget", "--jw-loo-token-budget",
                         "--jw-tie-tolerance", "--jw-max-instances", "--jw-no-cache", "--jw-layer", "--jw-heads",
                         "--device", "--precision", "--dataset", "--text-column", "--label-column", "--max-length"}


def _settings(*argv, name="jw"):
    argv = ["analyze", "M", "--battery", name, *argv]
    args = build_parser("analyze", argv).parse_args(argv)
    return available_batteries([name])[name].settings_from_args(args)


def test_one_max_length_option_feeds_the_jw_battery_and_the_table(capsys):
    from hf_attn.batteries.jw.common import length_for

    assert _settings().algorithm.max_length is None
    assert _settings("--max-length", "64").algorithm.max_length == 64
    assert _settings("--max-length", "window").algorithm.max_length == "window"
    assert _settings("--max-length", "64", name="faithfulness").max_length == 64
    assert _settings("--max-length", "window", name="faithfulness").max_length == "window"
    assert _settings(name="faithfulness").max_length is None

    class Config:  # what length_for reads of a model
        model_type = "bert"

    class Model:
        config = Config()

    assert length_for(Model(), None) == 512 and length_for(Model(), "window") is None and length_for(Model(), 9) == 9
    Config.model_type = "hf_attn"
    assert length_for(Model(), None) is None
    for bad in ("0", "many", "-3"):
        with pytest.raises((SystemExit, ValueError)) as error:
            _settings("--max-length", bad)
        if isinstance(error.value, SystemExit):
            assert error.value.code == 2 and "--max-length" in capsys.readouterr().err
        else:
            assert "--max-length" in str(error.value)


def test_one_threads_option_feeds_the_jw_battery(capsys):
    assert _settings("--threads", "2").algorithm.num_threads == 2
    assert _settings("--threads", "auto").algorithm.num_threads is None  # the command set torch's threads
    with pytest.raises(SystemExit) as exit_info:
        _settings("--jw-threads", "1")
    assert exit_info.value.code == 2 and "--jw-threads" in capsys.readouterr().err


def test_help_shows_type_default_and_choices_from_the_dataclass():
    done = subprocess.run([sys.executable, "-m", "hf_attn.cli", "analyze", "--help"], capture_output=True, text=True,
                          cwd=ROOT, env={"COLUMNS": "400", "PATH": "", "HF_HUB_OFFLINE": "1"}, check=True)
    text = " ".join(done.stdout.split())
    assert "permutations per instance (Alg. 2) (int ≥ 1, default 100; key num_permutations)" in text
    assert "({float32,bfloat16,float16}, default float32)" in text
    assert "Adam learning rate of the adversary search (number > 0, default 0.01)" in text
    assert "exact NAOPC bounds up to this many tokens (2^n forwards) (int in [0, 20], default 10)" in text
    assert "do not cache batches for resuming (key use_cache)" in text
    assert "--config FILE" in text and "--jw-threads" not in text


def test_jw_eps_help_names_the_qa_threshold():
    from hf_attn.batteries.jw.pair import QA_EPS

    parser = _analyze_parser(["analyze", "M", "--battery", "jw"])
    assert f"default 0.01; {QA_EPS} on the QA datasets" in parser._option_string_actions["--jw-eps"].help


# ----------------------------------------------------------------------------------- settings files
def _write(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(path)


def test_file_values_reach_the_settings_and_the_command_line_overrides_them(tmp_path):
    path = _write(tmp_path, "s.json", {"jw": {"num_permutations": 50, "k": 3, "eps": 0.2, "use_cache": False,
                                              "seed": 7, "split": "validation", "transformer_heads": 2,
                                              "max_instances": None, "num_threads": 1},
                                       "ts": {"mi_words": 5}})
    settings = _settings("--config", path)
    assert (settings.algorithm.num_permutations, settings.algorithm.k, settings.algorithm.eps) == (50, 3, 0.2)
    assert settings.eps_given and not settings.use_cache and settings.algorithm.seed == 7
    assert settings.split == "validation" and settings.transformer_heads == "2" and settings.max_instances is None
    assert settings.algorithm.num_threads == 1
    again = _settings("--config", path, "--jw-permutations", "9", "--seed", "1", "--threads", "2")
    assert (again.algorithm.num_permutations, again.algorithm.seed, again.algorithm.num_threads) == (9, 1, 2)
    assert again.algorithm.k == 3 and not again.use_cache  # the rest still from the file
    assert _settings("--config", path, "--jw-permutations", "100").algorithm.num_permutations == 100


def test_yaml_file_with_lists_and_other_batteries(tmp_path):
    path = _write(tmp_path, "s.yaml", "faithfulness:\n  methods: [attention, rollout]\n  fractions: [0.1, 0.5]\n"
                                      "  ig_target: 0\n  naopc_beam: 0\n  progress: false\n"
                                      "wp:\n  lambdas: [0.5, 2]\n  seed_model_dirs: [a, b]\n")
    table_run = _settings("--config", path, name="faithfulness")
    assert table_run.table.methods == ("attention", "rollout") and table_run.table.fractions == (0.1, 0.5)
    assert table_run.table.ig_target is None and table_run.table.naopc_beam == 0 and not table_run.progress
    wp = _settings("--config", path, "--wp-lambdas", "3", name="wp")
    assert wp.lambdas == (3.0,) and wp.seed_model_dirs == ("a", "b")


@pytest.mark.parametrize("content, message", [
    ({"jw": {"permutations": 5}}, "jw.permutations: unknown key (the key of --jw-permutations is num_permutations)"),
    ({"jw": {"num_permutations": 0}}, "jw.num_permutations: must be >= 1, got 0"),
    ({"jw": {"num_permutations": "many"}}, "jw.num_permutations: expected a whole number, got 'many'"),
    ({"jw": {"num_permutations": 2.5}}, "jw.num_permutations: expected a whole number, got '2.5'"),
    ({"jw": {"num_permutations": True}}, "jw.num_permutations: expected int ≥ 1, got true"),
    ({"jw": {"num_permutations": 10 ** 9}}, "jw.num_permutations: must be <= 100000"),
    ({"jw": {"use_cache": "no"}}, "jw.use_cache: expected true or false, got 'no'"),
    ({"jw": {"precision": "float64"}}, "jw.precision: must be one of float32, bfloat16, float16, got 'float64'"),
    ({"jw": {"steps": None}}, "jw.steps: null is not allowed here"),
    ({"jw": {"transformer_heads": "all"}}, "jw.transformer_heads: --jw-heads must be 'mean' or a head index"),
    ({"jw": {"init_scale": 2.0}}, "jw.init_scale: unknown key; the keys are"),
    ({"jx": {}}, "unknown section 'jx'; the sections are jw, wp, ts, faithfulness"),
    ({"jw": [1]}, "jw: expected a mapping of settings, got list"),
    ([1, 2], "expected a mapping of sections, got list"),
])
def test_a_bad_file_is_one_line_naming_the_file_and_the_key(tmp_path, capsys, content, message):
    path = _write(tmp_path, "bad.json", content)
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", str(tmp_path), "--battery", "jw", "--config", path])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--config {path}: " in err and message in err, err


def test_unreadable_files(tmp_path, monkeypatch):
    with pytest.raises(SettingsFileError, match="cannot be read"):
        read_settings_file(str(tmp_path / "missing.json"))
    with pytest.raises(SettingsFileError, match=r"\.json, \.yaml or \.yml, got '\.toml'"):
        read_settings_file(_write(tmp_path, "s.toml", "x = 1"))
    with pytest.raises(SettingsFileError, match="not valid JSON"):
        read_settings_file(_write(tmp_path, "s.json", "{jw: 1"))
    with pytest.raises(SettingsFileError, match="not valid YAML"):
        read_settings_file(_write(tmp_path, "s.yml", "jw: [1, 2"))
    assert read_settings_file(_write(tmp_path, "empty.yaml", "")) == {}
    monkeypatch.setitem(sys.modules, "yaml", None)  # PyYAML not installed
    with pytest.raises(SettingsFileError, match=r"reading YAML needs PyYAML \(pip install pyyaml\)"):
        read_settings_file(_write(tmp_path, "s.yaml", "jw: {}"))


def test_analyze_runs_with_the_file_and_the_command_line_settings(trained_model_dir, tmp_path, capsys):
    """End to end: results.json records the file's settings, and the flag given on the command line."""
    path = _write(tmp_path, "s.yaml", "jw:\n  num_permutations: 3\n  k: 1\n  steps: 2\n  max_instances: 4\n"
                                      "  use_cache: false\n  seed: 5\n")
    out = tmp_path / "jw"
    assert main(["analyze", trained_model_dir, "--battery", "jw", "--output-dir", str(out), "--config", path,
                 "--jw-permutations", "2", "--quiet", "--threads", "1"]) == 0
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    parameters = results["parameters"]
    assert (parameters["num_permutations"], parameters["k"], parameters["steps"], parameters["seed"]) == (2, 1, 2, 5)
    assert parameters["max_instances"] == 4 == results["summary"]["num_instances"]
    assert parameters["num_threads"] == 1


@pytest.mark.parametrize("content, message", [
    ({"faithfulness": {"methods": ["attention", "nope"]}},
     "faithfulness.methods: methods must be a non-empty subset of ['attention', 'rollout'"),
    ({"faithfulness": {"metrics": "sufficiency,sufficiency"}},
     "faithfulness.metrics: metrics lists an item twice: ['sufficiency', 'sufficiency']"),
    ({"faithfulness": {"fractions": [0.5, 2]}}, "faithfulness.fractions: fractions[1]"),
])
def test_a_value_the_settings_class_refuses_names_the_file_and_the_key(tmp_path, capsys, content, message):
    """The per-value checks pass (names, numbers) but the settings class refuses the value: the error
    still names the file and the key, before any model is loaded."""
    path = _write(tmp_path, "bad.json", content)
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", str(tmp_path), "--battery", "faithfulness", "--config", path])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--config {path}: {message}" in err, err


def test_a_value_the_settings_class_refuses_names_the_flag():
    with pytest.raises(ValueError, match=r"^argument --faith-methods: methods must be a non-empty subset"):
        _settings("--faith-methods", "attention,nope", name="faithfulness")
    with pytest.raises(ValueError, match=r"^argument --faith-metrics: metrics lists an item twice"):
        _settings("--faith-metrics", "agreement agreement", name="faithfulness")
    # a value refused only beside another's: the one refused alone (every other setting at its default) is named
    with pytest.raises(ValueError, match=r"^argument --faith-naopc-every-k-max: naopc_exact_max and naopc_beam_max "
                                         r"must be ≤ naopc_every_k_max \(20\)"):
        _settings("--faith-naopc-every-k-max", "20", name="faithfulness")
    # a convert that names its flag already is not named twice
    with pytest.raises(ValueError, match=r"^--jw-heads must be 'mean' or a head index, got 'x'"):
        _settings("--jw-heads", "x")


def test_explain_options_are_generated_from_explain_settings():
    """``hf-attn explain``'s explanation options are ExplainSettings' fields: one flag per field with
    metadata, its default the field's, and parsed values (switches included) build the same settings."""
    from hf_attn.cli.explain import settings_of
    from hf_attn.explanation.settings import ExplainSettings

    parser = build_parser("explain")
    explain = parser._subparsers._group_actions[0].choices["explain"]
    flags = {s for a in explain._actions for s in a.option_strings}
    with_option = [f for f in dataclasses.fields(ExplainSettings) if f.metadata.get(OPTION)]
    assert {f.metadata[OPTION].flag for f in with_option} <= flags
    assert {f.name for f in with_option} == set(ExplainSettings.names()) - {"batch_size"}
    assert settings_of(explain.parse_args(["m", "t"])) == ExplainSettings()
    args = explain.parse_args(["m", "t", "--no-ig", "--k", "2", "--lambda", "3", "--permutations", "0"])
    assert settings_of(args) == ExplainSettings(ig=False, k=2, lam=3.0, num_permutations=0)
    help_text = explain.format_help()
    assert "adversaries per text (int ≥ 1, default 5)" in " ".join(help_text.split())


def test_train_options_are_generated_from_the_two_training_settings_classes(monkeypatch):
    """``hf-attn train``'s options are TrainSettings' and TransformerTrainSettings' fields: one flag per
    field with metadata; the command line builds the same settings as Python would, the kind-dependent
    defaults (epochs, learning rate, length) coming from the class of the model trained."""
    import hf_attn.cli as cli
    from hf_attn.training.settings import TrainSettings
    from hf_attn.training.transformer import TransformerTrainSettings

    parser = build_parser("train")
    train = parser._subparsers._group_actions[0].choices["train"]
    flags = {s for a in train._actions for s in a.option_strings}
    for cls in (TrainSettings, TransformerTrainSettings):
        for f in dataclasses.fields(cls):
            cli_option = f.metadata.get(OPTION)
            if cli_option is not None:
                assert "--" + (cli_option.flag or f.name.replace("_", "-")) in flags, f.name
    seen = {}
    monkeypatch.setattr("hf_attn.training.engine.train", lambda settings, *a, **k: seen.setdefault("lstm", settings) and {})
    monkeypatch.setattr("hf_attn.training.transformer.train_transformer_classifier",
                        lambda output_dir, settings, progress: seen.setdefault("bert", settings) and {})
    monkeypatch.setattr(cli, "format_train_summary", lambda *a, **k: "")
    cli._run_train(train.parse_args(["--output-dir", "x", "--no-class-balance", "--label-names", "neg,pos",
                                     "--hidden-size", "16"]))
    assert seen["lstm"] == TrainSettings(class_balanced=False, label_names=["neg", "pos"], hidden_size=16)
    cli._run_train(train.parse_args(["--output-dir", "x", "--base-model", "tiny", "--max-length", "900",
                                     "--seed", "3", "--freeze-layers", "1"]))
    assert seen["bert"] == TransformerTrainSettings(base_model="tiny", max_length=512, seed=3, freeze_layers=1)
    help_text = " ".join(train.format_help().split())
    assert "training epochs (int ≥ 1, default 8; 2 with --base-" in help_text  # (wrapped at the dash)


def test_eraser_options_are_generated_from_eraser_run_settings():
    """``hf-attn eraser``'s options are EraserRunSettings' fields; parsed values build the settings."""
    from hf_attn.runs.eraser import EraserRunSettings
    from hf_attn.core.settings_cli import settings_from_namespace

    parser = build_parser("eraser")
    eraser = parser._subparsers._group_actions[0].choices["eraser"]
    flags = {s for a in eraser._actions for s in a.option_strings}
    assert {f.metadata[OPTION].flag for f in dataclasses.fields(EraserRunSettings)} <= flags
    assert settings_from_namespace(EraserRunSettings, eraser.parse_args(["m"]), "") == EraserRunSettings()
    args = eraser.parse_args(["m", "--measures", "attention", "gradient", "--fractions", "0.1", "0.5",
                              "--heads", " 2 ", "--max-instances", "4"])
    assert settings_from_namespace(EraserRunSettings, args, "") == EraserRunSettings(
        measures=("attention", "gradient"), fractions=(0.1, 0.5), heads="2", max_instances=4)
    with pytest.raises(ValueError, match="--heads must be 'mean' or a head index"):
        settings_from_namespace(EraserRunSettings, eraser.parse_args(["m", "--heads", "first"]), "")
