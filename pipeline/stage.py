"""The one abstraction everything composes through: a `Stage` maps (Topics, Run | None) -> Run.

Retrievers ignore the input run, rerankers read it. Operators are defined here and nowhere else:

    a >> b    Compose: b reranks what a retrieved (nested compositions flatten)
    s % k     keep the top k hits per query (a Cutoff stage composed after s)
    a + b     Fusion: the sum of the two runs' scores, as PyTerrier's + (rrf(a, b): reciprocal rank fusion;
              fusion(a, b, method=weighted, ...): weighted, normalised scores); 0.7 * a + 0.3 * b: a weighted sum
    a ** b    a feature union: the input's hits with a's and b's scores as features (pipeline/stages/features.py)

A Python function on either side of >> is a stage: the frame -> frame `apply.generic` (pipeline/stages/functions.py).

Every stage has a registry `name` and a `config()` dict; `repr` prints it in the spec grammar
(`bm25(k1=0.9, b=0.4) % 100`), and equality/hash follow it, so pipelines print, compare and key caches.

Two phases. `bind(dataset or Binding)` resolves everything that touches the outside world or costs time (an
index, a recipe's training, a store, the engine) into a bound copy of the stage (pipeline/binding.py);
`transform(topics, run)` only computes on what bind resolved. Calling a stage that was never bound binds it
first to nothing (its own arguments, the local engine).
"""
from __future__ import annotations

import copy
import difflib
import inspect
import time
from pathlib import PurePath
from typing import ClassVar

from pipeline import cache
from pipeline.binding import Binding
from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.errors import ConfigError, IrpipeError
from pipeline.log import logger
from pipeline.on_frames import frames_too, search, transform_frame
from pipeline.rerank import migrations
from pipeline.rerank.fusion import fuse, fusion_weights, norm_name
from pipeline.validate import annotation_problem, at_least, problem


class StageError(IrpipeError):
    """A stage was given, or produced, something it cannot work with."""


def check_arguments(cls: type, args: tuple, kwargs: dict) -> None:
    """The one check of a stage's arguments, however it is made (a spec, `ir.<stage>(...)`, a YAML file; called by
    pipeline/stage.py's metaclass): they bind to its signature (an unknown name: ConfigError with the close ones and
    every parameter; a retired model field: its message) and fit bool / int / float annotations."""
    name, signature = cls.name, inspect.signature(cls)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as error:
        config_class = getattr(getattr(cls, "model_class", None), "config_class", None)
        retired = [migrations.retired_message(config_class, key) for key in kwargs] if config_class else []
        if any(retired):  # a model config field retired (pipeline/rerank/migrations.py RETIRED): say so
            raise ConfigError(next(message for message in retired if message)) from None
        params = list(signature.parameters)
        close = [match for key in kwargs if key not in params for match in difflib.get_close_matches(key, params, n=2)]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(f"{name}: {error}{hint} (parameters: {', '.join(params)})") from None
    for key, value in bound.arguments.items():
        problem = annotation_problem(signature.parameters[key], value)
        if problem:
            raise ConfigError(f"{name}: {key}={value!r}: {problem}", field=key)


class _Checked(type):
    """Every stage is made through one check of its arguments, from a spec, from Python or from a YAML file
    (`check_arguments`): `ir.bm25(k=0.9)` is the ConfigError that `bm25(k=0.9)` is."""

    def __call__(cls, *args, **kwargs):
        check_arguments(cls, args, kwargs)
        return super().__call__(*args, **kwargs)


