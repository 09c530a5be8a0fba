"""A BEIR dataset folder, as BEIR's download unzips it, read as it is (no dataset.yaml, no conversion):

    scifact/corpus.jsonl      {"_id": "4983", "title": "...", "text": "...", "metadata": {}}  one document a line
    scifact/queries.jsonl     {"_id": "1", "text": "...", "metadata": {}}                     every split's queries
    scifact/qrels/test.tsv    query-id<TAB>corpus-id<TAB>score, under that header line; also train.tsv, dev.tsv

`--dataset scifact` is the test split (BEIR evaluates on it), `--dataset scifact:dev` (`DIR:SPLIT`) another one:
the split's qrels, and as topics the queries it judges (in queries.jsonl's order), as BEIR's GenericDataLoader
keeps them. A document's contents are `title + " " + text` (the text alone when the title is empty), the
"title" kept as a field. The corpus is indexed once whatever the split (the index is keyed by its checksum).
"""
from __future__ import annotations

from pathlib import Path

from pipeline.data.files import numbered_lines
from pipeline.data.sets.base import Dataset
from pipeline.data.sets.local import FolderLayout, LocalCollection, local_dataset
from pipeline.data.topics import Topics
from pipeline.errors import InputError, MissingResourceError

DEFAULT_SPLIT = "test"
CORPUS, QUERIES, QRELS = "corpus.jsonl", "queries.jsonl", "qrels"


def is_beir_folder(folder: Path) -> bool:
    return (folder / CORPUS).is_file() and (folder / QUERIES).is_file() and (folder / QRELS).is_dir()


def splits(folder: Path) -> list[str]:
    """The splits the folder has qrels for (`qrels/<split>.tsv`)."""
    return sorted(path.stem for path in (folder / QRELS).glob("*.tsv"))


def load_beir_folder(folder: Path, split: str | None = None, name: str | None = None) -> Dataset:
    """The BEIR folder's `split` (default test) as a dataset called `<name or folder name>:<split>`."""
    split = split or DEFAULT_SPLIT
    qrels = folder / QRELS / f"{split}.tsv"
    if not qrels.is_file():
        have = ", ".join(splits(folder)) or "none"
        raise MissingResourceError(f"{folder}: BEIR split {split!r} has no qrels file {qrels} (splits here: {have}; "
                                   f"pick one with --dataset {folder}:SPLIT)")
    spec = {"kind": "trec", "description": f"BEIR folder {folder} ({split} split)",
            "files": {"topics": QUERIES, "qrels": f"{QRELS}/{split}.tsv", "corpus": CORPUS}}
    dataset = local_dataset(spec, folder, folder, f"{name or folder.resolve().name}:{split}", family=BeirSplit)
    dataset.spec["family"] = "beir"
    return dataset


class BeirSplit(LocalCollection):
    """One split of a BEIR folder: its qrels, the queries they judge, the whole corpus."""

    def topics(self) -> Topics:
        topics, qrels = super().topics(), self.qrels()
        missing = [qid for qid in qrels if qid not in topics.queries]
        if missing:
            path = self.path("qrels")
            line = next((n for n, text in numbered_lines(path) if text.split()[0] == missing[0]), None)
            raise InputError(path, f"query {missing[0]!r} is judged but not in {self.path('topics')}", line,
                             "query-id")
        return topics.subset([qid for qid in topics if qid in qrels])


LAYOUT = FolderLayout("BEIR", f"{CORPUS}, {QUERIES}, {QRELS}/<split>.tsv", is_beir_folder, load_beir_folder)
