"""`irpipe rerank`: rerank a run file with a neural model (a checkpoint folder, or a pretrained model's name).

    irpipe rerank --model models/hcan-trecqa --run cand.trec --dataset trecqa/raw-test --output hcan.trec
    irpipe rerank --model biencoder --store stores/dl20 --run dl20.trec --dataset dl20-passage --output be.trec
"""
from __future__ import annotations

import argparse
import sys

from pipeline.commands.data_args import add_data_args, dataset_from_args
from pipeline.commands.engine_args import add_engine_args, engine_from_args
from pipeline.errors import ConfigError
from pipeline.log import logger


def add_model_args(parser: argparse.ArgumentParser, what: str = "pairs") -> None:
    """How a model is set up and run: config fields, batches, device, autocast, int8, threads (rerank and encode)."""
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="config",
                        help="a model config field (max_length=512, ...); repeatable")
    parser.add_argument("--batch-size", type=int, metavar="N",
                        help=f"{what} per batch at most (default: 64 on the CPU, 512 on CUDA)")
    parser.add_argument("--batch-tokens", type=int, metavar="N",
                        help="padded word pieces per batch at most, batches sorted by length (default: 2048 on the "
                             "CPU, 65536 on CUDA; 0: no budget)")
    parser.add_argument("--device", default="auto", metavar="DEV", help="auto (default: CUDA when present), cpu, cuda, cuda:N")
    parser.add_argument("--amp", choices=("auto", "none", "bf16", "fp16"), default="auto",
                        help="autocast: auto (default: bf16 on CUDA and on a CPU with native bf16, AVX512-BF16 or "
                             "AMX; else none), none, bf16 (CPU or CUDA), fp16 (CUDA)")
    parser.add_argument("--quantize", type=quantize_scheme, default="none", metavar="SCHEME",
                        help="none (default), int8 (the linear layers dynamically quantised, weights per tensor), "
                             "int8-channel (weights per output channel), int8-vnni (and activations in 8 bits, not 7: "
                             "VNNI CPUs), int8-token (activations a range per token; with -smooth, SmoothQuant scales "
                             "from the LayerNorms), each with ':' and layer groups kept in fp32 "
                             "(int8-channel:ffn-out; pipeline/rerank/quantize.py). CPU inference; not with --amp bf16")
    parser.add_argument("--threads", type=int, metavar="N", help="torch CPU threads (default: all cores)")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile the model's forward (cross-encoders): tens of seconds to compile, then "
                             "a few percent faster on a 2-core CPU (docs/inference.md)")


def quantize_scheme(value: str) -> str:
    """--quantize's value: none or an int8 scheme (else argparse's exit 2 with the choices)."""
    from pipeline.rerank.scoring import check_quantize

    try:
        return check_quantize(value) or "none"
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def model_runtime(args: argparse.Namespace) -> dict:
    """The stage's keyword arguments of how it runs, from `add_model_args`' flags."""
    return {"batch_size": args.batch_size, "batch_tokens": args.batch_tokens, "device": args.device, "amp": args.amp,
            "quantize": None if args.quantize == "none" else args.quantize, "threads": args.threads,
            "compile": args.compile}


def define_args(parser: argparse.ArgumentParser) -> None:
    from pipeline.data.runs import RUN_FORMATS

    parser.add_argument("--model", required=True, metavar="DIR|NAME",
                        help="checkpoint folder (config.json + model.safetensors; a transformers or sentence-transformers "
                             "folder too), hf:ORG/NAME[@REVISION] from the local Hugging Face cache (offline), or a "
                             "pretrained model (biencoder)")
    add_data_args(parser, what="the run to rerank (--run, or the dataset's candidates), its topics and texts")
    parser.add_argument("--output", required=True, metavar="RUN", help="reranked run file")
    parser.add_argument("--output-format", choices=RUN_FORMATS, default="trec")
    parser.add_argument("--store", metavar="DIR", help="stored document encodings (late-interaction models: irpipe encode)")
    add_model_args(parser)
    parser.add_argument("--eval", metavar="MEASURES",
                        help="evaluate the output with the qrels (e.g. RR@10,AP,nDCG@10): irpipe eval's table")
    parser.add_argument("--no-cache", action="store_true", help="rescore every pair (default: the stage cache's "
                                                                "run when the model, run and texts are unchanged)")
    add_engine_args(parser, shards=("pairs",))


def main(args: argparse.Namespace) -> int:
    """The reranker as a one-stage pipeline over the run's candidates, bound and run as `irpipe run` runs one: in the
    stage cache, keyed by the model's digest, the run and the texts."""
    from pipeline.commands.train import key_values
    from pipeline.data.outputs import check_writable
    from pipeline.experiment import run_pipeline
    from pipeline.stages.neural import reranker_for_model

    options = engine_from_args(args)  # checked before any work, with the output
    check_writable(args.output, "file")
    dataset = dataset_from_args(args)
    if "run" not in dataset.provides:
        raise ConfigError("nothing to rerank: give --run FILE (or a dataset that ships candidates)")
    if args.eval and "qrels" not in dataset.provides:
        raise ConfigError("--eval needs qrels: --qrels FILE or a dataset that has them")
    reranker = reranker_for_model(args.model, store=args.store, **model_runtime(args), **key_values(args.config, "--set"))
    output, _, _ = run_pipeline(reranker, dataset, use_cache=not args.no_cache, engine=options)
    output.write(args.output, format=args.output_format, tag=reranker.name)
    logger.info("wrote %s", args.output)
    if args.eval:  # the table `irpipe eval OUTPUT` prints
        from pipeline.compare import compare

        sys.stdout.write(compare({args.output: output}, dataset.qrels(), args.eval,
                                 rel_level=dataset.rel_level).to_table())
    return 0