class Stage(metaclass=_Checked):
    name: ClassVar[str] = ""
    needs_run: ClassVar[bool] = False  # rerankers and cutoffs need an input run; retrievers do not
    cacheable: ClassVar[bool] = False  # output depends only on config + fingerprint() + input: cache it
    keeps_candidates: ClassVar[bool] = False  # its output's candidates are among its input's (a cutoff, a filter)
    bound: bool = False  # set on the copy that `bind` returns

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.transform is Stage.transform:
            raise TypeError(f"{cls.__name__} must define transform(self, topics, run) -> Run")
        if "transform" in cls.__dict__:  # stage.transform(frame) too, as PyTerrier's (pipeline/on_frames.py)
            cls.transform = frames_too(cls.transform)
        if "__signature__" not in cls.__dict__:  # what inspect.signature shows, the metaclass's __call__ aside
            cls.__signature__ = inspect.Signature(list(inspect.signature(cls.__init__).parameters.values())[1:])

    # -- the contract -----------------------------------------------------------------------------------
    def transform(self, topics: Topics, run: Run | None) -> Run:
        raise NotImplementedError

    def config(self) -> dict:
        """The parameters that determine the output (for repr, equality and cache keys)."""
        return {}

    def fingerprint(self) -> str:
        """What else the output depends on besides config and input, by content (e.g. the searched index's digest)."""
        return ""

    def bind(self, to=None, engine=None) -> "Stage":
        """A copy of this stage with everything it needs resolved, once: `to` is a `Binding`, or a dataset (or
        None) with the `EngineOptions` to run on (None: here). The stage's identity (repr, config) is unchanged."""
        binding = to if isinstance(to, Binding) else Binding(dataset=to, engine=engine)
        bound = copy.copy(self)
        bound.resolve(binding)
        bound.bound = True
        return bound

    def resolve(self, binding: Binding) -> None:
        """Take what this (copied) stage needs from `binding` (an index, a model, a store); default: nothing."""

    def run(self, dataset, cache: bool = True, engine=None) -> Run:
        """This pipeline's run on `dataset` (a name, a folder or a `Dataset`): its topics, and its candidates when the
        pipeline starts with a reranker, through bind and the stage cache, as `irpipe run` does.

            >>> import pipeline as ir
            >>> run = (ir.bm25(k1=0.9, b=0.4) % 100 >> ir.overlap(idf=True)).run("cacm")
            >>> len(run), run.num_hits()
            (64, 6400)
        """
        return self.run_on(dataset, cache, engine)[0]

    def run_on(self, dataset, use_cache: bool = True, engine=None) -> tuple[Run, "Stage", object]:
        """(run, bound stage, dataset) of `run`: the dataset's topics (and candidates, for a reranker first), the
        pipeline bound to the dataset and the engine (`EngineOptions`; None: here), run inside the stage cache."""
        from pipeline.data.registry import get_dataset

        dataset = get_dataset(str(dataset)) if isinstance(dataset, (str, PurePath)) else dataset  # a name or folder
        topics = dataset.topics()
        candidates = dataset.run() if self.needs_run else None
        if self.needs_run and candidates is None:
            raise ConfigError(f"{self!r} starts with a reranker, but {dataset.name} ships no candidate run: "
                              "start the pipeline with a retriever, e.g. bm25() % 100 >> ...")
        missing = candidates.queries_not_in(topics) if candidates is not None else []
        if missing:
            raise ConfigError(f"{len(missing)} queries of the candidate run are not in the topics (e.g. "
                              f"{missing[0]!r})")
        stage = self.bind(Binding(dataset, engine, candidates))
        with cache.using(cache.StageCache() if use_cache else None) as stage_cache:
            run = stage(topics, candidates)
        if stage_cache:
            logger.info("stage cache: %d hit(s), %d miss(es)", stage_cache.hits, stage_cache.misses)
        return run, stage, dataset

    def annotate(self, topics: Topics) -> Topics:
        """The topics that the stages after this one see (default: the same; `keywords()` adds fields)."""
        return topics

    def search(self, query: str, qid: str = "1"):
        """PyTerrier's `search`: the result frame of one query (`stage(frame)` too: pipeline/on_frames.py)."""
        return search(self, query, qid)

    def __call__(self, topics: Topics, run: Run | None = None) -> Run:
        if not isinstance(topics, Topics):  # a frame: PyTerrier's call
            return transform_frame(self, topics)
        if self.needs_run and run is None:
            raise StageError(f"{self!r} reranks an input run: compose it after a retriever, e.g. `bm25() >> {self!r}`")
        missing = run.queries_not_in(topics) if run is not None and self.needs_run else []
        if missing:
            raise StageError(f"{self!r}: {len(missing)} queries of its input run are not in the topics: "
                             f"{', '.join(map(repr, missing[:5]))}{' ...' * (len(missing) > 5)}")
        if not self.bound:
            return self.bind(Binding(candidates=run))(topics, run)
        start = time.perf_counter()
        if not isinstance(self, Compose):
            logger.info("%s: start: %d queries, %d input hits", self, len(topics), run.num_hits() if run else 0)
        stage_cache = cache.current() if self.cacheable else None
        if stage_cache:  # one process computes a missing entry; another that needs it at once waits and reuses it
            output, computed = stage_cache.fill(stage_cache.key(self, topics, run), self,
                                                lambda: self._transformed(topics, run))
        else:
            output, computed = self._transformed(topics, run), True
        source = "computed" if computed else "from cache"
        if not isinstance(self, Compose):
            seconds = time.perf_counter() - start
            logger.info("%s: %d queries, %d hits, %s in %.2fs (%.1f queries/s)", self, len(output), output.num_hits(),
                        source, seconds, len(topics) / max(seconds, 1e-9))
        return output

    def _transformed(self, topics: Topics, run: Run | None) -> Run:
        output = self.transform(topics, run)
        if not isinstance(output, Run):
            raise StageError(f"{self!r} returned {type(output).__name__}, not a Run")
        return output

    # -- operators ----------------------------------------------------------------------------------------
    def __rshift__(self, other: "Stage") -> "Compose":
        return Compose(self, _as_stage(other, ">>"))

    def __rrshift__(self, other) -> "Compose":  # `function >> stage`
        return Compose(_as_stage(other, ">>"), self)

    def __mul__(self, weight: float) -> "Fusion":
        """`0.7 * a`: a's scores times 0.7; `0.7 * a + 0.3 * b` is one weighted sum of the two runs' scores."""
        real = isinstance(weight, (int, float)) and not isinstance(weight, bool)
        return Fusion(self, method="weighted", weights=(float(weight),), depth=None) if real else NotImplemented

    __rmul__ = __mul__

    def __pow__(self, other: "Stage") -> "Stage":
        """`a ** b`: the input's hits with a's and b's scores as features (`features(a, b)`, for `ltr(...)`)."""
        return registered("features")(self, _as_stage(other, "**"))

    def __mod__(self, k: int) -> "Compose":
        return Compose(self, Cutoff(k))

    def __add__(self, other: "Stage") -> "Fusion":
        """The sum of both runs' scores, as PyTerrier's `+` (`a + b + c`, `0.7 * a + b`: one flat, weighted sum);
        rrf(a, b) fuses ranks."""
        terms = [term for stage in (self, _as_stage(other, "+")) for term in
                 (zip(stage.stages, stage.weights) if isinstance(stage, Fusion) and stage._sum() else [(stage, 1.0)])]
        return Fusion(*(stage for stage, _ in terms), method="weighted", weights=tuple(w for _, w in terms), depth=None)

    # -- identity -----------------------------------------------------------------------------------------
    def __repr__(self) -> str:
        args = ", ".join(f"{k}={_format_value(v)}" for k, v in self.config().items())
        return f"{self.name or type(self).__name__}({args})"

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.config() == other.config()

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self)))


