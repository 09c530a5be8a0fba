"""SQuAD v1.1 dev as a retrieval benchmark: paragraphs are the documents, questions the topics, and the
paragraph a question was written about is its one relevant document.

Paragraph ids are `<article title>-<paragraph index>` (0-based), e.g. `Super_Bowl_50-0`; the article title is
kept as a document field "title" and the context text is kept verbatim (answer offsets point into it).

Article splits (for training on some articles' questions and testing on others'): a spec's `articles: [start,
stop]` keeps the questions of the articles at those positions in file order (0-based, stop excluded), and
`doc_articles: [start, stop]` the paragraphs of those articles as the documents; either absent means all 48.
"""
from __future__ import annotations

import json
from typing import Iterator

from pipeline.data.corpus import collapse_whitespace
from pipeline.data.qrels import Qrels
from pipeline.data.sets.base import Dataset
from pipeline.data.topics import Topics
from pipeline.errors import InputError


class SquadDataset(Dataset):
    provides = ("topics", "qrels", "docs")

    def _paragraphs(self, span: str) -> Iterator[tuple[str, str, dict]]:
        """(paragraph id, article title, paragraph object) in file order, of the articles the spec's `span`
        ("articles" or "doc_articles") keeps."""
        path = self.path("json")
        with open(path, encoding="utf-8") as handle:
            try:
                data = json.load(handle)["data"]
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise InputError(path, f"not a SQuAD JSON file ({error})", field="data") from None
        start, stop = self.spec.get(span, (0, len(data)))
        for article in data[start:stop]:
            title = "_".join(article["title"].split())
            for index, paragraph in enumerate(article["paragraphs"]):
                yield f"{title}-{index}", article["title"], paragraph

    def _questions(self) -> Iterator[tuple[str, dict]]:
        """(paragraph id, question object) of the kept articles' questions."""
        return ((pid, qa) for pid, _, paragraph in self._paragraphs("articles") for qa in paragraph["qas"])

    def docs(self) -> Iterator[dict]:
        """{"id", "contents" (the context), "title"} for each paragraph."""
        return ({"id": pid, "contents": paragraph["context"], "title": title}
                for pid, title, paragraph in self._paragraphs("doc_articles"))

    def topics(self) -> Topics:
        return Topics({qa["id"]: collapse_whitespace(qa["question"]) for _, qa in self._questions()})

    def qrels(self) -> Qrels:
        return {qa["id"]: {pid: 1} for pid, qa in self._questions()}
