"""PyTerrier and irpipe, both ways (the `pyterrier` extra: `pip install -e ".[pyterrier]"`).

    import pyterrier as pt
    from pipeline.pyterrier import IrpipeTransformer, PyTerrierStage, qrels_frame

    bm25 = IrpipeTransformer("candidates()", dataset="dl19-passage")   # any irpipe stage or spec, a pt.Transformer
    addax = IrpipeTransformer("addax()", dataset="dl19-passage")
    pt.Experiment([bm25, bm25 >> addax], topics, qrels_frame(qrels), eval_metrics=[...])

    pipeline = bm25() % 100 >> PyTerrierStage(some_pt_transformer)      # any pt.Transformer, an irpipe Stage

An irpipe stage as a PyTerrier transformer (`IrpipeTransformer`) is bound once, when it is made (its index opened,
its model loaded or trained through the recipe cache), and then takes
- a query frame (qid, query, + extra fields such as keywords): a retriever retrieves; a reranker reranks the
  candidates its dataset ships (DL19/DL20 BM25 top-100, WikiQA, TrecQA), else it is an error;
- a result frame (qid, query, docno, + score, rank, text): a reranker reranks those candidates, their texts from
  the `text` column, else from the dataset's index (`pt.text.get_text` gives one); the order without score is
  `rank`'s, else the frame's;
and gives a result frame: qid, docno, score, rank (0-based), query, + text where the run carries texts, + every
other column of the frame it was given (features, `query_0`, ...), as PyTerrier's own transformers keep them: what
`stage.transform(frame)` gives outside PyTerrier too (pipeline/on_frames.py, `transform_frame`). The rows become a
`Run` and back through pipeline/data/frames.py (Run.from_frame / Run.to_frame), the one conversion.
Stage outputs go through the stage cache as in `irpipe run` (`cache=False`: always computed).

A PyTerrier transformer as an irpipe stage (`PyTerrierStage`) gets `topics.to_frame()` (no input run) or
`run.to_frame(topics)` with a `text` column (the run's texts, the rest read from the dataset's index where it has
one) and gives back a run read by `Run.from_frame`; it composes with `>>`, `%` and `+`. `+` is PyTerrier's: the
sum of the scores (reciprocal rank fusion is `rrf(a, b)`). It is
not in the spec grammar (it is a Python object) and not cached (irpipe cannot fingerprint it).

One JVM per process, in either order. Importing pyterrier starts none, and neither do its transformer and
Experiment API. When PyTerrier starts it (`pt.java.init()`, or any Terrier class), irpipe's initializer
(`AnseriniJavaInit`, a `pyterrier.java.init` entry point) adds Anserini's jar, Java >= 21 and irpipe's options; when
irpipe's Lucene stages start it in a process that has imported pyterrier, they do so through `pt.java.init()`
(pipeline/java.py). Where PyTerrier cannot start Java (Terrier's jars not cached and no network, or
IRPIPE_OFFLINE), irpipe starts it with Anserini's jar alone and says so; a later `pt.java.init()` then says why it
cannot run instead of pyjnius' "VM is already running".
"""
from __future__ import annotations

import pandas as pd

from pipeline.binding import Binding
from pipeline.data.qrels import Qrels
from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.errors import IrpipeError, MissingResourceError
from pipeline.on_frames import QUERY_COLUMNS, transform_frame
from pipeline.rerank.pairs import CandidateTexts, missing_texts
from pipeline.stage import Stage, StageError
from pipeline.validate import problem

try:
    import pyterrier as pt
except ImportError:
    raise MissingResourceError('pipeline.pyterrier needs PyTerrier: pip install -e ".[pyterrier]"') from None


class IrpipeTransformer(pt.Transformer):
    """An irpipe stage (a `Stage` or a spec string) as a PyTerrier transformer, bound once to `dataset` (a
    `Dataset`, a registered name or a folder; None: the stage's own arguments) and `engine`."""

    def __init__(self, stage: Stage | str, dataset=None, engine=None, cache: bool = True):
        from pipeline.data.registry import get_dataset
        from pipeline.spec import parse

        stage = parse(stage) if isinstance(stage, str) else stage
        if not isinstance(stage, Stage):
            raise TypeError(f"IrpipeTransformer wraps an irpipe Stage or a spec string, not {type(stage).__name__}")
        self.dataset = get_dataset(dataset) if isinstance(dataset, str) else dataset
        self.stage = stage.bind(Binding(self.dataset, engine))
        self.cache = cache

    def __repr__(self) -> str:
        return f"irpipe({self.stage!r})"

    def transform_inputs(self) -> list[list[str]]:
        """A result frame for a reranker; a query frame for a retriever, or for a reranker whose dataset ships
        candidates."""
        if not self.stage.needs_run:
            return [QUERY_COLUMNS]
        return [QUERY_COLUMNS + ["docno"], QUERY_COLUMNS] if self._shipped() else [QUERY_COLUMNS + ["docno"]]

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        with pt.validate.any(inp, context=self) as v:
            v.result_frame(["query"], mode="rerank")
            if not self.stage.needs_run or self._shipped():
                v.query_frame(["query"], mode="retrieve")
        return transform_frame(self.stage, inp, self._shipped(), self.cache)

    def _shipped(self) -> Run | None:
        """The candidates the dataset ships (with their texts), or None."""
        if self.dataset is None:
            return None
        if not hasattr(self, "_candidates"):
            self._candidates = self.dataset.run()
        return self._candidates


