"""Collections shipped as plain files: a corpus (JSONL, TSV or TREC SGML), a topic file and TREC qrels.

CACM (JsonCollection JSONL, CACM-style topics), Vaswani NPL (TREC SGML docs and topics) and MS MARCO passage
dev-small (TSV topics and qrels, no passages offline) are all read with the generic readers.
"""
from __future__ import annotations

from typing import Iterator

from pipeline.data.corpus import iter_docs
from pipeline.data.qrels import Qrels, read_qrels
from pipeline.data.sets.base import Dataset
from pipeline.data.topics import Topics
from pipeline.data.topics import read_topics


class StandardDataset(Dataset):
    """Files keyed "docs" (`docs_key`), "topics", "qrels"; formats in the spec's "formats" (detected when absent)."""

    docs_key = "docs"

    def __init__(self, name, spec, files):
        super().__init__(name, spec, files)
        parts = {"topics": "topics", "qrels": "qrels", "docs": self.docs_key}
        self.provides = tuple(what for what, key in parts.items() if key in files)

    def topics(self) -> Topics:
        if "topics" not in self.files:
            raise self._lacks("topics")
        return read_topics(self.path("topics"), self.spec.get("formats", {}).get("topics"))

    def qrels(self) -> Qrels:
        if "qrels" not in self.files:
            raise self._lacks("qrels")
        return read_qrels(self.path("qrels"))

    def docs(self) -> Iterator[dict]:
        if self.docs_key not in self.files:
            raise self._lacks("docs")
        return iter_docs(self.path(self.docs_key), self.spec.get("formats", {}).get(self.docs_key))
