"""Evaluation edge cases as the reference tools treat them (docs/interop.md, "Evaluation edge cases").

Each case either agrees with the reference tool -- trec_eval through pytrec_eval (its C code), or the official MS
MARCO script's rule, restated below from msmarco_eval.py -- or is refused with exit 2 naming file, line and field.
"""
from __future__ import annotations

import random

import pytest

from pipeline.data.qrels import read_qrels
from pipeline.data.runs import read_run
from pipeline.errors import InputError
from pipeline.evaluation import evaluate, parse_measures, per_query


def refused(path, line: int, field: str) -> InputError:
    with pytest.raises(InputError) as error:
        read_run(path)
    assert (error.value.line, error.value.field) == (line, field), str(error.value)
    assert str(error.value).startswith(f"{path}:{line} [{field}]")
    return error.value


# -- one run file, one format -----------------------------------------------------------------------------------

@pytest.mark.parametrize("lines, bad, fragment", [
    (["q1 Q0 d1 1 2.0 t", "q1\td2\t2"], 2, "3 columns (an MS MARCO line) in a TREC run"),
    (["q1\td1\t1", "q1 Q0 d2 2 1.0 t"], 2, "6 columns (a TREC line) in an MS MARCO run"),
])
def test_a_run_mixing_trec_and_msmarco_lines_is_refused(tmp_path, irpipe_eval, lines, bad, fragment):
    """trec_eval stops at such a line ('get_results: Malformed line 2'); the MS MARCO script cannot read a TREC
    line either. Read line by line, each line's own format, the two kinds of line used to be mixed silently."""
    path = tmp_path / "mixed.run"
    path.write_text("\n".join(lines) + "\n")
    assert fragment in str(refused(path, bad, "columns"))
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\n")
    code, out, err = irpipe_eval("eval", path, "--qrels", qrels)
    assert code == 2 and out == "" and f"{path}:{bad} [columns]" in err


# -- MS MARCO ranks: placed by rank, as the official script does ---------------------------------------------------

def official_mrr10(qrels: dict[str, set[str]], lines: list[tuple[str, str, int]]) -> float:
    """MRR@10 by msmarco_eval.py's rule (load_candidate_from_stream, compute_metrics): each query has 1000 slots;
    a line puts its pid in slot rank-1 (a later line overwrites an earlier one; rank 0 is Python's slot -1, the
    last); a query scores 1/(i+1) for the first slot i < 10 holding a relevant pid; the sum is divided by the
    number of queries in the qrels."""
    slots: dict[str, list] = {}
    for qid, pid, rank in lines:
        slots.setdefault(qid, [None] * 1000)[rank - 1] = pid
    total = 0.0
    for qid, ranked in slots.items():
        for i in range(10):
            if ranked[i] is not None and ranked[i] in qrels.get(qid, ()):
                total += 1 / (i + 1)
                break
    return total / len(qrels)


def write_msmarco(path, lines) -> None:
    path.write_text("".join(f"{q}\t{p}\t{r}\n" for q, p, r in lines))


@pytest.mark.parametrize("ranks, bad, fragment", [
    ([1, 2, 2, 3], 3, "rank 2 of query '7' is given twice (lines 2 and 3)"),
    ([1, 3, 4], 2, "query '7' has no rank 2"),
    ([2, 1, 4], 3, "query '7' has no rank 3"),
    ([0, 1, 2], 1, "rank 0 is not positive"),
    ([1, -1], 2, "rank -1 is not positive"),
])
def test_msmarco_ranks_that_the_official_script_would_place_elsewhere_are_refused(tmp_path, ranks, bad, fragment):
    """Repeated, missing or non-positive ranks: the official script puts each passage in the slot its rank names
    (an empty slot where a rank is missing, the later passage where one repeats, rank 0 in the last slot); irpipe
    ranks by the rank column alone and cannot hold an empty slot, so it refuses these rather than score them
    another way."""
    path = tmp_path / "run.tsv"
    write_msmarco(path, [("7", f"p{i}", rank) for i, rank in enumerate(ranks)])
    assert fragment in str(refused(path, bad, "rank"))


def test_msmarco_lines_out_of_rank_order_are_placed_by_rank(tmp_path):
    path = tmp_path / "run.tsv"
    write_msmarco(path, [("7", "c", 3), ("7", "a", 1), ("7", "b", 2)])
    assert [d for d, _ in read_run(path)["7"]] == ["a", "b", "c"]
    assert evaluate(path, {"7": {"b": 1}}, ["RR@10"])["RR@10"] == official_mrr10({"7": {"b"}}, [
        ("7", "c", 3), ("7", "a", 1), ("7", "b", 2)]) == 0.5