def _format_value(value) -> str:
    if isinstance(value, str):
        return value if value.replace("/", "").replace("-", "").replace("_", "").replace(".", "").isalnum() else repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_format_value(v) for v in value) + "]"
    return repr(value)


def _as_stage(other, operator: str) -> Stage:
    if operator == ">>" and callable(other) and not isinstance(other, (Stage, type)):  # a frame -> frame function
        return registered("apply_generic")(other)
    if not isinstance(other, Stage):
        raise TypeError(f"cannot apply {operator} to a Stage and {type(other).__name__}; both sides must be Stages")
    return other


registered = None  # pipeline/stages/__init__.py's get_stage_class (set there): a stage class by its registry name


class Compose(Stage):
    """Stages applied left to right; `a >> (b >> c)` and `(a >> b) >> c` are the same flat pipeline."""

    name = "compose"

    def __init__(self, *stages: Stage):
        self.stages: tuple[Stage, ...] = tuple(s for stage in stages for s in (stage.stages if isinstance(stage, Compose) else (stage,)))
        if not self.stages:
            raise ValueError("Compose needs at least one stage")
        # it needs an input run when its first stage that uses one (not a query rewrite: apply_query) does
        self.needs_run = next((s.needs_run for s in self.stages if s.needs_run or not s.keeps_candidates), False)

    def transform(self, topics: Topics, run: Run | None) -> Run:
        for stage in self.stages:
            run = stage(topics, run)
            topics = stage.annotate(topics)
        return run

    def resolve(self, binding: Binding) -> None:
        """Bind each stage in turn; the input's candidates are known to a stage only while every stage before it
        keeps candidates (`candidates() % 10 >> monobert(...)`), not after a retriever."""
        stages = []
        for stage in self.stages:
            stages.append(stage.bind(binding))
            if not stage.keeps_candidates:  # what a reranker after reads its texts from, the dataset lacking them
                binding = binding.after_retrieval(getattr(stages[-1], "index_path", None))
        self.stages = tuple(stages)

    def config(self) -> dict:
        return {"stages": [repr(s) for s in self.stages]}

    def __len__(self) -> int:
        return len(self.stages)

    def __getitem__(self, index: int) -> Stage:
        return self.stages[index]

    def __repr__(self) -> str:
        parts = []
        for stage in self.stages:
            if isinstance(stage, Cutoff) and parts:
                parts[-1] = f"{parts[-1]} % {stage.k}"
            else:
                parts.append(f"({stage!r})" if isinstance(stage, Fusion) else repr(stage))
        return " >> ".join(parts)


