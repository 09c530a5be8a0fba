"""`ltr(features, train=DATASET)`: learning to rank over a feature union, as PyTerrier's
`pt.ltr.apply_learned_model(...)` fitted with `.fit(train_topics, train_qrels)`, by scikit-learn.

    ir.ltr(ir.bm25() ** ir.overlap(idf=True) ** ir.biencoder(), train="trecqa/train")

The learner is fitted on the training dataset's shipped candidates (its topics, candidate run and qrels): the
`features` pipeline runs on them (bound to that dataset; each stage cached as ever), each hit is labelled 1 when
the qrels judge it relevant at the dataset's level (`rel_level`), else 0, and a pointwise learner is fitted on the
hits' feature vectors, each feature first normalised within its query (`norm`: NORMS of pipeline/rerank/fusion.py,
z-scores by default, so that a BM25 sum and a cosine meet on one scale):

    learner=gbdt      sklearn GradientBoostingClassifier(n_estimators=trees, max_depth=depth, random_state=seed);
                      the score is the probability of relevance
    learner=logistic  sklearn LogisticRegression (lbfgs); the score is the decision function

Both are deterministic (a fixed random_state). The fitted learner scores the input's candidates from the same
features computed on them. The stage is cached: its key is its config (features, train, learner and its
parameters) and its fingerprint, the digest of the training data (topics, candidates, qrels) and of the fingerprints
of the features' stages on both datasets; the fit itself is done once per process, the first time the stage runs.
"""
from __future__ import annotations

import time

from pipeline.binding import Binding
from pipeline.data.files import json_digest
from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.log import logger
from pipeline.rerank.fusion import NORMS
from pipeline.stage import Stage
from pipeline.stages import register
from pipeline.validate import at_least, choice, problem

LEARNERS = ("gbdt", "logistic")