def test_msmarco_runs_agree_with_the_official_script_or_are_refused(tmp_path):
    """Random MS MARCO runs, their ranks shuffled, repeated, left out or made non-positive: each is refused with
    the rank at fault, or its RR@10 equals MRR@10 by the official script's rule. Both kinds occur."""
    rng = random.Random(33)
    outcomes = {"refused": 0, "agreed": 0}
    for trial in range(300):
        qrels, lines = {}, []
        queries = rng.randint(1, 4)
        spoilt = rng.randrange(queries)
        spoil = rng.choice(["shuffled", "shuffled", "gap", "repeat", "zero", "negative"])
        for q in range(queries):
            pids = [f"p{i}" for i in range(rng.randint(1, 14))]
            ranks = list(range(1, len(pids) + 1))
            kind = spoil if q == spoilt else "shuffled"
            if kind == "gap" and len(ranks) > 1:
                ranks = [r + (r >= rng.randint(1, len(ranks))) for r in ranks]
            elif kind == "repeat" and len(ranks) > 1:
                ranks[rng.randrange(len(ranks))] = rng.choice(ranks)
            elif kind == "zero":
                ranks[rng.randrange(len(ranks))] = 0
            elif kind == "negative":
                ranks[rng.randrange(len(ranks))] = -rng.randint(1, 5)
            lines += [(str(q), pid, rank) for pid, rank in zip(pids, ranks)]
            qrels[str(q)] = set(rng.sample(pids, rng.randint(1, min(3, len(pids)))))
        rng.shuffle(lines)
        path = tmp_path / f"run{trial}.tsv"
        write_msmarco(path, lines)
        try:
            run = read_run(path)
        except InputError as error:
            assert error.field == "rank" and error.line is not None, str(error)
            outcomes["refused"] += 1
            continue
        graded = {q: {pid: 1 for pid in pids} for q, pids in qrels.items()}
        assert evaluate(run, graded, ["RR@10"])["RR@10"] == pytest.approx(official_mrr10(qrels, lines)), lines
        outcomes["agreed"] += 1
    assert min(outcomes.values()) > 50, outcomes


# -- --rel-level on the count measures: trec_eval's meaning --------------------------------------------------------

QRELS = {"1": {"a": 2, "b": 1, "c": 0, "d": 3}, "2": {"x": 3, "w": 1}, "3": {"m": 1, "n": 2}}
RUN = {"1": {"a": 3.0, "b": 2.0, "z": 1.0}, "2": {"y": 1.0, "w": 0.5}, "3": {"m": 2.0, "n": 1.0, "o": 0.5}}


def pytrec(level: int) -> dict[str, dict[str, float]]:
    import pytrec_eval

    names = {"num_ret", "num_rel", "num_rel_ret"}
    return pytrec_eval.RelevanceEvaluator(QRELS, names, relevance_level=level).evaluate(RUN)


@pytest.mark.parametrize("level", [1, 2, 3])
@pytest.mark.parametrize("names", [["num_ret", "num_rel", "num_rel_ret"], ["NumRet", "NumRel", "NumRelRet"]])
def test_count_measures_keep_trec_eval_meaning_at_every_rel_level(level, names):
    """`trec_eval -l N -m num_ret -m num_rel -m num_rel_ret`: num_ret counts every retrieved document whatever the
    level, num_rel and num_rel_ret those judged >= N; per query and summed ('all'), as pytrec_eval computes them."""
    reference = pytrec(level)
    measures = parse_measures(names, level)
    table = per_query(RUN, QRELS, measures)
    totals = evaluate(RUN, QRELS, measures)
    for name, measure in zip(["num_ret", "num_rel", "num_rel_ret"], measures):
        assert table[str(measure)] == {q: reference[q][name] for q in RUN}, (name, str(measure))
        assert totals[str(measure)] == sum(reference[q][name] for q in RUN), (name, str(measure))


def test_count_measures_on_the_command_line(tmp_path, irpipe_eval):
    run, qrels = tmp_path / "run.trec", tmp_path / "qrels.txt"
    run.write_text("".join(f"{q} Q0 {d} {i + 1} {s} t\n" for q, docs in RUN.items() for i, (d, s) in
                           enumerate(docs.items())))
    qrels.write_text("".join(f"{q} 0 {d} {r}\n" for q, judged in QRELS.items() for d, r in judged.items()))
    code, out, err = irpipe_eval("eval", run, "--qrels", qrels, "--rel-level", "2", "-m", "num_ret", "num_rel",
                            "num_rel_ret", "--format", "csv")
    assert code == 0, err
    header, row = out.splitlines()[:2]
    values = dict(zip(header.split(","), row.split(",")))
    reference = pytrec(2)
    assert {name: float(values[column]) for name, column in
            (("num_ret", "NumRet"), ("num_rel", "NumRel(rel=2)"), ("num_rel_ret", "NumRet(rel=2)"))} == {
        name: sum(reference[q][name] for q in RUN) for name in ("num_ret", "num_rel", "num_rel_ret")}


def test_a_measure_that_names_its_own_rel_keeps_it():
    assert [str(m) for m in parse_measures("NumRet(rel=1) AP(rel=1) NumRel(rel=3)", 2)] == [
        "NumRet(rel=1)", "AP", "NumRel(rel=3)"]


# -- qrels with trailing columns ---------------------------------------------------------------------------------

@pytest.mark.parametrize("content, line", [
    ("1 0 a 1\n1 0 b 0 extra\n", 2),
    ("1 0 a 1 0.5\n", 1),
    ("query-id\tcorpus-id\tscore\nq1\td1\t1\t7\n", 2),
])
def test_qrels_with_trailing_columns_are_refused(tmp_path, irpipe_eval, content, line):
    """trec_eval refuses text after the relevance ('get_qrels: Malformed line N'); so does irpipe, naming the line,
    rather than read the judgement from the wrong column."""
    path = tmp_path / "qrels.txt"
    path.write_text(content)
    with pytest.raises(InputError) as error:
        read_qrels(path)
    assert (error.value.line, error.value.field) == (line, "columns")
    run = tmp_path / "run.trec"
    run.write_text("1 Q0 a 1 1.0 t\n")
    code, out, err = irpipe_eval("eval", run, "--qrels", path)
    assert code == 2 and out == "" and f"{path}:{line} [columns]" in err