class PyTerrierStage(Stage):
    """A PyTerrier transformer as an irpipe stage: `reranks=True` when it needs a result frame (an input run)."""

    name = "pyterrier"
    _index = None  # resolved by bind: the dataset's index, where candidates lack texts

    def __init__(self, transformer: pt.Transformer, reranks: bool = False):
        if not isinstance(transformer, pt.Transformer):
            raise TypeError(f"PyTerrierStage wraps a pt.Transformer, not {type(transformer).__name__}")
        if not isinstance(reranks, bool):
            raise problem(self.name, "reranks", f"reranks={reranks!r}; expected True or False")
        self.transformer, self.needs_run = transformer, reranks

    def resolve(self, binding: Binding) -> None:
        """Where a reranker's `text` column comes from: the run's own texts, the rest from the dataset's index
        (opened only when some candidate lacks a text); a dataset without documents gives what the run has."""
        self._index = None
        if self.needs_run and (binding.candidates is None or missing_texts(binding.candidates)):
            path = binding.dataset_index()
            if path is not None:
                from pipeline.retrieve.index import open_index

                self._index = open_index(path)

    def transform(self, topics: Topics, run: Run | None) -> Run:
        if run is not None and self._index is not None and missing_texts(run):
            run = Run(run.ranking, CandidateTexts(self._index, repr(self)).of(run), run.tag, run.doc_fields)
        frame = topics.to_frame() if run is None else run.to_frame(topics)
        output = self.transformer(frame)
        try:
            return Run.from_frame(output, tag=self.name)
        except IrpipeError as error:
            raise StageError(f"{self!r} gave a frame irpipe cannot read as a run: {error}") from None

    def config(self) -> dict:
        return {"transformer": repr(self.transformer)} | ({"reranks": True} if self.needs_run else {})

    def __eq__(self, other) -> bool:
        return isinstance(other, PyTerrierStage) and other.transformer is self.transformer and \
            other.needs_run == self.needs_run

    def __hash__(self) -> int:
        return hash((type(self).__name__, id(self.transformer), self.needs_run))


def qrels_frame(qrels: Qrels) -> pd.DataFrame:
    """Qrels as PyTerrier's frame: qid, docno, label (what pt.Experiment takes)."""
    rows = [(qid, docno, label) for qid, docs in qrels.items() for docno, label in docs.items()]
    return pd.DataFrame(rows, columns=["qid", "docno", "label"]).astype({"label": "int64"})


class AnseriniJavaInit(pt.java.JavaInitializer):
    """irpipe's part of a JVM that PyTerrier starts (`pt.java.init()`; registered as the `pyterrier.java.init`
    entry point `irpipe` in setup.cfg): Anserini's jar, a Java >= 21 (Terrier needs 11) and irpipe's options, so
    that the one JVM of the process serves both. It runs first (PyTerrier's own Java set-up is -100): where irpipe
    has already started the JVM without PyTerrier, it says what to do instead of pyjnius' "VM is already running"."""

    def priority(self) -> int:
        return -102

    def pre_init(self, jnius_config) -> None:
        from pipeline import java

        if jnius_config.vm_running:
            cause = java.pyterrier_cause()
            if cause:  # pyterrier was imported first, and could not start Java: say why, not the import order
                raise RuntimeError(
                    f"irpipe started this process's JVM before PyTerrier could, with Anserini's jar alone, because "
                    f"PyTerrier could not start it: {cause}; a process starts one JVM. Make Terrier's jars available "
                    f"(run once with a network, or unset IRPIPE_OFFLINE), then start the process again")
            raise RuntimeError(
                "irpipe started this process's JVM before PyTerrier could, with Anserini's jar alone (pyterrier was "
                "not imported yet); a process starts one JVM. Import pyterrier before irpipe's first Lucene stage "
                "runs (irpipe then starts Java through pt.java.init()), or call pt.java.init() first")
        java.configure(jnius_config)

    def message(self) -> str:
        from pipeline import java

        return java.anserini_jar().name
