"""The store's codecs: each dtype's round-trip error within its bound (fp32 exact, fp16 and int8 by their rounding,
the residual codes by the bucket they fall in), through the codec alone and through a store of real token rows
(a tiny ADDAX); the codebook kept for a resumed encode, so a store cut short and resumed equals an uninterrupted
one; format-1 stores read, other formats refused."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pipeline.errors import ConfigError, InputError
from pipeline.rerank.codecs import DTYPES, Codec, nearest, train_codec
from pipeline.rerank.store import EncodingStore, write_store

DOCS = [(f"d{i}", text) for i, text in enumerate(
    ["the sky is blue", "grass is green and grows in fields", "snow is white and cold", "coal is black",
     "blood is red", "the sun is a yellow star in the sky", "violets are purple", "oranges are orange"])]


def clustered_rows(n: int = 3000, dims: int = 64, seed: int = 0) -> tuple[np.ndarray, float]:
    """Rows near 32 centres (noise sd 0.2), four dimensions ten times wider, as BERT's outlier dimensions."""
    rng = np.random.default_rng(seed)
    scale = np.ones(dims)
    scale[:4] = 10
    centres = rng.standard_normal((32, dims)) * 3 * scale
    return (centres[rng.integers(0, 32, n)] + rng.standard_normal((n, dims)) * 0.2).astype(np.float32), 0.2


