"""PyTerrier both ways (pipeline/pyterrier.py) with the real `pyterrier` package: an irpipe stage as a
pt.Transformer (query frame or result frame in, result frame out), a pt.Transformer as an irpipe stage (composed with
`>>`, `%`), one JVM shared with Pyserini in one process, and pt.Experiment on DL19 giving `irpipe eval`'s numbers."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pt = pytest.importorskip("pyterrier", reason='PyTerrier is the optional extra: pip install -e ".[pyterrier]"')
pd = pytest.importorskip("pandas")

from support import REPO, needs_shared_data, write_collection  # noqa: E402

from pipeline.data.registry import get_dataset  # noqa: E402
from pipeline.data.runs import Run  # noqa: E402
from pipeline.errors import ConfigError  # noqa: E402
from pipeline.experiment import run_pipeline  # noqa: E402
from pipeline.pyterrier import IrpipeTransformer, PyTerrierStage, qrels_frame  # noqa: E402
from pipeline.stage import Cutoff, StageError  # noqa: E402
from pipeline.stages.rerank import Overlap  # noqa: E402


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A tiny collection of our own (tests/support.py), as a dataset folder irpipe indexes on first use."""
    return write_collection(tmp_path_factory.mktemp("pyterrier") / "tiny")


@pytest.fixture(scope="module")
def tiny(folder):
    return get_dataset(str(folder))


def test_a_retriever_takes_a_query_frame_and_gives_irpipes_run(tiny):
    frame = IrpipeTransformer("bm25()", dataset=tiny, cache=False)(tiny.topics().to_frame())
    assert list(frame.columns) == ["qid", "docno", "score", "rank", "query"]
    assert frame.groupby("qid")["rank"].apply(list).to_dict() == {q: list(range(n)) for q, n in
                                                                 frame.groupby("qid").size().items()}
    expected = run_pipeline("bm25()", tiny, use_cache=False)[0]
    assert Run.from_frame(frame).ranking == expected.ranking  # the same hits, the same floats
    assert set(frame["query"]) == set(tiny.topics().queries.values())


def test_bm25_then_a_reranker_in_pyterrier_is_irpipes_pipeline(tiny):
    """`bm25 >> overlap` composed by PyTerrier (the reranker's texts from the dataset's index, the frame has none)
    gives what irpipe's `bm25() >> overlap()` gives."""
    pipeline = IrpipeTransformer("bm25()", dataset=tiny, cache=False) >> IrpipeTransformer("overlap()", dataset=tiny,
                                                                                           cache=False)
    assert isinstance(pipeline, pt.Transformer)
    frame = pipeline(tiny.topics().to_frame())
    assert Run.from_frame(frame).ranking == run_pipeline("bm25() >> overlap()", tiny, use_cache=False)[0].ranking


def test_a_reranker_takes_a_result_frame_with_texts_and_no_score():
    """A PyTerrier result frame (qid, query, docno, text; no score, no rank): candidates in frame order, texts
    from `text`, no dataset needed; the texts come back out. IDF-weighted overlap needs a collection for its IDF
    (a dataset or an index), which such a frame is not: refused when the transformer is made."""
    frame = pd.DataFrame({"qid": ["q1", "q1", "q1", "q2"], "query": ["coal mine"] * 3 + ["blue sky"],
                          "docno": ["a", "b", "c", "a"],
                          "text": ["nothing here", "a coal mine in wales", "coal dust", "nothing here"]})
    with pytest.raises(ConfigError, match=r"overlap\(idf=true\) takes its IDF from a collection"):
        IrpipeTransformer("overlap(idf=true)", cache=False)
    out = IrpipeTransformer("overlap(idf=false)", cache=False)(frame)
    assert list(out.columns) == ["qid", "docno", "score", "rank", "query", "text"]
    assert list(out[out.qid == "q1"].docno) == ["b", "c", "a"]
    from pipeline.data.topics import Topics

    topics = Topics({"q1": "coal mine", "q2": "blue sky"})
    run = Run({"q1": [("a", -1.0), ("b", -2.0), ("c", -3.0)], "q2": [("a", -1.0)]},
              dict(zip(frame.docno, frame.text)))
    assert Run.from_frame(out).ranking == Overlap(idf=False)(topics, run).ranking
    assert dict(zip(out.docno, out.text)) == dict(zip(frame.docno, frame.text))


