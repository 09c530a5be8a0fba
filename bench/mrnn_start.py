"""Benchmark (effectiveness, no training): what MRNN ranks right after initialisation, random or init=identity.

    python -m bench.mrnn_start --train trecqa/train --dataset trecqa/clean-test --record
    python -m bench.mrnn_start --train squad-v1.1/dev-articles-a-train \\
        --dataset squad-v1.1/dev-articles-b --run runs/squad-dev-articles-b-bm25.trec --queries 300 \\
        --set blocks=6 max_doc_length=256 --record

MRNN (docs/models.md §2) on the frozen BERT's token vectors (embeddings=contextual), untrained, in evaluation:
- init=random: PyTorch's default initialisation (what training starts from unless told otherwise);
- init=identity: the feature maps pass the inputs through and the attention of eq. (6) is sharpened, so the
  distance of eq. (8) is the inputs' own nearest-word distance (mrnn.py `start_as_identity`).
Each is scored at `--filters` (s) 128 and 384 (the BERT's width: P is then the identity). The vocabulary and IDF
come from the training set (a trained model's); candidates are the set's own or a run's (`--run`, texts from the
set's documents), the first `--queries` only; a run's own order is scored beside them (a set's shipped candidates
are in file order, which on TrecQA puts the answers first: no ranking to compare with). `--save-runs DIR` writes
each start's ranking as DIR/mrnn-start-<start>-s<S>.trec, for `irpipe eval --baseline` paired tests.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench import machine, positive, record, record_name, rounded, run_main
from bench._candidates import add_candidate_arguments, candidates, training_texts

VARIANTS = {"random": {"init": "random"}, "identity": {"init": "identity"}}


def bench(train: str, dataset: str, run_path: str | None, queries: int | None, filters: list[int],
          measures: list[str], settings: dict, starts: tuple[str, ...] = tuple(VARIANTS),
          save_runs: str | None = None) -> dict:
    import torch

    from pipeline.data.registry import get_dataset
    from pipeline.data.runs import Run, write_run
    from pipeline.evaluation import evaluate
    from pipeline.rerank.config import make_config
    from pipeline.rerank.models.mrnn import MRNN, MRNNConfig
    from pipeline.rerank.pairs import pairs_of, scores_by_query
    from pipeline.rerank.scoring import predict

    test = get_dataset(dataset)
    run = candidates(test, run_path, queries)
    pairs = pairs_of(test.topics(), run, run.texts)
    qrels = test.qrels()
    texts = training_texts(get_dataset(train))
    results = {}   # a run's own order beside (a set's shipped candidates come in file order, not a ranking)
    if run_path is not None:
        results["first stage"] = rounded(evaluate(run, qrels, measures, test.rel_level, queries="run"))
    for width in filters:
        for name in starts:
            options = VARIANTS[name]
            config = make_config(MRNNConfig, {"embeddings": "contextual"} | settings | options | {"filters": width})
            torch.manual_seed(0)
            model = MRNN.from_training_data(config, *texts).eval()
            scores = scores_by_query(pairs, predict(model, pairs, desc=f"{name}, s={width}").scores)
            results[f"{name}, s={width}"] = rounded(evaluate(scores, qrels, measures, test.rel_level, queries="run"))
            if save_runs is not None:
                write_run(Run.from_scores(scores), Path(save_runs) / f"mrnn-start-{name}-s{width}.trec",
                          tag=f"mrnn-start-{name}")
    return {"train": train, "dataset": dataset, "run": run_path, "queries": len(run.ranking), "settings": settings,
            "untrained": results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mrnn_start", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_candidate_arguments(parser, "trecqa/clean-test")
    parser.add_argument("--filters", type=positive, nargs="+", default=[128, 384], metavar="S")
    parser.add_argument("--measures", nargs="+", default=["AP", "RR", "P@1"])
    parser.add_argument("--starts", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE", help="other MRNN config fields")
    parser.add_argument("--save-runs", metavar="DIR", help="write each start's ranking as a TREC run into DIR")
    parser.add_argument("--record", nargs="?", const="", metavar="NAME", type=record_name,
                        help="write eval/benchmarks/NAME.json (default NAME: mrnn-start-<dataset>)")
    args = parser.parse_args(argv)

    import torch

    from pipeline import log
    from pipeline.commands.train import key_values

    log.configure(quiet=True)
    torch.set_num_threads(1)   # the command's setting; `bench` leaves the caller's threads alone
    settings = key_values(args.set, "--set")
    result = bench(args.train, args.dataset, args.run, args.queries, args.filters, args.measures, settings,
                   tuple(args.starts), args.save_runs)
    print(machine())
    print(json.dumps(result, indent=2))
    if args.record is not None:
        name = args.record or f"mrnn-start-{args.dataset.replace('/', '-')}"
        record(name, __spec__.name, argv, {"result": result})
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
