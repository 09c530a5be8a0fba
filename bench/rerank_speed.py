"""Benchmark: training seconds per epoch and inference pairs/s of the neural rerankers on this machine.

    python -m bench.rerank_speed [--models monobert hcan] [--threads 1 2] [--record [--output NAME]]

For each model (default: every model of the registry, pipeline/rerank/models) with its default config and training
options:
- training: `--steps` optimizer steps on batches of the training set (`--train`, default wikiqa/train) drawn exactly
  as the training loop draws them (same loss, batch size, length bucketing), timed after `--warmup` steps;
  seconds/epoch = seconds/step x the epoch's steps (an extrapolation, printed as such);
- inference: `predict` over the first `--pairs` candidate pairs of `--test` (default wikiqa/test), length-sorted
  batches of `--batch-size`, under torch.inference_mode, after one warm-up batch.
The machine is described in the output (cores, threads, load average: other processes slow everything down).
"""
from __future__ import annotations

import argparse
import sys
import time

from bench import machine, record, record_name, run_main

def bench_model(name: str, train: str, test: str, steps: int, warmup: int, pairs: int, batch_size: int,
                threads: int | None, device: str = "auto") -> dict:
    import torch

    from pipeline.data.registry import get_dataset
    from pipeline.rerank.config import make_config
    from pipeline.rerank.models import model_class
    from pipeline.rerank.pairs import pairs_of
    from pipeline.rerank.scoring import predict, resolve_device
    from pipeline.training.examples import epoch_batches, epoch_steps, examples_from
    from pipeline.training.loop import batch_loss
    from pipeline.training.optim import Stepper
    from pipeline.training.options import resolve_options

    if threads:
        torch.set_num_threads(threads)
    cls = model_class(name)
    config = make_config(cls.config_class, {})
    options = resolve_options(cls, config, {"device": device})
    examples = examples_from(get_dataset(train), options.negatives, options.depth, options.min_rel)
    torch.manual_seed(0)
    model = cls.from_training_data(config, list(examples.queries.values()), list(examples.texts.values()),
                                   list(examples.doc_fields.values()))
    device = resolve_device(device)
    model.to(device).train()
    sampling = model.batch_sampling()
    steps_per_epoch = epoch_steps(examples, sampling, options)
    stepper = Stepper(model, options, steps_per_epoch * options.epochs, False, device)  # the training loop's own step
    batches = epoch_batches(examples, sampling, options, torch.Generator().manual_seed(0))[:warmup + steps]
    for i, batch in enumerate(batches):
        if i == warmup:
            start = time.perf_counter()
        loss, _ = batch_loss(model, batch, device)
        stepper.step(loss.total)
    step_seconds = (time.perf_counter() - start) / max(1, len(batches) - warmup)

    test_set = get_dataset(test)
    candidates = test_set.run()
    scored = pairs_of(test_set.topics(), candidates, candidates.texts)[:pairs]
    predict(model, scored[:batch_size], batch_size, device)  # warm-up
    start = time.perf_counter()
    result = predict(model, scored, batch_size, device)
    infer_seconds = time.perf_counter() - start
    return {"model": name, "device": str(device), "threads": torch.get_num_threads(), "train": train,
            "sampling": sampling, "train_batch_size": options.train_batch_size, "timed_steps": len(batches) - warmup,
            "seconds_per_step": round(step_seconds, 3), "train_pairs_per_s": round(options.train_batch_size / step_seconds, 1),
            "epoch_steps": steps_per_epoch, "seconds_per_epoch": round(step_seconds * steps_per_epoch, 1),
            "test": test, "pairs": len(scored), "batch_size": batch_size, "truncated": result.truncated,
            "inference_pairs_per_s": round(len(scored) / infer_seconds, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", help="model names (default: every model of the registry)")
    parser.add_argument("--train", default="wikiqa/train", metavar="DATASET")
    parser.add_argument("--test", default="wikiqa/test", metavar="DATASET")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps (default 20)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed training steps first (default 2)")
    parser.add_argument("--pairs", type=int, default=1000, help="pairs scored for inference (default 1000)")
    parser.add_argument("--batch-size", type=int, default=64, help="inference batch size (default 64)")
    parser.add_argument("--threads", type=int, nargs="+", default=[None], metavar="N",
                        help="torch CPU threads, one row per value (default: torch's own, all cores)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--record", action="store_true", help="write eval/benchmarks/NAME.json (--output)")
    parser.add_argument("--output", default="rerank-speed", metavar="NAME", type=record_name,
                        help="the record's name (default rerank-speed)")
    args = parser.parse_args(argv)

    from pipeline import log

    log.configure(quiet=True)
    from pipeline.rerank.models import model_names

    names = args.models or model_names()
    rows = [bench_model(name, args.train, args.test, args.steps, args.warmup, args.pairs, args.batch_size,
                        threads, args.device) for name in names for threads in args.threads]
    print(machine())
    print(f"{'model':<10} {'dev':>4} {'thr':>3} {'train pairs/s':>13} {'s/step':>7} {'steps/epoch':>11} "
          f"{'s/epoch (extrapolated)':>22} {'infer pairs/s':>13}")
    for row in rows:
        print(f"{row['model']:<10} {row['device']:>4} {row['threads']:>3} {row['train_pairs_per_s']:>13} "
              f"{row['seconds_per_step']:>7} {row['epoch_steps']:>11} {row['seconds_per_epoch']:>22} "
              f"{row['inference_pairs_per_s']:>13}")
    if args.record:
        record(args.output, __spec__.name, argv, {"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
