"""Fixtures of the neural reranker tests: a tiny random BERT (MiniLM's vocabulary, 2 layers of width 32) and a tiny
labelled dataset, so that a model trains for an epoch in about a second on 2 CPU cores."""
from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.data.runs import Run, Topics
from pipeline.data.sets.base import Dataset

# 8 questions x 5 candidates: the correct answer repeats the question's key word, the distractors do not.
_FACTS = [("sky", "blue"), ("grass", "green"), ("snow", "white"), ("coal", "black"),
          ("blood", "red"), ("sun", "yellow"), ("orange", "orange"), ("violet", "purple")]
_FILLER = ["the train left the station late", "a cat sleeps on the warm mat", "numbers can be added and multiplied",
           "rivers flow down to the sea"]


class TinyQA(Dataset):
    """An in-memory answer-selection dataset: 8 queries, 5 labelled candidates each (1 correct)."""

    provides = ("topics", "qrels", "run")

    def __init__(self, name: str = "tiny-qa", queries: int = 8):
        super().__init__(name, {"description": "test fixture"}, {})
        self.facts = _FACTS[:queries]

    def topics(self) -> Topics:
        return Topics({f"q{i}": f"what colour is the {thing}" for i, (thing, _) in enumerate(self.facts)})

    def run(self) -> Run:
        ranking, texts = {}, {}
        for i, (thing, colour) in enumerate(self.facts):
            docs = [f"q{i}-a"] + [f"q{i}-f{j}" for j in range(len(_FILLER))]
            texts[docs[0]] = f"the {thing} is {colour}"
            texts.update((doc, text) for doc, text in zip(docs[1:], _FILLER[i % 2:] + _FILLER[:i % 2]))
            ranking[f"q{i}"] = [(doc, -float(rank)) for rank, doc in enumerate(docs[::-1], start=1)]
        return Run(ranking, texts)

    def qrels(self) -> dict:
        return {qid: {doc: int(doc.endswith("-a")) for doc, _ in hits} for qid, hits in self.run().ranking.items()}


@pytest.fixture(scope="session")
def tiny_qa() -> TinyQA:
    return TinyQA()


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    """A randomly initialised (seeded) 2-layer BERT with all-MiniLM-L6-v2's tokenizer, saved as a BERT folder."""
    from support import save_tiny_bert

    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), layers=2)
