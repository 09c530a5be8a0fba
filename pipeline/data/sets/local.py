"""Your own data: a folder with a `dataset.yaml`, or files named on the command line, as a `Dataset`.

A dataset folder names its files (paths relative to the folder) and, optionally, their formats:

    # dataset.yaml -- a TREC-style collection (kind: trec is the default)
    name: my-collection          # default: the folder's name
    description: three topics of my own
    rel_level: 1                 # binary relevance threshold of AP, RR, R (2 for TREC DL-style graded qrels)
    files:
      topics: topics.tsv         # TREC SGML, TSV (qid<TAB>text), JSONL; format detected, or {path:, format:}
      qrels: qrels.txt           # TREC qrels
      corpus: docs.jsonl         # JSONL, TSV, TREC SGML; optional
      run: bm25.trec             # a candidate run (TREC or MS MARCO); optional
      index: index/              # a Lucene index of the corpus; optional (else built from `corpus` on first use)
    run_texts: corpus            # the run's candidates take their texts from `corpus` (read whole: a small one), so
                                 # training and reranking on the run need no index and no Java (a GPU machine)

    kind: answer-selection       # WikiQA/TrecQA form; files default to a.toks, b.toks, sim.txt, id.txt
    kind: pairs                  # labelled pairs, one `label<TAB>text_a<TAB>text_b` a line; files: {pairs: FILE}

A pairs file becomes a ranking task: each distinct text_a is a query (`q1, q2, ...` in order of first
appearance), its rows are its candidates (`<qid>-<row>` ids, file order) with their labels as qrels.

Each file's sha256 (a folder's: of its files' paths and sha256s, pipeline/data/digests.py) joins the dataset's
`files` (as a `DataFile` with repo "local"), so recipe keys and cached indexes change when a file's content does,
not when the folder moves. The same class serves
`--topics/--qrels/--corpus|--index|--run` on the command line (`local_dataset_from_files`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from pipeline.data.corpus import DOC_FORMATS
from pipeline.data.digests import content_digest
from pipeline.data.files import json_digest, numbered_lines
from pipeline.data.paths import require_file
from pipeline.data.yaml_files import load_yaml
from pipeline.data.qrels import Qrels
from pipeline.data.runs import RUN_FORMATS, Run, read_run
from pipeline.data.sets.answer_selection import AnswerSelectionDataset
from pipeline.data.sets.base import DataFile, Dataset, LabelledPair, PairsAsRanking
from pipeline.data.sets.standard import StandardDataset
from pipeline.data.topics import TOPIC_FORMATS, Topics
from pipeline.errors import ConfigError, InputError, MissingResourceError
from pipeline.log import logger

SPEC_FILE = "dataset.yaml"
KINDS = ("trec", "answer-selection", "pairs")
FILE_KEYS = {"trec": ("topics", "qrels", "corpus", "run", "index"),
             "answer-selection": ("questions", "answers", "labels", "ids"),
             "pairs": ("pairs",)}
DEFAULT_FILES = {"answer-selection": {"questions": "a.toks", "answers": "b.toks", "labels": "sim.txt", "ids": "id.txt"}}
FORMATS = {"topics": TOPIC_FORMATS, "corpus": DOC_FORMATS, "run": RUN_FORMATS}
_SPEC_KEYS = {"name", "description", "kind", "rel_level", "language", "files", "run_texts"}


@dataclass(frozen=True)
class FolderLayout:
    """A way a dataset folder is laid out, recognised without a dataset.yaml (`--dataset DIR`, `DIR:SPLIT`):
    `detect(folder)` says whether the folder is one; `load(folder, split or None, name or None)` reads it."""

    name: str
    files: str  # what the layout's folder holds, for messages
    detect: Callable[[Path], bool]
    load: Callable[[Path, "str | None", "str | None"], Dataset]


def is_dataset_folder(path: str | Path) -> bool:
    return (Path(path) / SPEC_FILE).is_file()


def _load_spec_folder(folder: Path, split: str | None, name: str | None) -> Dataset:
    if split is not None:
        raise ConfigError(f"{folder}:{split}: a folder with a {SPEC_FILE} has no splits (give the folder alone, or "
                          "one folder per split)")
    return load_dataset_folder(folder, name)


SPEC_LAYOUT = FolderLayout("dataset.yaml", f"a {SPEC_FILE} naming its files", is_dataset_folder, _load_spec_folder)


def load_dataset_folder(folder: str | Path, name: str | None = None) -> Dataset:
    """The dataset described by `folder/dataset.yaml` (`name` overrides the file's own, e.g. a registered name)."""
    folder = Path(folder)
    spec_path = folder / SPEC_FILE
    if not spec_path.is_file():
        raise MissingResourceError(f"{folder}: not a dataset folder (it has no {SPEC_FILE}; see `irpipe datasets add`)")
    spec = load_yaml(spec_path)
    return local_dataset(spec if spec is not None else {}, folder, spec_path, name)


def local_dataset_from_files(files: dict[str, str], name: str | None = None, rel_level: int | None = None) -> Dataset:
    """A TREC-style dataset from files given one by one (`{"topics": PATH, "qrels": PATH, "corpus": PATH}`)."""
    given = {key: path for key, path in files.items() if path}
    spec = {"kind": "trec", "files": {key: str(Path(path).resolve()) for key, path in given.items()}}
    if rel_level is not None:
        spec["rel_level"] = rel_level
    default = Path(given.get("topics") or next(iter(given.values()), "local")).stem
    return local_dataset(spec, Path("."), "the command line", name or f"local:{default}", complete=False)


def local_dataset(spec: dict, folder: Path, where: str | Path, name: str | None = None,
                  complete: bool = True, family: type | None = None) -> Dataset:
    """Validate a dataset spec (dataset.yaml's mapping) and build the dataset of its kind (`complete`: with every
    file its kind requires; command-line files may be completed by a named dataset, see `WithFiles`; `family`: a
    subclass of the kind's class that reads the files its own way, e.g. a BEIR folder's)."""
    if not isinstance(spec, dict):
        raise InputError(where, "a dataset.yaml is a mapping (name, kind, files, ...)")
    unknown = set(spec) - _SPEC_KEYS
    if unknown:
        raise InputError(where, f"unknown key {sorted(unknown)[0]!r}; allowed: {', '.join(sorted(_SPEC_KEYS))}",
                         field=sorted(unknown)[0])
    kind = spec.get("kind", "trec")
    if kind not in KINDS:
        raise InputError(where, f"kind {kind!r} is not one of {', '.join(KINDS)}", field="kind")
    level = spec.get("rel_level", 1)
    if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 2**31 - 1:
        raise InputError(where, f"rel_level must be an integer >= 1 (the lowest relevant label), got {level!r}",
                         field="rel_level")
    for key, kinds in (("name", (str, int)), ("description", (str,)), ("language", (str,))):  # a list: a traceback
        if spec.get(key) is not None and (not isinstance(spec[key], kinds) or isinstance(spec[key], bool)):
            raise InputError(where, f"{key} must be a string, got {spec[key]!r}", field=key)
    if not isinstance(spec.get("files") or {}, dict):
        raise InputError(where, f"files must be a mapping (topics: FILE, qrels: FILE, ...), got {spec['files']!r}",
                         field="files")
    entries = {**DEFAULT_FILES.get(kind, {}), **(spec.get("files") or {})}
    files, formats = {}, {}
    for key, entry in entries.items():
        if key not in FILE_KEYS[kind]:
            raise InputError(where, f"unknown file key {key!r} for kind {kind}; allowed: {', '.join(FILE_KEYS[kind])}",
                             field=f"files.{key}")
        path, fmt = _file_entry(entry, key, where)
        path = folder / path  # an absolute `path` stays itself
        if not path.exists() and not path.is_symlink():
            raise InputError(where, f"{key} file {path.resolve()} does not exist", field=f"files.{key}")
        require_file(path, where, f"files.{key}", folder=key == "index" or (key == "corpus" and path.is_dir()))
        path = path.resolve()
        files[key] = (DataFile(str(path), "local", "", str(path), content_digest(path), _size(path)), None)
        if fmt:
            formats[key] = fmt
    if "run_texts" in spec and (spec["run_texts"] != "corpus" or kind != "trec" or not {"run", "corpus"} <= set(files)):
        raise InputError(where, f"run_texts: {spec['run_texts']!r}; the one value is `corpus`, for a trec dataset with "
                                "a run and a corpus file", field="run_texts")
    family = family or {"trec": LocalCollection, "answer-selection": LocalAnswerSelection, "pairs": LocalPairs}[kind]
    name = name or spec.get("name") or folder.resolve().name
    full = {"description": spec.get("description", f"local dataset ({kind}) in {folder}"), "family": f"local-{kind}",
            "rel_level": level, "language": spec.get("language", "en"), "formats": formats,
            "run_texts": spec.get("run_texts")}
    dataset = family(str(name), full, files)
    missing = [key for key in family.required if key not in files] if complete else []
    if missing:
        raise InputError(where, f"a {kind} dataset needs a {missing[0]} file", field=f"files.{missing[0]}")
    return dataset


def _file_entry(entry, key: str, where) -> tuple[str, str | None]:
    if isinstance(entry, str):
        return entry, None
    if isinstance(entry, dict) and isinstance(entry.get("path"), str) and set(entry) <= {"path", "format"}:
        fmt = entry.get("format")
        if fmt is not None and fmt not in FORMATS.get(key, ()):
            raise InputError(where, f"format {fmt!r} of {key} is not one of {', '.join(FORMATS.get(key, ()))}",
                             field=f"files.{key}.format")
        return entry["path"], fmt
    raise InputError(where, f"files.{key} is a path, or {{path: PATH, format: FORMAT}}", field=f"files.{key}")


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else 0


class LocalFiles:
    """Files on disk, used as they are: never looked up in the cache, the mirror or upstream."""

    required: tuple[str, ...] = ()
    files: dict

    def path(self, key: str) -> Path:
        if key not in self.files:
            raise self._lacks(key)
        return Path(self.files[key][0].path)

    def fetch(self) -> dict[str, Path]:
        return {key: self.path(key) for key in self.files}

    @property
    def index_key(self) -> str:
        """The cached index's folder name: `local-<digest>[.<format>][.<language>]`, the digest of its corpus (of all
        its files where the documents come from others, e.g. answer selection's answers), with how the corpus is read
        where that is not the default (a `format:` given, a language other than English)."""
        if "corpus" in self.files:
            digest = self.files["corpus"][0].sha256
        else:
            digest = json_digest(sorted((key, file.sha256) for key, (file, _) in self.files.items()))
        reading = [self.spec["formats"].get("corpus"), self.language if self.language != "en" else None]
        return ".".join([f"local-{digest[:16]}", *filter(None, reading)])

    def reading(self) -> dict:
        """What its spec says about reading its files where that is not the default: formats, rel_level, run_texts,
        language (each changes what a recipe trains on)."""
        spec = self.spec
        given = {"formats": spec["formats"], "rel_level": self.rel_level if self.rel_level != 1 else None,
                 "run_texts": spec.get("run_texts"), "language": self.language if self.language != "en" else None}
        return {key: value for key, value in given.items() if value}

    @property
    def index_dir(self) -> Path | None:
        """A prebuilt index named in the spec (`files: {index: DIR}`), else None."""
        return self.path("index") if "index" in self.files else None

    def info(self) -> dict:
        files = {key: {"path": file.path, "sha256": file.sha256, "size": file.size}
                 for key, (file, _) in self.files.items()}
        return {"name": self.name, "description": self.description, "family": self.spec["family"],
                "provides": list(self.provides), "rel_level": self.rel_level, "language": self.language,
                "files": files}


class LocalCollection(LocalFiles, StandardDataset):
    """topics + qrels, and a corpus, an index or a candidate run (TREC, MS MARCO)."""

    required = ("topics",)
    docs_key = "corpus"

    def __init__(self, name, spec, files):
        super().__init__(name, spec, files)
        more = ["docs"] if "index" in files else []  # an index alone is searched and read, never re-indexed
        self.provides = tuple(dict.fromkeys([*self.provides, *more, *(["run"] if "run" in files else [])]))

    def run(self) -> Run | None:
        """The run file's candidates; with `run_texts: corpus`, with the texts of every corpus document."""
        if "run" not in self.files:
            return None
        run = read_run(self.path("run"), self.spec["formats"].get("run"))
        if self.spec.get("run_texts") == "corpus":
            run.texts = {doc["id"]: doc["contents"] for doc in self.docs()}
        return run


class LocalAnswerSelection(LocalFiles, AnswerSelectionDataset):
    """a.toks / b.toks / sim.txt / id.txt in a folder of your own (see pipeline.data.sets.answer_selection)."""

    required = ("questions", "answers", "labels", "ids")


class LocalPairs(LocalFiles, PairsAsRanking, Dataset):
    """`label<TAB>text_a<TAB>text_b` lines: text_a groups are queries, their rows labelled candidates."""

    required = ("pairs",)
    provides = ("topics", "qrels", "run", "pairs")

    def pairs(self) -> Iterator[LabelledPair]:
        path = self.path("pairs")
        for number, line in numbered_lines(path):
            parts = line.split("\t")
            if len(parts) != 3:
                raise InputError(path, f"expected 3 tab-separated columns (label, text_a, text_b), found {len(parts)}",
                                 number, "columns")
            label, text_a, text_b = (part.strip() for part in parts)
            if label not in ("0", "1"):
                raise InputError(path, f"label {label!r} is not 0 or 1", number, "label")
            for text, field in ((text_a, "text_a"), (text_b, "text_b")):
                if not text:
                    raise InputError(path, f"empty {field}", number, field)
            yield LabelledPair(text_a, text_b, int(label))



class WithFiles(Dataset):
    """A dataset with some of its parts replaced by local files (`--dataset dl19-passage --run my.trec`): the
    files' parts are read from them, the rest from `base`; the files' checksums join `files`."""

    _narrowing_said = False  # the log has said once that the qrels are narrowed to a topics file's queries

    def __init__(self, base: Dataset, local: LocalCollection):
        parts = [key for key in ("topics", "qrels", "corpus", "run", "index") if key in local.files]
        super().__init__(f"{base.name}+{'+'.join(parts)}", {**base.spec, "rel_level": base.rel_level},
                         {**base.files, **{f"local.{key}": local.files[key] for key in parts}})
        self.base, self.local = base, local
        self.rel_level = base.rel_level
        has_docs = "docs" in base.provides or "docs" in local.provides
        self.provides = tuple(dict.fromkeys([*base.provides, *local.provides, *(["docs"] if has_docs else [])]))

    @property
    def language(self) -> str:
        return self.base.language

    def _from(self, key: str) -> Dataset:
        return self.local if key in self.local.files else self.base

    def topics(self) -> Topics:
        return self._from("topics").topics()

    def qrels(self) -> Qrels:
        """The qrels; the dataset's own narrowed to the queries of a topics file given in their place
        (`--dataset cacm --topics SUBSET`): a judged query outside the topics would score 0 in every mean."""
        qrels = self._from("qrels").qrels()
        if "topics" not in self.local.files or "qrels" in self.local.files:
            return qrels
        asked = set(self.topics())
        kept = {qid: judged for qid, judged in qrels.items() if qid in asked}
        if len(kept) < len(qrels) and not self._narrowing_said:
            self._narrowing_said = True
            logger.info("%s: %s's qrels narrowed to the topics file's queries: %d of its %d judged queries are "
                        "evaluated", self.name, self.base.name, len(kept), len(qrels))
        return kept

    def run(self) -> Run | None:
        """The run file's candidates, with the texts (and fields) that the base dataset ships for them (DL19/DL20,
        WikiQA, TrecQA, the microblog years): a run of your own over such a dataset needs no index."""
        run = self._from("run").run()
        shipped = self.base.run() if run is not None and "run" in self.local.files else None
        if shipped is not None:
            docids = [d for hits in run.ranking.values() for d, _ in hits]
            run.texts = {d: shipped.texts[d] for d in docids if d in shipped.texts}
            run.doc_fields = {d: shipped.doc_fields[d] for d in docids if d in shipped.doc_fields}
        return run

    def docs(self) -> Iterator[dict]:
        return self._from("corpus").docs()

    @property
    def index_dir(self) -> Path | None:
        return self.local.index_dir if "index" in self.local.files else self.base.index_dir

    @property
    def index_key(self) -> str:
        return self.local.index_key if "corpus" in self.local.files else self.base.index_key

    def reading(self) -> dict:
        return self.local.reading()
