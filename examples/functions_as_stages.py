"""Python functions as stages, and weighted sums, on TrecQA raw-test's shipped candidates (95 questions, 1,517
answers: seconds, no index, no model) -- each line the PyTerrier idiom beside irpipe's.

    python examples/functions_as_stages.py

Prints a table of the pipelines' AP and RR with paired t-tests against IDF-weighted word overlap. (Not against the
candidates' own order: TrecQA ships each question's correct answers first, AP 0.937, the ceiling.)
"""
import pipeline as ir

dataset = ir.dataset("trecqa/raw-test")
candidates = ir.candidates()  # the shipped candidate answers, with their texts


def shorter_first(query, text):  # pt.apply.doc_score(lambda row: -len(row["text"]))
    return -len(text.split())


def top_five(frame):  # pt.apply.generic(lambda df: df[df["rank"] < 5])
    return frame[frame["rank"] < 5]


overlap = candidates >> ir.overlap(idf=True)
pipelines = {
    "overlap": overlap,
    "shorter first": candidates >> ir.apply_doc_score(shorter_first),  # pipe >> pt.apply.doc_score(...)
    "overlap, top 5": overlap >> top_five,  # pipe >> pt.apply.generic(...); a plain function is a stage after >>
    "0.7 idf + 0.3 word": candidates >> (0.7 * ir.overlap(idf=True) + 0.3 * ir.overlap(idf=False)),  # same in pt
    "lower-cased": ir.apply_query(str.lower) >> candidates >> ir.overlap(idf=True),  # pt.apply.query(...) >> pipe
}
for name, pipeline in pipelines.items():
    print(f"{name:24} {pipeline!r}")
print(ir.Experiment(list(pipelines.values()), dataset, ["AP", "RR"], names=list(pipelines), baseline=0))
