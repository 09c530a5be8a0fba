"""How a store keeps a document's token rows (pipeline/rerank/store.py): codecs, apart from where rows live.

Every codec turns float32 rows (n, d) into fixed-size byte records (n, row_bytes) and back, so a shard is one
(rows, row_bytes) uint8 array and a document's rows are a slice of it, whatever the codec:

    fp32, fp16   the floats, little-endian                                   4d, 2d bytes a row (d = 384: 1536, 768)
    int8         q = round(x / s) in [-127, 127], s = max|x| / 127 per row; then s as float32
                                                                              d + 4 bytes a row (388); |x - x^| <= s/2
    residual<b>  ColBERTv2's residual compression (Santhanam et al., NAACL 2022, §3.2): the nearest of k centroids
                 c (k-means on a sample of the corpus's rows), then each dimension of the residual r = x - c in one
                 of 2^b buckets (b bits), decoded as the bucket's weight:  x^ = c + w[bucket]
                                                                              id (2 bytes, k <= 65536) + d b / 8 bytes
                                                                              (b = 2: 98, b = 1: 50 for d = 384)
    residual<b>-<k>  the same with the residual turned to its k leading principal components first (k < d; the
                 directions of the sample's residuals that vary most, orthonormal, P (d, k)), b bits each:
                 x^ = c + P w[bucket]                                          id + k b / 8 bytes (b = 1, k = 256: 34)
                 What the lower d - k components of a residual hold is dropped: MS MARCO at 87 rows a passage needs
                 about 42 bytes a row to fit 30 GiB, where residual1 keeps 50.
[R] cutoffs and weights per dimension: ColBERTv2 pools all dimensions of its normalised 128-d vectors; BERT's raw
token rows, which ADDAX's MAGS reads, differ in scale from one dimension to another (a few outlier dimensions).
Cutoffs are the residuals' quantiles j / 2^b (j = 1 .. 2^b - 1), weights their quantiles (j + 1/2) / 2^b.
Nearest centroid by L2 (the rows are not normalised), k = 2^floor(log2(16 sqrt(sample rows))) as ColBERTv2.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pipeline.errors import ConfigError

if TYPE_CHECKING:
    import torch  # imported where used: `irpipe encode --help` loads no torch

DTYPES = ("fp16", "fp32", "int8", "residual2", "residual1")  # and residual<b>-<k> (`check_dtype`)
RESIDUAL = re.compile(r"residual(?P<bits>[12])(?:-(?P<kept>[1-9][0-9]*))?")
FLOATS = {"fp16": np.dtype("<f2"), "fp32": np.dtype("<f4")}
KMEANS_ITERATIONS = 10
MAX_CENTROIDS = 1 << 16  # ids in 2 bytes


def known(dtype: str) -> bool:
    return dtype in DTYPES or RESIDUAL.fullmatch(dtype) is not None


def check_dtype(dtype: str) -> None:
    if not known(dtype):
        raise ConfigError(f"dtype={dtype!r}; choose one of {', '.join(DTYPES)}, or residual1-<k> / residual2-<k> "
                          "(k principal components of the residual kept, k below the rows' dims)", field="dtype")


def needs_training(dtype: str) -> bool:
    return dtype.startswith("residual")


def bits_of(dtype: str) -> int:
    return int(RESIDUAL.fullmatch(dtype)["bits"])


def kept_of(dtype: str, dims: int) -> int:
    """The residual dimensions a residual<b>[-<k>] record keeps: k, or all `dims`."""
    kept = RESIDUAL.fullmatch(dtype)["kept"]
    if kept is None:
        return dims
    if int(kept) >= dims:
        raise ConfigError(f"dtype={dtype}: keeps {kept} components of {dims}-dim rows; use residual{bits_of(dtype)} "
                          f"to keep them all, or a k below {dims}", field="dtype")
    return int(kept)


@dataclass
class Codec:
    """Rows <-> byte records for one store: `dtype`, `dims`, and for residual<b> the trained codebook."""
    dtype: str
    dims: int
    centroids: np.ndarray | None = None   # (k, d) float32
    cutoffs: np.ndarray | None = None     # (k, 2^b - 1) float32, ascending per dimension (k = d but for -<k>)
    weights: np.ndarray | None = None     # (k, 2^b) float32
    projection: np.ndarray | None = None  # residual<b>-<k>: (d, k) float32, orthonormal columns P

    @property
    def row_bytes(self) -> int:
        if self.dtype in FLOATS:
            return self.dims * FLOATS[self.dtype].itemsize
        if self.dtype == "int8":
            return self.dims + 4
        return self._id_bytes + math.ceil(self._kept * bits_of(self.dtype) / 8)

    @property
    def _kept(self) -> int:
        return kept_of(self.dtype, self.dims)

    @property
    def _id_bytes(self) -> int:
        return 2 if len(self.centroids) <= MAX_CENTROIDS else 4

    def arrays(self) -> dict[str, np.ndarray]:
        """What the store keeps of the codec beside the manifest (codec.safetensors); none for fp16/fp32/int8."""
        if not needs_training(self.dtype):
            return {}
        arrays = {"centroids": self.centroids, "cutoffs": self.cutoffs, "weights": self.weights}
        return arrays | ({"projection": self.projection} if self.projection is not None else {})

    # -- rows -> records ---------------------------------------------------------------------------------------------
    def encode(self, rows: np.ndarray, block: int = 1 << 16) -> np.ndarray:
        """(n, d) float -> (n, row_bytes) uint8, `block` rows at a time (bounded memory for a large shard)."""
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[1] != self.dims:
            raise ConfigError(f"encodings of shape {tuple(rows.shape)}; this store holds rows of {self.dims} dims")
        if len(rows) > block:
            return np.concatenate([self.encode(rows[i:i + block], block) for i in range(0, len(rows), block)])
        n = rows.shape[0]
        if self.dtype in FLOATS:
            return rows.astype(FLOATS[self.dtype]).view(np.uint8).reshape(n, -1)
        if self.dtype == "int8":
            scale = np.abs(rows).max(1, keepdims=True) / 127                             # (n, 1) s
            q = np.rint(rows / np.where(scale > 0, scale, 1)).clip(-127, 127).astype(np.int8)
            return np.concatenate([q.view(np.uint8), scale.astype("<f4").view(np.uint8)], 1)
        import torch

        ids = nearest(torch.from_numpy(rows), torch.from_numpy(self.centroids)).numpy()  # (n,)
        residual = rows - self.centroids[ids]                                           # r (n, d)
        if self.projection is not None:
            residual = residual @ self.projection                                       # P^T r (n, k)
        buckets = (residual[:, :, None] > self.cutoffs[None]).sum(-1).astype(np.uint8)  # (n, k) in [0, 2^b)
        bits = bits_of(self.dtype)
        planes = (buckets[:, :, None] >> np.arange(bits, dtype=np.uint8)) & 1           # (n, k, b) low bit first
        packed = np.packbits(planes.reshape(n, -1), axis=1)                             # (n, ceil(d b / 8))
        id_type = "<u2" if self._id_bytes == 2 else "<u4"
        return np.concatenate([ids.astype(id_type).view(np.uint8).reshape(n, -1), packed], 1)

    # -- records -> rows ---------------------------------------------------------------------------------------------
    def decode(self, records: np.ndarray) -> np.ndarray:
        """(n, row_bytes) uint8 -> (n, d) float32."""
        records = np.ascontiguousarray(records)
        n, d = records.shape[0], self.dims
        if self.dtype in FLOATS:
            return records.view(FLOATS[self.dtype]).astype(np.float32)
        if self.dtype == "int8":
            q = records[:, :d].view(np.int8).astype(np.float32)
            return q * records[:, d:].copy().view("<f4")                                 # q s
        cut, bits, k = self._id_bytes, bits_of(self.dtype), self._kept
        ids = records[:, :cut].copy().view("<u2" if cut == 2 else "<u4").reshape(n)
        planes = np.unpackbits(records[:, cut:], axis=1, count=k * bits).reshape(n, k, bits)
        buckets = (planes << np.arange(bits, dtype=np.uint8)).sum(-1)                   # (n, k)
        residual = self.weights[np.arange(k), buckets]                                  # w[bucket] (n, k)
        if self.projection is not None:
            residual = residual @ self.projection.T                                     # P w[bucket] (n, d)
        return self.centroids[ids] + residual                                           # c + ...


def nearest(rows: "torch.Tensor", centroids: "torch.Tensor") -> "torch.Tensor":
    """argmin_c ||x - c||^2 = argmax_c (2 x.c - ||c||^2) for each row: (n, d), (k, d) -> (n,) int64, in chunks of
    rows whose (chunk, k) products stay near 2^24 floats."""
    import torch

    norms = (centroids * centroids).sum(1)
    chunk = max(256, (1 << 24) // len(centroids))
    return torch.cat([(2 * rows[i:i + chunk] @ centroids.T - norms).argmax(1) for i in range(0, len(rows), chunk)])


def default_centroids(sample_rows: int) -> int:
    """ColBERTv2's rule, 2^floor(log2(16 sqrt(rows))), at most the rows and 2^16."""
    k = 1 << int(math.floor(math.log2(16 * math.sqrt(max(1, sample_rows)))))
    return max(1, min(k, sample_rows, MAX_CENTROIDS))


