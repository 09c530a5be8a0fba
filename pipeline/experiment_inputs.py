"""The files an experiment's pipelines read, and the `make:` commands of an experiment file that re-create those the
repository and the dataset mirror lack (pipeline/experiment.py; eval/*.yaml).

    make:
      models/zh-bert-2x128-pairs-cpu: irpipe pretrain-mlm --output models/zh-bert-2x128-pairs-cpu --steps 1000 ...
    pipeline: bm25(hits=20) >> kwbert(..., bert=models/zh-bert-2x128-pairs-cpu, bert_recipe=SUM, ...)

A stage option in PATH_OPTIONS names a path when its value has a '/' or a '.' (a preset or packaged name has neither:
dict=thucnews, bert=all-MiniLM-L6-v2), or is hf:ORG/NAME (the local Hugging Face cache, outside both). Paths are
relative to the folder `irpipe run` runs in: the repository's root for eval/*.yaml.

- Loading the file (`Experiment.check`): each make: entry is a path one of its pipelines names, and its command is
  bounded by its arguments -- no --max-minutes, whose stopping step depends on the machine (another model elsewhere).
- Before it runs (`check_inputs`): each named path exists, else exit 2 naming the path and the file's make: command
  for it (or saying the file names none); a bert= with bert_sha256= holds those tensors, one with bert_recipe= was
  made by that pretraining (bert.py `pinned_bert_folder`), else exit 2 naming both and the make: command.
- tests/test_experiment_inputs.py: every eval/*.yaml names only paths that git tracks, the mirror holds or its make:
  makes, and a pinned (expected:) experiment pins the recipe (or checksum) of each BERT its make: makes.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from pipeline.errors import ConfigError, IrpipeError, MissingResourceError

# options whose value may be a path (teacher=: a checkpoint folder, or a pretrained model's name such as biencoder)
PATH_OPTIONS = ("bert", "ckpt", "dict", "negatives_dict", "index", "store", "teacher")
UNBOUNDED = ("--max-minutes",)  # make: arguments that stop by the clock rather than by a count
HF = "hf:"


@dataclass(frozen=True)
class NamedPath:
    """A path a pipeline names: the option and the options of the stage that names it."""

    option: str
    value: str
    stage: dict


def is_path(value: object) -> bool:
    return isinstance(value, str) and (value.startswith(HF) or "/" in value or "." in value)


def _leaves(stage) -> Iterator:
    inner = getattr(stage, "stages", None)
    if inner:
        for child in inner:
            yield from _leaves(child)
    else:
        yield stage


def named_paths(pipeline) -> list[NamedPath]:
    """The paths a pipeline's stages (a Stage, or a spec string parsed here) name in PATH_OPTIONS, in order."""
    from pipeline.spec import parse

    found = []
    for stage in _leaves(parse(pipeline) if isinstance(pipeline, str) else pipeline):
        options = stage.config()
        found += [NamedPath(option, options[option], options) for option in PATH_OPTIONS if is_path(options.get(option))]
    return found


def experiment_paths(experiment) -> list[NamedPath]:
    """The paths every pipeline of an experiment names (each seed's, the baseline's, those beside)."""
    specs = [*experiment.pipelines().values(), *experiment.baselines().values(), *(experiment.beside or {}).values()]
    return [named for spec in specs if spec for named in named_paths(experiment.stage(spec))]  # parsed once


def check_make(experiment, problem: Callable[[str, str], IrpipeError]) -> None:
    """Each make: entry a path the pipelines name, with a command bounded by its arguments (`problem(message,
    field)`: the experiment's error)."""
    make = experiment.make or {}
    named = {p.value for p in experiment_paths(experiment)} if make else set()
    for path, command in make.items():
        field = f"make.{path}"
        if not isinstance(command, str) or not command.strip():
            raise problem(f"make: {path} needs the command that makes it (a string), got {command!r}", field)
        if path not in named:
            raise problem(f"make: {path} is no path that a pipeline names (they name: "
                          f"{', '.join(sorted(named)) or 'none'})", field)
        clock = [flag for flag in UNBOUNDED if flag in command.split()]
        if clock:
            raise problem(f"make: {path}: {clock[0]} stops by the clock, so another machine makes another "
                          "product; bound the command by its steps", field)


def _make_hint(experiment, path: str) -> str:
    command = (experiment.make or {}).get(path)
    where = experiment.path or "the experiment"
    return (f"make it with `{command}` ({where}, make:)" if command
            else f"{where} names no command that makes it (make:)")


def check_inputs(experiment) -> None:
    """Before running: every named path there (exit 2 naming it and its make: command) and every pinned BERT the
    pinned one (exit 2 naming both pins and the make: command)."""
    from pipeline.rerank.bert import pinned_bert_folder

    for named in experiment_paths(experiment):
        if named.value.startswith(HF):
            continue  # the stage finds it in the Hugging Face cache, and says so when it cannot
        if not Path(named.value).exists():
            raise MissingResourceError(f"{named.option}={named.value}: no such file or folder here; "
                                       f"{_make_hint(experiment, named.value)}")
        sha256, recipe = named.stage.get("bert_sha256", ""), named.stage.get("bert_recipe", "")
        if named.option == "bert" and (sha256 or recipe):
            try:
                pinned_bert_folder(named.value, sha256, recipe)
            except ConfigError as error:
                raise ConfigError(f"{error}; {_make_hint(experiment, named.value)}", field=error.field) from None
