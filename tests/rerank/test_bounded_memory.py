"""Bounded memory (eval/MRNN.md §3): what scoring and encoding hold does not grow with the run.
MRNN's largest tensor is set by the batch budget, not by the number or length of the candidates; its memory of
per-text maps holds the texts still to be reused, not every text scored, with the very same scores; encoding reads
the documents a shard at a time."""
from __future__ import annotations

import random

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from pipeline.rerank.models.biencoder import BiEncoder, BiEncoderConfig
from pipeline.rerank.models.mrnn import MRNN, MRNNConfig
from pipeline.rerank.pairs import Pair
from pipeline.rerank.scoring import predict
from pipeline.rerank.store import write_store

WORDS = [f"w{i}" for i in range(200)]


class LargestOutput(TorchDispatchMode):
    """The most elements any single operation produced while active."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def text(seed: int, length: int) -> str:
    return " ".join(random.Random(seed).choices(WORDS, k=length))


def mrnn(max_doc_length: int = 400) -> MRNN:
    torch.manual_seed(0)
    config = MRNNConfig(embeddings="random", embedding_dim=8, filters=8, blocks=3, max_doc_length=max_doc_length,
                        doc_attention="length_free")
    return MRNN.from_training_data(config, [" ".join(WORDS)], [])


def pairs(queries: int, docs: int, length: int, shared: int = 0) -> list[Pair]:
    """`docs` distinct documents of `length` words spread over `queries` queries, and `shared` documents that
    every query has."""
    own = [Pair(f"q{i % queries}", f"d{i}", text(i % queries, 6), text(100 + i, length)) for i in range(docs)]
    return own + [Pair(f"q{q}", f"s{j}", text(q, 6), text(10_000 + j, length))
                  for j in range(shared) for q in range(queries)]


def largest(model: MRNN, scored: list[Pair], batch_tokens: int) -> int:
    with LargestOutput() as probe:
        predict(model, scored, device="cpu", batch_tokens=batch_tokens, prefetch=0)
    return probe.largest


def test_mrnns_largest_tensor_is_set_by_the_batch_budget_not_by_the_candidates():
    """Four times the candidates, or documents four times as long (beyond the budget of 256 positions: one pair a
    batch), and no operation makes a larger tensor than the budget allows; without a budget it grows."""
    model = mrnn()
    base = largest(model, pairs(2, 8, 50), 256)
    assert largest(model, pairs(2, 32, 50), 256) == base                # 4x the candidates
    bound = 2 * 256 * model.config.filters * model.config.blocks        # G: every block's (positions, s) map, the
    assert base <= bound                                                # batch's queries padded as its documents
    long = largest(model, pairs(2, 8, 400), 256)                       # each pair alone: its own length sets it
    assert long <= 2 * 400 * model.config.filters * model.config.blocks  # (query + document) x s x N
    assert largest(model, pairs(1, 64, 50), 0) > 2 * bound              # the test can fail: no budget, 64 at once


def test_mrnn_remembers_only_the_texts_still_to_be_reused_with_the_same_scores():
    model = mrnn()
    scored = pairs(4, 60, 30, shared=5)                                 # 64 distinct texts used once, 9 reused
    sizes, lookup = [], model._mra.lookup

    def watched(rows, compute):                                         # the texts remembered after each lookup
        found = lookup(rows, compute)
        sizes.append(len(model._mra))
        return found

    model._mra.lookup = watched
    planned = predict(model, scored, device="cpu", batch_tokens=256).scores
    assert max(sizes) <= 4 + 5 and len(model._mra) == 0                 # the queries and shared documents at most
    model.plan_batches = lambda batches: None                           # as before the plan: every text kept
    unplanned = predict(model, scored, device="cpu", batch_tokens=256).scores
    assert len(model._mra) == 4 + 60 + 5                                # the test can fail
    assert planned == unplanned                                         # bit for bit


def test_encoding_reads_the_documents_a_shard_at_a_time(tiny_bert, tmp_path, monkeypatch):
    import pipeline.rerank.store as store

    read, when_saved = [], []

    def documents():
        for i in range(10):
            read.append(i)
            yield f"d{i}", text(i, 5)

    save_shard = store.save_shard
    monkeypatch.setattr(store, "save_shard", lambda *args: (when_saved.append(len(read)), save_shard(*args))[1])
    model = BiEncoder(BiEncoderConfig(bert=str(tiny_bert))).eval()
    manifest = write_store(tmp_path / "s", model, "digest", documents(), "fp32", shard_size=3)
    assert manifest["count"] == 10 and when_saved == [3, 6, 9, 10]      # a shard's documents read, then written