def kmeans(rows: "torch.Tensor", k: int, iterations: int = KMEANS_ITERATIONS, seed: int = 0) -> "torch.Tensor":
    """Lloyd's k-means: k distinct sample rows to start (seeded), `iterations` rounds; an empty cluster keeps its
    centroid. (m, d) -> (k, d)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    centroids = rows[torch.randperm(len(rows), generator=generator)[:k]].clone()
    for _ in range(iterations):
        ids = nearest(rows, centroids)
        sums = torch.zeros_like(centroids).index_add_(0, ids, rows)
        counts = torch.bincount(ids, minlength=k).unsqueeze(1)
        centroids = torch.where(counts > 0, sums / counts.clamp(min=1), centroids)
    return centroids


def train_codec(dtype: str, sample: np.ndarray, centroids: int | None = None) -> Codec:
    """The codec of `dtype` for rows like `sample` (m, d): for residual<b>, k-means centroids and the per-dimension
    bucket cutoffs and weights of the sample's residuals."""
    import torch

    check_dtype(dtype)
    sample = np.ascontiguousarray(sample, dtype=np.float32)
    dims = int(sample.shape[1])
    if not needs_training(dtype):
        return Codec(dtype, dims)
    if len(sample) == 0:
        raise ConfigError(f"dtype={dtype}: no rows to train the codebook on (no documents to encode)")
    rows = torch.from_numpy(sample)
    k = min(centroids or default_centroids(len(sample)), len(sample), MAX_CENTROIDS)
    c = kmeans(rows, k)
    residual = rows - c[nearest(rows, c)]                                               # (m, d)
    projection, kept = None, kept_of(dtype, dims)
    if kept < dims:
        projection = principal_directions(residual, kept)                               # P (d, k)
        residual = residual @ projection                                                # (m, k)
    buckets = 1 << bits_of(dtype)
    at = torch.arange(1, buckets, dtype=torch.float64) / buckets                        # j / 2^b
    mid = (torch.arange(buckets, dtype=torch.float64) + 0.5) / buckets                  # (j + 1/2) / 2^b
    cutoffs = torch.quantile(residual.double(), at, dim=0).T                            # (k, 2^b - 1)
    weights = torch.quantile(residual.double(), mid, dim=0).T                           # (k, 2^b)
    return Codec(dtype, dims, c.numpy().astype(np.float32), cutoffs.float().numpy(), weights.float().numpy(),
                 None if projection is None else projection.numpy())


def principal_directions(rows: "torch.Tensor", k: int) -> "torch.Tensor":
    """The k unit directions along which `rows` (m, d) vary most about their mean (the covariance's leading
    eigenvectors, largest first; each with its largest coordinate positive, so a codebook does not depend on the
    eigensolver's signs): (d, k) float32 with orthonormal columns."""
    import torch

    centred = rows.double() - rows.double().mean(0)
    values, vectors = torch.linalg.eigh(centred.T @ centred)                            # ascending
    top = vectors[:, values.argsort(descending=True)[:k]]                               # (d, k)
    signs = torch.sign(top.gather(0, top.abs().argmax(0, keepdim=True)))
    return (top * signs).float()


def load_codec(dtype: str, dims: int, arrays: dict[str, np.ndarray] | None = None) -> Codec:
    check_dtype(dtype)
    arrays = arrays or {}
    return Codec(dtype, dims, *(arrays.get(name) for name in ("centroids", "cutoffs", "weights", "projection")))


def dims_of(dtype: str, row_bytes: int) -> int:
    """The dims of a float or int8 record of `row_bytes` bytes (a resumed engine job's first shard)."""
    return row_bytes // FLOATS[dtype].itemsize if dtype in FLOATS else row_bytes - 4
