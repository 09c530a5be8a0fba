"""The pair head of a `irpipe pretrain-mlm --pairs` BERT, untouched by fine-tuning, as an LCQMC classifier
(eval/KEYWORD_BERT.md section 7):

    python bench/lcqmc/pair_head.py models/zh-bert-2l-128-pairs

Scores every lcqmc/dev and lcqmc/test pair by the head's logit difference "B is A's copy" minus "B is another
text", picks the threshold with the best dev accuracy (197 quantiles of the dev scores), and prints the dev
accuracy, the test accuracy at that threshold and at 0, and the Spearman correlation of the score with the label.
"""
from __future__ import annotations

import sys

import numpy as np
import torch
from scipy.stats import spearmanr
from transformers import BertForPreTraining, BertTokenizerFast

from pipeline.data.registry import get_dataset


def labelled_pairs(name: str) -> list[tuple[str, str, int]]:
    return [(p.text_a, p.text_b, int(p.label > 0)) for p in get_dataset(name).pairs()]


def head_scores(model, tokenizer, pairs, batch: int = 256) -> np.ndarray:
    scores = []
    with torch.inference_mode():
        for start in range(0, len(pairs), batch):
            chunk = pairs[start:start + batch]
            encoded = tokenizer([a for a, _, _ in chunk], [b for _, b, _ in chunk], truncation=True, max_length=64,
                                padding=True, return_tensors="pt")
            logits = model(**encoded).seq_relationship_logits                   # (B, 2): class 1 = copy
            scores += (logits[:, 1] - logits[:, 0]).tolist()
    return np.array(scores)


def main(folder: str) -> None:
    torch.set_num_threads(1)
    model, tokenizer = BertForPreTraining.from_pretrained(folder).eval(), BertTokenizerFast.from_pretrained(folder)
    dev, test = labelled_pairs("lcqmc/dev"), labelled_pairs("lcqmc/test")
    dev_scores, test_scores = head_scores(model, tokenizer, dev), head_scores(model, tokenizer, test)
    dev_labels, test_labels = np.array([y for *_, y in dev]), np.array([y for *_, y in test])
    cuts = np.quantile(dev_scores, np.linspace(0.01, 0.99, 197))
    best = max(cuts, key=lambda cut: ((dev_scores > cut) == dev_labels).mean())
    print(f"dev accuracy {((dev_scores > best) == dev_labels).mean():.4f} at threshold {best:.3f}; test accuracy "
          f"{((test_scores > best) == test_labels).mean():.4f} (at 0: {((test_scores > 0) == test_labels).mean():.4f}); "
          f"Spearman(score, label) dev {spearmanr(dev_scores, dev_labels)[0]:.3f}, "
          f"test {spearmanr(test_scores, test_labels)[0]:.3f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "models/zh-bert-2l-128-pairs")
