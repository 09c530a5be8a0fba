"""`irpipe run`: Python and CLI pipelines agree, stage outputs are cached, regression configs pass and can fail."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml

from pipeline import cache
from pipeline.cli import main
from pipeline.data.runs import read_run
from pipeline.errors import InputError
from pipeline.experiment import Experiment, run_experiment, status
from pipeline.leaderboard import render
from pipeline.stage import Stage
from pipeline.stages.rerank import Overlap
from pipeline.stages.bm25 import BM25
from support import REPO, needs_shared_data, write_collection

CONFIGS = sorted(p for p in (REPO / "eval").glob("*.yaml")
                 if p.name != "references.yaml" and yaml.safe_load(p.read_text()).get("ci", True))
# the configs whose check took under 3 s in the full suite on the busy 2-core machine (under ~0.7 s idle): the quick
# loop's (`pytest -m "not slow"`); every other one, a new one too, runs a whole collection and is marked slow
QUICK_CONFIGS = {"cacm-bm25", "dl19-bm25-top100", "dl20-bm25-top100", "trecqa-clean-test-idf-overlap",
                 "trecqa-raw-test-idf-overlap", "trecqa-raw-test-word-overlap", "wikiqa-test-idf-overlap",
                 "wikiqa-test-word-overlap"}


@pytest.mark.slow
@needs_shared_data
def test_python_and_cli_spec_give_the_same_run(tmp_path):
    from pipeline.data.registry import get_dataset

    dataset = get_dataset("cacm")
    python_run = (BM25(k1=0.9, b=0.4) % 10 >> Overlap(idf=True)).bind(dataset)(dataset.topics())
    python_run.write(tmp_path / "python.trec", tag="cli")
    assert main(["-q", "run", "bm25(k1=0.9, b=0.4) % 10 >> overlap(idf=true)", "--dataset", "cacm",
                 "--output", str(tmp_path / "cli.trec"), "--eval", "AP", "--no-cache"]) == 0
    assert (tmp_path / "cli.trec").read_text() == (tmp_path / "python.trec").read_text()
    assert {len(hits) for hits in read_run(tmp_path / "cli.trec").ranking.values()} == {10}


@pytest.mark.slow
@needs_shared_data
def test_second_run_is_served_from_the_cache(tmp_path, monkeypatch, caplog):
    """Counted, not timed: the first run computes BM25 and the reranker once each (2 misses), the second computes
    nothing (2 hits), --no-cache computes both again."""
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    computed = []
    transformed = Stage._transformed

    def counting(stage, topics, run):
        computed.append(stage.name)
        return transformed(stage, topics, run)

    monkeypatch.setattr(Stage, "_transformed", counting)
    experiment = Experiment.from_dict({"name": "cached", "dataset": "vaswani", "measures": ["AP"],
                                       "pipeline": "bm25(hits=1000) % 100 >> overlap()"})
    with caplog.at_level(logging.INFO, logger="irpipe"):
        first = run_experiment(experiment, tmp_path / "first.trec")
    assert "stage cache: 0 hit(s), 2 miss(es)" in caplog.text
    assert sorted(n for n in computed if n in ("bm25", "overlap")) == ["bm25", "overlap"]
    computed.clear()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="irpipe"):
        second = run_experiment(experiment, tmp_path / "second.trec")
    assert second["measures"] == first["measures"]
    assert (tmp_path / "second.trec").read_text() == (tmp_path / "first.trec").read_text()
    served = [r.message for r in caplog.records if "from cache" in r.message]
    assert len(served) == 2 and served[0].startswith("bm25(") and served[1].startswith("overlap(")
    assert "stage cache: 2 hit(s), 0 miss(es)" in caplog.text
    assert "bm25" not in computed and "overlap" not in computed  # neither stage ran again
    # --no-cache recomputes
    computed.clear()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="irpipe"):
        run_experiment(experiment, tmp_path / "third.trec", use_cache=False)
    assert "from cache" not in caplog.text and "stage cache:" not in caplog.text
    assert sorted(n for n in computed if n in ("bm25", "overlap")) == ["bm25", "overlap"]


@needs_shared_data
@pytest.mark.parametrize("config", [p if p.stem in QUICK_CONFIGS else pytest.param(p, marks=pytest.mark.slow)
                                    for p in CONFIGS], ids=[p.stem for p in CONFIGS])
def test_committed_configs_pass_their_check(config, tmp_path):
    assert main(["-q", "run", str(config), "--check", "--results-dir", str(tmp_path),
                 "--output", str(tmp_path / "run.trec")]) == 0
    result = json.loads((tmp_path / f"{config.stem}.json").read_text())
    assert result["checks"] and {c["status"] for c in result["checks"].values()} == {"OK"}


@pytest.mark.slow
@needs_shared_data
def test_wrong_expected_score_fails_the_check(tmp_path):
    data = yaml.safe_load((REPO / "eval" / "cacm-bm25.yaml").read_text())
    data["expected"]["AP"] = 0.35
    config = tmp_path / "cacm-wrong.yaml"
    config.write_text(yaml.safe_dump(data))
    args = ["-q", "run", str(config), "--results-dir", str(tmp_path), "--output", str(tmp_path / "run.trec")]
    assert main([*args, "--check"]) == 1
    assert main(args) == 0  # without --check a FAIL is reported, not fatal
    result = json.loads((tmp_path / "cacm-wrong.json").read_text())
    assert result["checks"]["AP"]["status"] == "FAIL" and result["checks"]["nDCG@10"]["status"] == "OK"


@pytest.mark.parametrize("score, expected, verdict", [
    (0.31137, 0.3114, "OK"), (0.3118, 0.3114, "OKISH"), (0.3134, 0.3114, "FAIL"), (0.3101, 0.3114, "FAIL")])
def test_comparator(score, expected, verdict):
    assert status(score, expected, 1e-4) == verdict


@pytest.mark.parametrize("content, field, line", [
    ("dataset: cacm\npipeline: bm25()\nmeasures: [AP]\nexpect: {AP: 0.3}\n", "expect", None),
    ("dataset: cacm\nmeasures: [AP]\n", "pipeline", None),
    ("dataset: cacm\npipeline: bm25()\nmeasures: [AP]\nexpected: {AP: high}\n", "expected.AP", None),
    ("dataset: cacm\npipeline: [bm25(\n  measures: AP\n", None, 3),
    ("dataset: cacm\npipeline: bm25()\nmeasures: [AP]\nseeds: [0, 1]\n", "pipeline", None),  # no {seed} in it
    ("dataset: cacm\npipeline: bm25(k1={seed})\nmeasures: [AP]\n", "seeds", None),  # {seed} but no seeds
    ("dataset: cacm\npipeline: bm25(k1={seed})\nmeasures: [AP]\nseeds: [1]\n", "seeds", None),
    ("dataset: cacm\npipeline: bm25(k1={seed})\nmeasures: [AP]\nseeds: [1, 1]\n", "seeds", None),
    ("dataset: cacm\npipeline: bm25(k1={seed})\nmeasures: [AP]\nseeds: [a, b]\n", "seeds", None),
    ("dataset: cacm\npipeline: bm25(k1={seed})\nmeasures: [AP]\nseeds: 3\n", "seeds", None),
    ("dataset: cacm\npipeline: bm25(k1={seed}, b=2)\nmeasures: [AP]\nseeds: [1, 2]\n", "pipeline", None),
    ("dataset: cacm\npipeline: bm25()\nbaseline: bm25(k1={seed})\nmeasures: [AP]\n", "baseline", None),
    ("dataset: cacm\npipeline: bm25(k1={seed})\nseeds: [1, 2]\nbaseline: bm25()\n"
     "beside:\n  x: bm25(k1={seed})\nmeasures: [AP]\n", "beside.x", None),
    ("dataset: cacm\npipeline: bm25()\nmeasures: [AP]\nengine: spark\n", "engine", None),
    ("dataset: cacm\npipeline: bm25()\nmeasures: [AP]\nengine: true\n", "engine", None),
    ("dataset: cacm\npipeline: bm25()\nmeasures: [AP]\nbeside: {b: bm25(b=0.7)}\n", "beside", None),  # no baseline
    ("dataset: cacm\npipeline: bm25()\nbaseline: bm25()\nmeasures: [AP]\nbeside: [bm25()]\n", "beside", None),
    ("dataset: cacm\npipeline: bm25()\nbaseline: bm25()\nmeasures: [AP]\nbeside: {baseline: bm25()}\n",
     "beside.baseline", None),
    ("dataset: cacm\npipeline: bm25()\nbaseline: bm25()\nmeasures: [AP]\nbeside: {../x: bm25()}\n", "beside.../x", None),
    ("dataset: cacm\npipeline: bm25()\nbaseline: bm25()\nmeasures: [AP]\nbeside: {b: bm25(b=2)}\n", "beside.b", None),
    ("dataset: cacm\npipeline: bm25()\nbaseline: bm25()\nmeasures: [AP]\nbeside: {b: 3}\n", "beside.b", None),
])
def test_bad_experiment_files(tmp_path, content, field, line):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(InputError) as error:
        Experiment.load(path)
    assert error.value.field == field and error.value.line == line and str(path) in str(error.value)


def test_leaderboard_puts_published_numbers_beside_ours():
    results = [{"name": "x-bm25", "dataset": "x", "pipeline": "bm25()", "queries": 10,
                "measures": {"AP": 0.25, "RR@10": 0.5}, "checks": {"AP": {"status": "OK"}}}]
    references = {"x": [{"system": "Paper", "scores": {"AP": 0.3, "P@1": "0.1 / 0.2"}, "source": "Someone 2020"}]}
    table = render(results, references)
    assert "| **x-bm25** `bm25()` (10 q) | 0.2500 | 0.5000 |  | OK: `irpipe run eval/x-bm25.yaml` |" in table
    assert "| Paper *(published)* | 0.3000 |  | 0.1 / 0.2 | Someone 2020 |" in table


def test_committed_leaderboard_is_current(tmp_path):
    """eval/LEADERBOARD.md is what `irpipe leaderboard` makes of the committed results."""
    output = tmp_path / "LEADERBOARD.md"
    assert main(["-q", "leaderboard", "--results-dir", str(REPO / "eval" / "results"),
                 "--references", str(REPO / "eval" / "references.yaml"), "--output", str(output)]) == 0
    assert output.read_text() == (REPO / "eval" / "LEADERBOARD.md").read_text()


@pytest.mark.slow
def test_a_baseline_gives_the_comparison_table_and_the_win_loss_plot(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    data = write_collection(tmp_path / "data")
    (tmp_path / "exp.yaml").write_text(f"dataset: {data}\npipeline: bm25() % 10 >> overlap()\n"
                                       "baseline: bm25() % 10\nmeasures: [AP, nDCG@10]\n")
    code = main(["-q", "run", str(tmp_path / "exp.yaml"), "--results-dir", str(tmp_path / "results"),
                 "--output", str(tmp_path / "runs" / "exp.trec")])
    out = capsys.readouterr().out
    assert code == 0
    result = json.loads((tmp_path / "results" / "exp.json").read_text())
    assert set(result["baseline"]["pvalues"]) == {"AP", "nDCG@10"}
    assert (tmp_path / "runs" / "exp.png").stat().st_size > 1000
    assert (tmp_path / "runs" / "exp.baseline.trec").is_file()
    header, baseline_row, exp_row = out.split("baseline = bm25() % 10\n")[1].splitlines()[:3]
    assert "AP p-value" in header and baseline_row.startswith("baseline") and exp_row.startswith("exp")


@pytest.mark.slow
@needs_shared_data
def test_a_seeded_experiment_tests_the_seed_mean_against_the_baseline(tmp_path, monkeypatch):
    """The p-value beside a seed mean pairs each query's mean over the seeds with the baseline's score, not seed 0's
    run with it: recomputed here from the written runs with scipy."""
    from scipy import stats

    from pipeline.compare import compare
    from pipeline.data.registry import get_dataset

    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "exp.yaml").write_text("dataset: cacm\npipeline: bm25(k1={seed}) % 20\nseeds: [1, 3]\n"
                                       "baseline: bm25() % 20\nmeasures: [AP, P@10]\n")
    assert main(["-q", "run", str(tmp_path / "exp.yaml"), "--results-dir", str(tmp_path / "results"),
                 "--output", str(tmp_path / "runs" / "exp.trec")]) == 0
    result = json.loads((tmp_path / "results" / "exp.json").read_text())
    runs = {name: read_run(tmp_path / "runs" / f"exp.{name}.trec") for name in ("baseline", "seed1", "seed3")}
    each = compare(runs, get_dataset("cacm").qrels(), ["AP", "P@10"], baseline="baseline")
    for measure in ("AP", "P@10"):
        base, one, three = (each.per_query[name][measure] for name in ("baseline", "seed1", "seed3"))
        means = [(one[qid] + three[qid]) / 2 for qid in base]
        expected = stats.ttest_rel(means, list(base.values())).pvalue
        assert result["baseline"]["pvalues"][measure] == pytest.approx(expected, rel=1e-9)
        assert abs(result["baseline"]["pvalues"][measure] - each.pvalues["seed1"][measure]) > 0.1  # seed 1's own
    assert result["baseline"]["test"] == "two-sided paired t-test over per-query seed means"
    assert "exp.seed{1,3}" in result["baseline"]["table"] and "over per-query seed means" in result["baseline"]["table"]


@pytest.mark.slow
@needs_shared_data
def test_a_baseline_with_seeds_pairs_seed_means_with_seed_means(tmp_path):
    """`baseline:` naming {seed} (a model's own untrained start) runs once per seed, and the p-value pairs each
    query's mean over the pipeline's seeds with its mean over the baseline's: recomputed here with scipy."""
    import numpy as np
    from scipy import stats

    from pipeline.compare import compare
    from pipeline.data.registry import get_dataset

    (tmp_path / "exp.yaml").write_text("dataset: cacm\npipeline: bm25(k1={seed}) % 20\nseeds: [1, 3]\n"
                                       "baseline: bm25(k1={seed}, b=0.9) % 20\nmeasures: [AP, nDCG@10]\n")
    assert main(["-q", "run", str(tmp_path / "exp.yaml"), "--results-dir", str(tmp_path / "results"),
                 "--output", str(tmp_path / "runs" / "exp.trec")]) == 0
    result = json.loads((tmp_path / "results" / "exp.json").read_text())
    names = ("baseline.seed1", "baseline.seed3", "seed1", "seed3")
    runs = {name: read_run(tmp_path / "runs" / f"exp.{name}.trec") for name in names}
    each = compare(runs, get_dataset("cacm").qrels(), ["AP", "nDCG@10"], baseline="baseline.seed1")
    for measure in ("AP", "nDCG@10"):
        base1, base3, one, three = (each.per_query[name][measure] for name in names)
        pipeline = [(one[q] + three[q]) / 2 for q in base1]
        baseline = [(base1[q] + base3[q]) / 2 for q in base1]
        expected = stats.ttest_rel(pipeline, baseline).pvalue  # nan where every difference is one number: None
        shown = None if np.isnan(expected) else pytest.approx(expected, rel=1e-9)
        assert result["baseline"]["pvalues"][measure] == shown
        assert result["baseline"]["measures"][measure] == pytest.approx(
            (each.scores["baseline.seed1"][measure] + each.scores["baseline.seed3"][measure]) / 2)
    assert result["baseline"]["run"] == [str(tmp_path / "runs" / f"exp.baseline.seed{s}.trec") for s in (1, 3)]
    assert set(result["baseline"]["seeds"]) == {"1", "3"}
    assert "baseline.seed{1,3}" in result["baseline"]["table"] and "exp.seed{1,3}" in result["baseline"]["table"]
    assert result["win_loss"]["queries"] == len(base1)
    assert None not in result["baseline"]["pvalues"].values()  # a test was made


@pytest.mark.slow
def test_the_main_job_is_the_default_experiment(tmp_path, monkeypatch, capsys):
    from pipeline.commands import run as run_command
    from pipeline.experiment import DEFAULT_EXPERIMENT

    main_job = Experiment.load(REPO / DEFAULT_EXPERIMENT)  # the checkout's, found from the working folder
    assert DEFAULT_EXPERIMENT == Path("eval") / "main-job.yaml" and main_job.name == "main-job"
    # a seed reranker (ADDAX) against BM25's candidates, the zero-shot bi-encoder as a third row
    assert main_job.pipeline.startswith("candidates() >> addax(") and main_job.baseline == "candidates()"
    assert main_job.beside == {"biencoder": "candidates() >> biencoder()"} and main_job.dataset == "dl19-passage"
    # `irpipe run` alone runs the default experiment file; here a cheap one of the same shape on data of our own
    data = write_collection(tmp_path / "data")
    (tmp_path / "main-job.yaml").write_text(f"dataset: {data}\npipeline: bm25() % 10 >> overlap()\n"
                                            "baseline: bm25() % 10\nmeasures: [nDCG@10, AP]\n"
                                            "beside: {plain: bm25() % 10 >> overlap(idf=false)}\n")
    monkeypatch.setattr(run_command, "DEFAULT_EXPERIMENT", tmp_path / "main-job.yaml")
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    assert main(["-q", "run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("main-job  tiny-trec") and "nDCG@10 p-value" in out
    header, *rows = out.split("plain = bm25() % 10 >> overlap(idf=false)\n")[1].splitlines()[:4]
    assert "AP p-value" in header and [row.split()[0] for row in rows] == ["baseline", "main-job", "plain"]
    assert {p.name for p in (tmp_path / "runs").iterdir()} == {"main-job.trec", "main-job.baseline.trec",
                                                                "main-job.plain.trec", "main-job.png", "results"}
    result = json.loads((tmp_path / "runs" / "results" / "main-job.json").read_text())  # untracked, not eval/results
    assert set(result["beside"]["plain"]["pvalues"]) == {"nDCG@10", "AP"}
    assert (tmp_path / "runs" / "main-job.plain.trec").read_text().split("\n")[0].endswith(" main-job.plain")
    assert not (tmp_path / "eval").exists()
    assert main(["-q", "run", "--record"]) == 0  # only when asked: the recorded results, which the pages are made from
    assert json.loads((tmp_path / "eval" / "results" / "main-job.json").read_text())["measures"] == result["measures"]


@pytest.mark.slow
def test_an_experiment_is_parsed_once_when_read_and_its_run_parses_nothing_again(tmp_path, monkeypatch):
    """Its specs are parsed when the file is read (check) and held; running it (bind, stage cache, comparison, the
    inputs' check) parses none again. Before: 8 spec parses and 6 measure parses while running
    eval/trecqa-raw-test-idf-overlap.yaml."""
    import pipeline.evaluation
    import pipeline.spec
    from pipeline.experiment import Experiment, run_experiment

    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    data = write_collection(tmp_path / "data")
    (tmp_path / "exp.yaml").write_text(f"dataset: {data}\npipeline: bm25() % 10 >> overlap()\n"
                                       "baseline: bm25() % 10\nbeside: {plain: 'bm25() % 5'}\n"
                                       "measures: [AP, nDCG@10]\nexpected: {AP: 0.5}\n")
    experiment = Experiment.load(tmp_path / "exp.yaml")
    calls = []
    for module, name in ((pipeline.spec, "parse"), (pipeline.evaluation, "parse_measure")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    run_experiment(experiment, output=tmp_path / "runs" / "exp.trec", results_dir=tmp_path / "results")
    assert calls == []


def test_run_alone_outside_a_checkout_says_where_the_main_job_is(tmp_path, monkeypatch, capsys):
    """The installed library reads no file of the repository: `irpipe run` alone finds eval/main-job.yaml in the
    working folder, and elsewhere says so (exit 2)."""
    monkeypatch.chdir(tmp_path)
    assert main(["-q", "run"]) == 2
    assert "eval/main-job.yaml: no such experiment file here" in capsys.readouterr().err
