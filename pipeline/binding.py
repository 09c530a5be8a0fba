"""What a pipeline is bound to: the one resolve phase of every entry point (the CLI commands, `irpipe run`, the
Python API).

    pipeline = parse("bm25() % 100 >> monobert(train=wikiqa/train)").bind(dataset)   # or .bind(Binding(...))
    run = pipeline(dataset.topics())                                                  # computes only

`Stage.bind(binding)` returns a copy of the stage with everything it needs resolved from the `Binding`: the
dataset's index (built once, on first use, shared by every stage of the pipeline), a recipe's model (trained
once through the recipe cache), a store (opened and checked), the candidate texts' source (the run's own
texts, else the index, opened only when a candidate lacks one), and the engine the work runs on. Whatever is
missing fails here, with exit status 2, before any stage computes. A stage's `transform` then only computes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from pipeline.data.runs import Run
from pipeline.engine import EngineOptions


@dataclass(frozen=True)
class Binding:
    dataset: object | None = None  # a Dataset (pipeline/data/sets/base.py): its index, shipped texts
    engine: EngineOptions | None = None  # None or kind "local": this process; "ray": a cluster (pipeline/engine/)
    candidates: Run | None = None  # the input run a stage will get, when it is known at bind (a dataset's or file's)
    searched: str | None = None  # the index the retriever before the stage searched (its candidates' documents)
    _indexes: dict = field(default_factory=dict, compare=False, repr=False)  # shared by the copies of one binding

    def __post_init__(self):
        if isinstance(self.dataset, str):  # a name or a folder: `stage.bind("cacm")`
            from pipeline.data.registry import get_dataset

            object.__setattr__(self, "dataset", get_dataset(self.dataset))

    @property
    def on_cluster(self) -> EngineOptions | None:
        """The cluster engine to run on, or None (here)."""
        return self.engine if self.engine is not None and self.engine.kind != "local" else None

    def after_retrieval(self, searched: str | None = None) -> "Binding":
        """The same binding for a stage whose input is computed (its candidates are not known at bind); `searched`:
        the index the stage before searched (kept from earlier stages when None)."""
        return dataclasses.replace(self, candidates=None, searched=searched or self.searched)

    def has_docs(self) -> bool:
        return self.dataset is not None and "docs" in self.dataset.provides

    def dataset_index(self, segment: str | None = None) -> str | None:
        """The dataset's own Lucene index (built on first use, cached); without documents, the index the retriever
        before searched (`bm25(index=DIR) >> overlap()` bound to no dataset reads its texts there), else None."""
        if not self.has_docs():
            return self.searched if segment is None else None
        if segment not in self._indexes:
            from pipeline.retrieve.index import dataset_index_for

            self._indexes[segment] = str(dataset_index_for(self.dataset, segment))
        return self._indexes[segment]
