"""Stored document encodings of a late-interaction model (`irpipe encode`), and scoring with them.

A store is a folder of shards, ColBERT's way: rows of all documents of a shard in one raw array, the docid ->
(offset, rows) map beside it, and a manifest naming the model that made it:

    STORE/manifest.json       {"format": 1, "model": "biencoder", "model_digest": sha1, "dtype": "float16",
                               "dims": 384, "count": documents, "rows": rows, "shards": [{"name", "count", "rows"}]}
    STORE/shard-00000.bin     (rows, dims) little-endian float16 (or float32), memory-mapped on read
    STORE/shard-00000.ids     docid<TAB>offset<TAB>rows, one line per document

Writing is resumable and atomic per shard: a shard's files are written under temporary names and renamed, then
the manifest, rewritten atomically, lists it; a shard the manifest does not list does not exist. A rerun of the
same command skips the documents already stored; a store of another model, or another dtype, is refused. The
manifest's digest joins the reranking stage's cache fingerprint. On a Ray cluster (pipeline/engine/) shards finish
out of order: each is written as it comes and listed once those before it are; a resumed job keeps a written,
unlisted shard whose docids are those it planned for it.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterable

import numpy as np
import torch

from pipeline.data.files import atomic_write
from pipeline.errors import ConfigError, InputError
from pipeline.log import logger, progress
from pipeline.rerank.model import LateInteraction
from pipeline.rerank.pairs import Pair
from pipeline.rerank.batching import PREFETCH, batch_cuts, batch_limits, in_input_order, length_order, run_batches
from pipeline.rerank.scoring import autocast, resolve_amp

FORMAT = 1
MANIFEST = "manifest.json"
DTYPES = {"fp16": np.float16, "fp32": np.float32}


class EncodingStore:
    """A store opened for reading: `get(docids)` gives each stored document's (rows, dims) float32 tensor."""

    def __init__(self, directory: Path, manifest: dict):
        self.directory, self.manifest = directory, manifest
        self._locations: dict[str, tuple[int, int, int]] | None = None  # read on first use, not for `digest`
        self._arrays: dict[int, np.ndarray] = {}

    @property
    def _where(self) -> dict[str, tuple[int, int, int]]:
        """docid -> (shard, offset, rows), from the shards' .ids files."""
        if self._locations is None:
            self._locations = {}
            for number, shard in enumerate(self.manifest["shards"]):
                ids = self.directory / f"{shard['name']}.ids"
                for line_number, line in enumerate(ids.read_text(encoding="utf-8").splitlines(), 1):
                    parts = line.split("\t")
                    if len(parts) != 3:
                        raise InputError(ids, "expected docid<TAB>offset<TAB>rows", line=line_number)
                    self._locations[parts[0]] = (number, int(parts[1]), int(parts[2]))
        return self._locations

    @classmethod
    def open(cls, directory: str | Path, model: str, model_digest: str) -> "EncodingStore":
        """The store at `directory`, refused unless `model` with weights `model_digest` made it."""
        directory = Path(directory)
        manifest = read_manifest(directory)
        if manifest is None:
            raise ConfigError(f"store={directory}: not an encoding store (no {MANIFEST}); make one with "
                              f"`irpipe encode --model ... --output {directory}`", field="store")
        if (manifest["model"], manifest["model_digest"]) != (model, model_digest):
            raise ConfigError(f"store={directory} holds encodings of another model ({manifest['model']}, weights "
                              f"{manifest['model_digest'][:12]}); this stage's model is {model} "
                              f"({model_digest[:12]}): encode again with this model", field="store")
        return cls(directory, manifest)

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, docid: str) -> bool:
        return docid in self._where

    def digest(self) -> str:
        return manifest_digest(self.manifest)

    def _array(self, number: int) -> np.ndarray:
        if number not in self._arrays:
            shard = self.manifest["shards"][number]
            self._arrays[number] = np.memmap(self.directory / f"{shard['name']}.bin", mode="r",
                                             dtype=DTYPES[self.manifest["dtype"]],
                                             shape=(shard["rows"], self.manifest["dims"]))
        return self._arrays[number]

    def get(self, docid: str) -> torch.Tensor:
        number, offset, rows = self._where[docid]
        return torch.from_numpy(np.array(self._array(number)[offset:offset + rows], dtype=np.float32))  # a copy


