"""`exclude()`: drop the documents a topic excludes (pipeline/data/sets/questions.py: a question-retrieval query's
own question, which is in the index too)."""
from __future__ import annotations

from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.stage import Stage
from pipeline.stages import register


@register
class Exclude(Stage):
    """Drop from each query's hits the docids listed in its `exclude` field (Topics.extra), e.g. the query's own
    copy in a question-retrieval index. Queries without the field keep all their hits."""

    name = "exclude"
    needs_run = True
    keeps_candidates = True

    def transform(self, topics: Topics, run: Run | None) -> Run:
        return run.excluding(topics)
