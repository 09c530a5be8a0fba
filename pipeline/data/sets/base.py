"""Dataset files in layers -- cache, mirror, download -- and the `Dataset` base class that every family extends.

A file is named by its path relative to the mirror root (the layout of ../shared/data), which is also its path
under the cache (`$IRPIPE_CACHE/datasets/`, default `~/.cache/irpipe/datasets/`). Resolving a file tries:
1. the cache; 2. the mirror folder `$IRPIPE_MIRROR`; 3. a download from its upstream repository at a pinned
commit (never with `IRPIPE_OFFLINE=1`), announced on stderr, sha256-checked while streaming, written to a
`.tmp` file and renamed into the cache. Every local copy is sha256-checked once per process. Archives are
verified, then extracted next to where they sit in the cache.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import re
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, NamedTuple

from pipeline.data.files import atomic_write, cache_root, file_sha256
from pipeline.data.qrels import Qrels
from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.environment import offline
from pipeline.errors import IrpipeError, MissingResourceError
from pipeline.log import logger, progress

RAW_URL = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"
CONNECT_TIMEOUT_S = 10  # fail fast where there is no network
PROVIDES = ("topics", "qrels", "docs", "run", "pairs", "records")


class DatasetLacksError(IrpipeError):
    """A dataset was asked for something it does not provide (e.g. documents of MS MARCO dev-small)."""


class LabelledPair(NamedTuple):
    """A labelled text pair of a matching dataset (LCQMC, BQ)."""

    text_a: str
    text_b: str
    label: int


class PairsAsRanking:
    """A labelled-pairs dataset read as a ranking task: each distinct text_a is a query (`q1, q2, ...` in order of
    first appearance), its rows are its candidates (`<qid>-<row>` ids, file order, row 1-based) with their labels as
    qrels. Mixed into a `Dataset` whose `pairs()` yields `LabelledPair`s."""

    def _ranking(self) -> tuple[Topics, Qrels, Run]:
        qids: dict[str, str] = {}
        ranking: dict[str, list[tuple[str, float]]] = {}
        qrels: Qrels = {}
        texts: dict[str, str] = {}
        for row, pair in enumerate(self.pairs(), start=1):
            qid = qids.setdefault(pair.text_a, f"q{len(qids) + 1}")
            hits = ranking.setdefault(qid, [])
            docid = f"{qid}-{row}"
            hits.append((docid, -float(len(hits) + 1)))  # file order is the candidates' ranking
            texts[docid] = pair.text_b
            qrels.setdefault(qid, {})[docid] = pair.label
        topics = Topics({qid: text for text, qid in qids.items()})
        return topics, qrels, Run(ranking, texts, tag=re.sub(r"\W+", "-", self.name))

    def topics(self) -> Topics:
        return self._ranking()[0]

    def qrels(self) -> Qrels:
        return self._ranking()[1]

    def run(self) -> Run:
        return self._ranking()[2]


@dataclass(frozen=True)
class DataFile:
    """One upstream file: `rel` is its path under the mirror root and under the cache."""

    rel: str
    repo: str
    commit: str
    path: str
    sha256: str
    size: int
    members: tuple[str, ...] = ()  # for an archive: the top-level entries it extracts to

    @property
    def url(self) -> str:
        return RAW_URL.format(repo=self.repo, commit=self.commit, path=self.path)


def datasets_root() -> Path:
    """Where dataset files are cached: `<irpipe cache>/datasets`."""
    return cache_root() / "datasets"


def mirror_root() -> Path | None:
    mirror = os.environ.get("IRPIPE_MIRROR")
    return Path(mirror).expanduser() if mirror else None



def locate(file: DataFile, member: str | None = None) -> Path | None:
    """Where the file (or an archive member) is now, in the cache or the mirror; never downloads or checks."""
    rel = str(Path(file.rel).parent / member) if member else file.rel
    for root in (datasets_root(), mirror_root()):
        if root is not None and (root / rel).exists():
            return root / rel
    return None


def resolve(file: DataFile, member: str | None = None) -> Path:
    """A verified local path of `file`, or of `member` extracted from the archive `file`; fetched if needed."""
    if member is None:
        for root in (datasets_root(), mirror_root()):
            if root is not None and (root / file.rel).is_file():
                return _verify(root / file.rel, file)
        return _download(file, datasets_root() / file.rel)
    if member not in file.members:
        raise ValueError(f"{member!r} is not among the members {file.members} of {file.rel}")
    found = locate(file, member)
    if found is not None:
        return found
    destination = datasets_root() / Path(file.rel).parent
    _extract(resolve(file), file, destination)
    return destination / member


def _place_message(file: DataFile, reason: str) -> str:
    mirror = mirror_root()
    where = (f"neither in the cache nor in the mirror {mirror}" if mirror
             else "not in the cache and IRPIPE_MIRROR is not set")
    return (f"dataset file {file.rel} is {where}, and {reason}. Place the file {file.url} "
            f"({file.size:,} bytes, sha256 {file.sha256}) at {datasets_root() / file.rel}, "
            f"or set IRPIPE_MIRROR to a folder holding {file.rel}.")


def _verify(path: Path, file: DataFile) -> Path:
    size = path.stat().st_size
    if size != file.size:
        raise MissingResourceError(f"{path} has {size:,} bytes, expected {file.size:,} ({file.url}); replace it")
    sha256 = file_sha256(path)
    if sha256 != file.sha256:
        raise MissingResourceError(
            f"{path}: sha256 {sha256} differs from the expected {file.sha256} ({file.url}); replace it")
    return path


def _download(file: DataFile, target: Path) -> Path:
    if offline():
        raise MissingResourceError(_place_message(file, "downloads are off (IRPIPE_OFFLINE)"))
    logger.warning("downloading %s (%s bytes) to %s", file.url, f"{file.size:,}", target)
    digest = hashlib.sha256()
    try:  # through atomic_write: a failed or wrong download leaves no file behind
        with atomic_write(target, "wb") as out, \
                urllib.request.urlopen(file.url, timeout=CONNECT_TIMEOUT_S) as response:
            with progress(desc=Path(file.rel).name, total=file.size, unit="B") as bar:
                for chunk in iter(lambda: response.read(1 << 16), b""):
                    digest.update(chunk)
                    out.write(chunk)
                    bar.update(len(chunk))
            if digest.hexdigest() != file.sha256:
                reason = f"the download's sha256 {digest.hexdigest()} is not the expected one"
                raise MissingResourceError(_place_message(file, reason))
    except (urllib.error.URLError, http.client.HTTPException, OSError) as error:  # HTTP errors, timeouts, refusals
        raise MissingResourceError(_place_message(file, f"the download failed ({error})")) from None
    return target


def _extract(archive: Path, file: DataFile, destination: Path) -> None:
    """Extract a verified archive into a temporary folder, then move its members into `destination`."""
    destination.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".extract-", suffix=".tmp", dir=destination))
    try:
        if file.rel.endswith(".zip"):
            with zipfile.ZipFile(archive) as zipped:
                zipped.extractall(tmp)  # zipfile drops absolute paths and '..'
        else:
            with tarfile.open(archive, "r:*") as tarred:
                tarred.extractall(tmp, filter="data")
        for member in file.members:
            if not (tmp / member).exists():
                raise MissingResourceError(f"{archive} holds no {member!r}")
            if not (destination / member).exists():  # else a concurrent process extracted it first
                os.replace(tmp / member, destination / member)
    except (zipfile.BadZipFile, tarfile.TarError) as error:
        raise MissingResourceError(f"{archive}: cannot extract ({error})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class Dataset:
    """A named dataset. Families override the readers they support and list them in `provides`.

    `spec` is the dataset's entry in datasets.json; `files` maps its file keys to (DataFile, member or None).
    """

    provides: tuple[str, ...] = ()

    def __init__(self, name: str, spec: dict, files: dict[str, tuple[DataFile, str | None]]):
        self.name = name
        self.spec = spec
        self.files = files
        self.description: str = spec.get("description", "")
        self.rel_level: int = spec.get("rel_level", 1)  # the binary relevance level for AP, RR, R

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @property
    def language(self) -> str:
        """The analyzer language its texts need: "en", or "zh" (CJK bigrams) for the Chinese sets."""
        return self.spec.get("language", "en")

    @property
    def index_dir(self) -> Path | None:
        """A prebuilt Lucene index of its documents that it names itself, or None: built on first use."""
        return None

    @property
    def index_key(self) -> str:
        """The name of its built index's folder under `<irpipe cache>/indexes/`."""
        return self.name

    def reading(self) -> dict:
        """How its files are read beyond what its name and files fix (a dataset.yaml's `format:`, `rel_level`, ...),
        for recipe keys; {} for a registered dataset."""
        return {}

    def path(self, key: str) -> Path:
        """The local path of the dataset file `key` (e.g. "topics"), fetched and verified if needed."""
        if key not in self.files:
            raise DatasetLacksError(f"dataset {self.name!r} has no file {key!r}; it has: {', '.join(self.files)}")
        file, member = self.files[key]
        return resolve(file, member)

    def _lacks(self, what: str):
        hint = self.spec.get("lacks", {}).get(what, "")
        provides = ", ".join(self.provides) or "nothing"
        hint = f": {hint}" if hint else ""
        return DatasetLacksError(f"dataset {self.name!r} has no {what}{hint} (it provides: {provides})")

    def topics(self) -> Topics:
        raise self._lacks("topics")

    def qrels(self) -> Qrels:
        raise self._lacks("qrels")

    def docs(self) -> Iterator[dict]:
        raise self._lacks("docs")

    def run(self) -> Run | None:
        """Candidate rankings shipped with the dataset (with their texts), or None when it ships none."""
        return None

    def pairs(self) -> Iterator[LabelledPair]:
        raise self._lacks("pairs")

    def records(self) -> Iterator[dict]:
        raise self._lacks("records")

    def fetch(self) -> dict[str, Path]:
        """Resolve every file of the dataset into the cache (or find it in the mirror)."""
        return {key: self.path(key) for key in self.files}

    def info(self) -> dict:
        """What the dataset is, provides and counts, and where each of its files comes from and lies now."""
        files = {}
        for key, (file, member) in self.files.items():
            local = locate(file, member) or locate(file)
            files[key] = {"path": file.rel + (f"!{member}" if member else ""), "url": file.url,
                          "sha256": file.sha256, "size": file.size, "local": str(local) if local else None}
        upstream = sorted({f"github.com/{file.repo}@{file.commit}" for file, _ in self.files.values()})
        return {"name": self.name, "description": self.description, "family": self.spec.get("family"),
                "provides": list(self.provides), "rel_level": self.rel_level, "language": self.language,
                "counts": self.spec.get("counts", {}), "upstream": upstream, "files": files,
                "notes": self.spec.get("notes", "")}
