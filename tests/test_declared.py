"""Options declared once (pipeline/declared.py): every option that once did nothing but re-key a recipe, or failed
minutes late, is refused when the stage is made -- from a spec, from Python and from a YAML experiment file."""
from __future__ import annotations

import dataclasses

import pytest

import pipeline as ir
from pipeline.cli import main
from pipeline.declared import declarations, option_rows
from pipeline.errors import ConfigError
from pipeline.rerank.models.hcan import HCANConfig
from pipeline.spec import parse
from pipeline.training.identity import RecipeIdentity
from pipeline.training.options import TrainOptions

# spec -> (field, the refusal's words). Before: each built the stage; the first fourteen trained a model identical to
# the recipe without the option under another cache key, the last three failed after the examples were built (a
# KeyError on HCAN's first batch, an unknown dev measure, torch's dropout probability check).
REFUSED = [
    ("monobert(train=wikiqa/train, momentum=0.5)", "momentum", "acts only with optimizer=sgd"),
    ("monobert(train=wikiqa/train, nesterov=true)", "nesterov", "acts only with optimizer=sgd"),
    ("hcan(train=trecqa/train, warmup=0.2)", "warmup", "acts only with schedule=linear"),
    ("monobert(train=wikiqa/train, plateau_factor=0.3)", "plateau_factor", "acts only with schedule=plateau"),
    ("monobert(train=wikiqa/train, plateau_patience=4)", "plateau_patience", "acts only with schedule=plateau"),
    ("monobert(train=wikiqa/train, patience=2)", "patience", "acts only with a dev set (dev=DATASET)"),
    ("monobert(train=wikiqa/train, measure=RR@10)", "measure", "acts only with a dev set"),
    ("monobert(train=wikiqa/train, keep_start=true)", "keep_start", "acts only with a dev set"),
    ("monobert(train=wikiqa/train, replace_ratio=0.3)", "replace_ratio", "acts only with negatives=keyword|random"),
    ("monobert(train=wikiqa/train, negatives=bm25, negatives_dict=thucnews)", "negatives_dict",
     "acts only with negatives=keyword, or negatives=random and replace_ratio > 0"),
    ("monobert(train=wikiqa/train, negatives=random, negatives_dict=thucnews)", "negatives_dict", "acts only"),
    ("monobert(train=wikiqa/train, beta=0.5)", "beta", "acts only with negatives=keyword"),
    ("monobert(train=wikiqa/train, teacher_group=4)", "teacher_group", "acts only with teacher=MODEL"),
    ("hcan(train=trecqa/train, overlap_mode=stopwords)", "overlap_mode", "acts only with external_features=true"),
    ("hcan(train=trecqa/train, margin=0.5)", "margin", "acts only with loss=hinge"),
    ("hcan(train=trecqa/train, overlap_mode=stopwrods, external_features=true)", "overlap_mode",
     "choose one of code, stopwords (did you mean stopwords?)"),
    ("monobert(train=wikiqa/train, dev=wikiqa/dev, measure=APP)", "measure", "unknown measure 'APP'"),
    ("hcan(train=trecqa/train, dropout=1.5)", "dropout", "dropout=1.5; expected a number >= 0 and < 1"),
    ("addax(train=wikiqa/train, dropout=1)", "dropout", "expected a number >= 0 and < 1"),
    ("monobert(train=wikiqa/train, epochs=1.5)", "epochs", "epochs=1.5 should be of type int"),
]


@pytest.mark.parametrize("spec, field, words", REFUSED, ids=[spec for spec, _, _ in REFUSED])
def test_an_option_that_would_not_act_or_is_out_of_bounds_is_refused_when_the_stage_is_made(spec, field, words):
    with pytest.raises(ConfigError) as error:
        parse(spec)
    assert words in str(error.value) and f"{field}=" in str(error.value)


