"""Stored document encodings of a late-interaction model (`irpipe encode`), and scoring with them.

A store is a folder of shards, ColBERT's way: the rows of all documents of a shard in one raw array of fixed-size
records (the codec, pipeline/rerank/codecs.py, says how a row is kept: fp32, fp16, int8, residual2, residual1), the
docid -> (offset, rows) map beside it, and a manifest naming the model that made it, each file's size and sha256,
and its own checksum (of the rest, checked on every read; pipeline/rerank/store_manifest.py):

    STORE/manifest.json       {"format": 2, "model": "addax", "model_digest": sha1, "dtype": "residual2", "dims": 384,
                               "row_bytes": 98, "count": documents, "rows": rows, "command": "irpipe encode ... (no --output)",
                               "codec": {"file": "codec.safetensors", "bytes", "sha256", "centroids", "sample_rows"},
                               "shards": [{"name", "count", "rows", "bin": {"bytes", "sha256"}, "ids": {...}}],
                               "checksum": "sha256:..."}
    STORE/codec.safetensors   residual<b>: centroids (k, d), bucket cutoffs (d, 2^b - 1) and weights (d, 2^b)
    STORE/shard-00000.bin     (rows, row_bytes) uint8 records, memory-mapped on read, decoded per document
    STORE/shard-00000.ids     docid<TAB>offset<TAB>rows, one line per document

The residual codebook is trained when the store is made, on the rows of a sample of the documents to encode (up to
`codec_sample`, evenly spread), and kept for good: a resumed encode compresses with the same codebook.

Integrity: opening a store checks every listed file's size; a shard's sha256 is checked the first time a process reads
it (the codec's at open). A damaged file is an InputError (exit 2) naming it and the `irpipe encode` command (recorded
in the manifest) whose rerun re-encodes that shard alone: `irpipe encode` checks the listed shards the same way, drops a
damaged one and encodes its documents again. A damaged manifest is an InputError naming it. A format-1 store (fp16/fp32,
made before the checksums) is read with its sizes checked; encoding into one is refused.

Writing is resumable and atomic per shard: a shard's files are written under temporary names and renamed, then the
manifest, rewritten atomically, lists it; a shard the manifest does not list does not exist. A rerun of the same command
skips the documents already stored; a store of another model, or another dtype, is refused. Two encoders into one store
take turns (a file lock, pipeline/data/locks.py, around planning and writing; the second reads the manifest after the
first is done and encodes only what is still missing). The manifest's digest joins the reranking stage's cache
fingerprint. On a Ray cluster (pipeline/engine/) shards finish out of order: each is written as it comes and listed once
those before it are; a resumed job keeps a written, unlisted shard whose docids are those it planned for it.
"""
from __future__ import annotations

import contextlib
import contextvars
import itertools
import os
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
import torch

from pipeline.data.files import write_by_path
from pipeline.data.ids import check_id, id_problem
from pipeline.data.locks import file_lock
from pipeline.errors import ConfigError, InputError
from pipeline.log import logger
from pipeline.rerank.codecs import Codec, check_dtype, dims_of, needs_training, train_codec
from pipeline.rerank.store_manifest import (CODEC, FORMAT, MANIFEST, check_layout, check_store_folder, file_record,
                                            manifest_digest, read_manifest, save_manifest, sealed, store_codec,
                                            verify_file)
from pipeline.rerank.model import LateInteraction
from pipeline.rerank.pairs import Pair
from pipeline.rerank.batching import PREFETCH, batch_limits, group_cuts, group_order, in_input_order, run_batches
from pipeline.rerank.scoring import autocast, resolve_amp

DTYPES = {"fp16": np.float16, "fp32": np.float32}  # pipeline/rerank/on_cluster.py: a resumed float store's dims
CODEC_SAMPLE = 2048
# the `irpipe encode` command (less --output) that a new store records, set by pipeline/commands/encode.py for the
# local and the ray engine's path alike: a damaged shard's error gives it, with --output, as the rerun
ENCODE_COMMAND: contextvars.ContextVar[str | None] = contextvars.ContextVar("encode_command", default=None)  # documents whose rows train a residual codebook
Encoder = Callable[[list[str]], list[torch.Tensor]]   # texts -> each one's (rows, dims) float32 encoding

