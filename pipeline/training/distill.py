"""Distillation [R]: a teacher's scores over the training set's candidates are the targets, not its judgments.

    monobert(train=dl20-passage, teacher=biencoder, epochs=2)     # the zero-shot bi-encoder teaches monobert

`teacher` is a model usable as it comes (a pretrained model's name: `biencoder`) or a trained checkpoint folder
(an ADDAX trained elsewhere). It scores every candidate of the training set (the dataset's shipped candidates, else
BM25's top `depth`) at the training's own precision (fp32 unless the recipe sets `amp`: the same targets on a CPU
with native bf16 as on one without); each query's scores are standardised (z = (t - mean) / sd over its candidates),
so a teacher's scale (a cosine, a logit) does not set the targets' sharpness. No qrels are read: queries without
judgments train too, and the judged queries of an evaluation are held out by training on another set.

Each epoch a query's candidates are shuffled and cut into groups of `teacher_group`; the loss is the KL divergence of
the student's scores from the teacher's within each group, averaged over the groups (`listwise_kl`):

    (1) p = softmax(z_teacher)   q = softmax(s_student)   over the group's candidates
    (2) loss = sum_i p_i (log p_i - log q_i)

The targets are written to the training folder (`teacher-targets.json`, with what they were computed from), so that
`--resume` trains on the very same numbers without running the teacher again.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F

from pipeline.data.files import atomic_write, parse_json
from pipeline.errors import ConfigError
from pipeline.log import logger
from pipeline.rerank.checkpoint import ModelSource, checkpoint_digest, read_checkpoint_config
from pipeline.rerank.pairs import pairs_of, scores_by_query
from pipeline.rerank.scoring import predict
from pipeline.training.examples import Examples, dataset_fingerprint, training_candidates

TARGETS_FILE = "teacher-targets.json"


def teacher_source(teacher: str) -> ModelSource:
    """The teacher: a pretrained model's name, or a checkpoint folder (a ConfigError when it is neither)."""
    from pipeline.rerank import models

    if Path(teacher).is_dir():
        return ModelSource(read_checkpoint_config(teacher)["model"], teacher)
    if teacher in models.model_names() and models.model_class(teacher).pretrained:
        return ModelSource(teacher)
    usable = ", ".join(n for n in models.model_names() if models.model_class(n).pretrained)
    raise ConfigError(f"teacher={teacher} is neither a pretrained model ({usable}) nor a checkpoint folder",
                      field="teacher")


def teacher_identity(teacher: str) -> str | None:
    """What a teacher's scores depend on beyond its name: a checkpoint folder's digest (None for a pretrained model,
    whose name and version are the recipe's already)."""
    return checkpoint_digest(teacher) if teacher and teacher_source(teacher).checkpoint else None


def teacher_examples(dataset, options, device, folder: Path | None = None) -> Examples:
    """The training set's candidates (the first `train_queries` queries), each pair labelled with the teacher's
    standardised score; read from `folder`'s targets file when it holds those of the same teacher and candidates,
    else scored (and written there)."""
    topics = dataset.topics()
    run = training_candidates(dataset, options.depth).cut(options.depth)
    qids = [q for q in topics if run.ranking.get(q)][:options.train_queries]                     # topics' order
    source = {"teacher": options.teacher, "weights": teacher_identity(options.teacher),
              "dataset": dataset_fingerprint(dataset), "depth": options.depth, "queries": qids,
              "amp": options.scoring_amp}
    labels = saved_targets(folder / TARGETS_FILE, source) if folder is not None else None
    if labels is None:
        labels = teacher_targets(dataset, options, device, topics, run, qids)
        if folder is not None:
            with atomic_write(folder / TARGETS_FILE) as handle:
                json.dump({"source": source, "targets": labels}, handle)
    return Examples.of(topics, run, labels)


def teacher_targets(dataset, options, device, topics, run, qids: list[str]) -> dict[str, dict[str, float]]:
    """The teacher's standardised scores of the candidates of `qids` in `run`."""
    kept = set(qids)
    pairs = [pair for pair in pairs_of(topics, run, run.texts) if pair.qid in kept]
    if not pairs:
        raise ConfigError(f"{dataset.name}: no candidates for the teacher to score", field="teacher")
    teacher = teacher_source(options.teacher).load()
    logger.info("teacher %s: scoring %d candidates of %d queries of %s", options.teacher, len(pairs), len(qids),
                dataset.name)
    scores = predict(teacher, pairs, options.eval_batch_size, device, options.scoring_amp,
                     desc=f"teacher {options.teacher}").scores
    by_query = scores_by_query(pairs, scores)
    return {q: standardised(by_query[q]) for q in qids if len(by_query[q]) > 1}


def saved_targets(path: Path, source: dict) -> dict[str, dict[str, float]] | None:
    """The targets saved at `path` when they were computed from `source`; None when there are none (or they are
    another teacher's, or unreadable: scored again)."""
    if not path.is_file():
        return None
    try:
        saved = parse_json(path.read_text(encoding="utf-8"))
        if saved["source"] == source:
            return saved["targets"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    logger.warning("%s: not this recipe's teacher targets (or unreadable); the teacher scores again", path)
    return None


def standardised(scores: dict[str, float]) -> dict[str, float]:
    """z-scores of one query's scores (all 0 when they are all equal)."""
    values = torch.tensor(list(scores.values()), dtype=torch.float64)
    sd = values.std().item()
    z = (values - values.mean()) / sd if sd > 0 else values * 0
    return dict(zip(scores, z.tolist()))


def listwise_kl(scores: torch.Tensor, targets: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """(B,) student scores, (B,) teacher z-scores, (B,) group ids -> mean over groups of KL(p || q), eq. (1)-(2)."""
    losses = []
    for group in groups.unique():
        rows = groups == group
        p = F.softmax(targets[rows].float(), 0)                                         # (n,) (1)
        losses.append((p * (p.clamp_min(1e-12).log() - F.log_softmax(scores[rows].float(), 0))).sum())  # (2)
    return torch.stack(losses).mean()
