"""Diagnostic: how MRNN's training moves the model, step by step (why a setting barely moves it).

    python -m bench.mrnn_dynamics [--queries 300] [--steps 40] [--set filters=128 lr=0.0001 ...]

Trains MRNN with the training loop's own batches, loss and optimizer step (as bench.rerank_speed does)
on the first `--queries` questions of `--train`, and logs per step (JSON lines, then a summary line):
- the batch-hard loss; the share of anchors whose hardest triplet is active (d+ - d- + margin > 0);
- the hardest positive / negative distances, their gap, and the distance per real query position, against the margin;
- the gradient norm and the update (|delta| / |theta| over the group) of each parameter group (conv, BN, PReLU,
  sc_n, conductor FC, query-attention FC; embeddings when trainable), and the drift from the initialisation;
- optionally (--bn-check) the Spearman correlation of the batch's distances in train mode (batch statistics)
  against eval mode (running statistics).
`--set k=v` changes a model config field or a training option (e.g. margin=, lr=, own_negatives=, summary=).
"""
from __future__ import annotations

import argparse
import json
import sys

from bench import run_main


def group_of(name: str) -> str:
    """The parameter group of a parameter name of MRNN."""
    for key, group in (("embedding", "embeddings"), (".conv.", "conv"), (".norm.", "batchnorm"), (".act.", "prelu"),
                       (".scale", "scales"), ("resolution_attention", "conductor_fc"),
                       ("query_attention.fc", "query_attention_fc"), ("query_attention.act", "prelu")):
        if key in name:
            return group
    return "other"


def run(train: str, queries: int, steps: int, settings: dict, bn_check: bool, seed: int = 0) -> list[dict]:
    import dataclasses

    import torch

    from pipeline.data.registry import get_dataset
    from pipeline.rerank.config import make_config
    from pipeline.rerank.models import model_class
    from pipeline.training.examples import epoch_batches, examples_from
    from pipeline.training.loop import batch_loss
    from pipeline.training.optim import Stepper
    from pipeline.training.options import TrainOptions, resolve_options

    torch.set_num_threads(1)
    cls = model_class("mrnn")
    option_names = {f.name for f in dataclasses.fields(TrainOptions)}
    config_names = {f.name for f in dataclasses.fields(cls.config_class)}
    config = make_config(cls.config_class, {k: v for k, v in settings.items() if k in config_names})
    options = resolve_options(cls, config, {k: v for k, v in settings.items() if k in option_names}
                              | {"train_queries": queries, "seed": seed})
    examples = examples_from(get_dataset(train), options.negatives, options.depth, options.min_rel,
                             options.train_queries)
    torch.manual_seed(seed)
    model = cls.from_training_data(config, list(examples.queries.values()), list(examples.texts.values()))
    model.train()
    sampling = model.batch_sampling()
    stepper = Stepper(model, options, steps, False, torch.device("cpu"))
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    initial = {n: p.detach().clone() for n, p in named}
    generator = torch.Generator().manual_seed(seed)
    batches: list = []
    records = []
    for step in range(1, steps + 1):
        if not batches:
            batches = epoch_batches(examples, sampling, options, generator)
        groups = batches.pop(0)
        loss, _ = batch_loss(model, groups, "cpu")
        before = {n: p.detach().clone() for n, p in named}
        stats = _triplet_stats(model, groups, config.margin)
        stepper.step(loss.total)
        sums: dict[str, list[float]] = {}  # group -> squared norms of grad, update, drift, initial values
        for n, p in named:
            parts = (p.grad if p.grad is not None else torch.zeros_like(p), p.detach() - before[n],
                     p.detach() - initial[n], initial[n])
            total = sums.setdefault(group_of(n), [0.0] * 4)
            for k, part in enumerate(parts):
                total[k] += part.norm().item() ** 2
        grads = {g: v[0] for g, v in sums.items()}
        updates = {g: (v[1] / v[3]) ** 0.5 for g, v in sums.items()}
        drift = {g: (v[2] / v[3]) ** 0.5 for g, v in sums.items()}
        record = {"step": step, "loss": round(loss.total.item(), 4), **stats,
                  "grad_norm": {g: float(f"{v ** 0.5:.3g}") for g, v in grads.items()},
                  "update_rel": {g: float(f"{v:.3g}") for g, v in updates.items()},
                  "drift_rel": {g: float(f"{v:.3g}") for g, v in drift.items()},
                  "scales": [round(b.scale.item(), 4) for b in model.feature_maps.blocks]}
        if bn_check:
            record["bn_train_eval_spearman"] = _bn_check(model, groups)
        records.append(record)
        print(json.dumps(record), flush=True)
    return records


