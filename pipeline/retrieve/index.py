"""Building Lucene indexes with Anserini's IndexCollection (the command: pipeline/commands/index.py).

Documents are streamed (from JSONL, TSV such as MS MARCO's collection.tsv, TREC SGML or a registered dataset)
into JSONL part files of CHUNK_DOCS documents in a scratch folder, so memory stays flat whatever the collection
size; Anserini then indexes the parts in parallel (one thread per part) in a child JVM. The index is built under
a temporary name and renamed into place, and `irpipe-index.json` beside it records the source, the document
count and the settings.

A repeated document id is refused (search would return that document twice per query), naming the line of its
second occurrence, unless `duplicates="keep-first"`; so is, before Anserini starts, a document longer than its JSON
reader accepts. A document with no text, which Anserini leaves out, is said and not counted; after Anserini, the
index must hold every other document given (else no index is kept): pipeline/retrieve/index_checks.py. Ctrl-C or
SIGTERM stops the Anserini child (and reaps it: the signals are held while it is being started, so there always is
a handle to stop it by) and removes the scratch folder; a scratch folder whose process was killed outright is swept
by the next build beside it. A full, read-only or forbidden disk -- met by the part files or by Anserini (its log
says so) -- is an OutputError (exit 2) naming the index, the scratch folder removed.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections import deque
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from pipeline import java
from pipeline.data.files import (INDEX_METADATA, atomic_write, cache_root, output_error, read_index_metadata,
                                 scratch_prefix, sweep_stale)
from pipeline.data import reuse as cache_reuse  # (build_index has a `reuse` flag of its own)
from pipeline.data.locks import file_lock
from pipeline.errors import ConfigError, InputError
from pipeline.log import logger, peak_rss_mib, progress
from pipeline.retrieve.index_checks import (ANSERINI_ERROR, IndexingError, Locate, check_indexed, check_lengths,
                                            is_blank, warn_empty)
from pipeline.retrieve.lucene import SEGMENTERS, LuceneIndex

CHUNK_DOCS = 200_000
_PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h): the signal a process gets when its parent dies
_PROGRESS = re.compile(r"files completed|documents indexed in")
# what Anserini (Java) prints when it cannot write the index: the errno it stands for
_JAVA_WRITE_ERRORS = {"No space left on device": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT,
                      "Read-only file system": errno.EROFS, "Permission denied": errno.EACCES}
SCRATCH = "irpipe-index"  # scratch folders `.irpipe-index.PID.*` beside the index, swept when their process is gone
DUPLICATES = ("refuse", "keep-first")  # what to do with a repeated document id
# How a Chinese dataset's own index splits text into terms: jieba words (indexed pre-tokenized, queries cut the
# same way) or Lucene's CJK bigrams. jieba is the default: better on LCQMC question retrieval (eval/KEYWORDS.md).
CHINESE_TERMS = ("jieba", "bigram")
DEFAULT_CHINESE_TERMS = "jieba"
LANGUAGES = ("en", "zh", "ar", "bn", "de", "es", "fa", "fi", "fr", "hi", "id", "ja", "ko", "ru", "sw", "te", "th")


def _write_parts(docs: Iterable[dict], folder: Path, source: str, locate: Locate | None = None,
                 segment: Callable[[str], str] | None = None) -> tuple[array, dict[int, str]]:
    """Stream docs into part-NNNNN.jsonl files; returns a 64-bit hash of each document id, in order (8 bytes a
    document, for the duplicate check), and the ids of the documents with no text by position. With `segment`, the
    indexed `contents` is the segmented text and the original is kept in the stored raw record as `text`. A document
    too long for Anserini is an InputError (check_lengths)."""
    hashes, blank, part, handle = array("q"), {}, 0, None
    try:
        for doc in progress(docs, desc="reading documents", unit="doc"):
            if len(hashes) % CHUNK_DOCS == 0:
                if handle:
                    handle.close()
                handle = open(folder / f"part-{part:05d}.jsonl", "w", encoding="utf-8")
                part += 1
            record = {"id": doc["id"], "contents": doc["contents"]}
            if segment is not None:
                record = {"id": doc["id"], "contents": segment(doc["contents"]), "text": doc["contents"]}
            check_lengths(record, len(hashes), source, locate, segment is not None)
            if is_blank(record):
                blank[len(hashes)] = doc["id"]
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            hashes.append(hash(doc["id"]))
    finally:
        if handle:
            handle.close()
    return hashes, blank


def _repeated_ids(parts: Path, hashes: array) -> list[tuple[str, int, int]]:
    """(document id, position of its first occurrence, position of a later one) for each repeated id, positions
    0-based in reading order. Sorting the hashes finds candidates in memory; only then are the parts re-read."""
    values = np.frombuffer(hashes, dtype=np.int64)
    ordered = np.sort(values)
    suspects = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
    if suspects.size == 0:
        return []
    wanted = set(np.flatnonzero(np.isin(values, suspects)).tolist())
    first, repeats = {}, []
    for position, record in enumerate(_part_records(parts)):
        if position in wanted:
            doc_id = record["id"]
            if doc_id in first:
                repeats.append((doc_id, first[doc_id], position))
            else:
                first[doc_id] = position
    return repeats


def _part_records(parts: Path) -> Iterator[dict]:
    for part in sorted(parts.glob("part-*.jsonl")):
        with open(part, encoding="utf-8") as handle:
            yield from (json.loads(line) for line in handle)


def _drop_documents(parts: Path, positions: set[int]) -> None:
    """Rewrite the part files without the documents at `positions` (reading order)."""
    position = 0
    for part in sorted(parts.glob("part-*.jsonl")):
        with open(part, encoding="utf-8") as handle:
            lines = handle.readlines()
        kept = [line for offset, line in enumerate(lines, start=position) if offset not in positions]
        position += len(lines)
        if len(kept) != len(lines):
            part.write_text("".join(kept), encoding="utf-8")


def _check_duplicates(parts: Path, hashes: array, duplicates: str, source: str, locate: Locate | None) -> set[int]:
    """Refuse repeated document ids (search would return such a document twice per query), naming the second
    occurrence; with duplicates="keep-first", drop the later ones with a warning. Returns the positions dropped."""
    repeats = _repeated_ids(parts, hashes)
    if not repeats:
        return set()
    doc_id, first, again = repeats[0]
    if duplicates != "keep-first":
        what = f"document id {doc_id!r} occurs again ({len(repeats)} later occurrence(s) of repeated ids in all)"
        hint = "make the ids unique, or pass --duplicates keep-first to index the first occurrence only"
        if locate is not None:
            (file, line), (first_file, first_line) = locate(again), locate(first)
            raise InputError(file, f"{what}; first on line {first_line}" +
                             (f" of {first_file}" if first_file != file else "") + f": {hint}", line, "id")
        raise InputError(source, f"{what}: documents {first + 1} and {again + 1}: {hint}", field="id")
    dropped = {position for _, _, position in repeats}
    _drop_documents(parts, dropped)
    logger.warning("%s: %d document(s) with a repeated id left out (kept the first occurrence), e.g. %r",
                   source, len(repeats), doc_id)
    return dropped


def _run_anserini(parts: Path, target: Path, threads: int, language: str, pretokenized: bool,
                  store_positions: bool, store_docvectors: bool, store_raw: bool,
                  memory_buffer: int) -> tuple[int, str | None]:
    """Run IndexCollection in a child JVM whose heap is bounded by the RAM buffer; returns its peak RSS in MB and the
    first error it logged about a document or part file it skipped (None: none)."""
    command = [str(java.java_executable()), *java.jvm_options(), f"-Xmx{2 * memory_buffer + 512}m", "-cp", str(java.anserini_jar()),
               "io.anserini.index.IndexCollection", "-collection", "JsonCollection",
               "-generator", "DefaultLuceneDocumentGenerator", "-input", str(parts), "-index", str(target),
               "-threads", str(threads), "-memoryBuffer", str(memory_buffer)]
    command += ["-storePositions"] * store_positions + ["-storeDocvectors"] * store_docvectors + ["-storeRaw"] * store_raw
    if pretokenized:
        command.append("-pretokenized")
    elif language != "en":
        command += ["-language", language]
    logger.debug("running %s", " ".join(command))
    tail: deque[str] = deque(maxlen=30)
    child, skipped = None, None
    try:
        with _signals_held():  # a Ctrl-C or SIGTERM while Popen runs is raised once `child` is set, so it is stopped
            child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     preexec_fn=_terminated_with(os.getpid()) if sys.platform == "linux" else None)
        with child.stdout:
            for line in child.stdout:
                tail.append(line.rstrip())
                skipped = skipped or next(iter(ANSERINI_ERROR.findall(line)), None)
                # Anserini reports its progress per input file ("... files completed, N documents indexed")
                level = logging.INFO if _PROGRESS.search(line) else logging.DEBUG
                logger.log(level, "anserini: %s", line.rstrip().split(" - ", 1)[-1])
        _, status, usage = os.wait4(child.pid, 0)
    except BaseException:  # Ctrl-C, SIGTERM (pipeline.cli.Terminated): the child goes too, before its folder
        if child is not None:
            with _signals_held():  # a second Ctrl-C waits until the child is stopped and reaped
                _stop(child)
        raise
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0 or not any(target.glob("segments_*")):
        log = "\n".join(tail)
        for reason, number in _JAVA_WRITE_ERRORS.items():  # a full or read-only disk: the user's to fix (exit 2)
            if reason in log:
                raise OSError(number, f"Anserini could not write the index: {reason}")
        raise IndexingError(f"Anserini IndexCollection failed (exit {child.returncode}):\n" + "\n".join(tail))
    return usage.ru_maxrss // 1024, skipped


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM noted but not raised inside the block, then raised again (to the handlers from before) as
    it ends: an interrupted block cannot leave a half-started or unreaped child behind. Main thread only (Python
    runs signal handlers there); elsewhere a plain block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {number: signal.signal(number, lambda signum, frame: caught.append(signum)) for number in held}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for number in caught[:1]:
            signal.raise_signal(number)


def _terminated_with(parent: int) -> Callable[[], None]:
    """For the child, before it runs Java: the kernel sends it SIGTERM when irpipe dies, even by SIGKILL, when no
    handler of ours can stop it (Linux prctl PR_SET_PDEATHSIG); a parent already gone by then ends it at once."""
    def arrange() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)
    return arrange


def _stop(child: subprocess.Popen, grace: float = 5.0) -> None:
    """Terminate the child JVM, killing it if it has not exited after `grace` seconds, and reap it."""
    child.terminate()
    try:
        child.wait(grace)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
    logger.info("stopped the Anserini indexer (pid %d)", child.pid)


def build_index(docs: Iterable[dict], index_dir: str | Path, source: str, threads: int = 1, language: str = "en",
                pretokenized: bool = False, store_positions: bool = True, store_docvectors: bool = True,
                store_raw: bool = True, overwrite: bool = False, memory_buffer: int = 1024,
                segmenter: str | None = None, duplicates: str = "refuse",
                locate: Locate | None = None, reuse: bool = False) -> dict:
    """Index `docs` ({"id", "contents"} dicts, streamed) into `index_dir`; returns the recorded metadata.

    `segmenter="jieba"` indexes jieba-segmented text pre-tokenized (whitespace analyzer); searches then segment
    queries the same way (the metadata records the segmenter). A repeated document id is an InputError
    (`duplicates="refuse"`, naming its file and line when `locate(position) -> (file, line)` is given) or its later
    occurrences are left out (`duplicates="keep-first"`).

    The build holds the index's lock (`.NAME.lock` beside it, pipeline/data/locks.py): a second build of the same
    folder waits for the first, then finds its index there and refuses it without `overwrite` (or, with `reuse`,
    returns its metadata: the cache's indexes)."""
    index_dir = Path(index_dir)
    if duplicates not in DUPLICATES:
        raise ConfigError(f"duplicates must be one of {', '.join(DUPLICATES)}, got {duplicates!r}")
    if language not in LANGUAGES:
        raise ConfigError(f"unsupported index language {language!r}; choose one of {', '.join(LANGUAGES)}")
    segment = None
    if segmenter is not None:
        if segmenter not in SEGMENTERS:
            raise ConfigError(f"unknown segmenter {segmenter!r}; choose one of {', '.join(SEGMENTERS)}")
        from pipeline.retrieve.segment import segment

        pretokenized = True
    with file_lock(index_dir, f"building index {index_dir}"):  # two builds of one index take turns
        if reuse and read_index_metadata(index_dir).get("documents"):
            return read_index_metadata(index_dir)  # built by another process while this one waited
        if index_dir.exists() and not overwrite:
            raise ConfigError(f"{index_dir} already exists: pass --overwrite to replace it")
        start = time.perf_counter()
        try:  # a full, read-only or forbidden place: exit 2 naming the index (the scratch folder goes)
            index_dir.parent.mkdir(parents=True, exist_ok=True)
            sweep_stale(index_dir.parent, SCRATCH)
            with tempfile.TemporaryDirectory(prefix=scratch_prefix(SCRATCH), dir=index_dir.parent) as scratch:
                parts, target = Path(scratch) / "parts", Path(scratch) / "index"
                parts.mkdir()
                hashes, blank = _write_parts(docs, parts, source, locate, segment)
                if not hashes:
                    raise ConfigError(f"no documents to index from {source}")
                dropped = _check_duplicates(parts, hashes, duplicates, source, locate)
                empty = [doc_id for position, doc_id in blank.items() if position not in dropped]
                count = len(hashes) - len(dropped) - len(empty)
                if empty:
                    warn_empty(source, empty, count)
                logger.info("indexing %d documents with Anserini (%d threads)", count, threads)
                java_peak_mb, skipped = _run_anserini(parts, target, threads, language, pretokenized,
                                                      store_positions, store_docvectors, store_raw, memory_buffer)
                check_indexed(target, count, _part_records(parts), dropped, source, locate, skipped)
                metadata = {"source": source, "documents": count, "language": language, "pretokenized": pretokenized,
                            "store_positions": store_positions, "store_docvectors": store_docvectors,
                            "store_raw": store_raw,
                            "threads": threads, "memory_buffer_mb": memory_buffer, "anserini": java.anserini_jar().name,
                            "seconds": round(time.perf_counter() - start, 2),
                            "peak_rss_mb": {"python": peak_rss_mib(),
                                            "java": java_peak_mb},
                            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                if segmenter is not None:
                    metadata["segmenter"] = segmenter
                if empty:
                    metadata["empty_documents"] = len(empty)  # given, with no text: not in the index
                with atomic_write(target / INDEX_METADATA) as out:
                    json.dump(metadata, out, indent=2)
                if index_dir.exists():
                    shutil.rmtree(index_dir)
                os.replace(target, index_dir)
        except OSError as error:
            raise output_error(index_dir, error) or error from None
    logger.info("index %s: %d documents in %.1fs", index_dir, count, metadata["seconds"])
    return metadata


def dataset_index(dataset, threads: int = 2, segmenter: str | None = None) -> Path:
    """The cached index of a dataset's corpus, built on first use (`segmenter`: see build_index); a local dataset
    may name its own prebuilt index (`index_dir`) and keys its cached one by its corpus checksum (`index_key`)."""
    if dataset.index_dir is not None and segmenter is None:
        return Path(dataset.index_dir)
    key = dataset.index_key
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", key) + (f".{segmenter}" if segmenter else "")
    index_dir = cache_root() / "indexes" / safe
    if read_index_metadata(index_dir).get("documents"):
        cache_reuse.note("indexes", index_dir)
        return index_dir
    language = dataset.language
    logger.info("building the index of %s at %s (first use)", dataset.name, index_dir)
    build_index(dataset.docs(), index_dir, source=f"dataset:{dataset.name}", threads=threads, language=language,
                overwrite=True, segmenter=segmenter, reuse=True)  # built meanwhile by another process: reused
    cache_reuse.made(index_dir)
    return index_dir


def dataset_index_for(dataset, segment: str | None = None) -> Path:
    """The index a dataset is searched with (built on first use); for a Chinese dataset, of jieba words (the
    default) or CJK bigrams (`segment="bigram"`)."""
    if segment is not None and dataset.language != "zh":
        raise ConfigError(f"segment={segment} is for Chinese datasets; {dataset.name} is {dataset.language}",
                          field="segment")
    segment = segment or (DEFAULT_CHINESE_TERMS if dataset.language == "zh" else None)
    return dataset_index(dataset, segmenter="jieba" if segment == "jieba" else None)


@functools.lru_cache(maxsize=8)
def open_index(index_dir: str, language: str | None = None) -> LuceneIndex:
    """An index opened for search and document lookup; it stays open for the life of the process (one JVM)."""
    return LuceneIndex(index_dir, language)
