"""The Python front door (`import pipeline as ir`): every stage by its spec name, runs through the same bind and cache
as `irpipe run` (the same run file, byte for byte), `ir.evaluate` and `ir.Experiment` giving the tables the command
line prints, and examples/bm25_addax.py equal to the main job."""
from __future__ import annotations

import doctest
import inspect
import os
import pydoc
import subprocess
import sys

import pytest
import yaml

import pipeline as ir
from pipeline.cli import main
from pipeline.errors import ConfigError
from pipeline.rerank import models
from pipeline.experiment import Experiment as ExperimentFile
from pipeline.experiment import run_experiment
from pipeline.spec import parse
from pipeline.stages import get_stage_class, stage_names
from support import REPO, needs_shared_data


def test_every_spec_stage_is_a_name_of_the_package():
    for name in stage_names():
        assert getattr(ir, name) is get_stage_class(name)
        assert name in dir(ir)
    assert repr(ir.bm25(k1=0.9, b=0.4) % 100 >> ir.monobert(ckpt="m")) == \
        repr(parse("bm25(k1=0.9, b=0.4) % 100 >> monobert(ckpt=m)"))
    with pytest.raises(AttributeError, match="no attribute 'bm26'"):
        ir.bm26  # noqa: B018


def test_importing_the_package_imports_neither_torch_nor_the_jvm():
    code = "import sys, pipeline as ir; ir.bm25; ir.dataset; print('torch' in sys.modules, 'jnius' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_a_module_of_the_package_imports_first_on_its_own():
    """`from pipeline import cache` (pipeline/stage.py's, before anything imported pipeline.cache) imports the module,
    not a stage named so: `from pipeline.stage import fuse` first in a process once failed as a circular import."""
    for module in ("pipeline.stage", "pipeline.tune", "pipeline.compare", "bench.keyword_bert"):
        subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, check=True)


def test_help_of_a_model_stage_lists_its_options_with_defaults():
    text = pydoc.render_doc(ir.monobert, renderer=pydoc.plaintext)
    for line in ("max_length = 256", "epochs = 3", "lr = 2e-05", "device = 'auto'", "ckpt = None"):
        assert line in text
    addax = pydoc.render_doc(ir.addax, renderer=pydoc.plaintext)
    assert "code_sharpness = 5.0" in addax and "alpha = 0.6" in addax and "lr = 1e-05" in addax  # its own defaults
    assert "code_sharpness=5.0" in str(inspect.signature(ir.addax))


@pytest.mark.slow
@needs_shared_data
def test_run_writes_what_irpipe_run_writes(tmp_path):
    pipe = ir.bm25(k1=0.9, b=0.4) % 10 >> ir.overlap(idf=True)
    ir.run(pipe, "cacm", output=tmp_path / "python" / "x.trec", tag="x", cache=False)
    assert main(["-q", "run", repr(pipe), "--dataset", "cacm", "--output", str(tmp_path / "x.trec"),
                 "--no-cache"]) == 0
    assert (tmp_path / "python" / "x.trec").read_bytes() == (tmp_path / "x.trec").read_bytes()
    assert pipe.run("cacm").ranking == ir.run(repr(pipe), ir.dataset("cacm")).ranking


@needs_shared_data
def test_evaluate_takes_a_dataset_and_its_relevance_level(tmp_path):
    run = ir.candidates().run("dl19-passage")
    graded = ir.evaluate(run, "dl19-passage", ["AP", "nDCG@10"])
    assert set(graded) == {"AP(rel=2)", "nDCG@10"} and graded["nDCG@10"] == pytest.approx(0.5058, abs=1e-4)
    assert ir.evaluate(run, ir.dataset("dl19-passage"), ["AP"], rel_level=1) != {"AP": graded["AP(rel=2)"]}


@pytest.mark.slow
@needs_shared_data
def test_experiment_prints_the_table_of_an_experiment_file(tmp_path, monkeypatch):
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    spec, baseline = "bm25(k1=0.9, b=0.4) % 100 >> overlap(idf=true)", "bm25(k1=0.9, b=0.4)"
    measures = ["AP", "RR@10"]
    from_file = run_experiment(ExperimentFile.from_dict({"name": "overlap", "dataset": "cacm", "pipeline": spec,
                                                          "measures": measures, "baseline": baseline}),
                               tmp_path / "overlap.trec")
    table = ir.Experiment([parse(baseline), spec], "cacm", measures, names=["baseline", "overlap"], baseline=0)
    assert table.to_table() == from_file["baseline"]["table"]
    same = ir.Experiment([spec], "cacm", measures, names=["overlap"], baseline=baseline)  # a baseline pipeline
    assert same.to_table() == table.to_table()
    frame = table.to_dataframe()
    assert list(frame["run"]) == ["baseline", "overlap"] and frame.loc[1, "AP"] == from_file["measures"]["AP"]
    with pytest.raises(ConfigError, match="baseline=5"):
        ir.Experiment([spec], "cacm", measures, baseline=5)


@pytest.mark.slow
@needs_shared_data
def test_the_docstring_examples_run(cache):
    """The examples of pipeline/api.py, Stage.run and every model stage's help text, run as doctests."""
    from pipeline.api import __name__ as api_name
    from pipeline.stage import Stage

    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(sys.modules[api_name], globs={"ir": ir}) + finder.find(Stage.run, "Stage.run")
    tests += [test for name in models.model_names() for test in finder.find(getattr(ir, name), name)]
    assert sum(len(test.examples) for test in tests) >= 9 + 3 + 3 * len(models.model_names())
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


@pytest.mark.slow
@needs_shared_data
def test_the_example_script_is_the_main_job_byte_for_byte(tmp_path):
    """examples/bm25_addax.py's pipeline is eval/main-job.yaml's: run on the tiny MS MARCO folder (two queries and
    their five shipped candidates: the job's ADDAX training on DL20 is most of the test's time, where scoring DL19's
    4,300 pairs, or WikiQA dev's 1,130 twice, took minutes), the script's run file equals `irpipe run` of the main
    job's spec, computed again (`--no-cache`: only the trained recipe is shared)."""
    env = {**os.environ, "IRPIPE_CACHE": str(tmp_path / "cache")}
    dataset = str(REPO / "tests" / "fixtures" / "msmarco-passage-tiny")
    script = subprocess.run([sys.executable, str(REPO / "examples" / "bm25_addax.py"), dataset,
                             str(tmp_path / "python" / "main-job.trec")], capture_output=True, text=True,
                            env=env, cwd=tmp_path)
    assert script.returncode == 0, script.stderr[-2000:]
    assert "ADDAX" in script.stdout and "p-value" in script.stdout
    spec = yaml.safe_load((REPO / "eval" / "main-job.yaml").read_text())["pipeline"]
    cli = subprocess.run([sys.executable, "-m", "pipeline.cli", "-q", "run", spec, "--dataset", dataset,
                          "--output", str(tmp_path / "main-job.trec"), "--no-cache"], capture_output=True, text=True,
                         env=env, cwd=tmp_path)
    assert cli.returncode == 0, cli.stderr[-2000:]
    lines = (tmp_path / "main-job.trec").read_text().splitlines()
    assert len(lines) == 5 and {line.split()[0] for line in lines} == {"2001", "2002"}  # every candidate, reranked
    assert (tmp_path / "python" / "main-job.trec").read_bytes() == (tmp_path / "main-job.trec").read_bytes()
