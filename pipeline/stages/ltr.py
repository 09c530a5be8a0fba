"""`ltr(features, train=DATASET)`: learning to rank over a feature union, as PyTerrier's
`pt.ltr.apply_learned_model(...)` fitted with `.fit(train_topics, train_qrels)`, by scikit-learn or LightGBM.

    ir.ltr(ir.bm25() ** ir.overlap(idf=True) ** ir.biencoder(), train="trecqa/train")
    ir.ltr(..., train=["trecqa/train", "trecqa/raw-dev"], learner="lambdamart")   # several training sets, pooled

The learner is fitted on the training datasets' shipped candidates (their topics, candidate runs and qrels): the
`features` pipeline runs on them (bound to each dataset; each stage cached as ever), each hit is labelled 1 when
the qrels judge it relevant at the dataset's level (`rel_level`), else 0, and the learner is fitted on the hits'
feature vectors, each feature first normalised within its query (`norm`: NORMS of pipeline/rerank/fusion.py,
z-scores by default, so that a BM25 sum and a cosine meet on one scale):

    learner=gbdt        pointwise: sklearn GradientBoostingClassifier(n_estimators=trees, max_depth=depth,
                        random_state=seed); the score is the probability of relevance
    learner=logistic    pointwise: sklearn LogisticRegression (lbfgs); the score is the decision function
    learner=pairwise    pairwise: sklearn LogisticRegression on the differences of each relevant and non-relevant hit
                        of a query (both signs; RankNet's loss on a linear scorer); the score is w . x
    learner=lambdamart  listwise: LightGBM's LGBMRanker, objective lambdarank (LambdaMART; n_estimators=trees,
                        max_depth=depth, num_leaves=2**depth - 1, one thread, deterministic); the `ltr` extra

All are deterministic (a fixed seed). The fitted learner scores the input's candidates from the same
features computed on them.

A feature trained on the very set the learner is fitted on (`hcan(train=trecqa/train, ...)` beside
`train=trecqa/train`) scores that set in sample: too well, so the learner leans on it. `cross_fit=K` fits on its
out-of-fold scores instead, as stacking does: the set's judged queries fall in K folds (position mod K), and fold i's
features come from every such stage trained with `hold_out=i/K` (without fold i; each fold's model is a recipe of
its own, cached as ever); the input's candidates are scored by the stages as given, trained on the whole set.
Queries without judgements are left out of the fit then; a training set no feature is trained on (`train=[A, B]`)
is fitted on whole.

The stage is cached: its key is its config (features, train, learner and its parameters) and its fingerprint, the
digest of the training data (topics, candidates, qrels) and of the fingerprints of the features' stages on both
datasets; the fit itself is done once per process, the first time the stage runs.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass

from pipeline.binding import Binding
from pipeline.data.files import json_digest
from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.errors import MissingResourceError
from pipeline.log import logger
from pipeline.rerank.fusion import NORMS, norm_name
from pipeline.stage import Stage
from pipeline.stages import register
from pipeline.training.options import fold_queries
from pipeline.validate import at_least, choice, problem

LEARNERS = ("gbdt", "logistic", "pairwise", "lambdamart")
TREE_LEARNERS = ("gbdt", "lambdamart")  # the learners that trees= and depth= act on


@register
class LearnedRanker(Stage):
    """The input's candidates scored by a learner fitted on `train`'s candidates over the `features` pipeline."""

    name = "ltr"
    needs_run = True
    keeps_candidates = True
    cacheable = True
    _model = None  # fitted on first transform

    def __init__(self, features: Stage, train: str | list[str], learner: str = "gbdt", norm: str = "zscore",
                 seed: int = 0, trees: int = 100, depth: int = 3, cross_fit: int = 0):
        if not isinstance(features, Stage):
            raise problem(self.name, "features", f"{features!r} is not a pipeline; ltr learns over a feature union, "
                                                 "e.g. ltr(features(bm25(), overlap(idf=true)), train=trecqa/train)")
        names = list(train) if isinstance(train, (list, tuple)) else [train]
        if not names or any(not isinstance(name, str) or not name.strip() for name in names):
            raise problem(self.name, "train", f"train={train!r}: the name of a dataset with candidates and qrels, "
                                              "or a list of them")
        norm = norm_name(norm)
        choice(self.name, "learner", learner, LEARNERS)
        choice(self.name, "norm", norm, NORMS)
        at_least(self.name, "trees", trees, 1, integer=True)
        at_least(self.name, "depth", depth, 1, integer=True)
        at_least(self.name, "seed", seed, 0, integer=True)
        if cross_fit:
            at_least(self.name, "cross_fit", cross_fit, 2, integer=True)
        self.features, self.learner, self.norm, self.cross_fit = features, learner, norm, cross_fit
        self.train = names[0] if len(names) == 1 else names  # one name as it was given: the same cache key
        self.seed, self.trees, self.depth = seed, trees, depth

    def config(self) -> dict:
        config = {"features": repr(self.features), "train": self.train, "learner": self.learner, "norm": self.norm,
                  "seed": self.seed}
        config |= {"trees": self.trees, "depth": self.depth} if self.learner in TREE_LEARNERS else {}
        return config | ({"cross_fit": self.cross_fit} if self.cross_fit else {})  # off: the keys made before it

    def __repr__(self) -> str:
        def shown(value) -> str:
            return f"[{', '.join(value)}]" if isinstance(value, list) else str(value)

        options = ", ".join(f"{key}={shown(value)}" for key, value in self.config().items() if key != "features")
        return f"ltr({self.features!r}, {options})"

    # -- bind ----------------------------------------------------------------------------------------------------
    def resolve(self, binding: Binding) -> None:
        """The features bound to the input's dataset, and to each training dataset with its candidates and qrels."""
        from pipeline.data.registry import get_dataset

        if self.learner == "lambdamart":
            _lightgbm()  # missing: an exit 2 with the install command, before anything is computed
        self._training = []
        for name in self.train_names:
            dataset = get_dataset(name)
            lacking = [part for part in ("topics", "run", "qrels") if part not in dataset.provides]
            if lacking:
                raise problem(self.name, "train", f"train={name}: {dataset.name} has no {' or '.join(lacking)}; "
                                                  "ltr is fitted on a dataset's candidates and their qrels")
            topics, run, qrels = dataset.topics(), dataset.run(), dataset.qrels()
            labels = {qid: {docid for docid, grade in judged.items() if grade >= dataset.rel_level}
                      for qid, judged in qrels.items()}
            self._training.append(TrainingSet(name, labels, [Fold(part_topics, part_run, features.bind(
                Binding(dataset, binding.engine, part_run)))
                for part_topics, part_run, features in self._folds(name, topics, run, qrels)]))
        if self.cross_fit and all(len(part.folds) == 1 for part in self._training):
            raise problem(self.name, "cross_fit", f"cross_fit={self.cross_fit}: no feature is trained on "
                                                  f"{' or '.join(self.train_names)}: its scores are out of sample "
                                                  "already")
        self._features = self.features.bind(binding)

    def _folds(self, name: str, topics: Topics, run: Run, qrels) -> list[tuple[Topics, Run, Stage]]:
        """Training set `name` whole, or, with cross_fit and a feature trained on it, its folds: each fold's queries
        and the features that score them out of fold (that feature trained without them, `hold_out`)."""
        held = [f"{fold}/{self.cross_fit}" for fold in range(self.cross_fit)]
        rebuilt = [_held_out(self.features, name, hold_out) for hold_out in held]
        if not rebuilt or not rebuilt[0][1]:
            return [(topics, run, self.features)]
        judged = [qid for qid in topics if qid in qrels]  # the queries `hold_out` counts, as training does
        parts = [fold_queries(judged, hold_out) for hold_out in held]
        return [(topics.subset(qids), run.subset(qids), features) for qids, (features, _) in zip(parts, rebuilt)]

    @property
    def train_names(self) -> list[str]:
        return self.train if isinstance(self.train, list) else [self.train]

    def fingerprint(self) -> str:
        """The training data and the features' stages on every dataset: another training set, another key."""
        training = [[*_fold_fingerprints(part.folds), {qid: sorted(docids) for qid, docids in part.labels.items()},
                     *[_deep_fingerprint(fold.features) for fold in part.folds]] for part in self._training]
        if len(training) == 1:  # as one training set was keyed before lists were taken: the same key
            return json_digest([*training[0], _deep_fingerprint(self._features)])
        return json_digest([training, _deep_fingerprint(self._features)])

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
        """The learner fitted on the training candidates' features and labels, query by query."""
        start = time.perf_counter()
        queries = []  # one (vectors, labels) per training query, the training sets in order
        for part in self._training:
            for fold in part.folds:
                for qid, hits in self.vectors(fold.features(fold.topics, fold.run)).items():
                    relevant = part.labels.get(qid, ())
                    queries.append((list(hits.values()), [int(docid in relevant) for docid in hits]))
        labels = {label for _, query_labels in queries for label in query_labels}
        if labels != {0, 1}:
            raise problem(self.name, "train", f"train={self.train}: its candidates are all "
                                              f"{'relevant' if labels == {1} else 'non-relevant'}; nothing to learn")
        model = getattr(self, f"_fit_{self.learner}")(queries)
        hits = sum(len(query_labels) for _, query_labels in queries)
        logger.info("%s: %s fitted on %d hits of %d queries (%d relevant), %d features, in %.2fs", self.name,
                    self.learner, hits, len(queries), sum(sum(query_labels) for _, query_labels in queries),
                    len(queries[0][0][0]), time.perf_counter() - start)
        return model

    def _fit_gbdt(self, queries):
        from sklearn.ensemble import GradientBoostingClassifier

        model = GradientBoostingClassifier(n_estimators=self.trees, max_depth=self.depth, random_state=self.seed)
        return model.fit(*_pointwise(queries))

    def _fit_logistic(self, queries):
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(max_iter=1000, random_state=self.seed).fit(*_pointwise(queries))

    def _fit_pairwise(self, queries):
        """A linear scorer w . x fitted by logistic loss on pairs: x_rel - x_nonrel is class 1, its negation 0."""
        from sklearn.linear_model import LogisticRegression

        differences, targets = [], []
        for vectors, query_labels in queries:
            relevant = [v for v, label in zip(vectors, query_labels) if label]
            other = [v for v, label in zip(vectors, query_labels) if not label]
            for good in relevant:
                for bad in other:
                    difference = [g - b for g, b in zip(good, bad)]
                    differences += [difference, [-d for d in difference]]
                    targets += [1, 0]
        return LogisticRegression(max_iter=1000, fit_intercept=False, random_state=self.seed).fit(differences,
                                                                                                   targets)

    def _fit_lambdamart(self, queries):
        lightgbm = _lightgbm()
        model = lightgbm.LGBMRanker(objective="lambdarank", n_estimators=self.trees, max_depth=self.depth,
                                    num_leaves=2 ** self.depth - 1, random_state=self.seed, n_jobs=1,
                                    deterministic=True, force_row_wise=True, verbose=-1)
        vectors, labels = _pointwise(queries)
        return model.fit(vectors, labels, group=[len(query_labels) for _, query_labels in queries])

    def predict(self, vectors: list[list[float]]) -> list[float]:
        if self.learner == "gbdt":
            return [float(p) for p in self._model.predict_proba(vectors)[:, 1]]
        if self.learner == "lambdamart":
            return [float(s) for s in self._model.predict(vectors)]
        return [float(s) for s in self._model.decision_function(vectors)]