class Cutoff(Stage):
    """Keep the top k hits of every query."""

    name = "cutoff"
    needs_run = True
    keeps_candidates = True

    def __init__(self, k: int):
        at_least(self.name, "k", k, 1, integer=True)
        self.k = k

    def transform(self, topics: Topics, run: Run | None) -> Run:
        return run.cut(self.k)

    def config(self) -> dict:
        return {"k": self.k}


class Candidates(Stage):
    """The input run as it is: the candidates a dataset ships (DL19/DL20 BM25 top-100, WikiQA, TrecQA)."""

    name = "candidates"
    needs_run = True
    keeps_candidates = True

    def transform(self, topics: Topics, run: Run | None) -> Run:
        return run


class Fusion(Stage):
    """Fuse the runs of several stages: reciprocal rank fusion, sum_i 1/(k + rank_i) (Cormack et al. 2009; by
    name: `rrf(a, b)`), or, with `method="weighted"`, sum_i w_i * norm(score_i) (CombSUM; a document absent from a
    run adds 0). `a + b` is the plain sum of the two runs' scores, every hit of each (`depth=None`), as PyTerrier's
    `+` is (before 2026-11-27 irpipe's `+` was reciprocal rank fusion: spec.py says so where a spec uses it).
    `norm` rescales each run's scores per query before weighting, so that scores on different scales (a
    probability, a BM25 sum) can be interpolated: "none", "minmax" ((s - min) / (max - min)) or "zscore"
    ((s - mean) / population std); a query whose scores are all equal gets 0 for each. Candidate texts and fields
    of all inputs are kept."""

    name = "fusion"

    def __init__(self, *stages: Stage, method: str = "rrf", k: int = 60, weights: tuple[float, ...] | None = None,
                 depth: int | None = 1000, norm: str = "none"):
        other = next((stage for stage in stages if not isinstance(stage, Stage)), None)
        if other is not None:  # `fusion(bm)` in a spec: a word, not a pipeline (was an AttributeError traceback)
            raise problem("fusion", "stages", f"{other!r} is not a pipeline; fusion fuses pipelines, e.g. "
                                              "fusion(bm25(), bm25(k1=1.2))")
        self.stages, norm = stages, norm_name(norm)
        self.weights = fusion_weights(len(self.stages), method, k, weights, depth, norm)
        self.method, self.k, self.depth, self.norm = method, k, depth, norm
        self.needs_run = any(s.needs_run for s in self.stages)

    def resolve(self, binding: Binding) -> None:
        self.stages = tuple(s.bind(binding) for s in self.stages)

    def _sum(self) -> bool:
        """Whether this is `a + 0.5 * b + ...`: the weighted, unnormalised sum of every hit's score."""
        return self.method == "weighted" and self.depth is None and self.norm == "none"

    def transform(self, topics: Topics, run: Run | None) -> Run:
        outputs = (stage(topics, run) for stage in self.stages)  # one at a time: each is fused, then let go
        return fuse(outputs, self.method, self.k, self.weights, self.depth, self.norm)

    def config(self) -> dict:
        return {"stages": [repr(s) for s in self.stages], "method": self.method, "k": self.k,
                "weights": list(self.weights), "depth": self.depth} | ({"norm": self.norm} if self.norm != "none" else {})

    def __repr__(self) -> str:
        if self._sum() and set(self.weights) == {1.0}:  # a + b + ...
            return " + ".join(f"({s!r})" if isinstance(s, Compose) else repr(s) for s in self.stages)
        options = {k: v for k, v in self.config().items() if k != "stages"}
        return f"fusion({', '.join([*map(repr, self.stages), *(f'{k}={_format_value(v)}' for k, v in options.items())])})"


def rrf(*stages: Stage, k: int = 60, depth: int = 1000) -> Fusion:
    """`rrf(a, b, k=60)`: reciprocal rank fusion by name (`a + b` sums scores, as in PyTerrier)."""
    return Fusion(*stages, method="rrf", k=k, depth=depth)

