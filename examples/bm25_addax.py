"""BM25 -> ADDAX (a training recipe, trained once and cached) -> evaluation against BM25, from Python: the main job
(`irpipe run`, eval/main-job.yaml) in ten lines of `ir.` calls, with the same run file, byte for byte.

    python examples/bm25_addax.py                      # TREC DL 2019: the BM25 top-100 it ships, reranked
    python examples/bm25_addax.py wikiqa/dev runs/x.trec   # any dataset that ships candidates, any output

It writes the ADDAX run (runs/main-job.trec by default) and prints ADDAX beside BM25 with paired t-tests.
"""
import sys

import pipeline as ir

dataset = ir.dataset(sys.argv[1] if len(sys.argv) > 1 else "dl19-passage")
output = sys.argv[2] if len(sys.argv) > 2 else "runs/main-job.trec"
bm25 = ir.candidates()  # the dataset's first-stage run: DL19 ships BM25's top 100 (k1=0.9, b=0.4)
addax = bm25 >> ir.addax(train="dl20-passage", negatives="bm25", epochs=1, train_queries=10, max_doc_length=180,
                         seed=0)  # trained on the first 10 DL20 queries (76 triplets, 3 Adam steps), then cached
ir.run(addax, dataset, output=output, tag="main-job")
print(ir.Experiment([bm25, addax], dataset, ["nDCG@10", "RR@10", "AP", "R@100"], names=["BM25", "ADDAX"],
                    baseline=0))
