"""The MS MARCO passage ranking files in one folder, as Microsoft distributes them (collectionandqueries.tar.gz,
qrels.dev.tsv and top1000.{dev,eval}.tar.gz, extracted side by side), read as they are:

    collection.tsv                      pid<TAB>passage
    queries.<split>.tsv                 qid<TAB>query         (train, dev, dev.small, eval, eval.small)
    qrels.<split>.tsv                   qid 0 pid relevance   (TREC; train, dev, dev.small: eval's are hidden)
    top1000.<split>.tsv                 qid<TAB>pid<TAB>query<TAB>passage: BM25's top 1000, with the texts (dev, eval)

`--dataset DIR` is the dev.small split (the 6,980 queries MS MARCO's leaderboard and Pyserini's
msmarco-passage-dev-subset report on), `--dataset DIR:SPLIT` another (any SPLIT with a queries.SPLIT.tsv). A
split is its queries, its qrels when the folder has them, the collection when it is there, and its candidates
when there is a top1000 file for it: top1000.SPLIT.tsv, or for a `.small` split the file of the split it is a
subset of (dev.small's are in top1000.dev.tsv), each of its queries' candidates only. A top1000 file has no
scores or ranks: a query's candidates are ranked in file order (what a reranker starts from; not a BM25 run to
evaluate). A folder needs queries and collection.tsv or a top1000 file.
"""
from __future__ import annotations

import os
from pathlib import Path

from pipeline.data.files import numbered_lines
from pipeline.data.ids import check_id
from pipeline.data.runs import Run
from pipeline.data.sets.base import Dataset
from pipeline.data.sets.local import FolderLayout, LocalCollection, local_dataset
from pipeline.errors import InputError, MissingResourceError

DEFAULT_SPLIT = "dev.small"
COLLECTION = "collection.tsv"
TOP_COLUMNS = ("qid", "pid", "query", "passage")


def splits(folder: Path) -> list[str]:
    """The splits the folder has queries for (`queries.<split>.tsv`)."""
    return sorted(path.name[len("queries."):-len(".tsv")] for path in folder.glob("queries.*.tsv"))


def is_msmarco_folder(folder: Path) -> bool:
    return bool(splits(folder)) and ((folder / COLLECTION).is_file() or any(folder.glob("top1000.*.tsv")))


def candidates_file(folder: Path, split: str) -> Path | None:
    """top1000.<split>.tsv, else (a `.small` split) the top1000 file of the split it is a subset of, else None."""
    for name in (split, split.removesuffix(".small")):
        if os.path.lexists(folder / f"top1000.{name}.tsv"):  # a FIFO or folder there: named, and then refused
            return folder / f"top1000.{name}.tsv"
    return None


def load_msmarco_folder(folder: Path, split: str | None = None, name: str | None = None) -> Dataset:
    """The folder's `split` (default dev.small) as a dataset called `<name or folder name>:<split>`."""
    split = split or DEFAULT_SPLIT
    if not (folder / f"queries.{split}.tsv").is_file():
        raise MissingResourceError(f"{folder}: MS MARCO split {split!r} has no queries file queries.{split}.tsv "
                                   f"(splits here: {', '.join(splits(folder))}; pick one with --dataset {folder}:SPLIT)")
    files = {"topics": f"queries.{split}.tsv"}
    if os.path.lexists(folder / f"qrels.{split}.tsv"):
        files["qrels"] = f"qrels.{split}.tsv"
    if os.path.lexists(folder / COLLECTION):
        files["corpus"] = COLLECTION
    candidates = candidates_file(folder, split)
    if candidates is not None:
        files["run"] = candidates.name
    spec = {"kind": "trec", "description": f"MS MARCO passage folder {folder} ({split} split)", "files": files}
    dataset = local_dataset(spec, folder, folder, f"{name or folder.resolve().name}:{split}", family=MsmarcoSplit)
    dataset.spec["family"] = "msmarco-passage-folder"
    return dataset


class MsmarcoSplit(LocalCollection):
    """One split of an MS MARCO passage folder; its candidates (`run`) come from a top1000 file, with texts."""

    def run(self) -> Run | None:
        if "run" not in self.files:
            return None
        path, wanted = self.path("run"), set(self.topics())
        ranking: dict[str, list[tuple[str, float]]] = {}
        texts: dict[str, str] = {}
        seen: dict[str, set[str]] = {}
        for number, line in numbered_lines(path):
            parts = line.split("\t")
            if len(parts) != len(TOP_COLUMNS):
                raise InputError(path, f"expected {len(TOP_COLUMNS)} tab-separated columns ({', '.join(TOP_COLUMNS)}),"
                                       f" found {len(parts)}", number, "columns")
            qid, pid, passage = parts[0].strip(), parts[1].strip(), parts[3].strip()
            if check_id(qid, path, number, "qid", "query id") not in wanted:
                continue
            check_id(pid, path, number, "pid", "pid")
            if pid in seen.setdefault(qid, set()):
                raise InputError(path, f"pid {pid!r} listed twice for query {qid!r}", number, "pid")
            seen[qid].add(pid)
            hits = ranking.setdefault(qid, [])
            hits.append((pid, -float(len(hits) + 1)))  # no scores in the file: file order is the ranking
            texts[pid] = passage
        return Run(ranking, texts, tag="top1000")


LAYOUT = FolderLayout("MS MARCO passage", f"queries.<split>.tsv with {COLLECTION} or top1000.<split>.tsv",
                      is_msmarco_folder, load_msmarco_folder)
