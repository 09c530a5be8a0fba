"""The verbs a PyTerrier user types, on irpipe stages, beside the same stage as a PyTerrier
transformer: `search("query")`, `transform(frame)` and `stage(frame)` give PyTerrier's result frame; a reranker
after `bm25(index=DIR)` reads its texts from that index; a run whose queries the topics lack is an error naming them.

    python examples/pyterrier_verbs.py                 # CACM (the dataset mirror, IRPIPE_MIRROR)
"""
import pipeline as ir
from pipeline.data.runs import Run
from pipeline.pyterrier import IrpipeTransformer
from pipeline.retrieve.index import dataset_index_for
from pipeline.stage import StageError

cacm = ir.dataset("cacm")
index = str(dataset_index_for(cacm))  # CACM's Lucene index, built once; any `irpipe index` folder does
bm25 = ir.bm25(index=index, k1=0.9, b=0.4)

# PyTerrier: a transformer's search() and transform(frame)
transformer = IrpipeTransformer(bm25 % 10)
print(transformer.search("sorting algorithms").to_string())
# irpipe: the stage itself, the same frame
found = (bm25 % 10).search("sorting algorithms")
assert found.equals(transformer.search("sorting algorithms"))
topics = cacm.topics().to_frame().head(3)
assert (bm25 % 10).transform(topics).equals(transformer.transform(topics))
assert (bm25 % 10)(topics).equals(transformer(topics))

# a reranker after bm25(index=DIR), bound to no dataset: texts from DIR (the dataset-bound pipeline's scores)
pipe = bm25 % 100 >> ir.overlap(idf=True)
print(ir.evaluate(pipe(cacm.topics()), cacm, ["AP"]), ir.evaluate(pipe.run(cacm), cacm, ["AP"]))

# topics that lack the run's queries: a StageError naming them
run = pipe(cacm.topics())
try:
    ir.overlap()(cacm.topics().subset(["1"]), Run(run.ranking, run.texts))
except StageError as error:
    print("StageError:", error)
