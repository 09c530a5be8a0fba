"""The candidates an effectiveness probe scores without training (hcan_inputs_probe, mrnn_start): a set's shipped
candidates or a run file's over the set's documents, the first N queries, and the training texts a model's vocabulary
and IDF come from; with the command-line options that choose them."""
from __future__ import annotations

import argparse

from bench import positive


def training_texts(dataset) -> tuple[list[str], list[str]]:
    """(queries, documents) a trained model's vocabulary and IDF come from: the shipped candidates' texts, or (a set
    without them) all its documents."""
    topics, run = dataset.topics(), dataset.run()
    if run is None:
        return [text for _, text in topics.items()], [doc["contents"] for doc in dataset.docs()]
    return [topics[q] for q in run.ranking], [run.texts[d] for hits in run.ranking.values() for d, _ in hits]


def candidates(dataset, run_path: str | None, queries: int | None):
    """The run to score with its texts: the set's own, or `run_path`'s with the set's documents; first `queries`."""
    from pipeline.data.runs import Run, read_run

    run = dataset.run() if run_path is None else read_run(run_path)
    if queries:
        run = Run(dict(list(run.ranking.items())[:queries]), run.texts, tag=run.tag)
    if run_path is not None:   # a run file carries no texts: the kept candidates' from the set's documents
        kept = {d for hits in run.ranking.values() for d, _ in hits}
        texts = {doc["id"]: doc["contents"] for doc in dataset.docs() if doc["id"] in kept}
        run = Run(run.ranking, texts, tag=run.tag)
    return run


def add_candidate_arguments(parser: argparse.ArgumentParser, dataset: str) -> None:
    """--train, --dataset (default `dataset`), --run and --queries: what `training_texts` and `candidates` read."""
    parser.add_argument("--train", default="trecqa/train", help="vocabulary and IDF from this set (a trained model's)")
    parser.add_argument("--dataset", default=dataset, help="the set whose candidates are scored")
    parser.add_argument("--run", metavar="FILE", help="score this run's candidates (texts: the set's documents)")
    parser.add_argument("--queries", type=positive, metavar="N", help="the run's first N queries only")
