"""TREC Microblog 2011-2014 tweet search, as prepared for MP-HCNN / HCAN (jinfengr/hcan data/twitter/).

Per year, line-aligned files hold one (query, tweet) pair a line: a.toks (query), b.toks (tweet text, tokenised,
URLs as `@url`, mentions as `@names`), sim.txt (0/1 label), url.txt (the tweet's URLs, possibly empty) and id.txt
(the query likelihood first-stage run, TREC format: `qid Q0 tweetid rank score lucene4lm`). The candidates of each
query, with their QL scores, form the dataset's run; their labels its qrels (only QL candidates are judged here,
so MAP is not comparable with published numbers; P@30 is).

A dataset spec names the years it joins ("years") and optionally a query split of them ("holdout": "exclude" |
"only"): the held-out queries are those whose number is a multiple of `holdout_every` (7: about 14%), a fixed
dev sample of the training years (the authors' code samples 15% of the training queries at random).
Tweet ids are the docids; a tweet that is a candidate of several queries has one text (checked).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from pipeline.data.qrels import Qrels
from pipeline.data.runs import Run
from pipeline.data.sets.answer_selection import AnswerSelectionDataset, aligned_columns
from pipeline.data.topics import Topics
from pipeline.errors import InputError

COLUMNS = ("queries", "tweets", "labels", "urls", "ids")
HOLDOUTS = (None, "exclude", "only")


@dataclass
class _Candidates:
    topics: Topics
    qrels: Qrels
    run: Run
    urls: dict[str, str]


class MicroblogDataset(AnswerSelectionDataset):
    """topics(), qrels() and run() (the QL candidates by QL score, ties: tweet id ascending, each tweet's URL in
    `run().doc_fields`) as answer selection; the reader and docs() are the tweets' own."""

    def _held_out(self, qid: str) -> bool:
        return int(qid) % self.spec.get("holdout_every", 7) == 0

    def _keep(self, qid: str) -> bool:
        holdout = self.spec.get("holdout")
        if holdout not in HOLDOUTS:
            raise ValueError(f"{self.name}: holdout {holdout!r} is not one of {HOLDOUTS}")
        return holdout is None or self._held_out(qid) == (holdout == "only")

    def _read(self) -> _Candidates:
        queries: dict[str, str] = {}
        qrels: Qrels = {}
        scores: dict[str, dict[str, float]] = {}
        texts: dict[str, str] = {}
        urls: dict[str, str] = {}
        for year in self.spec["years"]:
            self._read_year(year, queries, qrels, scores, texts, urls)
        run = Run.from_scores(scores, texts, tag=self.name.replace("/", "-"),
                              doc_fields={docid: {"url": url} for docid, url in urls.items()})
        return _Candidates(Topics(queries), qrels, run, urls)

    def _read_year(self, year, queries, qrels, scores, texts, urls) -> None:
        paths = {key: self.path(f"{year}/{key}") for key in COLUMNS}
        columns = aligned_columns(paths)
        for (number, query), (_, tweet), (_, label), (_, url), (_, ids) in zip(*(columns[k] for k in COLUMNS)):
            parts = ids.split()
            if len(parts) != 6 or not parts[0].isdigit():
                raise InputError(paths["ids"], "expected `qid Q0 tweetid rank score tag` with a numeric qid", number)
            qid, docid = parts[0], parts[2]
            try:
                score = float(parts[4])
            except ValueError:
                raise InputError(paths["ids"], f"score {parts[4]!r} is not a number", number, "score") from None
            if label.strip() not in ("0", "1"):
                raise InputError(paths["labels"], f"label {label!r} is not 0 or 1", number, "label")
            if not self._keep(qid):
                continue
            if queries.setdefault(qid, query.strip()) != query.strip():
                raise InputError(paths["queries"], f"query {qid!r} changes text within its candidates", number, "query")
            if docid in scores.setdefault(qid, {}):
                raise InputError(paths["ids"], f"tweet {docid!r} is a candidate of query {qid} twice", number, "docid")
            if texts.setdefault(docid, tweet.strip()) != tweet.strip():
                raise InputError(paths["tweets"], f"tweet {docid!r} has two different texts", number, "tweet")
            scores[qid][docid] = score
            urls[docid] = url.strip()
            qrels.setdefault(qid, {})[docid] = int(label)

    def docs(self) -> Iterator[dict]:
        """The candidate tweets as a small corpus ({"id", "contents", "url"}), each tweet once."""
        data = self._read()
        return ({"id": docid, "contents": text, "url": data.urls[docid]} for docid, text in data.run.texts.items())