def test_irpipe_stages_keep_the_frames_other_columns(tiny):
    """As PyTerrier's transformers do: a retriever keeps a query frame's columns (`query_0`, a feature), a
    reranker a result frame's (a per-hit feature, the retriever's `docid`), each on the rows it belongs to."""
    topics = tiny.topics().to_frame().assign(query_0=lambda f: f["query"], qfeature=lambda f: range(len(f)))
    retrieved = IrpipeTransformer("bm25()", dataset=tiny, cache=False)(topics)
    assert list(retrieved.columns) == ["qid", "docno", "score", "rank", "query", "query_0", "qfeature"]
    by_qid = dict(zip(topics.qid.astype(str), topics.qfeature))
    assert (retrieved.qfeature == retrieved.qid.map(by_qid)).all() and (retrieved["query_0"] == retrieved["query"]).all()

    given = retrieved.assign(docid=range(len(retrieved)), bm25=retrieved["score"])
    reranked = IrpipeTransformer("overlap()", dataset=tiny, cache=False)(given)
    assert list(reranked.columns) == ["qid", "docno", "score", "rank", "query", "query_0", "qfeature", "docid", "bm25"]
    assert sorted(map(tuple, reranked[["qid", "docno", "docid", "bm25"]].values.tolist())) == \
        sorted(map(tuple, given[["qid", "docno", "docid", "bm25"]].values.tolist()))
    assert not reranked.score.equals(given.score)  # it did rerank: overlap's scores, not BM25's

    texts = pd.DataFrame({"qid": ["q1", "q1"], "query": ["coal mine"] * 2, "docno": ["a", "b"], "feature": [1, 2],
                          "text": ["nothing here", "a coal mine in wales"]})
    out = IrpipeTransformer("overlap(idf=false)", cache=False)(texts)  # its text column kept beside the given ones
    assert list(out.columns) == ["qid", "docno", "score", "rank", "query", "text", "feature"]
    assert dict(zip(out.docno, out.feature)) == {"a": 1, "b": 2}


def test_a_pyterrier_reranker_inside_irpipe_gets_the_candidates_texts(tiny):
    """bm25() >> a PyTerrier reranker: the frame it gets has a `text` column, read from the dataset's index."""
    seen = {}

    def length(row):
        seen[row["docno"]] = row["text"]
        return float(len(row["text"]))

    from pipeline.stages.bm25 import BM25

    run = (BM25() >> PyTerrierStage(pt.apply.doc_score(length), reranks=True)).bind(tiny)(tiny.topics())
    from pipeline.retrieve.index import dataset_index_for, open_index

    index = open_index(str(dataset_index_for(tiny)))
    assert seen and all(text == index.doc_text(docno) for docno, text in seen.items())
    assert all(score == len(seen[docno]) for hits in run.ranking.values() for docno, score in hits)


def test_plus_is_the_same_score_sum_in_pyterrier_and_in_irpipe(tiny):
    """PyTerrier's `+` of two irpipe transformers and irpipe's `a + b` give the same scores; `rrf(a, b)` is
    reciprocal rank fusion by name."""
    a, b = "bm25()", "bm25(k1=0.6, b=0.9)"
    summed = (IrpipeTransformer(a, dataset=tiny, cache=False) + IrpipeTransformer(b, dataset=tiny, cache=False))(
        tiny.topics().to_frame())
    ours = run_pipeline(f"{a} + {b}", tiny, use_cache=False)[0]
    pyterrier = {(str(r.qid), r.docno): r.score for r in summed.itertuples()}
    assert pyterrier == pytest.approx({(q, d): s for q, hits in ours.ranking.items() for d, s in hits}, abs=1e-12)
    fused = run_pipeline(f"rrf({a}, {b})", tiny, use_cache=False)[0]
    assert max(s for hits in fused.ranking.values() for _, s in hits) <= 2 / 61


