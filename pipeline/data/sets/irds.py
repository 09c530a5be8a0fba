"""`irds:<id>`: any ir_datasets dataset in irpipe's types (ir_datasets is imported only when one is used).

ir_datasets does its own downloading and caching (`$IR_DATASETS_HOME`); documents become
{"id", "contents" (the document's default_text()), ...its other text fields}, queries their default_text().
"""
from __future__ import annotations

from functools import cached_property
from typing import Iterator

from pipeline.data.qrels import Qrels
from pipeline.data.runs import Run
from pipeline.data.sets.base import Dataset
from pipeline.data.topics import Topics
from pipeline.errors import UnknownNameError

PREFIX = "irds:"


class IrdsDataset(Dataset):
    def __init__(self, name: str):
        super().__init__(name, {"family": "irds", "description": f"ir_datasets {name[len(PREFIX):]!r}"}, {})
        self.irds_id = name[len(PREFIX):]
        # TREC DL judges on a 0-3 scale where 2 is the binary relevance threshold
        self.rel_level = 2 if "trec-dl" in self.irds_id else 1

    @cached_property
    def _dataset(self):
        import ir_datasets  # lazy: only irds: names need it

        try:
            return ir_datasets.load(self.irds_id)
        except KeyError:
            raise UnknownNameError("ir_datasets dataset", self.irds_id, list(ir_datasets.registry)) from None

    @property
    def language(self) -> str:
        lang = self._dataset.docs_lang() if self._dataset.has_docs() else None
        return lang or "en"

    @property
    def provides(self) -> tuple[str, ...]:
        has = {"topics": "queries", "qrels": "qrels", "docs": "docs", "run": "scoreddocs"}
        return tuple(ours for ours, theirs in has.items() if getattr(self._dataset, f"has_{theirs}")())

    def topics(self) -> Topics:
        if not self._dataset.has_queries():
            raise self._lacks("topics")
        return Topics({query.query_id: query.default_text() for query in self._dataset.queries_iter()})

    def qrels(self) -> Qrels:
        if not self._dataset.has_qrels():
            raise self._lacks("qrels")
        qrels: Qrels = {}
        for qrel in self._dataset.qrels_iter():
            qrels.setdefault(qrel.query_id, {})[qrel.doc_id] = int(qrel.relevance)
        return qrels

    def docs(self) -> Iterator[dict]:
        if not self._dataset.has_docs():
            raise self._lacks("docs")
        return self._iter_docs()

    def _iter_docs(self) -> Iterator[dict]:
        for doc in self._dataset.docs_iter():
            extra = {key: value for key, value in doc._asdict().items()
                     if isinstance(value, str) and key not in ("doc_id", "id", "contents")}
            yield {"id": doc.doc_id, "contents": doc.default_text(), **extra}

    def run(self) -> Run | None:
        """The dataset's scoreddocs as a run (without texts), or None when it has none."""
        if not self._dataset.has_scoreddocs():
            return None
        scores: dict[str, dict[str, float]] = {}
        for hit in self._dataset.scoreddocs_iter():
            scores.setdefault(hit.query_id, {})[hit.doc_id] = float(hit.score)
        return Run.from_scores(scores, tag=self.irds_id.replace("/", "-"))

    def fetch(self) -> dict:
        """Let ir_datasets download what it needs: reading the first item of each part fetches that part."""
        for part in ("docs", "queries", "qrels", "scoreddocs"):
            if getattr(self._dataset, f"has_{part}")():
                next(iter(getattr(self._dataset, f"{part}_iter")()), None)
        return {}

    def info(self) -> dict:
        info = super().info()
        info["upstream"] = [f"ir_datasets:{self.irds_id}"]
        info["files"] = {}
        return info