def test_row_bytes_of_each_codec():
    rows, _ = clustered_rows(dims=384)
    sizes = {dtype: train_codec(dtype, rows[:600], centroids=16).row_bytes
             for dtype in (*DTYPES, "residual1-256", "residual2-128")}
    assert sizes == {"fp32": 384 * 4, "fp16": 384 * 2, "int8": 384 + 4, "residual2": 2 + 384 * 2 // 8,
                     "residual1": 2 + 384 // 8, "residual1-256": 2 + 256 // 8, "residual2-128": 2 + 128 * 2 // 8}


def test_float_and_int8_round_trips_within_their_rounding():
    rows, _ = clustered_rows()
    for dtype, bound in (("fp32", np.zeros_like(rows)), ("fp16", np.abs(rows) * 2.0 ** -11 + 1e-7),
                         ("int8", np.abs(rows).max(1, keepdims=True) / 127 / 2 * (1 + 1e-5) + 0 * rows)):
        codec = train_codec(dtype, rows)
        records = codec.encode(rows)
        assert records.dtype == np.uint8 and records.shape == (len(rows), codec.row_bytes)
        assert np.all(np.abs(codec.decode(records) - rows) <= bound), dtype


@pytest.mark.parametrize("bits, rms_bound", [(2, 0.45), (1, 0.7)])
def test_residual_round_trip_within_its_bucket(bits, rms_bound):
    """x^ = c + w[bucket]: the nearest centroid's id, each residual dimension decoded inside its own bucket (between
    its two cutoffs) when the bucket is an inner one; RMS error near the optimal quantiser's for Gaussian noise
    (2 bits: 0.35 sd, 1 bit: 0.61 sd) against the noise's sd."""
    rows, sd = clustered_rows()
    codec = train_codec(f"residual{bits}", rows[:2000], centroids=128)  # k > the 32 clusters, as in use
    test = rows[2000:]
    decoded = codec.decode(codec.encode(test))
    ids = nearest(torch.from_numpy(test), torch.from_numpy(codec.centroids)).numpy()
    residual, error = test - codec.centroids[ids], decoded - test
    assert np.sqrt((error ** 2).mean()) <= rms_bound * sd
    lower = np.concatenate([np.full((codec.dims, 1), -np.inf), codec.cutoffs], 1)   # (d, 2^b) bucket edges
    upper = np.concatenate([codec.cutoffs, np.full((codec.dims, 1), np.inf)], 1)
    buckets = (residual[:, :, None] > codec.cutoffs[None]).sum(-1)
    dims = np.arange(codec.dims)
    assert np.allclose(decoded, codec.centroids[ids] + codec.weights[dims, buckets], atol=1e-5)
    assert np.all((codec.weights >= lower) & (codec.weights <= upper))               # each weight in its bucket
    inner = np.isfinite(lower[dims, buckets]) & np.isfinite(upper[dims, buckets])
    width = (upper - lower)[dims, buckets]
    assert np.all(np.abs(error)[inner] <= width[inner] + 1e-5)


def test_a_projected_residual_keeps_its_principal_components():
    """residual<b>-<k>: P (d, k) orthonormal, the directions the residuals vary most along (found again when the
    noise lives in k known dimensions), each of its k coordinates P^T r decoded inside its own bucket, x^ = c + P
    w[bucket]; where the residual lies in k dimensions the k-component code loses nothing against the full one."""
    rng = np.random.default_rng(1)
    dims, kept = 64, 16
    centres = rng.standard_normal((8, dims)) * 3
    noise = np.zeros((3000, dims))
    noise[:, 5:5 + kept] = rng.standard_normal((3000, kept)) * np.linspace(0.5, 0.2, kept)  # rank 16, sds known
    rows = (centres[rng.integers(0, 8, 3000)] + noise).astype(np.float32)
    codec = train_codec(f"residual1-{kept}", rows[:2000], centroids=64)
    full = train_codec("residual1", rows[:2000], centroids=64)
    p = codec.projection
    assert p.shape == (dims, kept) and codec.cutoffs.shape == (kept, 1) and codec.row_bytes == 2 + kept // 8
    assert np.allclose(p.T @ p, np.eye(kept), atol=1e-5)
    assert (p[5:5 + kept] ** 2).sum(0).min() > 0.99  # each direction inside the noise's 16 dimensions
    test = rows[2000:]
    decoded = codec.decode(codec.encode(test))
    ids = nearest(torch.from_numpy(test), torch.from_numpy(codec.centroids)).numpy()
    coordinates = (test - codec.centroids[ids]) @ p                                     # P^T r (n, k)
    buckets = (coordinates[:, :, None] > codec.cutoffs[None]).sum(-1)
    assert np.allclose(decoded, codec.centroids[ids] + codec.weights[np.arange(kept), buckets] @ p.T, atol=1e-5)
    error = np.sqrt(((decoded - test) ** 2).sum(1).mean())
    assert error <= 1.05 * np.sqrt(((full.decode(full.encode(test)) - test) ** 2).sum(1).mean())
    assert error < 0.7 * np.sqrt((noise[2000:] ** 2).sum(1).mean())                  # 1 bit: ~0.6 of the noise


def test_a_projection_must_drop_something():
    rows, _ = clustered_rows(dims=64)
    with pytest.raises(ConfigError, match="residual1 to keep them all"):
        train_codec("residual1-64", rows[:600], centroids=16)
    for wrong in ("residual3", "residual1-0", "residual1-", "residual-16"):
        with pytest.raises(ConfigError, match="residual1-<k>"):
            train_codec(wrong, rows[:600])


def _stored(folder, model) -> dict[str, torch.Tensor]:
    store = EncodingStore.open(folder, "addax", "digest")
    return {docid: store.get(docid) for docid, _ in DOCS}


@pytest.mark.parametrize("dtype", (*DTYPES, "residual1-16"))
def test_a_store_of_each_dtype_gives_its_codec_rows(tiny_addax, tmp_path, dtype):
    """Every document's token rows come back as the codec decodes them: float32 as encoded (1e-6: batches padded otherwise), the others within their
    codec's error of the fresh encodings."""
    manifest = write_store(tmp_path / dtype, tiny_addax, "digest", DOCS, dtype=dtype, shard_size=3, centroids=8)
    with torch.inference_mode():
        fresh = dict(zip([d for d, _ in DOCS], tiny_addax.encode_documents([t for _, t in DOCS])))
    stored = _stored(tmp_path / dtype, tiny_addax)
    assert manifest["format"] == 2 and manifest["row_bytes"] == EncodingStore.open(
        tmp_path / dtype, "addax", "digest").codec.row_bytes
    for docid, rows in stored.items():
        assert rows.dtype == torch.float32 and rows.shape == fresh[docid].shape
    error = torch.cat([stored[d] - fresh[d] for d in stored]).abs()
    scale = torch.cat(list(fresh.values())).abs()
    bound = {"fp32": 1e-6, "fp16": 1e-3, "int8": float(scale.max()) / 254 * 1.001 + 1e-6}.get(dtype)  # 1e-6: batching
    if bound is not None:
        assert float(error.max()) <= bound
    else:  # residual: well under the rows' own size; the codebook is in the store
        assert float(error.pow(2).mean().sqrt()) < 0.5 * float(scale.pow(2).mean().sqrt())
        assert manifest["codec"]["centroids"] == 8 and (tmp_path / dtype / "codec.safetensors").is_file()


def test_a_cut_residual_encode_resumes_to_the_same_store(tiny_addax, tmp_path, monkeypatch):
    """The codebook is trained once and kept: a run killed in its third shard, then resumed, gives the very rows
    (and codebook) of an uninterrupted run."""
    whole = write_store(tmp_path / "whole", tiny_addax, "digest", DOCS, dtype="residual2", shard_size=3, centroids=8)
    calls, encode = [], tiny_addax.encode_prepared

    def failing(prepared, side):
        calls.append(1)
        if len(calls) == 4:  # the codebook sample, two shards, then the third shard dies
            raise KeyboardInterrupt
        return encode(prepared, side)

    monkeypatch.setattr(tiny_addax, "encode_prepared", failing)
    with pytest.raises(KeyboardInterrupt):
        write_store(tmp_path / "cut", tiny_addax, "digest", DOCS, dtype="residual2", shard_size=3, centroids=8,
                    batch_size=64)
    cut = json.loads((tmp_path / "cut" / "manifest.json").read_text())
    assert cut["count"] == 6 and cut["codec"] == whole["codec"]
    monkeypatch.setattr(tiny_addax, "encode_prepared", encode)
    resumed = write_store(tmp_path / "cut", tiny_addax, "digest", DOCS, dtype="residual2", shard_size=3, centroids=8)
    assert resumed["shards"] == whole["shards"] and resumed["codec"] == whole["codec"]
    a, b = _stored(tmp_path / "whole", tiny_addax), _stored(tmp_path / "cut", tiny_addax)
    assert all(torch.equal(a[d], b[d]) for d in a)


def test_format_1_stores_are_read_and_other_formats_refused(tiny_addax, tmp_path):
    """A format-1 store (fp16 rows, no checksums: what irpipe wrote before) reads as it did; encoding into one is
    refused, and so is a store of a format this irpipe does not know."""
    write_store(tmp_path / "s", tiny_addax, "digest", DOCS, dtype="fp16", shard_size=3)
    now = _stored(tmp_path / "s", tiny_addax)
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    old = {key: manifest[key] for key in ("model", "model_digest", "dtype", "dims", "count", "rows")}
    old["format"], old["shards"] = 1, [{k: s[k] for k in ("name", "count", "rows")} for s in manifest["shards"]]
    (tmp_path / "s" / "manifest.json").write_text(json.dumps(old))
    before = _stored(tmp_path / "s", tiny_addax)
    assert all(torch.equal(before[d], now[d]) for d in now)
    with pytest.raises(ConfigError, match="format-1 store"):
        write_store(tmp_path / "s", tiny_addax, "digest", DOCS, dtype="fp16")
    (tmp_path / "s" / "shard-00001.bin").write_bytes((tmp_path / "s" / "shard-00001.bin").read_bytes()[:-2])
    with pytest.raises(InputError, match="shard-00001.bin: damaged"):
        EncodingStore.open(tmp_path / "s", "addax", "digest")
    (tmp_path / "s" / "manifest.json").write_text(json.dumps(old | {"format": 3}))
    with pytest.raises(InputError, match="store format 3; this irpipe reads formats 1, 2"):
        EncodingStore.open(tmp_path / "s", "addax", "digest")


def test_an_unknown_dtype_is_refused(tiny_addax, tmp_path):
    with pytest.raises(ConfigError, match="residual2"):
        write_store(tmp_path / "s", tiny_addax, "digest", DOCS, dtype="int4")
    assert isinstance(Codec("fp16", 4).row_bytes, int)