def manifest_digest(manifest: dict | None) -> str:
    """What identifies a store's contents: sha1 of its manifest (the shards it lists, the model that made it)."""
    return hashlib.sha1(json.dumps(manifest or {}, sort_keys=True).encode()).hexdigest()


def read_manifest(directory: Path) -> dict | None:
    path = directory / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise InputError(path, f"not a readable store manifest ({error})") from None
    for key in ("model", "model_digest", "dtype", "dims", "shards"):
        if key not in manifest:
            raise InputError(path, "missing", field=key)
    if manifest.get("format") != FORMAT:
        raise InputError(path, f"store format {manifest.get('format')!r}; this irpipe reads {FORMAT}", field="format")
    return manifest


def encode_texts(model: LateInteraction, texts: list[str], side: str, batch_size: int | None = None, device=None,
                 amp: str | None = "auto", desc: str = "encode", batch_tokens: int | None = None,
                 prefetch: int = PREFETCH) -> list[torch.Tensor]:
    """Each text's encoding (side "document" or "query"), float32 on the CPU, in input order: the batched path of
    pipeline/rerank/batching.py (sorted by the model's `text_lengths`, tokenised ahead on a background thread, one
    copy back per batch that does not block, one wait at the end), under inference_mode and autocast."""
    device = device if device is not None else torch.device("cpu")
    batch_size, batch_tokens = batch_limits(device, batch_size, batch_tokens)
    lengths = model.text_lengths(texts, side)
    order = length_order(lengths)
    cuts = list(batch_cuts([lengths[i] for i in order], batch_size, batch_tokens))

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
                amp: str | None = "auto", batch_tokens: int | None = None) -> dict:
    """Encode `documents` ((docid, text) pairs) into the store at `directory`, resuming what is there."""
    directory = Path(directory)
    manifest, chunks = plan_store(directory, model.name, model_digest, documents, dtype, shard_size)
    model.eval().to(device)
    for chunk in chunks:
        name = shard_name(len(manifest["shards"]))
        rows, lengths = encode_shard(model, [text for _, text in chunk], dtype, batch_size, device, amp,
                                     desc=f"encode {name}", batch_tokens=batch_tokens)
        save_shard(directory, manifest, name, [docid for docid, _ in chunk], rows, lengths)
        list_shard(directory, manifest, name, len(chunk), rows)
    return manifest


def plan_store(directory: Path, model_name: str, model_digest: str, documents: Iterable[tuple[str, str]],
               dtype: str, shard_size: int) -> tuple[dict, list[list[tuple[str, str]]]]:
    """The store's manifest (read, or new) and the shards still to encode: the documents not stored yet, in input
    order, `shard_size` to a shard. A store of another model or dtype is refused."""
    if dtype not in DTYPES:
        raise ConfigError(f"dtype={dtype!r}; choose one of {', '.join(DTYPES)}", field="dtype")
    directory.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(directory) or {"format": FORMAT, "model": model_name, "model_digest": model_digest,
                                            "dtype": dtype, "dims": None, "count": 0, "rows": 0, "shards": []}
    if (manifest["model"], manifest["model_digest"], manifest["dtype"]) != (model_name, model_digest, dtype):
        raise ConfigError(f"{directory} holds {manifest['dtype']} encodings of another model ({manifest['model']}, "
                          f"{manifest['model_digest'][:12]}); choose another --output folder", field="output")
    stored = set(EncodingStore(directory, manifest)._where)
    for stale in directory.glob(".shard-*.tmp"):  # a shard interrupted before the manifest listed it
        stale.unlink()
    items = list({docid: text for docid, text in documents if docid not in stored}.items())
    if stored:
        logger.info("%s: %d documents already stored, %d to encode", directory, len(stored), len(items))
    return manifest, [items[start:start + shard_size] for start in range(0, len(items), shard_size)]


def shard_name(number: int) -> str:
    return f"shard-{number:05d}"


def encode_shard(model: LateInteraction, texts: list[str], dtype: str, batch_size: int | None, device: torch.device,
                 amp: str | None = "auto", desc: str = "encode",
                 batch_tokens: int | None = None) -> tuple[np.ndarray, list[int]]:
    """A shard's rows ((rows, dims) in `dtype`, documents one after another) and each document's number of rows."""
    encodings = encode_texts(model, texts, "document", batch_size, device, amp, desc, batch_tokens)
    return torch.cat(encodings).cpu().numpy().astype(DTYPES[dtype]), [int(e.shape[0]) for e in encodings]