class EncodingStore:
    """A store opened for reading: `get(docids)` gives each stored document's (rows, dims) float32 tensor."""

    def __init__(self, directory: Path, manifest: dict):
        self.directory, self.manifest = directory, manifest
        self._locations: dict[str, tuple[int, int, int]] | None = None  # read on first use, not for `digest`
        self._arrays: dict[int, np.ndarray] = {}
        self._codec: Codec | None = None

    @property
    def _where(self) -> dict[str, tuple[int, int, int]]:
        """docid -> (shard, offset, rows), from the shards' .ids files."""
        if self._locations is None:
            self._locations = {}
            for number, shard in enumerate(self.manifest["shards"]):
                ids = verify_file(self.directory, self.manifest, shard, "ids")
                for line_number, line in enumerate(ids.read_text(encoding="utf-8").splitlines(), 1):
                    parts = line.split("\t")
                    if len(parts) != 3 or not (parts[1].isdigit() and parts[2].isdigit()) or \
                            int(parts[1]) + int(parts[2]) > shard["rows"]:
                        raise InputError(ids, f"expected docid<TAB>offset<TAB>rows within the shard's {shard['rows']} "
                                         "rows", line=line_number)
                    check_id(parts[0], ids, line_number, "docid", "document id")  # the id rule (pipeline/data/ids.py)
                    self._locations[parts[0]] = (number, int(parts[1]), int(parts[2]))
        return self._locations

    @classmethod
    def open(cls, directory: str | Path, model: str, model_digest: str) -> "EncodingStore":
        """The store at `directory`, refused unless `model` with weights `model_digest` made it; every file's size
        checked against the manifest."""
        directory = Path(directory)
        manifest = read_manifest(directory)
        if manifest is None:
            raise ConfigError(f"store={directory}: not an encoding store (no {MANIFEST}); make one with "
                              f"`irpipe encode --model ... --output {directory}`", field="store")
        if (manifest["model"], manifest["model_digest"]) != (model, model_digest):
            raise ConfigError(f"store={directory} holds encodings of another model ({manifest['model']}, weights "
                              f"{manifest['model_digest'][:12]}); this stage's model is {model} "
                              f"({model_digest[:12]}): encode again with this model", field="store")
        for shard in manifest["shards"]:
            for kind in ("bin", "ids"):
                verify_file(directory, manifest, shard, kind, content=False)
        store = cls(directory, manifest)
        check_layout(directory, manifest, store.codec)  # a residual codebook read and checked; sizes agree
        return store

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, docid: str) -> bool:
        return docid in self._where

    def digest(self) -> str:
        return manifest_digest(self.manifest)

    @property
    def codec(self) -> Codec:
        if self._codec is None:
            self._codec = store_codec(self.directory, self.manifest)
        return self._codec

    def _array(self, number: int) -> np.ndarray:
        if number not in self._arrays:
            shard = self.manifest["shards"][number]
            path = verify_file(self.directory, self.manifest, shard, "bin")
            self._arrays[number] = np.memmap(path, mode="r", dtype=np.uint8,
                                             shape=(shard["rows"], self.codec.row_bytes))
        return self._arrays[number]

    def get(self, docid: str) -> torch.Tensor:
        number, offset, rows = self._where[docid]
        return torch.from_numpy(self.codec.decode(self._array(number)[offset:offset + rows]))  # a copy, float32


@contextlib.contextmanager
def store_lock(directory: str | Path) -> Iterator[None]:
    """Held around planning and writing: two encoders into one store take turns."""
    with file_lock(Path(directory) / MANIFEST, f"encoding store {directory}"):
        yield


def encode_texts(model: LateInteraction, texts: list[str], side: str, batch_size: int | None = None, device=None,
                 amp: str | None = "auto", desc: str = "encode", batch_tokens: int | None = None,
                 prefetch: int = PREFETCH, groups: Sequence | None = None) -> list[torch.Tensor]:
    """Each text's encoding (side "document" or "query"), float32 on the CPU, in input order: the batched path of
    pipeline/rerank/batching.py (by the model's `text_lengths`; no batch mixes two of `groups`, one per text, None:
    one group), under inference_mode and autocast."""
    device = device if device is not None else torch.device("cpu")
    batch_size, batch_tokens = batch_limits(device, batch_size, batch_tokens)
    lengths, groups = model.text_lengths(texts, side), [0] * len(texts) if groups is None else groups
    order = group_order(groups, lengths, texts)  # ties by text: a text's batch and row whatever order texts come in
    cuts = group_cuts([groups[i] for i in order], [lengths[i] for i in order], batch_size, batch_tokens)

    def compute(prepared) -> tuple[torch.Tensor, list[int]]:
        encodings = model.encode_prepared(prepared, side)                          # B x (rows_i, dims), on device
        rows = [int(e.shape[0]) if e.dim() > 1 else 0 for e in encodings]          # 0: a vector, (dims,)
        flat = torch.cat([e if e.dim() > 1 else e[None] for e in encodings]).float()
        return flat.to("cpu", non_blocking=True), rows                             # pinned on the host, from CUDA

    with torch.inference_mode(), autocast(device, resolve_amp(amp, device)):
        pieces = run_batches(texts, order, cuts, lambda chunk: model.prepare_texts(chunk, side), compute, device,
                             desc=desc, unit="text", prefetch=prefetch, lengths=lengths)
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # the copies to the host have landed
    out: list[torch.Tensor | None] = [None] * len(texts)
    for indices, (flat, rows) in pieces:
        for i, n, encoding in zip(indices, rows, flat.split([max(1, n) for n in rows])):
            out[i] = encoding if n else encoding[0]
    return out


