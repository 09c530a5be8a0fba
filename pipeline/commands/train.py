"""`irpipe train MODEL`: train a neural reranker into a checkpoint folder (train.jsonl log, state/ for --resume).

    irpipe train monobert --train wikiqa/train --dev wikiqa/dev --output models/monobert-wikiqa --epochs 2
    irpipe train hcan --train trecqa/train --output models/h --set encoder=wide --set loss=hinge --option warmup=0.1
    irpipe train hcan --train ./mydata/train --dev-topics dev.tsv --dev-qrels dev.qrels --dev-run dev.trec --output m
"""
from __future__ import annotations

import argparse

from pipeline.commands.data_args import add_data_args, dataset_from_args
from pipeline.errors import ConfigError

TRAINING_FLAGS = ("epochs", "lr", "train_batch_size", "seed", "negatives", "depth", "measure", "patience",
                  "train_queries", "device", "amp", "threads")


def key_values(items: list[str], flag: str) -> dict:
    """KEY=VALUE items as a dict, each value read as the spec grammar reads a bare value (pipeline.spec.parse_scalar:
    true/false, none/null, numbers, else text)."""
    from pipeline.spec import parse_scalar  # here, not at the top: building the parser stays light

    values = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} {item!r}: expected KEY=VALUE")
        values[key.strip().replace("-", "_")] = parse_scalar(value.strip())
    return values


def define_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="model name (monobert, hcan, biencoder, ...)")
    add_data_args(parser, prefix="train", what="training data (labelled candidates, or qrels with BM25 negatives)")
    add_data_args(parser, prefix="dev", what="dev data (evaluated every epoch, picks the best epoch)")
    parser.add_argument("--output", required=True, metavar="DIR",
                        help="output folder: the best checkpoint, train.jsonl, state/")
    parser.add_argument("--epochs", type=int, metavar="N")
    parser.add_argument("--lr", type=float, metavar="LR")
    parser.add_argument("--batch-size", type=int, metavar="N", dest="train_batch_size",
                        help="groups per step: pairs, a positive with its negatives, or queries (the model's sampling)")
    parser.add_argument("--seed", type=int, metavar="N")
    parser.add_argument("--loss", metavar="NAME", help="the model's loss, where it has a choice (its config's loss field)")
    parser.add_argument("--negatives", choices=("labelled", "bm25", "keyword", "random"),
                        help="labelled candidates (default), BM25 hard negatives, or sampled: keyword-BERT's rule "
                             "(--option negatives_dict=thucnews alpha=0.6 beta=0.2 replace_ratio=0.1) or random")
    parser.add_argument("--depth", type=int, metavar="N", help="BM25 hits per query for negatives / dev (default 100)")
    parser.add_argument("--measure", metavar="MEASURE", help="dev measure that picks the best epoch (default AP; or loss)")
    parser.add_argument("--patience", type=int, metavar="N", help="early stop after N epochs without improvement")
    parser.add_argument("--train-queries", type=int, metavar="N", help="use only the first N training queries")
    parser.add_argument("--device", metavar="DEV", help="auto (default), cpu, cuda, cuda:N")
    parser.add_argument("--amp", choices=("bf16", "fp16"), help="autocast dtype")
    parser.add_argument("--threads", type=int, metavar="N", help="torch CPU threads (default: all cores)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="any other training option (optimizer=sgd, warmup=0.1, ...); repeatable")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="config",
                        help="a model config field (max_length=128, bert=PATH, encoder=wide, margin=0.5, ...); repeatable")
    parser.add_argument("--resume", action="store_true", help="continue the interrupted run in --output")


def main(args: argparse.Namespace) -> int:
    from pipeline.data.outputs import check_writable
    from pipeline.training.loop import train

    check_writable(args.output, "folder")  # before any work
    options = key_values(args.option, "--option")
    options.update({k: getattr(args, k) for k in TRAINING_FLAGS if getattr(args, k) is not None})
    overrides = key_values(args.config, "--set")
    if args.loss is not None:
        overrides["loss"] = args.loss
    result = train(args.model, dataset_from_args(args, prefix="train"), args.output,
                   dev=dataset_from_args(args, prefix="dev", required=False), options=options, overrides=overrides,
                   resume=args.resume)  # an interrupt is reported by the loop, with what was saved
    scores = ", ".join(f"{k} {v:.4f}" for k, v in result.best.items() if v is not None)
    print(f"{result.out}: best epoch {result.best_epoch} of {len(result.history)}{': dev ' + scores if scores else ''}")
    return 0
