"""`irpipe encode`: store the document encodings of a late-interaction model (pipeline/rerank/store.py).

    irpipe encode --model biencoder --dataset dl20-passage --output stores/dl20           # the dataset's candidates
    irpipe encode --model models/be --run runs/x.trec --dataset cacm --output stores/x   # a run's candidates (texts
                                                                                          # from the dataset or --index)
    irpipe encode --model biencoder --corpus corpus.jsonl --output stores/c --dtype fp32  # every document of a corpus
    irpipe encode --model models/addax --dataset dl19-passage --output stores/a --dtype residual2  # compressed rows

Shards are written atomically; running the same command again resumes (finished shards are kept, their documents
skipped); a damaged shard (size or sha256 differ from the manifest's) is encoded again. A store of another model is
refused, and so is a folder of other files (no manifest: exit 2 before any work). `--dtype` chooses how a row is
kept (pipeline/rerank/codecs.py); a residual codebook is trained on a sample of the documents when the store is
made. `--engine ray --workers N` encodes the shards on a Ray cluster (pipeline/engine/): the same store, byte for
byte.
"""
from __future__ import annotations

import argparse
import shlex
from typing import Iterator

from pipeline.commands.data_args import add_data_args
from pipeline.commands.engine_args import add_engine_args, engine_from_args
from pipeline.commands.rerank import add_model_args, model_runtime
from pipeline.errors import ConfigError
from pipeline.rerank.codecs import check_dtype

CODEC_SAMPLE = 2048  # = pipeline.rerank.store.CODEC_SAMPLE (not imported here: it loads torch)


def _dtype(value: str) -> str:
    try:
        check_dtype(value)
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return value


def define_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, metavar="DIR|NAME",
                        help="checkpoint folder of a late-interaction model, or a pretrained one (biencoder)")
    add_data_args(parser, parts=("corpus", "index", "run"),
                  what="what to encode: a run's candidates (--run, or the dataset's), else every document")
    parser.add_argument("--output", required=True, metavar="STORE", help="store folder (created, or resumed)")
    parser.add_argument("--dtype", type=_dtype, default="fp16",
                        help="how a row is kept (pipeline/rerank/codecs.py): fp16 (default), fp32, int8 (per-row "
                             "scale), residual2 / residual1 (ColBERTv2: a centroid id and a 2- or 1-bit residual), "
                             "residual1-<k> / residual2-<k> (the residual's k principal components only: "
                             "residual1-256 is 34 bytes a 384-d row)")
    parser.add_argument("--codec-sample", type=int, default=CODEC_SAMPLE, metavar="N",
                        help=f"residual dtypes: documents whose rows train the codebook (default {CODEC_SAMPLE})")
    parser.add_argument("--centroids", type=int, default=None, metavar="K",
                        help="residual dtypes: k-means centroids (default ColBERTv2's 2^floor(log2(16 sqrt(rows))))")
    parser.add_argument("--shard-size", type=int, default=10_000, metavar="N", help="documents per shard (default 10,000)")
    add_model_args(parser, what="documents")
    add_engine_args(parser, shards=())  # a store shard (--shard-size) is the unit of work


def _documents(args) -> Iterator[tuple[str, str]]:
    """(docid, text) of what to encode: a run's candidates (texts from the run, those the dataset ships for it,
    else the dataset's or --index's index), or every document of the corpus."""
    from pipeline.data.corpus import iter_docs
    from pipeline.data.registry import get_dataset
    from pipeline.data.sets.local import WithFiles, local_dataset_from_files
    from pipeline.retrieve.index import dataset_index, open_index
    from pipeline.stages.rerank import CandidateTexts, missing_texts

    if args.corpus and not args.dataset:
        return ((doc["id"], doc["contents"]) for doc in iter_docs(args.corpus))
    dataset = get_dataset(args.dataset) if args.dataset else None
    if args.run:
        files = local_dataset_from_files({"run": args.run}, name="encode")
        dataset = WithFiles(dataset, files) if dataset is not None else files
    run = dataset.run() if dataset is not None else None
    if run is None:
        if dataset is None:
            raise ConfigError("give --run FILE (its candidates), --corpus FILE, or --dataset NAME|DIR")
        return ((doc["id"], doc["contents"]) for doc in dataset.docs())
    index = None
    if missing_texts(run):
        path = args.index or (dataset_index(dataset) if "docs" in dataset.provides else None)
        index = open_index(str(path)) if path else None
    texts = CandidateTexts(index, "irpipe encode").of(run)
    return ((docid, texts[docid]) for docid in dict.fromkeys(d for hits in run.ranking.values() for d, _ in hits))


def encode_command(args: argparse.Namespace) -> str:
    """The command that makes this store, less --output and the engine's flags, recorded in its manifest: a damaged
    shard's error says to run it again (with --output)."""
    parts = ["irpipe", "encode", "--model", args.model]
    for flag in ("dataset", "run", "corpus", "index"):
        if getattr(args, flag, None):
            parts += [f"--{flag}", str(getattr(args, flag))]
    for item in args.config:
        parts += ["--set", item]
    parts += ["--dtype", args.dtype, "--shard-size", str(args.shard_size)]
    if args.dtype.startswith("residual"):
        parts += ["--codec-sample", str(args.codec_sample)] + (["--centroids", str(args.centroids)] if args.centroids
                                                                 else [])
    return shlex.join(parts)


def main(args: argparse.Namespace) -> int:
    from pipeline.commands.train import key_values
    from pipeline.data.outputs import check_writable
    from pipeline.rerank.model import LateInteraction
    from pipeline.rerank.store import ENCODE_COMMAND, write_store
    from pipeline.rerank.store_manifest import check_store_folder
    from pipeline.stages.neural import reranker_for_model

    options = engine_from_args(args)  # checked before any work, with the output: a store, new or resumed
    check_store_folder(check_writable(args.output, "folder"))
    stage = reranker_for_model(args.model, **model_runtime(args), **key_values(args.config, "--set"))
    if not issubclass(stage.model_class, LateInteraction):
        raise ConfigError(f"{stage.name} scores query and document together: it has no document encodings to store")
    for flag, value in (("--shard-size", args.shard_size), ("--codec-sample", args.codec_sample),
                        ("--centroids", args.centroids or 1)):
        if value < 1:
            raise ConfigError(f"{flag} must be >= 1")
    if options.kind == "ray" and args.dtype.startswith("residual"):
        raise ConfigError(f"--dtype {args.dtype} trains its codebook when the store is made, which --engine ray does "
                          "not do yet: encode it locally, or choose fp16, fp32 or int8", field="dtype")
    stage.resolve_model(load=options.kind == "local")  # the model alone: a recipe is trained first
    token = ENCODE_COMMAND.set(encode_command(args))
    try:
        if options.kind == "ray":
            from pipeline.rerank.on_cluster import encode_on_cluster

            manifest, _ = encode_on_cluster(args.output, stage.source, stage.runtime(), stage.model_digest(),
                                            _documents(args), args.dtype, args.shard_size, options)
        else:
            manifest = write_store(args.output, stage.model, stage.model_digest(), _documents(args), args.dtype,
                                   args.shard_size, args.batch_size, stage.runtime().start(), stage.amp,
                                   args.batch_tokens, args.codec_sample, args.centroids)
    finally:
        ENCODE_COMMAND.reset(token)
    print(f"{args.output}: {manifest['count']} documents, {manifest['rows']} rows of {manifest['dims']} dims "
          f"({manifest['dtype']}), {len(manifest['shards'])} shards, model {manifest['model']}")
    return 0