def write_store(directory: str | Path, model: LateInteraction, model_digest: str,
                documents: Iterable[tuple[str, str]], dtype: str = "fp16", shard_size: int = 10_000,
                batch_size: int | None = None, device: torch.device = torch.device("cpu"),
                amp: str | None = "auto", batch_tokens: int | None = None, codec_sample: int = CODEC_SAMPLE,
                centroids: int | None = None, command: str | None = None) -> dict:
    """Encode `documents` ((docid, text) pairs) into the store at `directory`, resuming what is there."""
    model.eval().to(device)

    def encode(texts: list[str], desc: str = "encode") -> list[torch.Tensor]:
        return encode_texts(model, texts, "document", batch_size, device, amp, desc, batch_tokens)

    return write_encoded(directory, model.name, model_digest, documents, encode, dtype, shard_size, codec_sample,
                         centroids, command)


def write_encoded(directory: str | Path, model_name: str, model_digest: str, documents: Iterable[tuple[str, str]],
                  encode: Encoder, dtype: str = "fp16", shard_size: int = 10_000, codec_sample: int = CODEC_SAMPLE,
                  centroids: int | None = None, command: str | None = None) -> dict:
    """`write_store` with the documents' encoder given: `encode(texts)` -> each text's (rows, dims) float32."""
    directory = Path(directory)
    with store_lock(directory):
        manifest, chunks = plan_store(directory, model_name, model_digest, documents, dtype, shard_size, encode,
                                      codec_sample, centroids, command)
        for chunk in chunks:
            [name] = shard_names(manifest, 1)  # numbered after the shard just listed
            encodings = encode([text for _, text in chunk], f"encode {name}")
            rows = torch.cat(encodings).cpu().float().numpy()
            save_shard(directory, manifest, name, [docid for docid, _ in chunk], rows, [len(e) for e in encodings])
            list_shard(directory, manifest, name, len(chunk), rows)
    return manifest


def plan_store(directory: Path, model_name: str, model_digest: str, documents: Iterable[tuple[str, str]],
               dtype: str, shard_size: int, encode: Encoder | None = None, codec_sample: int = CODEC_SAMPLE,
               centroids: int | None = None,
               command: str | None = None) -> tuple[dict, Iterator[list[tuple[str, str]]]]:
    """The store's manifest (read, or new) and the shards still to encode: the documents not stored yet, in input
    order, `shard_size` to a shard, each read from `documents` when it is needed (one shard's texts in memory, not
    the collection's; a residual codebook still to train needs them all first, for its sample). Run under
    `store_lock`. A store of another model or dtype is refused; a listed shard whose files are damaged is dropped
    (its documents are encoded again); a residual codebook is trained on the rows of a sample of the documents
    (`encode`) when the store has none yet."""
    check_dtype(dtype)
    check_store_folder(directory)  # a folder of other files is refused
    directory.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(directory) or {"format": FORMAT, "model": model_name, "model_digest": model_digest,
                                            "dtype": dtype, "dims": None, "row_bytes": None, "count": 0, "rows": 0,
                                            "command": command or ENCODE_COMMAND.get(), "codec": None, "shards": []}
    if manifest["format"] != FORMAT:
        raise ConfigError(f"{directory} is a format-{manifest['format']} store (made before stores carried "
                          f"checksums and codecs): encode into a new --output folder, or remove it", field="output")
    if (manifest["model"], manifest["model_digest"], manifest["dtype"]) != (model_name, model_digest, dtype):
        raise ConfigError(f"{directory} holds {manifest['dtype']} encodings of another model ({manifest['model']}, "
                          f"{manifest['model_digest'][:12]}); choose another --output folder", field="output")
    for stale in directory.glob(".shard-*.tmp"):  # a shard interrupted before the manifest listed it
        stale.unlink()
    if manifest["shards"]:
        drop_damaged(directory, manifest)
        check_layout(directory, manifest, store_codec(directory, manifest))
        if not sealed(directory):  # a store from before manifests carried their checksum, its shards sound: seal it
            save_manifest(directory, manifest)
    stored = set(EncodingStore(directory, manifest)._where)
    if stored:
        logger.info("%s: %d documents already stored; encoding the others", directory, len(stored))
    items = unstored(documents, stored)
    if needs_training(dtype) and manifest["codec"] is None:
        items = list(items)  # the codebook's sample is spread over all of them
        if items:
            if encode is None:
                raise ConfigError(f"dtype={dtype} trains its codebook on encoded documents: give an encoder")
            train_store_codec(directory, manifest, items, encode, codec_sample, centroids)
    return manifest, shards(iter(items), shard_size)


