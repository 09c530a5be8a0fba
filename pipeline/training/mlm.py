"""Masked-language-model pretraining of a small BERT on the text we have (`irpipe pretrain-mlm`), for the models
that need a BERT in a language no pretrained checkpoint here speaks (Chinese: keyword-BERT on LCQMC and BQ).

    texts  = corpus_texts(["thucnews/dev", "lcqmc/dev", ...])   # records' texts, both sides of pairs, file lines
    vocab  = build_vocab(texts)            # [PAD] [UNK] [CLS] [SEP] [MASK], then characters (and ##pieces) by count
    pretrain(texts, OUT, MLMOptions(layers=2, hidden=256, steps=20000))   # resumable: OUT/state/, OUT/pretrain.jsonl

This module: the options, the corpus and the vocabulary (no torch: the command line imports it). The masked
examples: pipeline/training/mlm_examples.py; the loop: pipeline/training/pretrain.py.

Masking (Devlin et al. 2019): 15% of the tokens of a sentence are chosen; of those 80% become [MASK], 10% a random
token, 10% stay; the loss is the cross-entropy of the chosen tokens only. Whole-word masking (`whole_words`,
Cui et al. 2019 for Chinese): jieba words are chosen instead of tokens, and every character of a chosen word is
masked. The output folder is an ordinary BERT folder (config.json, model.safetensors of BertForMaskedLM, vocab.txt,
tokenizer.json): `bert=OUT` in monobert / kwbert loads its encoder (pipeline/rerank/bert.py).

Sentence pairs (`pairs`, [R]: the LCQMC diagnosis of eval/KEYWORD_BERT.md, section 4, found a BERT pretrained on
single sentences that never learns to compare two): every example is [CLS] A [SEP] B [SEP] (token types 0 / 1, each
side cut to (max_length - 3) // 2 pieces), where B is, with probability 1/2 each: a noisy copy of A (each jieba
word dropped with probability 0.1, one at least kept, neighbouring words swapped with probability 0.1), or another
training text, half the time one that shares a word with A (a word of A found in 2 to 2,000 texts) and otherwise any.
Both sides are masked as above, so a word masked in A can often be read off B (as in the translation-LM task of
Lample & Conneau 2019), and a linear head on the pooled [CLS] (BERT's next-sentence head, BertForPreTraining) says
whether B is A's copy: the loss is the MLM loss plus that cross-entropy. The folder keeps the same BERT encoder.

Resuming: every `save_every` steps the model, optimizer, schedule and RNG states go into OUT/state/step-NNNNNNN/,
committed by rewriting OUT/state/current.json atomically (as pipeline/training/state.py does for the reranker
loop); `--resume` continues from the commit and reaches the same weights as an uninterrupted run.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pipeline.data.files import numbered_lines
from pipeline.errors import ConfigError
from pipeline.rerank.bert import basic_tokens, new_tokenizer
from pipeline.validate import at_least

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CHINESE_SOURCES = ["thucnews/dev", "thucnews/test", "insuranceqa-zh/train", "insuranceqa-zh/valid",
                   "insuranceqa-zh/test", "lcqmc/dev", "bq/dev"]  # LCQMC and BQ: only the splits not tested on
LOG = "pretrain.jsonl"
TOKENIZATION = {"lower_case": True, "chinese_chars": True}  # uncased; each CJK character a token (Chinese BERT's)


@dataclass
class MLMOptions:
    layers: int = 2
    hidden: int = 256            # heads = hidden / 64, feed-forward 4 x hidden
    max_length: int = 64         # word pieces per sentence, [CLS] and [SEP] included
    batch_size: int = 64
    steps: int = 10000           # the schedule's length (warm-up then linear decay to 0)
    lr: float = 5e-4
    warmup: float = 0.05
    weight_decay: float = 0.01
    mask_rate: float = 0.15
    whole_words: bool = False    # jieba whole-word masking
    pairs: bool = False          # sentence pairs: A with its noisy copy or another text, and the copy-or-not head
    held_out: float = 0.02       # fraction of the texts kept out of training for the held-out loss / accuracy
    seed: int = 0
    save_every: int = 500
    log_every: int = 100
    threads: int | None = None
    device: str = "auto"         # auto: the first CUDA device when there is one (bf16 autocast there), else the CPU

    def check(self) -> None:
        for name in ("layers", "hidden", "batch_size", "steps", "save_every", "log_every"):
            at_least("pretrain-mlm", name, getattr(self, name), 1)
        at_least("pretrain-mlm", "max_length", self.max_length, 3)
        for name in ("lr", "warmup", "weight_decay", "mask_rate", "held_out"):
            at_least("pretrain-mlm", name, getattr(self, name), 0)
        if self.hidden % 64 and self.hidden % 32:
            raise ConfigError(f"pretrain-mlm: hidden={self.hidden}; use a multiple of 32 (heads of 64 or 32)",
                              field="hidden")


# -- corpus and vocabulary -------------------------------------------------------------------------------------

def corpus_texts(sources: list[str]) -> list[str]:
    """The distinct non-empty texts of the sources, in order: a dataset's records (their text) or pairs (both
    sides), or a UTF-8 text file (one text a line)."""
    from pipeline.data.registry import get_dataset

    texts: dict[str, None] = {}
    for source in sources:
        if Path(source).is_file():
            texts.update((line.strip(), None) for _, line in numbered_lines(source))
            continue
        dataset = get_dataset(source)
        if "records" in dataset.provides:
            texts.update((record["text"], None) for record in dataset.records())
        elif "pairs" in dataset.provides:
            for pair in dataset.pairs():
                texts.update({pair.text_a: None, pair.text_b: None})
        else:
            raise ConfigError(f"pretrain-mlm: {source} has neither records nor pairs; name a dataset with texts "
                              "(thucnews/dev, lcqmc/dev, ...) or a text file", field="corpus")
    return [text for text in texts if text]


def build_vocab(texts: list[str], min_count: int = 2) -> list[str]:
    """Special tokens, then every token of BERT's basic tokenization (as `make_tokenizer`'s tokenizer splits) seen
    `min_count` times, each with its characters as word pieces (c and ##c) so that a rare word splits."""
    counts: Counter = Counter()
    for tokens in basic_tokens(texts, **TOKENIZATION):
        for token in tokens:
            counts.update([token[0], *("##" + c for c in token[1:])] if len(token) > 1 else [token])
    return SPECIALS + sorted((t for t, n in counts.items() if n >= min_count), key=lambda t: (-counts[t], t))


def make_tokenizer(vocab: list[str], folder: Path):
    """The pretraining's tokenizer over `vocab` (TOKENIZATION: the one `build_vocab` counts with), saved into
    `folder` with its vocab.txt."""
    return new_tokenizer(vocab, folder, **TOKENIZATION)