def test_a_reranker_given_a_query_frame_without_candidates_is_refused(tiny):
    reranker = IrpipeTransformer("overlap()", dataset=tiny, cache=False)  # tiny ships no candidate run
    assert reranker.transform_inputs() == [["qid", "query", "docno"]]
    with pytest.raises(pt.validate.InputValidationError, match="docno"):
        reranker(tiny.topics().to_frame())


def test_a_pyterrier_transformer_is_an_irpipe_stage(tiny):
    """A PyTerrier reranker inside irpipe's algebra: bm25() >> it % 2; and a PyTerrier source of results (a run
    from elsewhere) before irpipe's cutoff and reranker, bound to the dataset for texts."""
    bm25 = run_pipeline("bm25()", tiny, use_cache=False)[0]
    negate = PyTerrierStage(pt.apply.doc_score(lambda row: -row["score"]), reranks=True)
    from pipeline.stages.bm25 import BM25

    pipeline = BM25() >> negate % 2
    assert repr(pipeline).startswith("bm25(") and " >> pyterrier(transformer=" in repr(pipeline) and \
        repr(pipeline).endswith(", reranks=True) % 2")
    run = pipeline.bind(tiny)(tiny.topics())
    for qid, hits in bm25.ranking.items():
        assert run.ranking[qid] == sorted(((d, -s) for d, s in hits), key=lambda h: (-h[1], h[0]))[:2]

    source = pd.DataFrame({"qid": ["1", "1", "1", "3", "3"], "docno": ["d4", "d1", "d6", "d6", "d5"],
                           "score": [3.0, 2.0, 1.0, 2.0, 1.0]})
    given = PyTerrierStage(pt.Transformer.from_df(source))
    assert not given.needs_run
    run = (given % 2 >> Overlap()).bind(tiny)(tiny.topics())
    expected = (Cutoff(2) >> Overlap()).bind(tiny)(tiny.topics(), Run.from_frame(source))
    assert run.ranking == expected.ranking and set(run.ranking) == {"1", "3"}


def test_a_pyterrier_transformer_that_gives_no_run_is_a_stage_error(tiny):
    broken = PyTerrierStage(pt.apply.generic(lambda frame: frame[["qid", "query"]]))
    with pytest.raises(StageError, match=r"pyterrier\(.*cannot read as a run.*missing column\(s\) docno, score"):
        broken.bind(tiny)(tiny.topics())
    with pytest.raises(ConfigError, match="reranks='yes'"):
        PyTerrierStage(broken.transformer, reranks="yes")
    with pytest.raises(TypeError, match="wraps a pt.Transformer"):
        PyTerrierStage(lambda frame: frame)


def test_qrels_frame_is_what_pt_experiment_reads(tiny):
    frame = qrels_frame(tiny.qrels())
    assert list(frame.columns) == ["qid", "docno", "label"] and len(frame) == 5
    assert frame[frame.docno == "d4"].label.tolist() == [0]