def unstored(documents: Iterable[tuple[str, str]], stored: set[str]) -> Iterator[tuple[str, str]]:
    """The documents not in `stored`, in input order, each docid once (its first text), read as they are needed."""
    for docid, text in documents:
        if docid not in stored:
            stored.add(docid)
            yield docid, text


def shards(items: Iterator[tuple[str, str]], shard_size: int) -> Iterator[list[tuple[str, str]]]:
    """`items` cut into lists of `shard_size` (the last: the rest), each read when it is needed."""
    while shard := list(itertools.islice(items, shard_size)):
        yield shard


def drop_damaged(directory: Path, manifest: dict) -> None:
    """Unlist the shards whose files are missing or differ from their records (size or sha256), and remove them."""
    kept = []
    for shard in manifest["shards"]:
        try:
            for kind in ("bin", "ids"):
                verify_file(directory, manifest, shard, kind)
            kept.append(shard)
        except InputError as error:
            logger.warning("%s; encoding its %d documents again", str(error).split(";")[0], shard["count"])
            for kind in ("bin", "ids"):
                (directory / f"{shard['name']}.{kind}").unlink(missing_ok=True)
            manifest["count"] -= shard["count"]
            manifest["rows"] -= shard["rows"]
    if len(kept) < len(manifest["shards"]):
        manifest["shards"] = kept
        save_manifest(directory, manifest)


def train_store_codec(directory: Path, manifest: dict, items: list[tuple[str, str]], encode: Encoder,
                      codec_sample: int, centroids: int | None) -> None:
    """Train the residual codebook on the rows of up to `codec_sample` of `items`, evenly spread; write it."""
    from safetensors.numpy import save_file

    step = max(1, len(items) / max(1, codec_sample))
    sample = [items[int(i * step)][1] for i in range(min(len(items), max(1, codec_sample)))]
    rows = torch.cat(encode(sample, "codebook sample")).cpu().float().numpy()
    codec = train_codec(manifest["dtype"], rows, centroids)
    tmp = directory / f".shard-codec.{os.getpid()}.tmp"
    save_file(codec.arrays(), str(tmp))
    os.replace(tmp, directory / CODEC)
    manifest["dims"], manifest["row_bytes"] = codec.dims, codec.row_bytes
    manifest["codec"] = {"file": CODEC, **file_record(directory / CODEC), "centroids": len(codec.centroids),
                         "sample_documents": len(sample), "sample_rows": len(rows)}
    logger.info("%s: %s codebook of %d centroids trained on %d rows of %d documents", directory, manifest["dtype"],
                len(codec.centroids), len(rows), len(sample))
    save_manifest(directory, manifest)


def shard_name(number: int) -> str:
    return f"shard-{number:05d}"


def shard_names(manifest: dict, count: int) -> list[str]:
    """Names for `count` new shards, numbered after every listed one."""
    start = 1 + max((int(s["name"].rpartition("-")[2]) for s in manifest["shards"]), default=-1)
    return [shard_name(start + number) for number in range(count)]


def encode_shard(model: LateInteraction, texts: list[str], dtype: str, batch_size: int | None, device: torch.device,
                 amp: str | None = "auto", desc: str = "encode",
                 batch_tokens: int | None = None) -> tuple[np.ndarray, list[int]]:
    """A shard's rows ((rows, dims) float32, documents one after another; `save_shard` compresses them as the
    store's codec says) and each document's number of rows."""
    encodings = encode_texts(model, texts, "document", batch_size, device, amp, desc, batch_tokens)
    return torch.cat(encodings).cpu().float().numpy(), [int(e.shape[0]) for e in encodings]


