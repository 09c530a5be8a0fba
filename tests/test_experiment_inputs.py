"""Inputs that exist (2026-11-27): an experiment file names only paths that git tracks, the dataset mirror holds or a
committed command of its own makes (`make:`, bounded by its steps and seeded); a pinned experiment pins the tensors'
checksum of each BERT its make: makes (`bert_sha256=`); and before it runs, a missing path or another backbone
stops it with exit 2 naming the path or both sums, and the command that makes it (pipeline/experiment_inputs.py)."""
from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from pipeline.cli import build_parser, main
from pipeline.errors import ConfigError
from pipeline.experiment import Experiment
from pipeline.experiment_inputs import check_inputs, experiment_paths
from pipeline.rerank.integrity import pretraining_recipe, tensors_digest
from pipeline.training.mlm import MLMOptions
from pipeline.training.pretrain import pretrain
from support import REPO, SHARED_DATA, save_tiny_bert

CONFIGS = sorted(p for p in (REPO / "eval").glob("*.yaml") if p.name != "references.yaml")
SHA256 = re.compile(r"[0-9a-f]{64}")


def _tracked(path: str) -> bool:
    """Whether git tracks `path` (a file, or a folder with a tracked file): what a fresh clone has."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "--", path], capture_output=True, text=True, check=True)
    return bool(listed.stdout.strip())


def _in_mirror(path: str) -> bool:
    return Path(path).is_absolute() and Path(path).resolve().is_relative_to(SHARED_DATA.resolve())


@pytest.fixture(scope="module")
def experiments() -> dict[str, Experiment]:
    return {config.name: Experiment.load(config) for config in CONFIGS}


def test_the_experiment_files_are_found():
    assert len(CONFIGS) > 50 and any(c.name == "lcqmc-questions-test-kwbert-fusion.yaml" for c in CONFIGS)


def test_no_experiment_file_names_a_path_that_the_repository_the_mirror_or_its_make_lacks(experiments):
    missing = [f"{name}: {p.option}={p.value}" for name, e in experiments.items() for p in experiment_paths(e)
               if not (p.value in (e.make or {}) or _tracked(p.value) or _in_mirror(p.value))]
    assert not missing, ("experiment files name paths that a fresh clone and the mirror lack, with no make: command "
                         f"that makes them: {missing}")


def test_each_make_command_is_an_irpipe_command_bounded_by_steps_seeded_and_making_its_path(experiments):
    made = [(name, path, command) for name, e in experiments.items() for path, command in (e.make or {}).items()]
    assert made, "the keyword-BERT LCQMC files make their backbone"
    for name, path, command in made:
        words = shlex.split(command)
        assert words[0] == "irpipe", f"{name}: make: {path} is no irpipe command"
        args = build_parser().parse_args(words[1:])  # a command this irpipe parses (else SystemExit)
        assert args.output == path, f"{name}: make: {path} writes {args.output}"
        if args.command == "pretrain-mlm":  # bounded by steps, seeded, on one CPU thread: the same tensors again
            assert args.max_minutes is None and "--steps" in words and "--seed" in words, f"{name}: {command}"
            assert args.device == "cpu" and args.threads == 1, f"{name}: {command}"
        if args.command == "encode":  # a store: fp32 rows, no autocast, one CPU thread: scores as encoded on the fly
            assert (args.dtype, args.amp, args.device, args.threads) == ("fp32", "none", "cpu", 1), f"{name}: {command}"
    assert any(shlex.split(c)[1] == "encode" for _, _, c in made), "squad-dev-biencoder.yaml makes its store"


def test_a_pinned_experiment_pins_the_recipe_of_each_bert_its_make_makes(experiments):
    """Its recipe, not its tensors: the make: command re-creates those only up to the CPU's rounding."""
    pinned = [(name, p) for name, e in experiments.items() if e.expected
              for p in experiment_paths(e) if p.option == "bert" and p.value in (e.make or {})]
    assert pinned
    unpinned = [f"{name}: bert={p.value}" for name, p in pinned
                if not SHA256.fullmatch(p.stage.get("bert_recipe", "")) or p.stage.get("bert_sha256")]
    assert not unpinned, f"pinned experiments whose made BERT has no bert_recipe (or a bert_sha256): {unpinned}"


