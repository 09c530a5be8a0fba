"""How much a tweet's URL says about its relevance, untrained (HCAN's with_url input).

    PYTHONPATH=. IRPIPE_MIRROR=../shared/data python bench/microblog/url_signal.py 2013

Over the year's QL candidates: the share of candidates with a URL and the relevant share with and without one;
then P@30 / AP of ranking by the share of the query's character trigrams found in the URL (what HCAN's URL branch
sees at level 0 with rm_similarity=cosine, rm_softmax=raw before training: an exact trigram match scores 1) and
in the tweet's text (the char_trigrams branch), each alone and each added to the QL score's per-query z-score
(ties broken by QL). Trigrams and URL text as HCAN reads them (pipeline/rerank/text.py).
"""
import statistics
import sys

from pipeline.data.registry import get_dataset
from pipeline.data.runs import Run
from pipeline.evaluation import evaluate
from pipeline.rerank.text import char_trigrams, url_text


def trigram_share(query: str, text: str) -> float:
    grams, found = char_trigrams(query), set(char_trigrams(text))
    return sum(g in found for g in grams) / max(len(grams), 1)


def zscores(scores: dict[str, float]) -> dict[str, float]:
    mean, sd = statistics.fmean(scores.values()), statistics.pstdev(scores.values())
    return {d: (s - mean) / sd if sd else 0.0 for d, s in scores.items()}


def main(year: str) -> None:
    dataset = get_dataset(f"microblog/{year}")
    topics, qrels, run = dataset.topics(), dataset.qrels(), dataset.run()
    pairs = [(qid, docid) for qid, hits in run.ranking.items() for docid, _ in hits]
    with_url = [p for p in pairs if url_text(run.doc_fields[p[1]]["url"])]
    relevant = lambda ps: sum(qrels[q].get(d, 0) > 0 for q, d in ps) / max(len(ps), 1)  # noqa: E731
    print(f"{year}: {len(pairs)} candidates, {len(with_url) / len(pairs):.3f} with a URL; relevant share "
          f"{relevant(with_url):.3f} with a URL, {relevant(sorted(set(pairs) - set(with_url))):.3f} without")
    features = {"url": lambda q, d: trigram_share(topics[q], url_text(run.doc_fields[d]["url"])),
                "text": lambda q, d: trigram_share(topics[q], run.texts[d])}
    for name, feature in features.items():
        alone, with_ql = {}, {}
        for qid, hits in run.ranking.items():
            values = {d: feature(qid, d) for d, _ in hits}
            ql = zscores(dict(hits))
            alone[qid] = {d: v + 1e-6 * ql[d] for d, v in values.items()}
            with_ql[qid] = {d: values[d] + ql[d] for d in values}
        for label, scores in ((f"{name} trigrams", alone), (f"QL z-score + {name} trigrams", with_ql)):
            result = evaluate(Run.from_scores(scores), qrels, ["AP", "P@30"])
            print(f"{year} {label}: " + ", ".join(f"{k} {v:.4f}" for k, v in result.items()), flush=True)
    result = evaluate(run, qrels, ["AP", "P@30"])
    print(f"{year} QL: " + ", ".join(f"{k} {v:.4f}" for k, v in result.items()))


if __name__ == "__main__":
    main(sys.argv[1])
