"""`a ** b`, `features(a, b)`: a feature union, as PyTerrier's `**` -- the input run's hits, each carrying the
scores its stages give it as a feature vector (`Run.features`: qid -> docid -> floats, in the stages' order), for a
learned ranker to read (`ltr(...)`, pipeline/stages/ltr.py).

    ir.candidates() >> (ir.bm25() ** ir.overlap(idf=True) ** ir.overlap(idf=False))

Each stage runs on the same input (a reranker rescores its candidates; a retriever searches as it would alone) and
is cached as it would be alone. A hit that a stage's output lacks (a retriever's that did not retrieve it) has the
feature 0.0. The union keeps the input's hits -- no more, no fewer -- ranked by the first feature (so
`features(bm25())` is the input's candidates in BM25's order, and `candidates() ** ...` keeps the input's order).
"""
from __future__ import annotations

from pipeline.binding import Binding
from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.stage import Stage
from pipeline.stages import register
from pipeline.validate import problem

MISSING = 0.0  # the feature of a hit that a stage's output lacks


@register
class FeatureUnion(Stage):
    """The input's hits, ranked by the first stage's score, with every stage's score as a feature."""

    name = "features"
    needs_run = True
    keeps_candidates = True

    def __init__(self, *stages: Stage):
        other = next((stage for stage in stages if not isinstance(stage, Stage)), None)
        if other is not None or not stages:
            raise problem(self.name, "stages", f"{other!r} is not a pipeline; features unites pipelines' scores, "
                                               "e.g. features(bm25(), overlap(idf=true))")
        self.stages = tuple(s for stage in stages for s in (stage.stages if isinstance(stage, FeatureUnion) else
                                                            (stage,)))

    def resolve(self, binding: Binding) -> None:
        self.stages = tuple(stage.bind(binding) for stage in self.stages)

    def transform(self, topics: Topics, run: Run | None) -> Run:
        columns = [stage(topics, run).to_dict() for stage in self.stages]  # one run at a time, kept as its scores
        features = {qid: {docid: tuple(column.get(qid, {}).get(docid, MISSING) for column in columns)
                          for docid, _ in hits} for qid, hits in run.ranking.items()}
        scores = {qid: {docid: vector[0] for docid, vector in vectors.items()} for qid, vectors in features.items()}
        output = Run.from_scores(scores, run.texts, tag=self.name, doc_fields=run.doc_fields)
        output.features = features
        return output

    def config(self) -> dict:
        return {"stages": [repr(stage) for stage in self.stages]}

    def __repr__(self) -> str:
        return f"features({', '.join(map(repr, self.stages))})"
