"""BM25: identical to Pyserini's own CLI on CACM; Anserini's score-tie arithmetic; errors."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from pipeline.cli import main
from pipeline.data.runs import read_run
from pipeline.data.topics import Topics
from pipeline.errors import IrpipeError, MissingResourceError
from pipeline.stages.bm25 import BM25
from pipeline.retrieve.lucene import LuceneIndex, adjust_score_ties

PYSERINI_CLI = """
import runpy, sys
from pipeline import java
java.start()
index, topics, output, output_rm3 = sys.argv[1:5]
for extra, output in [([], output), (["--rm3"], output_rm3)]:
    sys.argv = ["x", "--index", index, "--topics", topics, "--output", output, "--bm25", "--k1", "0.9",
                "--b", "0.4", "--hits", "1000", "--threads", "2"] + extra
    runpy.run_module("pyserini.search.lucene", run_name="__main__")
"""


@pytest.mark.slow
def test_identical_to_pyserini_cli_on_cacm(cacm_index, cacm_topics_file, tmp_path):
    """Same index, same topic file, k1=0.9 b=0.4, 1,000 hits: byte-identical runs (BM25 and BM25+RM3)."""
    theirs, theirs_rm3 = tmp_path / "pyserini.trec", tmp_path / "pyserini-rm3.trec"
    subprocess.run([sys.executable, "-c", PYSERINI_CLI, str(cacm_index), str(cacm_topics_file), str(theirs),
                    str(theirs_rm3)], check=True, capture_output=True)
    ours, ours_rm3 = tmp_path / "ours.trec", tmp_path / "ours-rm3.trec"
    common = ["--index", str(cacm_index), "--topics", str(cacm_topics_file), "--k1", "0.9", "--b", "0.4",
              "--hits", "1000", "--threads", "2", "--run-tag", "Anserini"]
    assert main(["-q", "search", *common, "--output", str(ours)]) == 0
    assert main(["-q", "search", *common, "--rm3", "--output", str(ours_rm3)]) == 0
    assert len(read_run(theirs)) == 64
    assert ours.read_text() == theirs.read_text()
    assert ours_rm3.read_text() == theirs_rm3.read_text()


@pytest.mark.parametrize("rm3", [False, True])
def test_threads_do_not_change_the_run(cacm_index, cacm_topics_file, rm3):
    """One query at a time, a batch on one Java thread and a batch on two: the same run, in the topics' order."""
    from pipeline.data.topics import Topics, read_topics

    topics = read_topics(cacm_topics_file)
    one = BM25(cacm_index, hits=100, threads=1, rm3=rm3)(topics)
    two = BM25(cacm_index, hits=100, threads=2, rm3=rm3)(topics)
    assert one.ranking == two.ranking and list(one.ranking) == list(topics.queries)
    first = next(iter(topics.queries))
    alone = BM25(cacm_index, hits=100, rm3=rm3)(Topics({first: topics.queries[first]}))
    assert alone.ranking[first] == one.ranking[first]


def test_query_without_indexed_terms_returns_no_hits(cacm_index):
    run = BM25(cacm_index, hits=10)(Topics({"1": "the of and", "2": "compiler"}))
    assert run["1"] == [] and len(run["2"]) == 10


def test_score_ties_follow_anserini_arithmetic():
    # rounding to 1e-4 is done in double precision on the float32 score (Anserini 1.7.1 bytecode):
    # float32(4.76185) is 4.76184988..., so it rounds down, although float32(4.76185 * 1e4) == 47618.5
    assert adjust_score_ties(np.array([4.76185], dtype=np.float32))[0] == np.float32(4.7618)
    # each further tie in a streak is lowered by 1e-6
    tied = adjust_score_ties(np.array([3.0, 2.0, 2.0, 2.00004, 1.0], dtype=np.float32))
    expected = [3.0, 2.0, np.float32(2.0) - np.float32(1e-6), np.float32(2.0) - np.float32(2e-6), 1.0]
    assert tied.tolist() == np.array(expected, dtype=np.float32).tolist()


def test_score_ties_walk_agrees_with_the_plain_loop_on_many_ties():
    """The walk that jumps from tie to tie gives the plain per-score loop's floats (the Java original's order of
    operations), on scores with long streaks, ties at the ends and streaks that end only through their lowering."""
    def plain(scores):
        out = (np.floor(np.asarray(scores, np.float32).astype(np.float64) * 1e4 + 0.5) / 1e4).astype(np.float32)
        dup = 0
        for i in range(1, len(out)):
            if out[i - 1] - out[i] > np.float32(1e-4):
                dup = 0
            else:
                dup += 1
                out[i] = out[i] - np.float32(1e-6) * np.float32(dup)
        return out

    rng = np.random.default_rng(0)
    for trial in range(300):
        steps = rng.choice([0.0, 1e-5, 5e-5, 1e-4, 1.02e-4, 2e-4, 1e-3], size=int(rng.integers(1, 400)))
        scores = np.sort(np.float32(20.0) - np.cumsum(steps).astype(np.float32))[::-1]
        assert adjust_score_ties(scores).tobytes() == plain(scores).tobytes(), trial
    assert len(adjust_score_ties(np.array([], dtype=np.float32))) == 0


def test_score_ties_of_a_batch_are_each_querys_own():
    """Several queries' scores adjusted in one pass (`starts`) equal each query adjusted alone: a streak of ties
    never runs from one query's last hit into the next query's first, nor do empty queries shift it."""
    rng = np.random.default_rng(1)
    steps = [rng.choice([0.0, 5e-5, 1e-3], size=int(size)) for size in rng.integers(0, 30, size=200)]
    queries = [np.sort(np.float32(5.0) - np.cumsum(step).astype(np.float32))[::-1] for step in steps]
    starts = np.cumsum([0] + [len(scores) for scores in queries])[1:-1]
    batched = adjust_score_ties(np.concatenate(queries), starts)
    assert batched.tobytes() == np.concatenate([adjust_score_ties(scores) for scores in queries]).tobytes()


def test_a_docid_holding_a_read_back_separator_is_an_error_not_a_shifted_run(cacm_index):
    """Hits come back from Java as `score FIELD docid HIT ...` strings; irpipe's readers refuse control characters
    in ids, but an index built elsewhere may hold one: a docid with a separator must fail, not shift the pairs."""
    index = LuceneIndex(cacm_index)
    assert index._read_hits(["2.5\x1fa b\x1e1.5\x1fc", ""]) == [[("a b", 2.5), ("c", 1.5)], []]
    with pytest.raises(IrpipeError, match="control character"):
        index._read_hits(["2.5\x1fa\x1eb\x1e1.5\x1fc"])


def test_missing_index_says_how_to_build_one(tmp_path):
    with pytest.raises(MissingResourceError, match="irpipe index"):
        LuceneIndex(tmp_path / "nothing-here")


def test_cli_missing_index_exits_nonzero(tmp_path, capsys):
    topics = tmp_path / "t.tsv"
    topics.write_text("1\thello\n")
    code = main(["-q", "search", "--index", str(tmp_path / "none"), "--topics", str(topics),
                 "--output", str(tmp_path / "run.trec")])
    assert code == 2 and "no Lucene index" in capsys.readouterr().err
    assert not (tmp_path / "run.trec").exists()