def save_shard(directory: Path, manifest: dict, name: str, docids: list[str], rows: np.ndarray,
               lengths: list[int]) -> None:
    """Write a shard's files, each atomically (the shard exists only once `list_shard` lists it): its rows
    (float32 (rows, dims)) compressed by the store's codec."""
    manifest["dims"] = manifest["dims"] or int(rows.shape[1])
    if rows.shape[1] != manifest["dims"]:
        raise ConfigError(f"{directory}: encodings of {rows.shape[1]} dims, the store holds {manifest['dims']}")
    codec = store_codec(directory, manifest)
    manifest["row_bytes"] = codec.row_bytes
    lines, offset = [], 0
    for docid, length in zip(docids, lengths):
        if id_problem(docid, "document id") is not None:  # the id rule: no tab, newline or control character
            raise ConfigError(f"{id_problem(docid, 'document id')}: it cannot be stored")
        lines.append(f"{docid}\t{offset}\t{length}\n")
        offset += length
    records = codec.encode(rows)
    for suffix, write in ((".bin", lambda path: records.tofile(path)),
                          (".ids", lambda path: Path(path).write_text("".join(lines), encoding="utf-8"))):
        # a full or read-only disk: exit 2 naming the shard file (and the bytes needed), its scratch removed
        write_by_path(directory / f"{name}{suffix}", write, needed=records.nbytes if suffix == ".bin" else None)


def saved_shard(directory: Path, name: str) -> tuple[list[str], int] | None:
    """The docids and number of rows of a shard's files, listed or not (None when it has none): a resumed engine
    job compares them with its plan to keep a shard that was written but not yet listed."""
    ids, data = directory / f"{name}.ids", directory / f"{name}.bin"
    if not ids.is_file() or not data.is_file():
        return None
    lines = [line.split("\t") for line in ids.read_text(encoding="utf-8").splitlines()]
    return [parts[0] for parts in lines], sum(int(parts[-1]) for parts in lines)


def list_shard(directory: Path, manifest: dict, name: str, count: int, rows: np.ndarray | int) -> None:
    """Add a written shard, with its files' sizes and sha256, to the manifest, rewritten atomically: from then on
    the shard exists."""
    rows = rows if isinstance(rows, int) else int(rows.shape[0])
    records = {kind: file_record(directory / f"{name}.{kind}") for kind in ("bin", "ids")}
    if manifest["dims"] is None and rows:  # a resumed engine job's first shard, written by the run before
        manifest["row_bytes"] = records["bin"]["bytes"] // rows
        manifest["dims"] = dims_of(manifest["dtype"], manifest["row_bytes"])
    manifest["shards"].append({"name": name, "count": count, "rows": rows, **records})
    manifest["count"] += count
    manifest["rows"] += rows
    save_manifest(directory, manifest)


def score_late_interaction(model: LateInteraction, pairs: list[Pair], store: EncodingStore | None,
                           batch_size: int | None, device: torch.device, amp: str | None = "auto",
                           desc: str = "scoring", batch_tokens: int | None = None) -> list[float]:
    """Scores of `pairs`: documents from `store`, the rest encoded on the fly (counted) in batches of one query's
    candidates (a document of two queries once for each), so a score never depends on other queries; each query
    encoded alone; a query's candidates decoded and moved to the device in one block, the scores copied back once."""
    amp = resolve_amp(amp, device, inference=model.auto_bf16) or "none"  # as scoring does (a store's: fp32)
    model.eval().to(device)
    docids, missing = {p.docid for p in pairs}, [p for p in pairs if store is None or p.docid not in store]
    if store is not None:
        on_the_fly = len({p.docid for p in missing})
        (logger.warning if missing else logger.info)("%s: %d of %d documents from the store, %d encoded on the fly",
                                                     desc, len(docids) - on_the_fly, len(docids), on_the_fly)
    fresh = encode_texts(model, [p.text for p in missing], "document", batch_size, device, amp, f"{desc} documents",
                         batch_tokens, groups=[p.qid for p in missing])
    encoded_docs = {(p.qid, p.docid): encoding for p, encoding in zip(missing, fresh)}
    queries = list(dict.fromkeys(p.query for p in pairs))
    encoded = dict(zip(queries, encode_texts(model, queries, "query", batch_size, device, amp, f"{desc} queries",
                                             batch_tokens, groups=range(len(queries)))))
    by_query: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        by_query.setdefault(pair.query, []).append(i)
    pieces = []
    with torch.inference_mode():
        for query, rows in by_query.items():
            candidates = [encoded_docs[key] if key in encoded_docs else store.get(key[1])
                          for key in ((pairs[i].qid, pairs[i].docid) for i in rows)]
            block = torch.cat(candidates).to(device, non_blocking=True)            # (sum of rows, dims): one copy
            values = model.score_encoded(encoded[query].to(device), list(block.split([len(c) for c in candidates])))
            pieces.append((rows, values.float()))
    return in_input_order(pieces, len(pairs)).cpu().tolist()
