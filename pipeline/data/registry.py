"""The dataset registry: names -> `Dataset` objects, from datasets.json, plus `irds:<id>` for ir_datasets.

    >>> from pipeline.data.registry import get_dataset
    >>> ds = get_dataset("cacm")
    >>> topics, qrels = ds.topics(), ds.qrels()
    >>> for doc in ds.docs(): ...

Files resolve through the cache, the mirror (`$IRPIPE_MIRROR`) and the upstream download (see
`pipeline.data.sets.base`). Datasets of your own: a folder with a `dataset.yaml` is a dataset by its path, or
by a name given to it with `add_local` (kept in `<irpipe cache>/local-datasets.json`); see
`pipeline.data.sets.local`. The CLI: `irpipe datasets list | info NAME | fetch NAME... | add NAME DIR`.
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
from pipeline.data.sets.local import is_dataset_folder, load_dataset_folder
from pipeline.data.sets.microblog import MicroblogDataset
from pipeline.data.sets.msmarco import BM25TopDataset
from pipeline.data.sets.questions import QuestionRetrievalDataset
from pipeline.data.sets.squad import SquadDataset
from pipeline.data.sets.standard import StandardDataset
from pipeline.data.files import cache_root
from pipeline.data.files import atomic_write
from pipeline.errors import ConfigError, UnknownNameError

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


@lru_cache(maxsize=1)
def _registry() -> dict:
    with open(REGISTRY_FILE, encoding="utf-8") as handle:
        return json.load(handle)


def dataset_names() -> list[str]:
    """Registered names, in registry order (`irds:<id>` names are accepted besides these)."""
    return list(_registry()["datasets"])


def local_datasets() -> dict[str, str]:
    """Names given to dataset folders with `add_local` (`irpipe datasets add`): name -> folder."""
    path = cache_root() / LOCAL_REGISTRY_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def add_local(name: str, folder: str | Path) -> Dataset:
    """Register the dataset folder `folder` as `name` (checked by loading it); returns the dataset."""
    if name in _registry()["datasets"] or name.startswith(IRDS_PREFIX):
        raise ConfigError(f"{name!r} is a registered dataset name (or irds:); choose another name")
    dataset = load_dataset_folder(folder, name)
    names = {**local_datasets(), name: str(Path(folder).resolve())}
    with atomic_write(cache_root() / LOCAL_REGISTRY_FILE) as out:
        json.dump(names, out, indent=2)
        out.write("\n")
    return dataset


def get_dataset(name: str) -> Dataset:
    """The dataset called `name`: registered, `irds:<id>` (ir_datasets' `<id>`), a name given with `add_local`, or
    the path of a dataset folder (one with a dataset.yaml). Nothing is read or fetched yet."""
    if name.startswith(IRDS_PREFIX):
        return IrdsDataset(name)
    registry = _registry()
    if name not in registry["datasets"]:
        local = local_datasets()
        if name in local:
            return load_dataset_folder(local[name], name)
        if is_dataset_folder(name) or Path(name).is_dir():  # a folder without a dataset.yaml is told so
            return load_dataset_folder(name)
        raise UnknownNameError("dataset", name, dataset_names() + list(local))
    spec = registry["datasets"][name]
    files = {}
    for key, ref in spec["files"].items():
        rel, member = (ref, None) if isinstance(ref, str) else ref
        entry = registry["files"][rel]
        files[key] = (DataFile(rel, entry["repo"], entry["commit"], entry["path"], entry["sha256"], entry["size"],
                               tuple(entry.get("members", ()))), member)
    return FAMILIES[spec["family"]](name, spec, files)
