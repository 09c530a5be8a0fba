"""What LCQMC's and BQ's labels follow, without a model (eval/KEYWORD_BERT.md section 4.1):

    python bench/lcqmc/pair_shortcuts.py

- per split: the Spearman correlation of the pair label with the pair's length (characters of A + B) and with the
  character Jaccard overlap of A and B, and the accuracy of a threshold on each, picked on the dev split; the share
  of matches in each tenth of the pairs by length (the tenths of `balance=length`, pipeline/training/examples.py);
- on BM25's top 20 (own question excluded) of the first 2,000 lcqmc/questions-test queries: the paired question's
  length against the other candidates', Success@1 of ordering the candidates by length (longest first) and by
  overlap, and how many queries have a second, unjudged paraphrase among the candidates (another LCQMC pair labels
  it a match of the query).
"""
from __future__ import annotations

import statistics

from scipy.stats import spearmanr

from bench.keyword_bert import ranking_of
from pipeline.data.registry import get_dataset


def overlap(a: str, b: str) -> float:
    a, b = set(a), set(b)
    return len(a & b) / len(a | b)


FEATURES = {"length": lambda a, b: len(a) + len(b), "overlap": overlap}


def threshold(values: list[float], labels: list[int]) -> float:
    """The t of `value > t` -> match with the best accuracy (the smallest such t)."""
    return max(sorted(set(values)), key=lambda t: sum((v > t) == bool(y) for v, y in zip(values, labels)))


def match_rate_by_tenth(pairs: list) -> list[float]:
    lengths = sorted(len(p.text_a) + len(p.text_b) for p in pairs)
    edges = [lengths[len(lengths) * i // 10] for i in range(1, 10)]
    tenths: dict[int, list[int]] = {}
    for p in pairs:
        tenths.setdefault(sum(len(p.text_a) + len(p.text_b) >= e for e in edges), []).append(p.label)
    return [statistics.fmean(tenths[t]) for t in sorted(tenths)]


def label_table() -> None:
    for family in ("lcqmc", "bq"):
        splits = {split: list(get_dataset(f"{family}/{split}").pairs()) for split in ("dev", "test")}
        for name, feature in FEATURES.items():
            values = {s: [feature(p.text_a, p.text_b) for p in pairs] for s, pairs in splits.items()}
            labels = {s: [p.label for p in pairs] for s, pairs in splits.items()}
            cut = threshold(values["dev"], labels["dev"])
            cells = [f"{s}: Spearman {spearmanr(labels[s], values[s])[0]:+.3f}, threshold accuracy "
                     f"{statistics.fmean((v > cut) == bool(y) for v, y in zip(values[s], labels[s])):.3f}"
                     for s in splits]
            print(f"{family} label ~ {name} (threshold {cut:.3f} from dev): " + "; ".join(cells))
        for split, pairs in splits.items():
            print(f"{family} {split} share of matches by length tenth, shortest first: "
                  + " ".join(f"{rate:.2f}" for rate in match_rate_by_tenth(pairs)))
        print(f"{family} mean pair length: " + ", ".join(
            f"{s} {statistics.fmean(len(p.text_a) + len(p.text_b) for p in pairs):.1f}" for s, pairs in splits.items()))


def ranking_table(queries: int = 2000) -> None:
    ranking = ranking_of("lcqmc/questions-test", 20, queries)
    paraphrases: dict[str, set[str]] = {}
    for split in ("dev", "test"):
        for p in get_dataset(f"lcqmc/{split}").pairs():
            if p.label == 1:
                paraphrases.setdefault(p.text_a, set()).add(p.text_b)
                paraphrases.setdefault(p.text_b, set()).add(p.text_a)
    by_query: dict[str, list] = {}
    for pair in ranking.pairs:
        by_query.setdefault(pair.qid, []).append(pair)
    paired_length, other_length, longer, unjudged, unjudged_first = [], [], [], 0, 0
    for qid, pairs in by_query.items():
        judged = ranking.qrels[qid]
        relevant = [p for p in pairs if judged.get(p.docid, 0) > 0]
        extra = [p for p in pairs if p.text in paraphrases.get(p.query, ()) and p.docid not in judged]
        unjudged += bool(extra)
        unjudged_first += bool(extra) and pairs[0] is extra[0]
        if relevant and len(pairs) > 1:
            others = [len(p.text) for p in pairs if p is not relevant[0]]
            paired_length.append(len(relevant[0].text))
            other_length.append(statistics.fmean(others))
            longer.append(statistics.fmean(n > len(relevant[0].text) for n in others))
    print(f"questions-test ({len(by_query)} queries): paired question {statistics.fmean(paired_length):.2f} "
          f"characters, the other candidates {statistics.fmean(other_length):.2f}; share of the others longer "
          f"{statistics.fmean(longer):.3f}; queries with an unjudged labelled paraphrase among the candidates "
          f"{unjudged} (BM25's first hit for {unjudged_first})")
    for name in FEATURES:
        scores = [len(p.text) if name == "length" else overlap(p.query, p.text) for p in ranking.pairs]
        success = statistics.fmean(ranking.per_query(scores)["Success@1"].values())
        print(f"questions-test: candidates ordered by {name}, Success@1 {success:.4f}")


if __name__ == "__main__":
    label_table()
    ranking_table()
