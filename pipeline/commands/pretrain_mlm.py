"""`irpipe pretrain-mlm`: pretrain a small BERT by masked-language modelling into an ordinary local BERT folder.

    irpipe pretrain-mlm --output models/zh-bert-2l --layers 2 --hidden 256 --steps 20000 --whole-words --threads 1
    irpipe pretrain-mlm --output models/zh-bert-2l --layers 2 --hidden 256 --steps 20000 --whole-words --resume
    irpipe pretrain-mlm --corpus my.txt --vocab vocab.txt --output models/b   # any text file; any BERT vocab.txt

The default corpus is the Chinese text shipped here that LCQMC/BQ evaluations do not test on (THUCNews titles,
InsuranceQA-zh questions, LCQMC and BQ dev pairs); the vocabulary is built from it, or given with --vocab (e.g. the
21,128-entry Chinese BERT vocab.txt of the `tudou` package). Method and files: pipeline/training/mlm.py, pretrain.py.
A finished run prints its `bert_recipe=` (pipeline/rerank/integrity.py `pretraining_recipe`): an experiment file
whose make: re-creates the backbone pins that, the same on every CPU, where the tensors' sha256 changes with the
CPU's rounding.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.errors import InputError


def define_args(parser: argparse.ArgumentParser) -> None:
    from pipeline.training.mlm import CHINESE_SOURCES, MLMOptions

    defaults = MLMOptions()
    parser.add_argument("--output", required=True, metavar="DIR",
                        help="the BERT folder (and its state/, pretrain.jsonl)")
    parser.add_argument("--corpus", nargs="+", default=CHINESE_SOURCES, metavar="SOURCE",
                        help="datasets with records or pairs, or text files (one text a line); default: %(default)s")
    parser.add_argument("--vocab", metavar="FILE", help="a BERT vocab.txt to use (default: built from the corpus)")
    for name, kind, unit, text in (
            ("layers", int, "N", "transformer layers"), ("hidden", int, "N", "hidden size (heads of 64)"),
            ("max_length", int, "N", "word pieces per sentence"), ("batch_size", int, "N", "sentences per step"),
            ("steps", int, "N", "optimizer steps (the schedule's length)"), ("lr", float, "LR", "peak learning rate"),
            ("warmup", float, "FRACTION", "warm-up share of the steps"), ("mask_rate", float, "FRACTION", "tokens masked"),
            ("held_out", float, "FRACTION", "texts held out for the held-out loss/accuracy"), ("seed", int, "N", "seed"),
            ("save_every", int, "N", "steps between saved (resumable) states"),
            ("log_every", int, "N", "steps between log lines"), ("threads", int, "N", "torch CPU threads")):
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=getattr(defaults, name), metavar=unit,
                            help=f"{text} (default: %(default)s)")
    parser.add_argument("--device", default=defaults.device, metavar="DEVICE",
                        help="auto (CUDA when there is one, under bf16 autocast), cpu, cuda or cuda:N (default: auto)")
    parser.add_argument("--whole-words", action="store_true", help="whole-word masking over jieba words")
    parser.add_argument("--pairs", action="store_true",
                        help="sentence pairs: each text with its noisy copy or another text, masked on both sides, "
                             "and a head that tells the copy (pipeline/training/mlm.py)")
    parser.add_argument("--max-minutes", type=float, metavar="M", help="stop cleanly after M minutes (then --resume)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --output from its last saved state")


def main(args: argparse.Namespace) -> int:
    from dataclasses import fields

    from pipeline.data.files import numbered_lines
    from pipeline.data.outputs import check_writable
    from pipeline.rerank.integrity import pretraining_recipe
    from pipeline.training.mlm import MLMOptions, corpus_texts
    from pipeline.training.pretrain import pretrain

    check_writable(args.output, "folder")  # before any work
    options = MLMOptions(**{f.name: getattr(args, f.name) for f in fields(MLMOptions) if hasattr(args, f.name)})
    vocab = None
    if args.vocab:
        vocab = [line.strip() for _, line in numbered_lines(args.vocab)]
        for token in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"):
            if token not in vocab:
                raise InputError(args.vocab, f"the vocabulary has no {token} token", field="vocab")
    texts = corpus_texts(args.corpus)
    record = pretrain(texts, args.output, options, vocab=vocab, resume=args.resume, max_minutes=args.max_minutes)
    held = record.get("held_out", {})
    print(f"{args.output}: step {record.get('step', 0)} of {options.steps}; train loss {record.get('loss', float('nan')):.4f}"
          + (f"; held-out loss {held['loss']:.4f}, accuracy {held['accuracy']:.4f}" if held else ""))
    recipe, _ = pretraining_recipe(Path(args.output))
    if recipe:  # what an experiment file pins for the backbone its make: re-creates: the same on every CPU
        print(f"{args.output}: bert_recipe={recipe}")
    return 0
