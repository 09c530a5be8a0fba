"""The dataset registry: names -> `Dataset` objects, from datasets.json, plus `irds:<id>` for ir_datasets.

    >>> from pipeline.data.registry import get_dataset
    >>> ds = get_dataset("cacm")
    >>> topics, qrels = ds.topics(), ds.qrels()
    >>> for doc in ds.docs(): ...

Files resolve through the cache, the mirror (`$IRPIPE_MIRROR`) and the upstream download (see
`pipeline.data.sets.base`). The CLI: `irpipe datasets list | info NAME | fetch NAME...`.
"""
from __future__ import annotations

import argparse
import json
from functools import lru_cache
from pathlib import Path

from pipeline.data.sets.answer_selection import AnswerSelectionDataset
from pipeline.data.sets.base import DataFile, Dataset, DatasetLacksError, Pair  # noqa: F401 (re-exported)
from pipeline.data.sets.chinese import BqDataset, InsuranceQaZhDataset, LcqmcDataset, ThucnewsDataset
from pipeline.data.sets.cranfield import CranfieldDataset
from pipeline.data.sets.irds import PREFIX as IRDS_PREFIX, IrdsDataset
from pipeline.data.sets.microblog import MicroblogDataset
from pipeline.data.sets.msmarco import BM25TopDataset
from pipeline.data.sets.questions import QuestionRetrievalDataset
from pipeline.data.sets.squad import SquadDataset
from pipeline.data.sets.standard import StandardDataset
from pipeline.errors import UnknownNameError

REGISTRY_FILE = Path(__file__).with_name("datasets.json")
FAMILIES: dict[str, type[Dataset]] = {
    "standard": StandardDataset,
    "cranfield": CranfieldDataset,
    "squad": SquadDataset,
    "answer-selection": AnswerSelectionDataset,
    "bm25-top100": BM25TopDataset,
    "lcqmc": LcqmcDataset,
    "bq": BqDataset,
    "thucnews": ThucnewsDataset,
    "insuranceqa-zh": InsuranceQaZhDataset,
    "question-retrieval": QuestionRetrievalDataset,
    "microblog": MicroblogDataset,
}


@lru_cache(maxsize=1)
def _registry() -> dict:
    with open(REGISTRY_FILE, encoding="utf-8") as handle:
        return json.load(handle)


def dataset_names() -> list[str]:
    """Registered names, in registry order (`irds:<id>` names are accepted besides these)."""
    return list(_registry()["datasets"])


def get_dataset(name: str) -> Dataset:
    """The dataset called `name`; `irds:<id>` wraps ir_datasets' `<id>`. Nothing is read or fetched yet."""
    if name.startswith(IRDS_PREFIX):
        return IrdsDataset(name)
    registry = _registry()
    if name not in registry["datasets"]:
        raise UnknownNameError("dataset", name, dataset_names())
    spec = registry["datasets"][name]
    files = {}
    for key, ref in spec["files"].items():
        rel, member = (ref, None) if isinstance(ref, str) else ref
        entry = registry["files"][rel]
        files[key] = (DataFile(rel, entry["repo"], entry["commit"], entry["path"], entry["sha256"], entry["size"],
                               tuple(entry.get("members", ()))), member)
    return FAMILIES[spec["family"]](name, spec, files)


def define_args(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("list", help="registered datasets and what each provides")
    info = actions.add_parser("info", help="a dataset's description, counts, files and upstream (JSON)")
    info.add_argument("name", metavar="NAME")
    fetch = actions.add_parser("fetch", help="resolve a dataset's files into the cache (mirror, then download)")
    fetch.add_argument("names", nargs="+", metavar="NAME")


def main(args: argparse.Namespace) -> int:
    if args.action == "list":
        rows = [(ds.name, ",".join(ds.provides), ds.description) for ds in map(get_dataset, dataset_names())]
        widths = [max(len(row[i]) for row in rows + [("NAME", "PROVIDES", "")]) for i in range(2)]
        print(f"{'NAME':<{widths[0]}}  {'PROVIDES':<{widths[1]}}  DESCRIPTION")
        for name, provides, description in rows:
            print(f"{name:<{widths[0]}}  {provides:<{widths[1]}}  {description}")
        print("\n(and irds:<id> for any ir_datasets id)")
    elif args.action == "info":
        print(json.dumps(get_dataset(args.name).info(), indent=2, ensure_ascii=False))
    else:
        datasets = [get_dataset(name) for name in args.names]  # unknown names fail before any fetching
        for dataset in datasets:
            for key, path in dataset.fetch().items():
                print(f"{dataset.name}\t{key}\t{path}")
    return 0
