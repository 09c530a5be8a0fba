"""Ranking losses that a model's own `loss(output, batch)` calls: they compare scores within groups.

    pairwise_hinge(s, labels, groups, margin)      mean over (i, j) of a group with label_i > label_j of
                                                   [margin - s_i + s_j]_+
    batch_hard_triplet(d, labels, groups, margin)  per group with a positive and a negative: the hardest positive
                                                   (largest distance d) against the hardest negative (smallest),
                                                   [d(q, D+) - d(q, D-) + margin]_+, mean over groups
    hardest_triplets(d, positive, negative, margin) the same on a (queries x documents) distance matrix with any
                                                   positives/negatives per query (in-batch negatives: MRNN)
    in_batch_softmax(q, d, qids, scale)            query i against every document of the batch, its own positive the
                                                   target, other queries' positives the negatives (rows of the same
                                                   query masked): cross-entropy of scale * cos (MultipleNegativesRanking)

Each returns a 0-dim tensor; a batch with nothing to compare gives 0 (with a gradient path, so training goes on).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def _same_group(groups: torch.Tensor) -> torch.Tensor:
    return groups.unsqueeze(1) == groups.unsqueeze(0)  # (B, B)


def pairwise_hinge(scores: torch.Tensor, labels: torch.Tensor, groups: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """(B,) scores, (B,) labels, (B,) group ids -> mean hinge over the ordered pairs of each group."""
    better = (labels.unsqueeze(1) > labels.unsqueeze(0)) & _same_group(groups)       # (B, B) i should beat j
    if not better.any():
        return scores.sum() * 0.0
    gaps = margin - scores.unsqueeze(1) + scores.unsqueeze(0)                         # (B, B) margin - s_i + s_j
    return torch.relu(gaps[better]).mean()


def hardest_triplets(distances: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor,
                     margin: float = 0.5) -> torch.Tensor:
    """(R, B) distances of R anchors (queries) to B documents and (R, B) masks of each anchor's positives and
    negatives -> mean over the anchors with both of [max_pos d - min_neg d + margin]_+ (batch-hard mining)."""
    rows = positive.any(1) & negative.any(1)                                           # (R,)
    if not rows.any():
        return distances.sum() * 0.0
    hardest_positive = distances.masked_fill(~positive, float("-inf")).amax(1)         # (R,)
    hardest_negative = distances.masked_fill(~negative, float("inf")).amin(1)          # (R,)
    return torch.relu(hardest_positive[rows] - hardest_negative[rows] + margin).mean()


def batch_hard_triplet(distances: torch.Tensor, labels: torch.Tensor, groups: torch.Tensor,
                       margin: float = 0.5) -> torch.Tensor:
    """(B,) query-document distances (lower = more relevant) -> the batch-hard triplet loss of each group."""
    same = _same_group(groups)                                                         # (B, B)
    positive, negative = (labels > 0).unsqueeze(0) & same, (labels <= 0).unsqueeze(0) & same  # (B, B) row = group
    first = torch.tensor([groups.tolist().index(g) for g in groups.tolist()], device=groups.device)
    keep = first == torch.arange(len(groups), device=groups.device)                   # (B,) one row per group
    d = distances.unsqueeze(0).expand_as(same)                                        # (B, B) d[j] in every row
    return hardest_triplets(d[keep], positive[keep], negative[keep], margin)


def in_batch_softmax(queries: torch.Tensor, documents: torch.Tensor, qids: list[str], scale: float = 20.0) -> torch.Tensor:
    """(B, H) query and (B, H) positive-document vectors of B pairs -> CE over the batch's documents."""
    similarity = scale * F.normalize(queries, dim=-1) @ F.normalize(documents, dim=-1).T   # (B, B) scale * cos
    index = {qid: i for i, qid in enumerate(dict.fromkeys(qids))}
    ids = torch.tensor([index[q] for q in qids], device=similarity.device)
    same_query = (ids.unsqueeze(1) == ids.unsqueeze(0)) & ~torch.eye(len(qids), dtype=torch.bool, device=ids.device)
    similarity = similarity.masked_fill(same_query, float("-inf"))                          # another positive of q_i
    return F.cross_entropy(similarity, torch.arange(len(qids), device=similarity.device))
