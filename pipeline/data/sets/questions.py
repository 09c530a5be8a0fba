"""Question retrieval over a question-pair set (the keyword-BERT paper's Table 3 setting).

The documents are the unique questions of all the listed splits (dev + test), numbered `q0, q1, ...` in order of
first appearance (each pair's first question, then its second). Every positive pair is a query: its first
question is the query text, its second question the one relevant document, and the query's own question, which
is in the index too, is listed in `Topics.extra[qid]["exclude"]` for the `exclude()` stage
(pipeline/stages/exclude.py) to drop from the ranking (`bm25() >> exclude()`). Query ids are `<split>-<pair index>` (0-based position in the split's file);
pairs whose two questions are the same text are left out (their answer would be the excluded question itself).
A spec's `query_splits` keeps the queries of those splits only (`lcqmc/questions-test`: the documents of dev+test,
the queries of test, for models trained on dev).
"""
from __future__ import annotations

import functools
from typing import Iterator

from pipeline.data.qrels import Qrels
from pipeline.data.sets.base import Dataset, LabelledPair
from pipeline.data.sets.chinese import BqDataset, LcqmcDataset
from pipeline.data.topics import Topics

PAIR_FAMILIES: dict[str, type[Dataset]] = {"lcqmc": LcqmcDataset, "bq": BqDataset}


class QuestionRetrievalDataset(Dataset):
    provides = ("docs", "topics", "qrels")

    def _pairs(self) -> Iterator[tuple[str, int, LabelledPair]]:
        """(split, index in split, pair) over the splits in the order of the spec's files."""
        family = PAIR_FAMILIES[self.spec["pairs_family"]]
        for split in self.files:
            pairs = family(f"{self.name}:{split}", self.spec, {"pairs": self.files[split]})
            for index, pair in enumerate(pairs.pairs()):
                yield split, index, pair

    @functools.cached_property
    def _built(self) -> tuple[dict[str, str], dict[str, str], dict[str, dict], Qrels]:
        ids: dict[str, str] = {}  # question text -> docid
        queries, extra, qrels = {}, {}, {}
        query_splits = set(self.spec.get("query_splits", self.files))
        for split, index, pair in self._pairs():
            for text in (pair.text_a, pair.text_b):
                ids.setdefault(text, f"q{len(ids)}")
            if pair.label == 1 and pair.text_a != pair.text_b and split in query_splits:
                qid = f"{split}-{index}"
                queries[qid] = pair.text_a
                extra[qid] = {"exclude": [ids[pair.text_a]]}
                qrels[qid] = {ids[pair.text_b]: 1}
        return ids, queries, extra, qrels

    def docs(self) -> Iterator[dict]:
        return ({"id": docid, "contents": text} for text, docid in self._built[0].items())

    def topics(self) -> Topics:
        _, queries, extra, _ = self._built
        return Topics(dict(queries), {qid: dict(fields) for qid, fields in extra.items()})

    def qrels(self) -> Qrels:
        return {qid: dict(judged) for qid, judged in self._built[3].items()}