def _triplet_stats(model, groups, margin: float) -> dict:
    """Hardest positive / negative distances of the batch (as the loss mines them), before the step."""
    import torch

    from pipeline.rerank.scoring import labelled

    with torch.no_grad():
        batch = model.prepare([pair for group in groups for pair in group])
        labelled(batch, "cpu", [g for g, group in enumerate(groups) for _ in group])
        output = model(**batch.tensors)
        positive, negative = model.triplet_masks(output, batch)
        d = model.all_distances(output)                                               # (U, B)
        rows = positive.any(1) & negative.any(1)
        hp = d.masked_fill(~positive, float("-inf")).amax(1)[rows]
        hn = d.masked_fill(~negative, float("inf")).amin(1)[rows]
        length = output.query_mask.sum(1)[rows].float()
        gap = hp - hn
        x, mask = model.embed(batch.tensors["query_ids"])
        resolution_aw = model.resolution_attention(model.feature_maps(x, mask))[1][mask]   # (R, N) aw, eq. (3)
        _, doc_aw = model.query_attention(output.queries[output.query_index], output.query_mask[output.query_index],
                                          output.docs, output.doc_mask)                     # (B, n, m) aw', eq. (6)
        doc_aw = doc_aw.amax(-1)[output.query_mask[output.query_index]]
    return {"anchors": int(rows.sum()), "active": round(((gap + margin) > 0).float().mean().item(), 3),
            "d_pos": round(hp.mean().item(), 3), "d_neg": round(hn.mean().item(), 3),
            "gap_mean": round(gap.mean().item(), 3), "gap_abs": round(gap.abs().mean().item(), 3),
            "d_per_position": round((hp / length).mean().item(), 3), "query_positions": round(length.mean().item(), 1),
            "conductor_max_weight": round(resolution_aw.amax(-1).mean().item(), 3),
            "doc_attention_max_weight": round(doc_aw.mean().item(), 3)}


def summary(records: list[dict]) -> dict:
    """Mean loss of the first and last 10 steps, mean share of active anchors, the last step's scales and drift."""
    mean = lambda rows, key: round(sum(r[key] for r in rows) / max(1, len(rows)), 4)  # noqa: E731
    return {"summary": True, "steps": len(records), "loss_first_10": mean(records[:10], "loss"),
            "loss_last_10": mean(records[-10:], "loss"), "active": mean(records, "active"),
            "conductor_max_weight": mean(records, "conductor_max_weight"),
            "scales": records[-1]["scales"], "drift_rel": records[-1]["drift_rel"]}


def _bn_check(model, groups) -> float:
    import torch

    from pipeline.rerank.scoring import labelled

    batch = model.prepare([pair for group in groups for pair in group])
    labelled(batch, "cpu")
    with torch.no_grad():
        train_d = model(**batch.tensors).distance
        model.eval()
        eval_d = model(**batch.tensors).distance
        model.train()
    rank = lambda x: x.argsort().argsort().float()  # noqa: E731
    return round(torch.corrcoef(torch.stack([rank(train_d), rank(eval_d)]))[0, 1].item(), 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", default="wikiqa/train", metavar="DATASET")
    parser.add_argument("--queries", type=int, default=300, help="first N training questions (default 300)")
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps (default 40)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bn-check", action="store_true", help="train- vs eval-mode distance ranks per step")
    parser.add_argument("--set", nargs="*", default=[], metavar="K=V", help="config fields / training options")
    args = parser.parse_args(argv)
    from pipeline.commands.train import key_values

    settings = key_values(args.set, "--set")
    records = run(args.train, args.queries, args.steps, settings, args.bn_check, args.seed)
    print(json.dumps(summary(records)))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