def save_shard(directory: Path, manifest: dict, name: str, docids: list[str], rows: np.ndarray,
               lengths: list[int]) -> None:
    """Write a shard's files, each atomically (the shard exists only once `list_shard` lists it)."""
    manifest["dims"] = manifest["dims"] or int(rows.shape[1])
    if rows.shape[1] != manifest["dims"]:
        raise ConfigError(f"{directory}: encodings of {rows.shape[1]} dims, the store holds {manifest['dims']}")
    lines, offset = [], 0
    for docid, length in zip(docids, lengths):
        if "\t" in docid or "\n" in docid:
            raise ConfigError(f"document id {docid!r} holds a tab or newline: it cannot be stored")
        lines.append(f"{docid}\t{offset}\t{length}\n")
        offset += length
    for suffix, write in ((".bin", lambda path: rows.tofile(path)),
                          (".ids", lambda path: Path(path).write_text("".join(lines), encoding="utf-8"))):
        tmp = directory / f".{name}{suffix}.{os.getpid()}.tmp"
        write(tmp)
        os.replace(tmp, directory / f"{name}{suffix}")


def saved_shard(directory: Path, name: str) -> tuple[list[str], int] | None:
    """The docids and number of rows of a shard's files, listed or not (None when it has none): a resumed engine
    job compares them with its plan to keep a shard that was written but not yet listed."""
    ids, data = directory / f"{name}.ids", directory / f"{name}.bin"
    if not ids.is_file() or not data.is_file():
        return None
    lines = [line.split("\t") for line in ids.read_text(encoding="utf-8").splitlines()]
    return [parts[0] for parts in lines], sum(int(parts[-1]) for parts in lines)


def list_shard(directory: Path, manifest: dict, name: str, count: int, rows: np.ndarray | int) -> None:
    """Add a written shard to the manifest, rewritten atomically: from then on the shard exists."""
    rows = rows if isinstance(rows, int) else int(rows.shape[0])
    manifest["shards"].append({"name": name, "count": count, "rows": rows})
    manifest["count"] += count
    manifest["rows"] += rows
    with atomic_write(directory / MANIFEST) as out:
        json.dump(manifest, out, indent=2)
        out.write("\n")


def score_late_interaction(model: LateInteraction, pairs: list[Pair], store: EncodingStore | None,
                           batch_size: int | None, device: torch.device, amp: str | None = "auto",
                           desc: str = "scoring", batch_tokens: int | None = None) -> list[float]:
    """Scores of `pairs`: documents from `store` (the rest encoded on the fly, counted), each query encoded once;
    each query's candidates moved to the device in one block, the scores copied back once."""
    model.eval().to(device)
    docids = list(dict.fromkeys(p.docid for p in pairs))
    texts = {p.docid: p.text for p in pairs}
    documents = {d: store.get(d) for d in docids if d in store} if store is not None else {}
    missing = [d for d in docids if d not in documents]
    if store is not None:
        log = logger.info if not missing else logger.warning
        log("%s: %d of %d documents from the store, %d encoded on the fly", desc, len(documents), len(docids),
            len(missing))
    documents.update(zip(missing, encode_texts(model, [texts[d] for d in missing], "document", batch_size, device,
                                               amp, f"{desc} documents", batch_tokens)))
    queries = list(dict.fromkeys(p.query for p in pairs))
    encoded = dict(zip(queries, encode_texts(model, queries, "query", batch_size, device, amp, f"{desc} queries",
                                             batch_tokens)))
    by_query: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        by_query.setdefault(pair.query, []).append(i)
    pieces = []
    with torch.inference_mode():
        for query, rows in by_query.items():
            candidates = [documents[pairs[i].docid] for i in rows]
            block = torch.cat(candidates).to(device, non_blocking=True)            # (sum of rows, dims): one copy
            values = model.score_encoded(encoded[query].to(device), list(block.split([len(c) for c in candidates])))
            pieces.append((rows, values.float()))
    return in_input_order(pieces, len(pairs)).cpu().tolist()
