"""Building Lucene indexes with Anserini's IndexCollection (the command: pipeline/commands/index.py).

Documents are streamed (from JSONL, TSV such as MS MARCO's collection.tsv, TREC SGML or a registered dataset)
into JSONL part files of CHUNK_DOCS documents in a scratch folder, so memory stays flat whatever the collection
size; Anserini then indexes the parts in parallel (one thread per part) in a child JVM. The index is built under
a temporary name and renamed into place, and `irpipe-index.json` beside it records the source, the document
count and the settings.
"""
from __future__ import annotations

import json
import logging
import os
import re
import resource
import shutil
import subprocess
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Callable, Iterable

from pipeline import java
from pipeline.cache import cache_root
from pipeline.data.files import atomic_write
from pipeline.errors import ConfigError, IrpipeError
from pipeline.log import logger, progress
from pipeline.retrieve.lucene import INDEX_METADATA, SEGMENTERS, read_index_metadata

CHUNK_DOCS = 200_000
_PROGRESS = re.compile(r"files completed|documents indexed in")
LANGUAGES = ("en", "zh", "ar", "bn", "de", "es", "fa", "fi", "fr", "hi", "id", "ja", "ko", "ru", "sw", "te", "th")


class IndexingError(IrpipeError):
    """Anserini's IndexCollection failed; the message carries the end of its log."""


def _write_parts(docs: Iterable[dict], folder: Path, segment: Callable[[str], str] | None = None) -> int:
    """Stream docs into part-NNNNN.jsonl files; returns the number of documents written. With `segment`, the
    indexed `contents` is the segmented text and the original is kept in the stored raw record as `text`."""
    count, part, handle = 0, 0, None
    try:
        for doc in progress(docs, desc="reading documents", unit="doc"):
            if count % CHUNK_DOCS == 0:
                if handle:
                    handle.close()
                handle = open(folder / f"part-{part:05d}.jsonl", "w", encoding="utf-8")
                part += 1
            record = {"id": doc["id"], "contents": doc["contents"]}
            if segment is not None:
                record = {"id": doc["id"], "contents": segment(doc["contents"]), "text": doc["contents"]}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    finally:
        if handle:
            handle.close()
    return count


def _run_anserini(parts: Path, target: Path, threads: int, language: str, pretokenized: bool,
                  store_positions: bool, store_docvectors: bool, store_raw: bool, memory_buffer: int) -> int:
    """Run IndexCollection in a child JVM whose heap is bounded by the RAM buffer; returns its peak RSS in MB."""
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
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with child.stdout:
        for line in child.stdout:
            tail.append(line.rstrip())
            # Anserini reports its progress per input file ("... files completed, N documents indexed")
            level = logging.INFO if _PROGRESS.search(line) else logging.DEBUG
            logger.log(level, "anserini: %s", line.rstrip().split(" - ", 1)[-1])
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0 or not any(target.glob("segments_*")):
        raise IndexingError(f"Anserini IndexCollection failed (exit {child.returncode}):\n" + "\n".join(tail))
    return usage.ru_maxrss // 1024


def build_index(docs: Iterable[dict], index_dir: str | Path, source: str, threads: int = 1, language: str = "en",
                pretokenized: bool = False, store_positions: bool = True, store_docvectors: bool = True,
                store_raw: bool = True, overwrite: bool = False, memory_buffer: int = 1024,
                segmenter: str | None = None) -> dict:
    """Index `docs` ({"id", "contents"} dicts, streamed) into `index_dir`; returns the recorded metadata.

    `segmenter="jieba"` indexes jieba-segmented text pre-tokenized (whitespace analyzer); searches then segment
    queries the same way (the metadata records the segmenter)."""
    index_dir = Path(index_dir)
    if language not in LANGUAGES:
        raise ConfigError(f"unsupported index language {language!r}; choose one of {', '.join(LANGUAGES)}")
    segment = None
    if segmenter is not None:
        if segmenter not in SEGMENTERS:
            raise ConfigError(f"unknown segmenter {segmenter!r}; choose one of {', '.join(SEGMENTERS)}")
        from pipeline.retrieve.segment import segment

        pretokenized = True
    if index_dir.exists() and not overwrite:
        raise ConfigError(f"{index_dir} already exists: pass --overwrite to replace it")
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=".irpipe-index-", dir=index_dir.parent) as scratch:
        parts, target = Path(scratch) / "parts", Path(scratch) / "index"
        parts.mkdir()
        count = _write_parts(docs, parts, segment)
        if count == 0:
            raise ConfigError(f"no documents to index from {source}")
        logger.info("indexing %d documents with Anserini (%d threads)", count, threads)
        java_peak_mb = _run_anserini(parts, target, threads, language, pretokenized, store_positions,
                                     store_docvectors, store_raw, memory_buffer)
        metadata = {"source": source, "documents": count, "language": language, "pretokenized": pretokenized,
                    "store_positions": store_positions, "store_docvectors": store_docvectors, "store_raw": store_raw,
                    "threads": threads, "memory_buffer_mb": memory_buffer, "anserini": java.anserini_jar().name,
                    "seconds": round(time.perf_counter() - start, 2),
                    "peak_rss_mb": {"python": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                                    "java": java_peak_mb},
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        if segmenter is not None:
            metadata["segmenter"] = segmenter
        with atomic_write(target / INDEX_METADATA) as out:
            json.dump(metadata, out, indent=2)
        if index_dir.exists():
            shutil.rmtree(index_dir)
        os.replace(target, index_dir)
    logger.info("index %s: %d documents in %.1fs", index_dir, count, metadata["seconds"])
    return metadata


def dataset_index(dataset, threads: int = 2, segmenter: str | None = None) -> Path:
    """The cached index of a dataset's corpus, built on first use (`segmenter`: see build_index); a local dataset
    may name its own prebuilt index (`index_dir`) and keys its cached one by its corpus checksum (`index_key`)."""
    if getattr(dataset, "index_dir", None) is not None and segmenter is None:
        return Path(dataset.index_dir)
    key = getattr(dataset, "index_key", dataset.name)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", key) + (f".{segmenter}" if segmenter else "")
    index_dir = cache_root() / "indexes" / safe
    if read_index_metadata(index_dir).get("documents"):
        return index_dir
    language = getattr(dataset, "language", "en")
    logger.info("building the index of %s at %s (first use)", dataset.name, index_dir)
    build_index(dataset.docs(), index_dir, source=f"dataset:{dataset.name}", threads=threads, language=language,
                overwrite=True, segmenter=segmenter)
    return index_dir