@pytest.mark.parametrize("spec", [
    "monobert(train=wikiqa/train, optimizer=sgd, momentum=0.5, nesterov=true)",
    "monobert(train=wikiqa/train, dev=wikiqa/dev, patience=2, measure=RR@10, keep_start=true)",
    "monobert(train=wikiqa/train, schedule=plateau, plateau_factor=0.3)",
    "hcan(train=trecqa/train, momentum=0.5)",  # HCAN trains with SGD by default
    "hcan(train=trecqa/train, loss=hinge, margin=0.5, external_features=true, overlap_mode=stopwords)",
    "monobert(train=wikiqa/train, measure=AP, warmup=0.1)",  # at the value it has anyway: nothing to refuse
])
def test_an_option_where_it_acts_is_accepted(spec):
    parse(spec)


def test_python_and_a_yaml_experiment_meet_the_same_refusal(tmp_path, capsys):
    with pytest.raises(ConfigError, match="momentum=0.5 acts only with optimizer=sgd"):
        ir.monobert(train="wikiqa/train", momentum=0.5)
    experiment = tmp_path / "exp.yaml"
    experiment.write_text("dataset: wikiqa/test\npipeline: monobert(train=wikiqa/train, patience=3)\nmeasures: [AP]\n")
    assert main(["-q", "run", str(experiment), "--results-dir", str(tmp_path)]) == 2
    assert "patience=3 acts only with a dev set" in capsys.readouterr().err


def test_a_recipe_resolved_from_saved_options_is_not_refused_for_defaults_it_carries():
    """A checkpoint or `irpipe train` hands every option (dataclasses.asdict): those at their defaults do not count as
    given, whatever applies."""
    identity = RecipeIdentity.resolve("monobert", "wikiqa/train", options=dataclasses.asdict(TrainOptions()))
    assert identity.options.momentum == 0.9


def test_every_option_is_declared_with_its_help_and_the_tables_read_the_declarations():
    undeclared = [name for name, declaration in declarations(TrainOptions).items()
                  if not declaration.help and name not in ("device", "amp", "optimizer")]
    assert undeclared == []
    rows = {row[0]: row for row in option_rows(TrainOptions)}
    assert rows["momentum"][2:4] == (">= 0 and < 1", "with optimizer=sgd")
    assert rows["measure"][3] == "with a dev set (dev=DATASET)"
    assert {row[0]: row[2] for row in option_rows(HCANConfig)}["rm_similarity"] == "dot | cosine"
    assert "momentum = 0.9  # >= 0 and < 1; with optimizer=sgd: SGD momentum" in ir.hcan.__doc__


def test_the_options_page_is_generated_from_the_declarations():
    from pipeline.stages.neural import options_page
    from support import REPO

    assert (REPO / "docs" / "options.md").read_text() == options_page(), (
        "docs/options.md is stale: regenerate it with the command its first paragraph gives")


def test_a_stage_made_in_python_meets_the_specs_argument_check():
    """Before: `ir.bm25(k=0.9)` was a bare TypeError where the spec suggested k1; now one check (pipeline/stage.py's
    metaclass) makes both the same ConfigError, and inspect.signature still shows the stage's parameters."""
    import inspect

    with pytest.raises(ConfigError, match="did you mean k1"):
        ir.bm25(k=0.9)
    with pytest.raises(ConfigError, match="did you mean k1"):
        parse("bm25(k=0.9)")
    with pytest.raises(ConfigError, match="hits='x': expected an integer"):
        ir.bm25(hits="x")
    assert list(inspect.signature(ir.bm25).parameters)[:3] == ["index", "k1", "b"]


def test_a_dataset_folder_given_as_a_path_runs_as_its_name_does(tmp_path, monkeypatch):
    """Before: `ir.bm25().run(Path(folder))` was an AttributeError ('PosixPath' object has no attribute 'topics')."""
    from pathlib import Path

    from support import write_collection

    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    data = write_collection(tmp_path / "data")
    assert ir.bm25().run(Path(data)).ranking == ir.bm25().run(str(data)).ranking
