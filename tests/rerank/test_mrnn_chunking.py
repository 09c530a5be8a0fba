"""MRNN's bounded memory: the document-aware attention of eqs. (5)-(8) run over the document axis
in chunks (a streaming softmax) and the evaluation feature maps in position-bounded groups give the same distances
as all at once, and the attention never holds a (pairs x n x m) tensor."""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from pipeline.rerank.models._mrnn_layers import DocumentAwareQueryAttention
from pipeline.rerank.models.mrnn import MRNN, MRNNConfig, position_groups
from support import make_pairs

QUERIES = ["who wrote the iron lady ?", "what is the capital of france ?", "how tall is the eiffel tower in paris ?"]
DOCS = ["hugo young wrote the iron lady , a biography of margaret thatcher , published in 1989 by macmillan .",
        "paris is the capital of france", "the eiffel tower is 324 metres tall and stands on the champ de mars in paris"]


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


def layer(doc_attention: str, length: int = 64, logits: str = "dot") -> DocumentAwareQueryAttention:
    torch.manual_seed(0)
    cfg = MRNNConfig(embeddings="random", embedding_dim=4, filters=4, doc_attention=doc_attention,
                     max_doc_length=length, attention_init="random", attention_logits=logits)
    return DocumentAwareQueryAttention(cfg)


def inputs(pairs: int, n: int, m: int, s: int = 4):
    torch.manual_seed(1)
    q, d = torch.randn(pairs, n, s), torch.randn(pairs, m, s)
    q_mask = torch.arange(n) < torch.randint(1, n + 1, (pairs, 1))
    d_mask = torch.arange(m) < torch.randint(1, m + 1, (pairs, 1))
    return q * q_mask[..., None], q_mask, d * d_mask[..., None], d_mask


@pytest.mark.parametrize("doc_attention", ["fixed", "length_free"])
@pytest.mark.parametrize("logits", ["dot", "scaled", "distance"])
@pytest.mark.parametrize("chunk", [1, 3, 16])
def test_chunked_attention_gives_the_unchunked_distances(doc_attention, logits, chunk):
    attention = layer(doc_attention, logits=logits)
    q, q_mask, d, d_mask = inputs(6, 5, 40)
    with torch.inference_mode():
        whole, weights = attention(q, q_mask, d, d_mask)
        chunked, none = attention(q, q_mask, d, d_mask, chunk)
        # broadcast (U, 1) queries x (1, B) documents, as in-batch mining computes them
        grid, _ = attention(q[:, None], q_mask[:, None], d[None], d_mask[None])
        grid_chunked, _ = attention(q[:, None], q_mask[:, None], d[None], d_mask[None], chunk)
    assert weights is not None and none is None
    torch.testing.assert_close(chunked, whole, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grid_chunked, grid, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.diagonal(grid), whole, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("doc_attention", ["fixed", "length_free"])
def test_chunked_attention_holds_no_pairs_by_n_by_m_tensor(doc_attention):
    """16 pairs, 40 query positions, 400 document positions, s = 4: unchunked, e and aw' are 40 x 400 per pair;
    chunked by 16, nothing larger than the documents themselves (400 x 4 per pair) or the fixed FC (400 x 400)."""
    attention = layer(doc_attention, length=400)
    q, q_mask, d, d_mask = inputs(16, 40, 400)
    sizes = {}
    for chunk in (0, 16):
        with torch.inference_mode(), LargestOutput() as probe:
            attention(q, q_mask, d, d_mask, chunk)
        sizes[chunk] = probe.largest
    assert sizes[0] >= 16 * 40 * 400                                  # the test can fail: unchunked holds n x m
    assert sizes[16] <= max(d.numel(), 400 * 400) < 16 * 40 * 400


def test_gradients_through_the_chunked_attention_match():
    attention = layer("fixed")
    q, q_mask, d, d_mask = inputs(4, 5, 40)
    grads = []
    for chunk in (0, 7):
        attention.zero_grad()
        attention(q, q_mask, d, d_mask, chunk)[0].sum().backward()
        grads.append(attention.fc.weight.grad.clone())
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-5)


def test_position_groups_keep_order_and_the_budget():
    rows = [(1,) * 5, (2,) * 3, (3,) * 9, (4,) * 1, (5,) * 20]
    groups = position_groups(rows, 10)
    assert [r for g in groups for r in g] == rows
    assert all(len(g) * max(map(len, g)) <= 10 or len(g) == 1 for g in groups)
    assert groups == [[rows[0], rows[1]], [rows[2]], [rows[3]], [rows[4]]]


@pytest.mark.parametrize("doc_attention", ["fixed", "length_free"])
@pytest.mark.parametrize("logits", ["dot", "distance"])
def test_the_model_scores_the_same_chunked_and_unchunked(doc_attention, logits):
    torch.manual_seed(0)
    config = MRNNConfig(embeddings="random", embedding_dim=8, filters=6, max_doc_length=24, doc_attention=doc_attention,
                        attention_logits=logits)
    model = MRNN.from_training_data(config, QUERIES, DOCS).eval()
    pairs = make_pairs([q for q in QUERIES for _ in DOCS], DOCS * len(QUERIES))
    batch = model.prepare(pairs)
    scores = {}
    for chunk, positions in ((0, 10**9), (4, 20)):                    # 20 positions: one document per map pass
        model.attention_chunk, model.map_positions = chunk, positions
        model.eval()                                                    # nothing remembered from the other setting
        with torch.inference_mode():
            scores[chunk] = model.score(model(**batch.tensors))
            out = model(**batch.tensors)
            scores[chunk, "all"] = model.all_distances(out)
    torch.testing.assert_close(scores[4], scores[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(scores[4, "all"], scores[0, "all"], rtol=1e-5, atol=1e-5)
    assert len(set(scores[0].tolist())) > 1
