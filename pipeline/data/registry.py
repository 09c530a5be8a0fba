"""The dataset registry: names -> `Dataset` objects, from datasets.json, plus `irds:<id>` for ir_datasets.

    >>> from pipeline.data.registry import get_dataset
    >>> ds = get_dataset("cacm")
    >>> topics, qrels = ds.topics(), ds.qrels()
    >>> for doc in ds.docs(): ...

Files resolve through the cache, the mirror (`$IRPIPE_MIRROR`) and the upstream download (see
`pipeline.data.sets.base`). Datasets of your own: a folder is a dataset by its path, or by a name given to it
with `add_local` (kept in `<irpipe cache>/local-datasets.json`), when it has one of the `FOLDER_LAYOUTS`: a
`dataset.yaml` (pipeline.data.sets.local), a BEIR folder (sets/beir.py) or the MS MARCO passage files
(sets/msmarco_folder.py). `DIR:SPLIT` (or `NAME:SPLIT`) picks a split of a BEIR or MS MARCO folder.
The CLI: `irpipe datasets list | info NAME | fetch NAME... | add NAME DIR`.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from pipeline.data.sets.answer_selection import AnswerSelectionDataset
from pipeline.data.sets.base import DataFile, Dataset, DatasetLacksError, LabelledPair  # noqa: F401 (re-exported)
from pipeline.data.sets.chinese import BqDataset, InsuranceQaZhDataset, LcqmcDataset, ThucnewsDataset
from pipeline.data.sets.cranfield import CranfieldDataset
from pipeline.data.sets.irds import PREFIX as IRDS_PREFIX, IrdsDataset
from pipeline.data.sets import beir, msmarco_folder
from pipeline.data.sets.local import SPEC_LAYOUT, FolderLayout
from pipeline.data.sets.microblog import MicroblogDataset
from pipeline.data.sets.msmarco import BM25TopDataset
from pipeline.data.sets.questions import QuestionRetrievalDataset
from pipeline.data.sets.squad import SquadDataset
from pipeline.data.sets.standard import StandardDataset
from pipeline.data.files import cache_root, parse_json
from pipeline.data.files import atomic_write
from pipeline.errors import ConfigError, MissingResourceError, UnknownNameError

REGISTRY_FILE = Path(__file__).with_name("datasets.json")
LOCAL_REGISTRY_FILE = "local-datasets.json"  # under the irpipe cache root: names given to dataset folders
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

# how a folder is recognised as a dataset, in this order (the first that matches reads it)
FOLDER_LAYOUTS: tuple[FolderLayout, ...] = (SPEC_LAYOUT, beir.LAYOUT, msmarco_folder.LAYOUT)


@lru_cache(maxsize=1)
def _registry() -> dict:
    with open(REGISTRY_FILE, encoding="utf-8") as handle:
        return json.load(handle)


def dataset_names() -> list[str]:
    """Registered names, in registry order (`irds:<id>` names are accepted besides these)."""
    return list(_registry()["datasets"])


def pyserini_topics() -> dict[str, tuple[str, str]]:
    """Pyserini's `--topics` names of a registered dataset's topics: name -> (dataset, how they differ from
    Pyserini's, or "" when they are the same)."""
    return {topics: (name, note) for name, spec in _registry()["datasets"].items()
            for topics, note in spec.get("pyserini_topics", {}).items()}


def local_datasets() -> dict[str, str]:
    """Names given to dataset folders with `add_local` (`irpipe datasets add`): name -> folder."""
    path = cache_root() / LOCAL_REGISTRY_FILE
    return parse_json(path.read_text(encoding="utf-8")) if path.is_file() else {}


def add_local(name: str, folder: str | Path) -> Dataset:
    """Register the dataset folder `folder` as `name` (checked by loading it); returns the dataset."""
    if name in _registry()["datasets"] or name.startswith(IRDS_PREFIX):
        raise ConfigError(f"{name!r} is a registered dataset name (or irds:); choose another name")
    dataset = load_folder(Path(folder), None, name)
    names = {**local_datasets(), name: str(Path(folder).resolve())}
    with atomic_write(cache_root() / LOCAL_REGISTRY_FILE) as out:
        json.dump(names, out, indent=2)
        out.write("\n")
    return dataset


def load_folder(folder: Path, split: str | None = None, name: str | None = None) -> Dataset:
    """The dataset in `folder`, read by the first of FOLDER_LAYOUTS it matches (`split`: a BEIR or MS MARCO split)."""
    for layout in FOLDER_LAYOUTS:
        if layout.detect(folder):
            return layout.load(folder, split, name)
    known = "; ".join(f"{layout.name} ({layout.files})" for layout in FOLDER_LAYOUTS)
    raise MissingResourceError(f"{folder}: not a dataset folder: it has none of the layouts irpipe reads: {known} "
                               "(see `irpipe datasets add`)")


def _folder_and_split(name: str, local: dict[str, str]) -> tuple[Path, str | None, str | None] | None:
    """(folder, split, its registered name) that `name` means (`DIR`, `DIR:SPLIT`, `NAME`, `NAME:SPLIT`), or None."""
    if name in local:
        return Path(local[name]), None, name
    if Path(name).is_dir():
        return Path(name), None, None
    base, colon, split = name.rpartition(":")
    if colon and base and split:
        if base in local:
            return Path(local[base]), split, base
        if Path(base).is_dir():
            return Path(base), split, None
    return None


def get_dataset(name: str | Dataset) -> Dataset:
    """The dataset called `name`: registered, `irds:<id>` (ir_datasets' `<id>`), a name given with `add_local`, or
    the path of a dataset folder (FOLDER_LAYOUTS), either with `:SPLIT`; a `Dataset` is itself. Nothing is read or
    fetched yet."""
    if isinstance(name, Dataset):
        return name
    if name.startswith(IRDS_PREFIX):
        return IrdsDataset(name)
    registry = _registry()
    if name not in registry["datasets"]:
        local = local_datasets()
        found = _folder_and_split(name, local)
        if found is not None:  # a folder of no known layout is told so
            return load_folder(*found)
        raise UnknownNameError("dataset", name, dataset_names() + list(local))
    spec = registry["datasets"][name]
    files = {}
    for key, ref in spec["files"].items():
        rel, member = (ref, None) if isinstance(ref, str) else ref
        entry = registry["files"][rel]
        files[key] = (DataFile(rel, entry["repo"], entry["commit"], entry["path"], entry["sha256"], entry["size"],
                               tuple(entry.get("members", ()))), member)
    return FAMILIES[spec["family"]](name, spec, files)
