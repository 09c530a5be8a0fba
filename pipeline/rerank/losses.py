"""Ranking losses that a model's own `loss(output, batch)` calls: they compare scores within groups.

    pairwise_hinge(s, labels, groups, margin)      mean over (i, j) of a group with label_i > label_j of
                                                   [margin - s_i + s_j]_+
    batch_hard_triplet(d, labels, groups, margin)  per group with a positive and a negative: the hardest positive
                                                   (largest distance d) against the hardest negative (smallest),
                                                   [d(q, D+) - d(q, D-) + margin]_+, mean over groups
    hardest_triplets(d, positive, negative, margin) the same on a (queries x documents) distance matrix with any
                                                   positives/negatives per query (in-batch negatives: MRNN)
    softmax_over_negatives(s, positive, negative)  per anchor with a positive and a negative, each positive's
                                                   cross-entropy against the anchor's negatives: -s_p + log(e^s_p +
                                                   sum_n e^s_n), mean over the (anchor, positive) pairs (listwise)
    grouped_softmax(s, labels, groups)             the same within each group of a (B,) score vector
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
    positive, negative = _group_rows(labels, groups)                                  # (G, B)
    return hardest_triplets(distances.unsqueeze(0).expand_as(positive), positive, negative, margin)


def _group_rows(labels: torch.Tensor, groups: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B,) labels and group ids -> (G, B) masks of each group's positives and negatives, one row per group."""
    same = _same_group(groups)                                                         # (B, B)
    first = torch.tensor([groups.tolist().index(g) for g in groups.tolist()], device=groups.device)
    keep = first == torch.arange(len(groups), device=groups.device)                   # (B,) one row per group
    return ((labels > 0).unsqueeze(0) & same)[keep], ((labels <= 0).unsqueeze(0) & same)[keep]


def softmax_over_negatives(scores: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
    """(R, B) scores of R anchors (queries) for B documents (higher = more relevant) and (R, B) masks of each anchor's
    positives and negatives -> mean over (anchor, positive) of -log softmax(s_p; s_p and the anchor's negatives)."""
    rows = (positive.any(1) & negative.any(1)).unsqueeze(1)                           # (R, 1)
    pairs = positive & rows                                                            # (R, B)
    if not pairs.any():
        return scores.sum() * 0.0
    negatives = torch.logsumexp(scores.masked_fill(~negative, float("-inf")), 1, keepdim=True)   # (R, 1)
    return (torch.logaddexp(scores, negatives) - scores)[pairs].mean()


def grouped_softmax(scores: torch.Tensor, labels: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """(B,) scores, labels and group ids -> softmax_over_negatives within each group."""
    positive, negative = _group_rows(labels, groups)
    return softmax_over_negatives(scores.unsqueeze(0).expand_as(positive), positive, negative)


def in_batch_softmax(queries: torch.Tensor, documents: torch.Tensor, qids: list[str], scale: float = 20.0) -> torch.Tensor:
    """(B, H) query and (B, H) positive-document vectors of B pairs -> CE over the batch's documents."""
    similarity = scale * F.normalize(queries, dim=-1) @ F.normalize(documents, dim=-1).T   # (B, B) scale * cos
    index = {qid: i for i, qid in enumerate(dict.fromkeys(qids))}
    ids = torch.tensor([index[q] for q in qids], device=similarity.device)
    same_query = (ids.unsqueeze(1) == ids.unsqueeze(0)) & ~torch.eye(len(qids), dtype=torch.bool, device=ids.device)
    similarity = similarity.masked_fill(same_query, float("-inf"))                          # another positive of q_i
    return F.cross_entropy(similarity, torch.arange(len(qids), device=similarity.device))
