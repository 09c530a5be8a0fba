"""A stage on PyTerrier's frames: the verbs a PyTerrier user types, on any irpipe stage.

    ir.bm25(index=DIR).search("sorting")       a result frame for one query (qid "1"), as pt's `search`
    stage.transform(frame), stage(frame)       a query frame (qid, query): a retriever retrieves; a result frame
                                               (qid, query, docno, + score, rank, text): a reranker reranks it

The result frame is PyTerrier's: qid, docno, score, rank (0-based), query, + text where the run carries texts, +
every other column of the frame given (features, `query_0`, ...), as PyTerrier's own transformers keep them. A
stage never bound binds to nothing but its own arguments (`bm25(index=DIR)`; a reranker after it reads its texts
from that index); bind it to a dataset first for the dataset's index (`stage.bind("cacm").search(...)`). The
IrpipeTransformer of pipeline/pyterrier.py is this, inside PyTerrier, with its candidates and stage cache.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from pipeline import cache
from pipeline.data.frames import is_frame
from pipeline.data.runs import Run
from pipeline.data.topics import Topics

if TYPE_CHECKING:
    import pandas as pd

    from pipeline.stage import Stage

QUERY_COLUMNS = ["qid", "query"]
RESULT_COLUMNS = ["qid", "docno", "score", "rank", "query"]  # + text where the run carries texts


def search(stage: "Stage", query: str, qid: str = "1") -> "pd.DataFrame":
    """PyTerrier's `search`: the result frame of one query."""
    return transform_frame(stage, Topics({qid: query}).to_frame())


def transform_frame(stage: "Stage", frame: "pd.DataFrame", candidates: Run | None = None,
                    use_cache: bool = False) -> "pd.DataFrame":
    """The stage's result frame of a query frame (with `candidates`, a reranker reranks those of its queries) or a
    result frame (its hits are the candidates), through the stage cache with `use_cache`."""
    from pipeline.data.frames import pyterrier_columns

    frame = pyterrier_columns(frame)
    if "docno" in frame.columns:
        topics = Topics.from_frame(frame[QUERY_COLUMNS].drop_duplicates())
        run = result_run(frame)
    else:
        topics = Topics.from_frame(frame)
        run = candidates.subset(topics.queries) if stage.needs_run and candidates is not None else None
    if not topics.queries:
        import pandas

        return pandas.DataFrame(columns=list(dict.fromkeys(RESULT_COLUMNS + list(frame.columns))))
    with cache.using(cache.StageCache() if use_cache else None):
        output = stage(topics, run)
    return with_other_columns(output.to_frame(topics)[RESULT_COLUMNS + (["text"] if output.texts else [])], frame)


def frames_too(transform):
    """A stage's `transform(topics, run)` that takes a frame too (`stage.transform(frame)`: `transform_frame`)."""

    @functools.wraps(transform)
    def transform_or_frame(self, topics, run=None):
        if is_frame(topics):
            return transform_frame(self, topics)
        return transform(self, topics, run)

    return transform_or_frame


def with_other_columns(result: "pd.DataFrame", given: "pd.DataFrame") -> "pd.DataFrame":
    """`result` with every column of the `given` frame that it lacks (features, `query_0`, a retriever's `docid`):
    a column that has one value per query is joined on qid, any other on (qid, docno); a hit the given frame did
    not have gets NaN there. Ids are joined as the strings irpipe makes of them."""
    own, other = list(result.columns), [c for c in given.columns if c not in result.columns]
    if not other:
        return result
    given = given.assign(qid=given["qid"].astype(str))
    per_query = [c for c in other if "docno" not in given.columns
                 or given.groupby("qid", sort=False)[c].nunique(dropna=False).max() <= 1]
    per_hit = [c for c in other if c not in per_query]
    if per_query:
        result = result.merge(given[["qid", *per_query]].drop_duplicates("qid"), on="qid", how="left")
    if per_hit:
        given = given.assign(docno=given["docno"].astype(str))
        result = result.merge(given[["qid", "docno", *per_hit]].drop_duplicates(["qid", "docno"]),
                              on=["qid", "docno"], how="left")
    return result[[*own, *other]]


def result_run(frame: "pd.DataFrame") -> Run:
    """The run of a PyTerrier result frame; without a score column, each query's hits in rank order (else the
    frame's) get the scores -1, -2, ... (a reranker reads only the candidates; a cutoff keeps that order)."""
    if "score" not in frame.columns:
        order = frame["rank"] if "rank" in frame.columns else frame.groupby("qid", sort=False).cumcount()
        frame = frame.assign(score=-(order.astype("float64") + 1.0))
    return Run.from_frame(frame)