@register
class LearnedRanker(Stage):
    """The input's candidates scored by a learner fitted on `train`'s candidates over the `features` pipeline."""

    name = "ltr"
    needs_run = True
    keeps_candidates = True
    cacheable = True
    _model = None  # fitted on first transform

    def __init__(self, features: Stage, train: str, learner: str = "gbdt", norm: str = "zscore", seed: int = 0,
                 trees: int = 100, depth: int = 3):
        if not isinstance(features, Stage):
            raise problem(self.name, "features", f"{features!r} is not a pipeline; ltr learns over a feature union, "
                                                 "e.g. ltr(features(bm25(), overlap(idf=true)), train=trecqa/train)")
        if not isinstance(train, str) or not train.strip():
            raise problem(self.name, "train", f"train={train!r}: the name of a dataset with candidates and qrels")
        choice(self.name, "learner", learner, LEARNERS)
        choice(self.name, "norm", norm, NORMS)
        at_least(self.name, "trees", trees, 1, integer=True)
        at_least(self.name, "depth", depth, 1, integer=True)
        at_least(self.name, "seed", seed, 0, integer=True)
        self.features, self.train, self.learner, self.norm = features, train, learner, norm
        self.seed, self.trees, self.depth = seed, trees, depth

    def config(self) -> dict:
        config = {"features": repr(self.features), "train": self.train, "learner": self.learner, "norm": self.norm,
                  "seed": self.seed}
        return config | ({"trees": self.trees, "depth": self.depth} if self.learner == "gbdt" else {})

    def __repr__(self) -> str:
        options = ", ".join(f"{key}={value}" for key, value in self.config().items() if key != "features")
        return f"ltr({self.features!r}, {options})"

    # -- bind ----------------------------------------------------------------------------------------------------
    def resolve(self, binding: Binding) -> None:
        """The features bound to the input's dataset, and to the training dataset with its candidates and qrels."""
        from pipeline.data.registry import get_dataset

        dataset = get_dataset(self.train)
        lacking = [part for part in ("topics", "run", "qrels") if part not in dataset.provides]
        if lacking:
            raise problem(self.name, "train", f"train={self.train}: {dataset.name} has no {' or '.join(lacking)}; "
                                              "ltr is fitted on a dataset's candidates and their qrels")
        self._train_topics, self._train_run = dataset.topics(), dataset.run()
        self._labels = {qid: {docid for docid, grade in judged.items() if grade >= dataset.rel_level}
                        for qid, judged in dataset.qrels().items()}
        self._train_features = self.features.bind(Binding(dataset, binding.engine, self._train_run))
        self._features = self.features.bind(binding)

    def fingerprint(self) -> str:
        """The training data and the features' stages on both datasets: another training set, another key."""
        return json_digest([self._train_topics.fingerprint(), self._train_run.fingerprint(),
                            {qid: sorted(docids) for qid, docids in self._labels.items()},
                            _deep_fingerprint(self._train_features), _deep_fingerprint(self._features)])

    # -- compute -------------------------------------------------------------------------------------------------
    def transform(self, topics: Topics, run: Run | None) -> Run:
        if self._model is None:
            self._model = self.fit()
        vectors = self.vectors(self._features(topics, run))
        rows = [(qid, docid) for qid, hits in vectors.items() for docid in hits]
        scores = self.predict([vectors[qid][docid] for qid, docid in rows]) if rows else []
        reranked: dict[str, dict[str, float]] = {qid: {} for qid in run.ranking}
        for (qid, docid), score in zip(rows, scores):
            reranked[qid][docid] = score
        return Run.from_scores(reranked, run.texts, tag=self.name, doc_fields=run.doc_fields)

    def vectors(self, run: Run) -> dict[str, dict[str, list[float]]]:
        """qid -> docid -> the hit's features, each normalised within its query (a run without features: its
        score is the one feature)."""
        raw = run.features or {qid: {docid: (score,) for docid, score in hits} for qid, hits in run.ranking.items()}
        vectors = {}
        for qid, hits in raw.items():
            docids = list(hits)
            width = len(hits[docids[0]]) if docids else 0
            columns = [NORMS[self.norm]([hits[docid][i] for docid in docids]) for i in range(width)]
            vectors[qid] = {docid: [column[row] for column in columns] for row, docid in enumerate(docids)}
        return vectors

    def fit(self):
        """The learner fitted on the training candidates' features and labels."""
        start = time.perf_counter()
        vectors = self.vectors(self._train_features(self._train_topics, self._train_run))
        rows = [(vector, int(docid in self._labels.get(qid, ()))) for qid, hits in vectors.items()
                for docid, vector in hits.items()]
        labels = {label for _, label in rows}
        if labels != {0, 1}:
            raise problem(self.name, "train", f"train={self.train}: its candidates are all "
                                              f"{'relevant' if labels == {1} else 'non-relevant'}; nothing to learn")
        model = self._learner()
        model.fit([vector for vector, _ in rows], [label for _, label in rows])
        logger.info("%s: %s fitted on %d hits of %d queries (%d relevant), %d features, in %.2fs", self.name,
                    self.learner, len(rows), len(vectors), sum(label for _, label in rows), len(rows[0][0]),
                    time.perf_counter() - start)
        return model

    def _learner(self):
        if self.learner == "gbdt":
            from sklearn.ensemble import GradientBoostingClassifier

            return GradientBoostingClassifier(n_estimators=self.trees, max_depth=self.depth, random_state=self.seed)
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(max_iter=1000, random_state=self.seed)

    def predict(self, vectors: list[list[float]]) -> list[float]:
        if self.learner == "gbdt":
            return [float(p) for p in self._model.predict_proba(vectors)[:, 1]]
        return [float(s) for s in self._model.decision_function(vectors)]


def _deep_fingerprint(stage: Stage) -> str:
    """A pipeline's fingerprint: its own and, in order, those of the stages it is made of (a union, a compose)."""
    return "\x1f".join([stage.fingerprint(), *(_deep_fingerprint(s) for s in getattr(stage, "stages", ()))])
