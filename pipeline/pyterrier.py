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
and gives a result frame: qid, docno, score, rank (0-based), query, + text where the run carries texts. The rows
become a `Run` and back through pipeline/data/frames.py (Run.from_frame / Run.to_frame), the one conversion.
Stage outputs go through the stage cache as in `irpipe run` (`cache=False`: always computed).

A PyTerrier transformer as an irpipe stage (`PyTerrierStage`) gets `topics.to_frame()` (no input run) or
`run.to_frame(topics)` and gives back a run read by `Run.from_frame`; it composes with `>>`, `%` and `+`. It is
not in the spec grammar (it is a Python object) and not cached (irpipe cannot fingerprint it).

One JVM per process. Importing pyterrier starts none, and neither do its transformer and Experiment API; irpipe's
Lucene stages start the JVM with Anserini's jar (pipeline/java.py). PyTerrier's Terrier classes (pt.terrier.*)
need Terrier's jars on that JVM's classpath when it starts: importing this module hands Anserini's jar, Java home
and options to PyTerrier's Java configuration, so a JVM that `pt.java.init()` starts first serves irpipe too; once
irpipe has started it, `pt.java.init()` fails (pyjnius: "VM is already running").
"""
from __future__ import annotations

import pandas as pd

from pipeline import cache
from pipeline.binding import Binding
from pipeline.data.qrels import Qrels
from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.errors import IrpipeError, MissingResourceError
from pipeline.stage import Stage, StageError
from pipeline.validate import problem

try:
    import pyterrier as pt
except ImportError:
    raise MissingResourceError('pipeline.pyterrier needs PyTerrier: pip install -e ".[pyterrier]"') from None

QUERY_COLUMNS = ["qid", "query"]
RESULT_COLUMNS = ["qid", "docno", "score", "rank", "query"]  # + text where the run carries texts


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
        if "docno" in inp.columns:
            topics = Topics.from_frame(inp[QUERY_COLUMNS].drop_duplicates())
            run = _result_run(inp)
        else:
            topics = Topics.from_frame(inp)
            run = _subset(self._shipped(), topics) if self.stage.needs_run else None
        if not topics.queries:
            return pd.DataFrame(columns=RESULT_COLUMNS + (["text"] if "text" in inp.columns else []))
        with cache.using(cache.StageCache() if self.cache else None):
            output = self.stage(topics, run)
        return output.to_frame(topics)[RESULT_COLUMNS + (["text"] if output.texts else [])]

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

    def __init__(self, transformer: pt.Transformer, reranks: bool = False):
        if not isinstance(transformer, pt.Transformer):
            raise TypeError(f"PyTerrierStage wraps a pt.Transformer, not {type(transformer).__name__}")
        if not isinstance(reranks, bool):
            raise problem(self.name, "reranks", f"reranks={reranks!r}; expected True or False")
        self.transformer, self.needs_run = transformer, reranks

    def transform(self, topics: Topics, run: Run | None) -> Run:
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


def _result_run(frame: pd.DataFrame) -> Run:
    """The run of a PyTerrier result frame; without a score column, each query's hits in rank order (else the
    frame's) get the scores -1, -2, ... (a reranker reads only the candidates; a cutoff keeps that order)."""
    if "score" not in frame.columns:
        order = frame["rank"] if "rank" in frame.columns else frame.groupby("qid", sort=False).cumcount()
        frame = frame.assign(score=-(order.astype("float64") + 1.0))
    return Run.from_frame(frame)


def _subset(run: Run, topics: Topics) -> Run:
    """The shipped candidates of the topics' queries (validation let a query frame through only where they exist)."""
    ranking = {qid: run.ranking[qid] for qid in topics.queries if qid in run.ranking}
    kept = {docid for hits in ranking.values() for docid, _ in hits}
    return Run(ranking, {d: t for d, t in run.texts.items() if d in kept}, run.tag,
               {d: f for d, f in run.doc_fields.items() if d in kept})


def _share_the_jvm() -> None:
    """Anserini's jar, Java home and options in PyTerrier's Java configuration, while no JVM runs yet. Without a
    Java >= 21 there is no home to hand over: PyTerrier's Python API needs none, and irpipe's Lucene stages say
    what is missing when they start (pipeline/java.py)."""
    import jnius_config

    from pipeline import java

    if jnius_config.vm_running or pt.java.started():
        return
    pt.java.add_jar(str(java.anserini_jar()))
    try:
        home, options = java.java_home(), java.jvm_options()
    except MissingResourceError:
        return
    if not pt.java.configure["java_home"]:
        pt.java.set_java_home(str(home))
    for option in [*options, "-Xrs"]:  # the options java.start() gives the JVM it starts
        if option not in pt.java.configure["options"]:
            pt.java.add_option(option)


_share_the_jvm()