_IRPIPE_FIRST = """
import json, sys
import pyterrier as pt
import jnius_config
from pipeline.data.registry import get_dataset
from pipeline.evaluation import parse_measures
from pipeline.pyterrier import IrpipeTransformer, qrels_frame

before = jnius_config.vm_running or pt.java.started()
tiny = get_dataset(sys.argv[1])
bm25 = IrpipeTransformer("bm25()", dataset=tiny, cache=False)
table = pt.Experiment([bm25], tiny.topics().to_frame(), qrels_frame(tiny.qrels()), eval_metrics=parse_measures("AP nDCG@10"))
try:
    pt.java.init()
    later = "started"
except RuntimeError as error:
    later = str(error)
print(json.dumps({"before": before, "vm": jnius_config.vm_running, "AP": float(table["AP"][0]), "later": later}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("offline", ["0", "1"])
def test_irpipe_first_starts_java_through_pyterrier_or_says_why_not(folder, tiny, offline):
    """irpipe's BM25 inside pt.Experiment, pyterrier imported: irpipe starts the process's one JVM through
    pt.java.init() (which fails here for want of Terrier's jars: a version that does not exist; with
    IRPIPE_OFFLINE it is not tried),
    says so, and starts it with Anserini's jar alone; a later pt.java.init() says why it cannot run (irpipe's
    initializer, first of PyTerrier's), not pyjnius' "VM is already running"."""
    # a Terrier version that exists nowhere: PyTerrier cannot start Java here, with a network or without one
    env = {**os.environ, "IRPIPE_OFFLINE": offline, "TERRIER_VERSION": "0.0-absent", "TERRIER_HELPER_VERSION": "0.0-absent"}
    done = subprocess.run([sys.executable, "-c", _IRPIPE_FIRST, str(folder)], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    from pipeline.evaluation import evaluate

    expected = evaluate(run_pipeline("bm25()", tiny, use_cache=False)[0], tiny.qrels(), ["AP"])["AP"]
    assert {k: result[k] for k in ("before", "vm", "AP")} == {"before": False, "vm": True, "AP": expected}
    assert result["later"].startswith("irpipe started this process's JVM before PyTerrier could")
    said = "IRPIPE_OFFLINE: irpipe starts Java with Anserini's jar alone" if offline == "1" else \
        "PyTerrier could not start Java ("
    assert said in done.stderr
    # the real cause, not the advice to import pyterrier first (it was)
    cause = "IRPIPE_OFFLINE is set" if offline == "1" else "Terrier's jars could not be downloaded ("
    assert cause in result["later"] and "Import pyterrier" not in result["later"], result["later"]


_PYTERRIER_AFTER = """
import sys
from pipeline.data.registry import get_dataset
from pipeline.experiment import run_pipeline

run_pipeline("bm25()", get_dataset(sys.argv[1]), use_cache=False)  # irpipe's JVM, pyterrier not imported yet
import pyterrier as pt
try:
    pt.java.init()
except RuntimeError as error:
    print(error)
"""


@pytest.mark.slow
def test_pyterrier_imported_after_irpipe_started_java_is_told_to_come_first(folder):
    done = subprocess.run([sys.executable, "-c", _PYTERRIER_AFTER, str(folder)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "(pyterrier was not imported yet)" in done.stdout and "Import pyterrier before" in done.stdout, done.stdout


_PYTERRIER_FIRST = """
import json, sys
import pyterrier as pt
import jnius_config

# Terrier's initializer fetches Terrier's jars from Maven, which this machine cannot reach: left out here
found = pt.utils.entry_points
pt.utils.entry_points = lambda group: tuple(e for e in found(group) if e.name != "pyterrier.terrier.java")
pt.java.set_redirect_io(False)
try:
    pt.java.init()
except Exception as error:  # PyTerrier's post-start step needs Terrier's helper jar (PTUtils)
    print("post-start:", type(error).__name__, error, file=sys.stderr)
from pipeline import java
from pipeline.data.registry import get_dataset
from pipeline.experiment import run_pipeline

run = run_pipeline("bm25()", get_dataset(sys.argv[1]), use_cache=False)[0]
print(json.dumps({"vm": jnius_config.vm_running, "jar": str(java.anserini_jar()) in jnius_config.get_classpath(),
                  "options": [o for o in jnius_config.get_options() if o in ("-Xrs", "-Xss16m")],
                  "java_home": java.java_home() == java.Path(__import__("os").environ["JAVA_HOME"]),
                  "ranking": run.ranking}))
