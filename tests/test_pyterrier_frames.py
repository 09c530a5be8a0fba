"""A PyTerrier user's Python: frames, objects and files wherever pt.Experiment and ir_measures take them
(`ir.evaluate`, `ir.Experiment`), pt.Experiment's tests, per-query frame and win/loss counts, and the verbs a
PyTerrier user types on a stage (`search`, `transform(frame)`, `stage(frame)`), checked against PyTerrier's and
ir_measures' own functions on the same inputs."""
from __future__ import annotations

import pytest

pd = pytest.importorskip("pandas")

import ir_measures  # noqa: E402

import pipeline as ir  # noqa: E402
from pipeline.data.qrels import read_qrels  # noqa: E402
from pipeline.data.runs import Run, read_run  # noqa: E402
from pipeline.data.topics import Topics  # noqa: E402
from pipeline.errors import ConfigError, InputError  # noqa: E402
from pipeline.evaluation import parse_measures  # noqa: E402
from pipeline.stage import StageError  # noqa: E402
from support import DOCS, REPO, needs_shared_data, write_collection  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "trec_eval"
MEASURES = ["AP", "nDCG@10", "P@5"]


def _qrels_frame(qrels) -> pd.DataFrame:
    return pd.DataFrame([(q, d, r) for q, docs in qrels.items() for d, r in docs.items()],
                        columns=["qid", "docno", "label"])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny collection of our own (tests/support.py) and its Lucene index, built once."""
    from pipeline.retrieve.index import dataset_index_for

    dataset = ir.dataset(write_collection(tmp_path_factory.mktemp("frames") / "tiny"))
    return dataset, str(dataset_index_for(dataset))


def test_evaluate_takes_frames_with_pyterriers_or_ir_measures_columns():
    """A result frame and a qrels frame, as PyTerrier (qid, docno, score / label) or ir_measures (query_id, doc_id,
    score / relevance: `pd.DataFrame(ir_measures.read_trec_run(...))`) make them, score what the files score. Before:
    ValueError could not convert string to float (the run frame), invalid literal for int() (the qrels frame)."""
    files = ir.evaluate(str(FIXTURE / "run.trec"), str(FIXTURE / "qrels.txt"), MEASURES)
    run, qrels = read_run(FIXTURE / "run.trec"), read_qrels(FIXTURE / "qrels.txt")
    measures_run = pd.DataFrame(ir_measures.read_trec_run(str(FIXTURE / "run.trec")))
    measures_qrels = pd.DataFrame(ir_measures.read_trec_qrels(str(FIXTURE / "qrels.txt")))
    assert list(measures_qrels.columns)[:3] == ["query_id", "doc_id", "relevance"]
    for given_run in (run, run.to_frame(), measures_run):
        for given_qrels in (qrels, _qrels_frame(qrels), measures_qrels, (Topics({"99": "x"}), measures_qrels)):
            assert ir.evaluate(given_run, given_qrels, MEASURES) == files
    assert files["AP"] == pytest.approx(ir_measures.calc_aggregate([ir_measures.AP], measures_qrels,
                                                                   measures_run)[ir_measures.AP], abs=1e-12)


def test_a_frame_that_is_no_qrels_is_an_input_error_naming_row_and_column():
    qrels = _qrels_frame(read_qrels(FIXTURE / "qrels.txt"))
    bad = qrels.assign(label=qrels["label"].astype(object))
    bad.loc[2, "label"] = "high"
    with pytest.raises(InputError, match=r"DataFrame:2 \[label\]: label 'high' is not a finite number") as error:
        ir.evaluate(read_run(FIXTURE / "run.trec"), bad, ["AP"])
    assert error.value.field == "label"
    with pytest.raises(InputError, match="missing column.*label") as error:
        ir.evaluate(read_run(FIXTURE / "run.trec"), qrels.drop(columns="label"), ["AP"])
    with pytest.raises(InputError, match="not an integer"):
        ir.evaluate(read_run(FIXTURE / "run.trec"), qrels.assign(label=0.5), ["AP"])


def test_experiment_takes_topics_and_qrels_frames_and_runs_made_elsewhere(tiny, tmp_path):
    """`(topics, qrels)` as frames, a stage with its own index, a Run, a run file and a result frame as systems:
    each row is what the dataset-bound stage scores. Before: AttributeError on the tuple, 'unknown stage' on a run."""
    dataset, index = tiny
    bm25 = ir.bm25(index=index)
    run = bm25.run(dataset, cache=False)
    run.write(tmp_path / "bm25.trec")
    on_dataset = ir.Experiment([bm25], dataset, MEASURES, cache=False)
    topics, qrels = dataset.topics().to_frame(), _qrels_frame(dataset.qrels())
    table = ir.Experiment([bm25, run, str(tmp_path / "bm25.trec"), run.to_frame()], (topics, qrels), MEASURES,
                          cache=False)
    assert table.runs == [repr(bm25), "run 1", str(tmp_path / "bm25.trec"), "run 3"]
    assert all(table.scores[name] == pytest.approx(on_dataset.scores[repr(bm25)], abs=1e-6) for name in table.runs)
    with pytest.raises(ConfigError, match="int is not a system"):
        ir.Experiment([7], (topics, qrels), MEASURES)


def test_names_never_shadow_an_external_baseline(tiny):
    """`names=["baseline", ...]` beside `baseline=<a stage>`: the external baseline keeps a row of its own and the
    p-values are against it. Before: its row was dropped and the first pipeline was the baseline."""
    dataset, index = tiny
    table = ir.Experiment([ir.bm25(index=index, k1=1.2), ir.bm25(index=index, b=0.2)], dataset, ["AP"],
                          names=["baseline", "new"], baseline=ir.bm25(index=index), cache=False)
    assert table.runs == [f"baseline: {ir.bm25(index=index)!r}", "baseline", "new"]
    assert table.baseline == table.runs[0] and set(table.pvalues) == {"baseline", "new"}


@needs_shared_data
def test_experiment_on_frames_gives_pt_experiments_table_tests_and_per_query_frame():
    """Three CACM runs as result frames: `ir.Experiment` gives pt.Experiment's scores, wins and losses (`AP +`,
    `AP -`), t-test and Wilcoxon p-values (Holm-corrected too) and, with perquery=True, its long frame."""
    pt = pytest.importorskip("pyterrier")
    cacm = ir.dataset("cacm")
    frames = [ir.bm25(k1=k1, b=b).run(cacm).to_frame() for k1, b in ((0.9, 0.4), (1.2, 0.75), (0.5, 0.9))]
    topics, qrels = cacm.topics().to_frame(), _qrels_frame(cacm.qrels())
    names, measures = ["a", "b", "c"], parse_measures("AP nDCG@10")
    for test in ("t", "wilcoxon"):
        ours = ir.Experiment(frames, (topics, qrels), measures, names=names, baseline=0, test=test,
                             correction="holm").to_dataframe()
        theirs = pt.Experiment(frames, topics, qrels, eval_metrics=measures, names=names, baseline=0, test=test,
                               correction="holm")
        for m in ("AP", "nDCG@10"):
            assert list(ours[m]) == pytest.approx(list(theirs[m]), abs=1e-9)
            assert list(ours[f"{m} +"][1:]) == list(theirs[f"{m} +"][1:])
            assert list(ours[f"{m} -"][1:]) == list(theirs[f"{m} -"][1:])
            assert list(ours[f"{m} p-value"][1:]) == pytest.approx(list(theirs[f"{m} p-value corrected"][1:]),
                                                                   abs=1e-9)
    ours = ir.Experiment(frames, (topics, qrels), measures, names=names, perquery=True)
    theirs = pt.Experiment(frames, topics, qrels, eval_metrics=measures, names=names, perquery=True)
    assert list(ours.columns) == list(theirs.columns) == ["name", "qid", "measure", "value"]
    key = ["name", "qid", "measure"]
    merged = ours.merge(theirs.dropna(subset=["value"]).assign(measure=lambda f: f["measure"].map(str)), on=key)
    assert len(merged) == len(ours) and list(merged["value_x"]) == pytest.approx(list(merged["value_y"]), abs=1e-9)


def test_search_transform_and_call_take_pyterriers_frames(tiny):
    """`stage.search("query")`, `stage.transform(frame)` and `stage(frame)` give PyTerrier's result frame, the run
    the stage gives on Topics. Before: TypeError (search was an internal method), AttributeError on a frame."""
    dataset, index = tiny
    bm25 = ir.bm25(index=index)
    found = bm25.search("coal mining")
    assert list(found.columns) == ["qid", "docno", "score", "rank", "query"]
    assert Run.from_frame(found).ranking == bm25(Topics({"1": "coal mining"})).ranking
    topics = dataset.topics()
    expected = bm25(topics).ranking
    assert Run.from_frame(bm25.transform(topics.to_frame())).ranking == expected
    assert Run.from_frame(bm25(topics.to_frame())).ranking == expected
    features = bm25(topics.to_frame()).assign(feature=1.5)  # a result frame with a column of its own, reranked
    reranked = ir.overlap(index=index).transform(features)
    assert list(reranked.columns) == ["qid", "docno", "score", "rank", "query", "feature"]


def test_a_reranker_after_bm25_with_an_index_reads_its_texts_there(tiny):
    """`bm25(index=DIR) >> overlap()` bound to no dataset reads the candidates' texts from DIR: the dataset's
    scores. Before: ConfigError asking for overlap(index=DIR) again."""
    dataset, index = tiny
    pipe = ir.bm25(index=index) >> ir.overlap()
    assert pipe(dataset.topics()).ranking == pipe.run(dataset, cache=False).ranking


def test_topics_that_lack_the_runs_queries_are_a_stage_error_naming_them(tiny):
    """Before: KeyError: '2' from inside the reranker."""
    dataset, index = tiny
    hits = ir.bm25(index=index)(dataset.topics())
    run = Run(hits.ranking, dict(DOCS))  # candidates with their texts: the reranker needs no index
    with pytest.raises(StageError, match=r"overlap\(idf=True\): 2 queries of its input run are not in the topics: "
                                         r"'2', '3'"):
        ir.overlap()(dataset.topics().subset(["1"]), run)


def test_a_stage_bound_to_nothing_says_how_to_bind_it(tiny):
    dataset, _ = tiny
    with pytest.raises(ConfigError, match=r"bm25 needs an index: .*stage.bind\(DATASET\)\(topics\), stage.run"):
        ir.bm25()(dataset.topics())
