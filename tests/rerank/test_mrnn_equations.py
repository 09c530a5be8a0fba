"""MRNN's equations (docs/models.md §2) on tensors small enough to compute by hand: each expected value below is worked
out in the comment beside it, not by running the model."""
from __future__ import annotations

import math

import pytest
import torch

from pipeline.rerank.models.mrnn import MRNNConfig
from pipeline.rerank.models.mrnn.network import DocumentAwareQueryAttention, MultiResolutionAttention, NgramBlock

S = 1 / (1 + math.e ** -1)  # softmax([1, 0])[0] = e / (e + 1) = 0.7311


def config(**overrides) -> MRNNConfig:
    """The paper's equations: dot-product attention logits unless overridden."""
    return MRNNConfig(**({"embeddings": "random", "embedding_dim": 2, "filters": 2, "blocks": 2,
                          "max_doc_length": 4, "attention_logits": "dot"} | overrides))


def test_eq1_block_is_scale_times_prelu_of_batchnorm_of_conv():
    block = NgramBlock(2, 2, 1, "identity").eval()           # running mean 0, var 1: BN(x) = x / sqrt(1 + eps)
    with torch.no_grad():
        block.conv.weight.copy_(torch.tensor([[[1.0], [0.0]], [[0.0], [-1.0]]]))   # out_1 = x_1, out_2 = -x_2
        block.conv.bias.zero_()
        block.act.weight.fill_(0.25)
        block.scale.fill_(2.0)
    x = torch.tensor([[[1.0, 2.0], [-4.0, 0.0], [9.0, 9.0]]])  # third position is padding
    mask = torch.tensor([[True, True, False]])
    out = block(x, mask)
    bn = 1 / math.sqrt(1 + 1e-5)
    # position 1: conv (1, -2) -> PReLU (1, -0.5) -> x2 (2, -1); position 2: conv (-4, 0) -> (-1, 0) -> (-2, 0)
    expected = torch.tensor([[[2.0, -1.0], [-2.0, 0.0], [0.0, 0.0]]]) * bn
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("summary, weights", [("mean", (S, 1 - S)),             # T = (2, 1): softmax = (0.73, 0.27)
                                              ("sum", (1 / (1 + math.e ** -2), 1 - 1 / (1 + math.e ** -2)))])  # (4, 2)
def test_eqs2_to_4_resolution_attention(summary, weights):
    layer = MultiResolutionAttention(config(summary=summary))
    with torch.no_grad():
        layer.conductor[0].weight.copy_(torch.eye(2))
        layer.conductor[0].bias.zero_()
    g = torch.tensor([[[[1.0, 3.0]], [[0.0, 2.0]]]])          # G (1, N=2, L=1, s=2): G_1 = (1, 3), G_2 = (0, 2)
    mra, aw = layer(g)
    torch.testing.assert_close(aw, torch.tensor([[list(weights)]]))
    a, b = weights                                            # MRA = a (1, 3) + b (0, 2)
    torch.testing.assert_close(mra, torch.tensor([[[a * 1.0, a * 3.0 + b * 2.0]]]))


@pytest.mark.parametrize("doc_attention", ["fixed", "length_free"])
def test_eqs5_to_8_document_aware_query_attention(doc_attention):
    layer = DocumentAwareQueryAttention(config(doc_attention=doc_attention))   # identity FC, PReLU slope 0.25
    q = torch.tensor([[[1.0, 0.0], [0.0, 0.0]]])              # query: one real position (1, 0), one padding
    d = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [7.0, 7.0]]])  # document: (1, 0), (0, 1) real, (7, 7) padding
    q_mask, d_mask = torch.tensor([[True, False]]), torch.tensor([[True, True, False]])
    dist, aw = layer(q, q_mask, d, d_mask)
    # e = (1, 0, -) -> PReLU (1, 0) -> softmax over the 2 real positions (S, 1 - S); sae = (S, 1 - S);
    # qe = ||(S - 1, 1 - S)|| = sqrt(2) (1 - S) = 0.3803; the padded query position adds nothing
    torch.testing.assert_close(aw[0, 0], torch.tensor([S, 1 - S, 0.0]))
    torch.testing.assert_close(dist, torch.tensor([math.sqrt(2) * (1 - S)]))


def test_eq6_prelu_scales_negative_logits_before_the_softmax():
    layer = DocumentAwareQueryAttention(config(doc_attention="length_free"))
    q = torch.tensor([[[1.0, 0.0]]])
    d = torch.tensor([[[-4.0, 0.0], [0.0, 1.0]]])             # e = (-4, 0) -> PReLU (-1, 0)
    _, aw = layer(q, torch.tensor([[True]]), d, torch.tensor([[True, True]]))
    torch.testing.assert_close(aw[0, 0], torch.tensor([1 / (1 + math.e), math.e / (1 + math.e)]))


@pytest.mark.parametrize("logits, expected", [
    # s = 2: q = (1, 0); d_1 = (2, 0), d_2 = (1, 0.5). dot: e = (2, 1); scaled: e / sqrt(2);
    # distance: (2 q.d - ‖d‖²) / sqrt(2) = ((4 - 4), (2 - 1.25)) / sqrt(2) = (0, 0.5303): the nearer d_2 wins
    ("dot", (2.0, 1.0)), ("scaled", (2 / math.sqrt(2), 1 / math.sqrt(2))), ("distance", (0.0, 0.75 / math.sqrt(2)))])
def test_eq5_attention_logits(logits, expected):
    layer = DocumentAwareQueryAttention(config(doc_attention="length_free", attention_logits=logits))
    q, d = torch.tensor([[[1.0, 0.0]]]), torch.tensor([[[2.0, 0.0], [1.0, 0.5]]])
    dist, aw = layer(q, torch.tensor([[True]]), d, torch.tensor([[True, True]]))
    e = torch.tensor(expected)
    w = torch.exp(e) / torch.exp(e).sum()                     # positive logits: PReLU leaves them
    torch.testing.assert_close(aw[0, 0], w)
    sae = w[0] * d[0, 0] + w[1] * d[0, 1]
    torch.testing.assert_close(dist, (sae - q[0, 0]).norm().reshape(1))