"""


@pytest.mark.slow
def test_pyterrier_first_starts_the_jvm_with_anserinis_jar(folder, tiny):
    """pt.java.init() runs irpipe's registered initializer (setup.cfg's pyterrier.java.init entry point): the JVM
    PyTerrier starts has Anserini's jar, irpipe's options and a Java >= 21, and irpipe's BM25 runs in it, hit for
    hit as in a process of its own."""
    done = subprocess.run([sys.executable, "-c", _PYTERRIER_FIRST, str(folder)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    expected = run_pipeline("bm25()", tiny, use_cache=False)[0].ranking
    assert result == {"vm": True, "jar": True, "options": ["-Xss16m", "-Xrs"], "java_home": True,
                      "ranking": {q: [list(h) for h in hits] for q, hits in expected.items()}}


def test_without_pyterrier_the_adapter_says_how_to_install_it():
    code = ("import sys; sys.modules['pyterrier'] = None\n"
            "from pipeline.errors import MissingResourceError\n"
            "try:\n    import pipeline.pyterrier\nexcept MissingResourceError as error:\n    print(error)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == 'pipeline.pyterrier needs PyTerrier: pip install -e ".[pyterrier]"', done.stderr


# The cheap reranker for DL19: BM25 interpolated with IDF word overlap, each z-scored per query. Its run has no
# tied scores (with ties, `irpipe eval` orders them as trec_eval does, docid descending, while ir-measures' default
# provider of RR@k, msmarco's, keeps another order: `overlap()` alone, 3,955 tied hits of 4,300, gets RR(rel=2)@10
# 0.4443 from irpipe and 0.5799 from pt.Experiment). The run file keeps 6 decimals of a score, as Pyserini's does:
# there 60 hits tie that do not in memory, which moves AP(rel=2) by 4e-6.
DL19_RERANKER = "fusion(candidates(), overlap(), method=weighted, norm=zscore)"
MEASURES = ["nDCG@10", "RR@10", "AP", "R@100"]


@pytest.mark.slow
@needs_shared_data
def test_pt_experiment_on_dl19_gives_irpipe_evals_numbers(tmp_path, capsys):
    from pipeline.cli import main
    from pipeline.evaluation import evaluate, parse_measures

    dl19 = get_dataset("dl19-passage")
    bm25 = IrpipeTransformer("candidates()", dataset=dl19, cache=False)
    reranker = IrpipeTransformer(DL19_RERANKER, dataset=dl19, cache=False)
    results = (bm25 >> reranker)(dl19.topics().to_frame())
    assert all(frame.score.is_unique for _, frame in results.groupby("qid"))  # no ties: see DL19_RERANKER
    table = pt.Experiment([bm25 >> reranker], dl19.topics().to_frame(), qrels_frame(dl19.qrels()),
                          eval_metrics=parse_measures(MEASURES, dl19.rel_level), names=["irpipe"])
    pyterrier = {column: float(table[column][0]) for column in table.columns if column != "name"}

    spec = f"candidates() >> {DL19_RERANKER}"
    run_file = tmp_path / "bm25-reranked.trec"
    assert main(["-q", "run", spec, "--dataset", "dl19-passage", "--output", str(run_file), "--no-cache"]) == 0
    capsys.readouterr()
    assert main(["-q", "eval", str(run_file), "--dataset", "dl19-passage", "-m", *MEASURES, "--format", "json"]) == 0
    irpipe_eval = json.loads(capsys.readouterr().out)["measures"]
    in_memory = evaluate(run_pipeline(spec, dl19, use_cache=False)[0], dl19.qrels(), MEASURES, dl19.rel_level)

    assert set(pyterrier) == set(irpipe_eval) == {"nDCG@10", "RR(rel=2)@10", "AP(rel=2)", "R(rel=2)@100"}
    assert pyterrier == pytest.approx(in_memory, abs=1e-12)
    assert pyterrier == pytest.approx(irpipe_eval, abs=1e-5)  # the file's 6 decimals (see DL19_RERANKER)
    assert {m: f"{v:.4f}" for m, v in pyterrier.items()} == {m: f"{v:.4f}" for m, v in irpipe_eval.items()}
    assert irpipe_eval["nDCG@10"] > 0.5058  # above DL19's BM25 (eval/dl19-bm25-top100.yaml): it did rerank
