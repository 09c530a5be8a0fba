"""`irpipe encode`: store the document encodings of a late-interaction model (pipeline/rerank/store.py).

    irpipe encode --model biencoder --dataset dl20-passage --out stores/dl20            # the dataset's candidates
    irpipe encode --model models/be --run runs/x.trec --dataset cacm --out stores/x    # a run's candidates (texts
                                                                                        # from the dataset or --index)
    irpipe encode --model biencoder --corpus corpus.jsonl --out stores/c --dtype fp32  # every document of a corpus

Shards are written atomically; running the same command again resumes (finished shards are kept, their documents
skipped). A store of another model is refused. `--engine ray --workers N` encodes the shards on a Ray cluster
(pipeline/engine/): the same store, byte for byte.
"""
from __future__ import annotations

import argparse
from typing import Iterator

from pipeline.commands.data_args import add_data_args, add_shipped_texts
from pipeline.commands.engine_args import add_engine_args, engine_from_args
from pipeline.commands.rerank import add_model_args
from pipeline.errors import ConfigError


def define_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, metavar="DIR|NAME",
                        help="checkpoint folder of a late-interaction model, or a pretrained one (biencoder)")
    add_data_args(parser, parts=("corpus", "index", "run"),
                  what="what to encode: a run's candidates (--run, or the dataset's), else every document")
    parser.add_argument("--out", required=True, metavar="STORE", help="store folder (created, or resumed)")
    parser.add_argument("--dtype", choices=("fp16", "fp32"), default="fp16", help="stored precision (default fp16)")
    parser.add_argument("--shard-size", type=int, default=10_000, metavar="N", help="documents per shard (default 10,000)")
    parser.add_argument("--batch-size", type=int, default=64, metavar="N", help="documents per batch (default 64)")
    add_model_args(parser)
    add_engine_args(parser, shards=())  # a store shard (--shard-size) is the unit of work


def _documents(args) -> Iterator[tuple[str, str]]:
    """(docid, text) of what to encode: a run's candidates (texts from the run, else the dataset's index), or every
    document of the corpus."""
    from pipeline.data.corpus import iter_docs
    from pipeline.data.registry import get_dataset
    from pipeline.data.runs import read_run
    from pipeline.rerank.base import run_texts

    if args.corpus and not args.dataset:
        return ((doc["id"], doc["contents"]) for doc in iter_docs(args.corpus))
    dataset = get_dataset(args.dataset) if args.dataset else None
    run = read_run(args.run) if args.run else dataset.run() if dataset is not None else None
    if run is None:
        if dataset is None:
            raise ConfigError("give --run FILE (its candidates), --corpus FILE, or --dataset NAME|DIR")
        return ((doc["id"], doc["contents"]) for doc in dataset.docs())
    if args.run:
        add_shipped_texts(run, dataset)

    def index_path() -> str | None:  # asked only when a candidate has no text
        if args.index or dataset is None:
            return args.index
        from pipeline.retrieve.index import dataset_index

        return str(dataset_index(dataset))

    texts = run_texts(run, index_path, "irpipe encode")
    return ((docid, texts[docid]) for docid in dict.fromkeys(d for hits in run.ranking.values() for d, _ in hits))


def main(args: argparse.Namespace) -> int:
    from pipeline.commands.train import key_values
    from pipeline.rerank.model import LateInteraction
    from pipeline.rerank.neural import reranker_for_model
    from pipeline.rerank.scoring import resolve_device
    from pipeline.rerank.store import write_store

    options = engine_from_args(args)  # checked before any work
    stage = reranker_for_model(args.model, batch_size=args.batch_size, device=args.device, amp=args.amp,
                               threads=args.threads, **key_values(args.config, "--set"))
    if not issubclass(stage.model_class, LateInteraction):
        raise ConfigError(f"{stage.name} scores query and document together: it has no document encodings to store")
    if args.shard_size < 1 or args.batch_size < 1:
        raise ConfigError("--shard-size and --batch-size must be >= 1")
    if options.kind == "ray":
        from pipeline.engine.tasks import encode_on_cluster

        manifest, _ = encode_on_cluster(args.out, stage, _documents(args), args.dtype, args.shard_size, options)
    else:
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        manifest = write_store(args.out, stage.load(), stage.model_digest(), _documents(args), args.dtype,
                               args.shard_size, args.batch_size, resolve_device(args.device), stage.amp)
    print(f"{args.out}: {manifest['count']} documents, {manifest['rows']} rows of {manifest['dims']} dims "
          f"({manifest['dtype']}), {len(manifest['shards'])} shards, model {manifest['model']}")
    return 0