# -- before it runs: the path there, the backbone the pinned one --------------------------------------------------
def _experiment_file(tmp_path: Path, bert: Path, pin: str = "", make: dict | None = None) -> Path:
    """An experiment whose monobert reads `bert`, pinned by `pin` (", bert_sha256=..." or ", bert_recipe=...")."""
    data = {"dataset": "cacm", "measures": ["AP"],
            "pipeline": f"bm25() % 5 >> monobert(train=wikiqa/train, bert='{bert}'{pin}, epochs=1)"}
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(data | ({"make": make} if make else {})), encoding="utf-8")
    return path


def test_a_missing_backbone_stops_the_run_naming_the_path_and_the_command_that_makes_it(tmp_path, capsys):
    bert = tmp_path / "models" / "b"
    command = f"irpipe pretrain-mlm --output {bert} --steps 10 --seed 0 --threads 1 --device cpu"
    assert main(["-q", "run", str(_experiment_file(tmp_path, bert, make={str(bert): command}))]) == 2
    error = capsys.readouterr().err
    assert f"bert={bert}: no such file or folder" in error and command in error
    assert main(["-q", "run", str(_experiment_file(tmp_path, bert))]) == 2
    assert "names no command that makes it (make:)" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["bert_sha256", "bert_recipe"])
def test_another_backbone_stops_the_run_naming_both_pins_and_the_command(tmp_path, capsys, option):
    bert = tmp_path / "bert"
    command = f"irpipe pretrain-mlm --output {bert} --steps 2 --layers 1 --hidden 32 --seed 0 --threads 1 --device cpu"
    if option == "bert_sha256":
        save_tiny_bert(bert, layers=2)
        actual = tensors_digest(bert / "model.safetensors")
    else:
        pretrain(["信用卡怎么还款", "贷款利率怎么算", "今天足球比赛怎么样", "我想去打篮球"] * 4, bert,
                 MLMOptions(layers=1, hidden=32, batch_size=4, steps=2, held_out=0.25, threads=1))
        actual, _ = pretraining_recipe(bert)
    make = {str(bert): command}
    assert main(["-q", "run", str(_experiment_file(tmp_path, bert, f", {option}={'f' * 64}", make))]) == 2
    error = capsys.readouterr().err
    assert actual in error and "f" * 64 in error and command in error
    check_inputs(Experiment.load(_experiment_file(tmp_path, bert, f", {option}={actual}", make)))  # the pinned one


def test_the_stage_refuses_another_backbone_than_its_bert_sha256(tmp_path):
    from pipeline.rerank.models.kwbert import KeywordBERT, KeywordBERTConfig

    bert = save_tiny_bert(tmp_path / "bert", layers=2)
    with pytest.raises(ConfigError, match=f"its tensors' sha256 is {tensors_digest(bert / 'model.safetensors')}"):
        KeywordBERT(KeywordBERTConfig(bert=str(bert), bert_sha256="f" * 64))
    model = KeywordBERT(KeywordBERTConfig(bert=str(bert), bert_sha256=tensors_digest(bert / "model.safetensors")))
    assert model.bert.config.num_hidden_layers == 2


@pytest.mark.parametrize("make, message", [
    ({"models/other": "irpipe pretrain-mlm --output models/other --steps 5"}, "no path that a pipeline names"),
    ({"BERT": "irpipe pretrain-mlm --output BERT --steps 5 --max-minutes 3"}, "--max-minutes stops by the clock")])
def test_a_make_entry_that_makes_nothing_named_or_stops_by_the_clock_is_refused(tmp_path, capsys, make, message):
    bert = tmp_path / "b"
    make = {(str(bert) if key == "BERT" else key): value.replace("BERT", str(bert)) for key, value in make.items()}
    assert main(["-q", "run", str(_experiment_file(tmp_path, bert, make=make))]) == 2
    error = capsys.readouterr().err
    assert "[make." in error and message in error
