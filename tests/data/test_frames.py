"""Run and Topics <-> pandas DataFrames with PyTerrier's column names: lossless both ways, bad frames named."""
from __future__ import annotations

import pandas as pd
import pytest

from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.errors import InputError

RUN = Run({"q1": [("d3", 2.5), ("d1", 1.0), ("d2", 1.0)], "q2": [("d1", -0.125)]},
          {"d1": "first passage", "d3": "third"}, tag="t")
TOPICS = Topics({"q1": "what is ir", "q2": "bm25"}, {"q1": {"keywords": ["ir"], "exclude": ["d9"]}})


def test_run_frame_has_pyterrier_columns_and_0_based_ranks():
    frame = RUN.to_frame(TOPICS)
    assert list(frame.columns) == ["qid", "docno", "score", "rank", "text", "query"]
    assert frame["rank"].tolist() == [0, 1, 2, 0]
    assert frame["docno"].tolist() == ["d3", "d1", "d2", "d1"]
    texts = frame["text"].tolist()
    assert texts[:2] == ["third", "first passage"] and pd.isna(texts[2]) and texts[3] == "first passage"
    assert frame["query"].tolist() == ["what is ir"] * 3 + ["bm25"]


def test_run_round_trip_is_lossless():
    back = Run.from_frame(RUN.to_frame(), tag="t")
    assert back == RUN and back.fingerprint() == RUN.fingerprint()
    plain = Run({"q1": [("a", 0.1 + 0.2), ("b", 1e-300)]})
    assert Run.from_frame(plain.to_frame()).ranking == plain.ranking  # floats bit-exact, no texts column


def test_topics_round_trip_is_lossless():
    frame = TOPICS.to_frame()
    assert list(frame.columns) == ["qid", "query", "keywords", "exclude"]
    assert Topics.from_frame(frame) == TOPICS


def test_a_pyterrier_result_frame_comes_in_ordered_by_rank():
    frame = pd.DataFrame({"qid": [1, 1, 2], "docid": [7, 8, 9], "docno": ["b", "a", "c"], "score": [3.0, 5.0, 1.0],
                          "rank": [1, 0, 0], "query": ["x", "x", "y"]})
    run = Run.from_frame(frame)
    assert run.ranking == {"1": [("a", 5.0), ("b", 3.0)], "2": [("c", 1.0)]}
    no_rank = Run.from_frame(frame.drop(columns="rank"))
    assert no_rank.ranking == run.ranking


@pytest.mark.parametrize("frame, row, column, message", [
    (pd.DataFrame({"qid": ["1"], "docno": ["a"]}), None, "score", "missing column"),
    (pd.DataFrame({"qid": ["1", "1"], "docno": ["a", "b"], "score": [1.0, float("nan")]}), 1, "score", "finite"),
    (pd.DataFrame({"qid": ["1", None], "docno": ["a", "b"], "score": [1.0, 2.0]}), 1, "qid", "empty"),
    (pd.DataFrame({"qid": ["1", "2"], "docno": ["a", "a"], "score": [1.0, 2.0], "text": ["x", "y"]}), 1, "text",
     "another text than on row 0"),
    (pd.DataFrame({"qid": ["1"], "docno": ["a b"], "score": [1.0]}), 0, "docno", "whitespace"),
])
def test_bad_run_frames_name_row_and_column(frame, row, column, message):
    with pytest.raises(InputError) as error:
        Run.from_frame(frame)
    assert error.value.line == row and error.value.field == column and message in str(error.value)


def test_bad_topic_frames():
    with pytest.raises(InputError, match="appears twice"):
        Topics.from_frame(pd.DataFrame({"qid": ["1", "1"], "query": ["a", "b"]}))
    with pytest.raises(InputError, match=r"DataFrame:1 \[query\]"):
        Topics.from_frame(pd.DataFrame({"qid": ["1", "2"], "query": ["a", ""]}))