@dataclass
class Fold:
    """Queries of a training set and the bound features that score them (all of its queries without cross_fit)."""

    topics: Topics
    run: Run
    features: Stage


@dataclass
class TrainingSet:
    """One training dataset as ltr reads it: relevant docids per query, and its folds."""

    name: str
    labels: dict[str, set[str]]
    folds: list[Fold]


def _held_out(stage: Stage, name: str, fold: str) -> tuple[Stage, int]:
    """`stage` with each stage in it that trains on `name` trained without `fold` (`hold_out`), and how many did."""
    if getattr(stage, "train", None) == name and hasattr(stage, "with_training"):
        return stage.with_training(hold_out=fold), 1
    if not getattr(stage, "stages", None):
        return stage, 0
    rebuilt = [_held_out(child, name, fold) for child in stage.stages]
    copied = copy.copy(stage)
    copied.stages = tuple(child for child, _ in rebuilt)
    return copied, sum(count for _, count in rebuilt)


def _fold_fingerprints(folds: list[Fold]) -> list[str]:
    """The folds' topics and candidates as keyed before folds existed (one fold: its topics', then its run's)."""
    return [fingerprint for fold in folds for fingerprint in (fold.topics.fingerprint(), fold.run.fingerprint())]


def _pointwise(queries) -> tuple[list[list[float]], list[int]]:
    """Every query's hits as rows: (feature vectors, labels)."""
    return ([vector for vectors, _ in queries for vector in vectors],
            [label for _, query_labels in queries for label in query_labels])


def _lightgbm():
    try:
        import lightgbm
    except ImportError:
        raise MissingResourceError('ltr(learner=lambdamart) needs LightGBM: pip install -e ".[ltr]"') from None
    return lightgbm


def _deep_fingerprint(stage: Stage) -> str:
    """A pipeline's fingerprint: its own and, in order, those of the stages it is made of (a union, a compose)."""
    return "\x1f".join([stage.fingerprint(), *(_deep_fingerprint(s) for s in getattr(stage, "stages", ()))])
