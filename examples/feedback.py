"""What a Python program sees of a run, as the command line does: each stage's start and end on stderr (queries,
hits, computed or from the stage cache, seconds, queries/s), progress bars (tqdm's auto mode: a widget in a
notebook, text in a script), and scores in the table `irpipe eval` prints -- each the PyTerrier idiom beside.

    python examples/feedback.py                 # TrecQA raw-test's shipped candidates: seconds
    python examples/feedback.py 2>/dev/null     # the table alone

Silence the lines and bars with `pipeline.log.quiet()` (the command line's -q), or configure logging yourself:
`logging.basicConfig(...)` and they go to your handler.
"""
import pipeline as ir

dataset = ir.dataset("trecqa/raw-test")
pipeline = ir.candidates() >> ir.overlap(idf=True)  # pt: candidates >> pt.apply.doc_score(...) (pt.tqdm for bars)
pipeline.run(dataset)                               # stderr: "overlap(idf=True): start: 95 queries, 1517 input hits"
run = pipeline.run(dataset)                         # ... "from cache": a stage's output is kept, as `irpipe run`'s
print(ir.Experiment([pipeline], dataset, ["AP", "RR"], names=["overlap"]))  # pt.Experiment([...], topics, qrels, ...)
