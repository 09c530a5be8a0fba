"""The one batched inference path of every model: cross-encoder scoring (`predict`, pipeline/rerank/scoring.py),
the dev evaluation of training, document and query encoding and scoring from a store (pipeline/rerank/store.py),
and the ray engine's shards of them (pipeline/rerank/on_cluster.py).

    lengths = model.input_lengths(pairs)                  # padded positions each item takes (word pieces)
    order = group_order(groups, lengths, ids)             # group by group, longest first, ties by id, None: input order
    size, tokens = batch_limits(device)                   # the device's defaults: CPU (64, 2048), CUDA (512, 65536)
    cuts = group_cuts([groups[i] for i in order], [lengths[i] for i in order], size, tokens)  # slices of `order`
    pieces = run_batches(items, order, cuts, prepare, compute, device)                   # [(indices, output)]
    scores = in_input_order(pieces, len(items))           # one tensor, one copy to the host

Batches: the items sorted by length and cut greedily in that order: a batch takes the next item while it then has
at most `batch_size` items and at most `batch_tokens` padded positions (items x its longest, the first); an item
longer than the budget is a batch alone (0: no budget). So long inputs go fewer to a batch, short ones more, and
padding stays small. Defaults (`batch_limits`): on the CPU 64 items and 2,048 positions (about 8 pairs of 256
word pieces: a small batch's activations stay in cache), on CUDA 512 and 65,536, to keep the GPU busy (not
measured here: no GPU; `python -m bench.inference_speed --gpu-only` sweeps the budget on one).
Groups (`group_order`, `group_cuts`): a batch never mixes two groups -- each pair's query in `predict`, each query
and each query's on-the-fly candidates in late interaction -- so a batch is the same whichever other queries are
scored (MKL's GEMM picks its kernel by a batch's row count: a row's last bits follow its batch), and a score is a
function of its query, the query's candidates and the model, bit for bit (tests/test_metamorphic.py).
`batch_cuts` is the one rule: the ray engine cuts its shards from the same batches, so a shard scores the very
batches a local run scores (bit-identical scores), and cutting again from a batch boundary gives the same batches.

Compute: `prepare` (tokenisation: Pair list -> CPU tensors) of the next `prefetch` batches runs on one background
thread while the model computes the current one; results are taken in order, so the batches and their scores are
the same whatever the timing. On CUDA the inputs are pinned and copied without blocking, and outputs stay on the
device until the caller gathers them once: no host synchronisation per batch.

Out of memory (torch.cuda.OutOfMemoryError): the batch is cut in halves (prepared again) and retried, and no later
batch holds more than that; the first time is logged as a warning, once. An item alone that does not fit fails.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterator, Sequence

import torch

from pipeline.log import logger, progress

LIMITS = {"cpu": (64, 2048), "cuda": (512, 65_536)}  # (items, padded positions) a batch at most, by device type
PREFETCH = 2             # batches prepared ahead on the background thread


def batch_limits(device: torch.device | str, batch_size: int | None = None,
                 batch_tokens: int | None = None) -> tuple[int, int]:
    """(batch_size, batch_tokens) on `device`: the given ones, the device type's defaults (`LIMITS`) for None."""
    size, tokens = LIMITS["cuda" if torch.device(device).type == "cuda" else "cpu"]
    return (size if batch_size is None else batch_size), (tokens if batch_tokens is None else batch_tokens)


def group_order(groups: Sequence, lengths: Sequence[int], ties: Sequence | None = None) -> list[int]:
    """The order items of groups (e.g. each pair's query) are batched in: the groups in order of first appearance,
    each group's items longest first, items of one length by `ties` (a key per item, e.g. each pair's document id:
    then a group's batches, and each item's place in its batch, do not depend on the order its items came in), then
    in input order."""
    first: dict = {}
    for i, group in enumerate(groups):
        first.setdefault(group, i)
    ties = range(len(lengths)) if ties is None else ties
    return sorted(range(len(lengths)), key=lambda i: (first[groups[i]], -lengths[i], ties[i], i))


def group_cuts(groups: Sequence, lengths: Sequence[int], batch_size: int, batch_tokens: int) -> list[slice]:
    """`batch_cuts` within each run of consecutive items of one group (items in batching order): no batch mixes
    two groups, so a batch holds the same items whichever other groups come before or after it."""
    cuts, start = [], 0
    for end in range(1, len(groups) + 1):
        if end == len(groups) or groups[end] != groups[start]:
            cuts += [slice(start + cut.start, start + cut.stop)
                     for cut in batch_cuts(lengths[start:end], batch_size, batch_tokens)]
            start = end
    return cuts


def batch_cuts(lengths: Sequence[int], batch_size: int, batch_tokens: int) -> Iterator[slice]:
    """Consecutive batches of items with `lengths` (in batching order, longest first): a batch grows while it holds
    at most `batch_size` items and (count x its longest) at most `batch_tokens` padded positions (0: no budget)."""
    start, longest = 0, 0
    for i, length in enumerate(lengths):
        count, grown = i - start + 1, max(longest, length)
        if i > start and (count > batch_size or (batch_tokens and count * grown > batch_tokens)):
            yield slice(start, i)
            start, grown = i, length
        longest = grown
    if start < len(lengths):
        yield slice(start, len(lengths))


