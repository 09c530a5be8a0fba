"""Fixtures of the neural reranker tests: a tiny random BERT (MiniLM's vocabulary, 2 layers of width 32) and a tiny
labelled dataset, so that a model trains for an epoch in about a second on 2 CPU cores."""
from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.data.runs import Run
from pipeline.data.sets.base import Dataset
from pipeline.data.topics import Topics
from support import save_tiny_bert

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


class TinyTweets(TinyQA):
    """TinyQA whose candidates carry a URL (Run.doc_fields), as the microblog years' tweets do: the correct
    answer's names the question's thing, the others a page about nothing in particular."""

    def run(self) -> Run:
        run = super().run()
        run.doc_fields = {doc: {"url": f"http://news.org/{doc.split('-')[0]}-{self.facts[int(doc[1])][0]}?ref=tw"
                                if doc.endswith("-a") else f"https://blog.example.com/post/{doc}"}
                          for hits in run.ranking.values() for doc, _ in hits}
        return run


@pytest.fixture(scope="session")
def tiny_qa() -> TinyQA:
    return TinyQA()


@pytest.fixture(scope="session")
def tiny_tweets() -> TinyTweets:
    return TinyTweets("tiny-tweets")


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    """A randomly initialised (seeded) 2-layer BERT with all-MiniLM-L6-v2's tokenizer, saved as a BERT folder."""
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), layers=2)


@pytest.fixture(scope="module")
def tiny_addax(tiny_bert):
    """ADDAX on the tiny BERT (seed 0, documents cut at 32 word pieces): the store tests' encoder, one per module."""
    import torch

    from pipeline.rerank.models.addax import ADDAX, ADDAXConfig

    torch.manual_seed(0)
    return ADDAX(ADDAXConfig(bert=str(tiny_bert), max_doc_length=32)).eval()
