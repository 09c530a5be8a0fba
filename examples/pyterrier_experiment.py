"""pt.Experiment's inputs in ir.Experiment: result frames as systems, topics and qrels as frames,
a run file and a stage beside them, the Wilcoxon test with Holm's correction, wins and losses, the per-query frame.
The same call goes to PyTerrier's pt.Experiment, and the two tables are printed one above the other.

    python examples/pyterrier_experiment.py            # CACM (the dataset mirror, IRPIPE_MIRROR)
"""
import tempfile
from pathlib import Path

import pyterrier as pt

import pipeline as ir
from pipeline.evaluation import parse_measures
from pipeline.pyterrier import qrels_frame

cacm = ir.dataset("cacm")
topics, qrels = cacm.topics().to_frame(), qrels_frame(cacm.qrels())  # qid, query / qid, docno, label
frames = [ir.bm25(k1=k1, b=b).run(cacm).to_frame() for k1, b in ((0.9, 0.4), (1.2, 0.75))]  # result frames
measures, names = parse_measures("AP nDCG@10"), ["BM25 0.9/0.4", "BM25 1.2/0.75"]

# PyTerrier: systems and inputs as frames
print(pt.Experiment(frames, topics, qrels, eval_metrics=measures, names=names, baseline=0, test="wilcoxon",
                    correction="holm").to_string())
# irpipe: the same call; its table, and pt.Experiment's columns from to_dataframe()
table = ir.Experiment(frames, (topics, qrels), measures, names=names, baseline=0, test="wilcoxon", correction="holm")
print(table.to_dataframe().to_string())

# more kinds of system in one call: a run file and a stage, on the dataset by name
with tempfile.TemporaryDirectory() as folder:
    run_file = ir.bm25(k1=0.9, b=0.4).run(cacm).write(Path(folder) / "bm25.trec")
    print(ir.Experiment([str(run_file), ir.bm25(k1=0.9, b=0.4) % 100 >> ir.overlap(idf=True)], "cacm", ["AP"],
                        names=["bm25 (file)", "overlap"], baseline=0))

# pt.Experiment(..., perquery=True): one row per system, query and measure
print(ir.Experiment(frames, (topics, qrels), measures, names=names, perquery=True).head().to_string())