def pinned(value):
    """`value` with its CPU tensors in pinned memory (tensors, dicts, lists, tuples, a Batch's `tensors`, labels and
    groups), for a non-blocking copy to a GPU."""
    if isinstance(value, torch.Tensor):
        return value.pin_memory()
    if isinstance(value, dict):
        return {k: pinned(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(pinned(v) for v in value)
    if hasattr(value, "tensors"):  # a Batch (pipeline/rerank/model.py)
        value.tensors = pinned(value.tensors)
        for name in ("labels", "groups"):
            if getattr(value, name, None) is not None:
                setattr(value, name, pinned(getattr(value, name)))
    return value


class OutOfMemoryBackoff:
    """The batch cap after CUDA out-of-memory errors (None: none yet), logged once."""

    def __init__(self, desc: str):
        self.desc, self.cap, self.events = desc, None, 0

    def split(self, chunk: list[int]) -> list[list[int]]:
        """`chunk` in pieces of at most the cap (itself when there is no cap)."""
        if self.cap is None or len(chunk) <= self.cap:
            return [chunk]
        return [chunk[start:start + self.cap] for start in range(0, len(chunk), self.cap)]

    def halve(self, size: int, tokens: int | None) -> None:
        self.cap = min(self.cap or size, max(1, size // 2))
        self.events += 1
        if self.events == 1:
            logger.warning("%s: CUDA out of memory on a batch of %d items%s: halving it and retrying (no later batch "
                           "holds more than %d; set a smaller batch_size / batch_tokens to avoid this)", self.desc,
                           size, f" ({tokens} padded positions)" if tokens else "", self.cap)


def run_batches(items: Sequence, order: Sequence[int], cuts: Sequence[slice], prepare: Callable[[list], Any],
                compute: Callable[[Any], Any], device: torch.device, desc: str = "batches", unit: str = "item",
                prefetch: int = PREFETCH, lengths: Sequence[int] | None = None) -> list[tuple[list[int], Any]]:
    """[(item indices, compute(prepare(those items)))] for the batches `cuts` of `order`, in that order; `prepare`
    on a background thread `prefetch` batches ahead (0: in this thread), `compute` here (inside the caller's
    inference_mode and autocast). A CUDA out-of-memory error halves the batch (see the module docstring)."""
    cuda = device.type == "cuda"
    backoff = OutOfMemoryBackoff(desc)
    waiting = deque(list(order[cut]) for cut in cuts)

    def prepared(chunk: list[int]):
        value = prepare([items[i] for i in chunk])
        return pinned(value) if cuda else value

    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="irpipe-prepare") if prefetch > 0 else None
    ahead: deque[tuple[list[int], Future]] = deque()

    def fill() -> None:
        while waiting and len(ahead) < max(1, prefetch):
            for piece in backoff.split(waiting.popleft()):
                ahead.append((piece, executor.submit(prepared, piece) if executor else None))

    def take(chunk: list[int], future: Future | None):
        return future.result() if future is not None else prepared(chunk)

    def again(chunk: list[int]):  # prepared anew, on the same thread as every other prepare
        return executor.submit(prepared, chunk).result() if executor else prepared(chunk)

    def attempt(chunk: list[int], value) -> list[tuple[list[int], Any]]:
        if len(backoff.split(chunk)) > 1:  # the cap came down after this batch was prepared
            return [done for piece in backoff.split(chunk) for done in attempt(piece, again(piece))]
        try:
            return [(chunk, compute(value))]
        except torch.cuda.OutOfMemoryError:
            if len(chunk) == 1:
                raise
        del value  # here, out of the except block, the traceback and the activations it held are gone
        if cuda:
            torch.cuda.empty_cache()
        backoff.halve(len(chunk), len(chunk) * max(lengths[i] for i in chunk) if lengths is not None else None)
        return [done for piece in backoff.split(chunk) for done in attempt(piece, again(piece))]

    results = []
    try:
        with progress(desc=desc, total=len(order), unit=unit) as bar:
            fill()
            while ahead:
                chunk, future = ahead.popleft()
                fill()  # the next batches are prepared while this one computes
                results.extend(attempt(chunk, take(chunk, future)))
                bar.update(len(chunk))
    finally:
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
    if backoff.events > 1:
        logger.info("%s: %d CUDA out-of-memory retries; batches of at most %d items", desc, backoff.events, backoff.cap)
    return results


def in_input_order(pieces: list[tuple[list[int], torch.Tensor]], count: int) -> torch.Tensor:
    """The (B, ...) outputs of `run_batches` as one (count, ...) tensor in input order, on their device."""
    if not pieces:
        return torch.zeros(0)
    values = torch.cat([value for _, value in pieces])
    where = torch.tensor([i for indices, _ in pieces for i in indices], device=values.device)
    out = values.new_empty((count, *values.shape[1:]))
    out[where] = values
    return out
