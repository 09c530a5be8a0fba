"""Python functions as stages, as PyTerrier's `pt.apply`: a query rewrite, a document score, a frame -> frame step.

    ir.apply_query(lambda query: query.lower()) >> ir.bm25()           # pt.apply.query(lambda row: ...)
    ir.bm25() % 100 >> ir.apply_doc_score(lambda query, text: len(text))  # pt.apply.doc_score(lambda row: ...)
    ir.bm25() % 100 >> (lambda frame: frame[frame["rank"] < 10])        # pt.apply.generic(lambda df: ...)

A function stage is never cached: the stage cache keys a stage by its config and its fingerprint, and a function's
code is neither (two lambdas share the name `<lambda>`); the stages after it are cached as ever, keyed by what it
made. Its repr names the function (`apply_query(fn=module.name)`), and two function stages are equal only when they
hold the same function object. It is made in Python only: a spec cannot name a function (`apply_query(fn=x)` in a
spec is a ConfigError saying so).
"""
from __future__ import annotations

import math
from typing import Callable

from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.errors import ConfigError
from pipeline.rerank.pairs import Pair
from pipeline.stage import Stage, StageError
from pipeline.stages import register
from pipeline.stages.rerank import Reranker


class FunctionStage:
    """What the function stages share (a mixin before Stage): the function, its name as the config, identity by the
    function object."""

    cacheable = False  # a function's code keys nothing: see the module's docstring

    def __init__(self, fn: Callable):
        if isinstance(fn, (str, bytes)) or not callable(fn):
            raise ConfigError(f"{self.name}: fn={fn!r} is not a Python function; a function stage is made in Python, "
                              f"e.g. ir.{self.name}(my_function), not in a spec", field="fn")
        self.fn = fn

    def config(self) -> dict:
        module, name = getattr(self.fn, "__module__", None), getattr(self.fn, "__qualname__", repr(self.fn))
        return {"fn": f"{module}.{name}" if module else name}

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.fn is other.fn

    def __hash__(self) -> int:
        return hash((type(self).__name__, id(self.fn)))


@register
class ApplyQuery(FunctionStage, Stage):
    """`fn(query) -> query`: the stages after it see the rewritten queries (the run it is given passes through)."""

    name = "apply_query"
    keeps_candidates = True

    def transform(self, topics: Topics, run: Run | None) -> Run:
        return run if run is not None else Run({})

    def annotate(self, topics: Topics) -> Topics:
        queries = {}
        for qid, query in topics.items():
            queries[qid] = self.fn(query)
            if not isinstance(queries[qid], str):
                raise StageError(f"{self!r} returned {type(queries[qid]).__name__} for query {qid!r}, not a str")
        return Topics(queries, topics.extra)


@register
class ApplyDocScore(FunctionStage, Reranker):
    """`fn(query, text) -> float`: each candidate's new score (texts from the run, `index=DIR` or the dataset's
    index, as every reranker's); the candidates are re-sorted by it."""

    name = "apply_doc_score"

    def __init__(self, fn: Callable, index: str | None = None):
        super().__init__(fn)
        self.index = index

    def config(self) -> dict:
        return super().config() | ({"index": self.index} if self.index else {})

    def score(self, pairs: list[Pair]) -> list[float]:
        scores = []
        for pair in pairs:
            score = self.fn(pair.query, pair.text)
            if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
                raise StageError(f"{self!r} scored query {pair.qid!r}, document {pair.docid!r} {score!r}: a score is "
                                 "a finite number")
            scores.append(float(score))
        return scores


@register
class ApplyGeneric(FunctionStage, Stage):
    """`fn(frame) -> frame`: the input run as PyTerrier's results frame (qid, docno, score, rank, query, and text
    where the run carries texts), and the run read back from the frame it returns (`Run.from_frame`: its checks).
    A plain function on either side of `>>` is this stage."""

    name = "apply_generic"
    needs_run = True

    def transform(self, topics: Topics, run: Run | None) -> Run:
        import pandas as pd

        frame = self.fn(run.to_frame(topics))
        if not isinstance(frame, pd.DataFrame):
            raise StageError(f"{self!r} returned {type(frame).__name__}, not a pandas DataFrame")
        output = Run.from_frame(frame, tag=run.tag)
        kept = {docid for hits in output.ranking.values() for docid, _ in hits}
        output.texts = output.texts or {d: t for d, t in run.texts.items() if d in kept}
        output.doc_fields = {d: f for d, f in run.doc_fields.items() if d in kept}
        return output
