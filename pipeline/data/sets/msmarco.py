"""TREC DL 2019 / 2020 passage reranking: the judged queries with their BM25 top-100 (rank_llm_data JSON, with
passage texts) and NIST's graded qrels (0-3; relevance level 2 for the binary measures, the DL convention).

JSON: a list, one object per query: {"query": str, "hits": [{"qid", "docid", "rank", "score", "content"}, ...]}.
The run keeps the shipped BM25 scores (ties, rare, are in docid order in the file, as Run keeps them).
"""
from __future__ import annotations

import json

from pipeline.data.qrels import Qrels, read_qrels
from pipeline.data.runs import Run
from pipeline.data.sets.base import Dataset
from pipeline.data.topics import Topics
from pipeline.errors import InputError


class BM25TopDataset(Dataset):
    provides = ("topics", "qrels", "run")

    def _queries(self) -> list[tuple[str, str, list[dict]]]:
        path = self.path("run")
        with open(path, encoding="utf-8") as handle:
            try:
                data = json.load(handle)
            except json.JSONDecodeError as error:
                raise InputError(path, f"not JSON: {error.msg}", error.lineno) from None
        queries = []
        for index, entry in enumerate(data):
            hits = entry.get("hits") if isinstance(entry, dict) else None
            if not hits or not isinstance(entry.get("query"), str):
                raise InputError(path, f"entry {index} lacks a query or hits", field=f"[{index}]")
            queries.append((str(hits[0]["qid"]), entry["query"].strip(), hits))
        return queries

    def topics(self) -> Topics:
        return Topics({qid: query for qid, query, _ in self._queries()})

    def qrels(self) -> Qrels:
        return read_qrels(self.path("qrels"))

    def run(self) -> Run:
        scores, texts = {}, {}
        for qid, _, hits in self._queries():
            scores[qid] = {str(hit["docid"]): float(hit["score"]) for hit in hits}
            texts.update((str(hit["docid"]), hit["content"]) for hit in hits)
        return Run.from_scores(scores, texts, tag="bm25")
