"""`irpipe trec_eval [flags] QRELS RUN`: trec_eval's flags and output, computed with irpipe's measures
(pipeline/trec_eval.py), and trec_eval's -c/-l/-M/-J/-q/-n on `irpipe eval`.

Two kinds of check of the output:
- against committed output (tests/fixtures/trec_eval/expected/, always run): what trec_eval itself printed on the
  fixture's qrels.txt and run.trec, less the lines of the measures irpipe does not compute (UNCOMPUTED): 10.0
  (usnistgov/trec_eval f425365, built from source) for the -c cases, 9.0.8 without -c (where 10.0 exits 4 on a
  run that lacks a judged query). J-c-q.txt's iprec_at_recall_0.00 is 9.0.8's 0.7500 (query 103: 0.0000): 10.0
  prints -nan there, dividing by the empty ranking that -J leaves of its stand-in for a missing query. The fixture's
  queries have 0, 10 or 20 relevant documents, where 9.0.8 and 10.0 agree on iprec_at_recall.
- against a trec_eval binary, when one is found ($IRPIPE_TREC_EVAL, `trec_eval` on PATH, else the one inside
  Pyserini's Anserini jar, trec_eval 9.0.4; skipped with the reason otherwise): CACM's BM25 run (irpipe search)
  and DL19's BM25 candidates (`ir.candidates()`), whole and with judged queries dropped, -m all_trec with -c, -q,
  -l 2, -M 10, -J and -n, every line of every measure both compute.
"""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from pipeline.errors import MissingResourceError
from pipeline.evaluation import EvalError, evaluate
from pipeline.trec_eval import UNCOMPUTED, requested, trec_eval_report
from support import irpipe, needs_shared_data

FIXTURE = Path(__file__).parent / "fixtures" / "trec_eval"
QRELS, RUN = FIXTURE / "qrels.txt", FIXTURE / "run.trec"
CASES = {  # expected/NAME.txt: the flags that printed it
    "official": [], "all_trec": ["-m", "all_trec"], "all_trec-c-q": ["-c", "-q", "-m", "all_trec"],
    "all_trec-c-q-l2": ["-c", "-q", "-l", "2", "-m", "all_trec"],
    "M5-q": ["-q", "-M", "5", "-m", "official", "-m", "ndcg_cut.5,10"],
    "J-c-q": ["-c", "-J", "-q", "-m", "all_trec"], "n-c-q": ["-c", "-n", "-q", "-m", "map", "-m", "P.5"],
}
NOT_COMPUTED = re.compile(r"^(%s)(_[0-9.]+)?$" % "|".join(map(re.escape, UNCOMPUTED)))


@pytest.mark.parametrize("case", CASES)
def test_the_output_trec_eval_printed_on_the_fixture(case, capsys):
    code, out, err = irpipe(capsys, "trec_eval", *CASES[case], QRELS, RUN)
    assert code == 0, err
    assert out == (FIXTURE / "expected" / f"{case}.txt").read_text()


def test_an_msmarco_run_adds_the_official_scripts_block(tmp_path, capsys):
    """trec_eval's lines (10.0, on the run written as TREC), then msmarco_passage_eval.py's block: its MRR @10 divides
    by the qrels' 4 queries, and QueriesRanked counts the run's 4, query 7 unjudged. A TREC run prints the block
    with --msmarco."""
    expected = (FIXTURE / "expected" / "msmarco.txt").read_text()
    code, out, _ = irpipe(capsys, "trec_eval", "-c", "-m", "recip_rank", "-m", "num_q", "-M", "10",
                          FIXTURE / "qrels-msmarco.tsv", FIXTURE / "run.tsv")
    assert code == 0 and out == expected
    trec = tmp_path / "run.trec"
    trec.write_text("".join(f"{q} Q0 {pid} {rank} {-int(rank)} x\n" for q, pid, rank in
                            (line.split() for line in (FIXTURE / "run.tsv").read_text().splitlines())))
    code, out, _ = irpipe(capsys, "trec_eval", "-c", "-m", "recip_rank", "-m", "num_q", "-M", "10",
                          FIXTURE / "qrels-msmarco.tsv", trec)
    assert code == 0 and out == expected.split("#")[0]
    code, out, _ = irpipe(capsys, "trec_eval", "--msmarco", "-c", "-m", "recip_rank", "-m", "num_q", "-M", "10",
                          FIXTURE / "qrels-msmarco.tsv", trec)
    assert code == 0 and out == expected


@needs_shared_data
def test_the_msmarco_block_is_the_official_scripts_rule_on_dl19(shared_data, cache, tmp_path, capsys):
    """The block on DL19's BM25 candidates written as an MS MARCO run, against msmarco_passage_eval.py's
    compute_metrics restated (every qrels line relevant, label 0 too, as the script reads qrels: a warning says
    so), summed in the run's query order, printed with Python's str of the float."""
    import pipeline as ir

    run = ir.candidates().run("dl19-passage")
    path = tmp_path / "dl19.tsv"
    run.write(path, format="msmarco")
    qrels_file = shared_data / "msmarco-passage-dl19-dl20-bm25top100" / "qrels" / "qrels.dl19-passage.txt"
    relevant = {}
    for line in qrels_file.read_text().splitlines():
        qid, _, pid, _ = line.split()
        relevant.setdefault(int(qid), []).append(int(pid))
    mrr = 0
    for qid, hits in run.ranking.items():
        ranked = [int(pid) for pid, _ in hits]
        if int(qid) in relevant:
            for i in range(10):
                if ranked[i] in relevant[int(qid)]:
                    mrr += 1 / (i + 1)
                    break
    code, out, err = irpipe(capsys, "eval", path, "--qrels", qrels_file, "-m", "RR@10")
    block = f"#####################\nMRR @10: {mrr / len(relevant)}\nQueriesRanked: {len(run)}\n#####################\n"
    assert code == 0 and out.endswith(block) and "counts every qrels line as a relevant passage" in err


# -- trec_eval's -m -------------------------------------------------------------------------------------------


def test_measures_print_in_trec_evals_order_with_their_first_parameters():
    assert requested(["P.10,5", "map", "success", "P.20"]) == [("map", ((), "")), ("P", ((5, 10), "10,5")),
                                                               ("success", ((1, 5, 10), ""))]
    assert requested(["all_trec", "P.7"])[11] == ("P", ((7,), "7"))  # named parameters beat a nickname's
    assert [name for name, _ in requested(None)] == ["runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map",
                                                     "gm_map", "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P"]


@pytest.mark.parametrize("measure, fragment", [
    ("utility", "trec_eval's measure 'utility' is not computed by irpipe"),
    ("recip_rnak", "Did you mean: recip_rank"),
    ("P.5,5", "a parameter is given twice (trec_eval: duplicate cutoffs detected)"),
    ("P.0", "P's parameters must be from 1 to"), ("P.x", "P's parameters are positive integers"),
    ("map.5", "map takes no parameters here"), ("official.5", "the nickname official takes no parameters"),
    ("iprec_at_recall.1.5", "iprec_at_recall's parameters must be from 0.0 to 1.0"),
    ("prefs", "preference or judgement-group qrels"),
])
def test_a_measure_irpipe_cannot_compute_is_exit_2(measure, fragment, capsys):
    code, out, err = irpipe(capsys, "trec_eval", "-m", measure, QRELS, RUN)
    assert code == 2 and out == "" and fragment in err


def test_trec_evals_own_argument_forms(capsys):
    """Attached values (-mmap -l2 -M10), long options, and -q after the command: per query, not irpipe's quiet."""
    _, attached, _ = irpipe(capsys, "trec_eval", "-q", "-mmap", "-mP.5", "-l2", "-M10", QRELS, RUN)
    _, spelled, _ = irpipe(capsys, "trec_eval", "--query_eval_wanted", "--measure", "map", "--measure", "P.5",
                           "--level_for_rel", "2", "--Max_retrieved_per_topic", "10", QRELS, RUN)
    assert attached == spelled and "map                   \t101\t" in attached


def test_a_score_only_a_double_tells_apart_is_no_tie(tmp_path):
    """10.0 reads scores as doubles: d1 (16.000002) ranks above d2 (16.000001), RR 1 (9.0.8, reading C floats, ties
    them and puts d2 first by docid: 0.5, as pytrec_eval alone did)."""
    run = {"q": {"d1": 16.000002, "d2": 16.000001}}
    assert evaluate(run, {"q": {"d1": 1}}, ["RR", "RR@10", "AP"]) == {"RR": 1.0, "RR@10": 1.0, "AP": 1.0}
    assert trec_eval_report(run, {"q": {"d1": 1}}, ["recip_rank"]) == "recip_rank            \tall\t1.0000\n"


def test_depth_and_judged_only_are_trec_evals_M_and_J():
    qrels = {"q": {"a": 1, "b": 0, "c": 1}}
    run = {"q": {"x": 5.0, "a": 4.0, "y": 3.0, "c": 2.0, "b": 1.0}}
    assert evaluate(run, qrels, ["NumRet", "RR", "AP"], depth=2) == {"NumRet": 2, "RR": 0.5, "AP": 0.25}
    assert evaluate(run, qrels, ["NumRet", "RR", "AP"], judged_only=True) == {"NumRet": 3, "RR": 1.0, "AP": 1.0}
    assert evaluate(run, qrels, ["NumRet", "AP"], depth=2, judged_only=True) == {"NumRet": 1, "AP": 0.5}  # -M first
    with pytest.raises(EvalError, match="depth"):
        evaluate(run, qrels, ["AP"], depth=0)


# -- irpipe eval takes the same flags --------------------------------------------------------------------------


def test_irpipe_eval_takes_trec_evals_flags_and_says_its_convention(capsys):
    """`irpipe eval RUN --qrels Q -m map -c -l 2 -M 10 -J -q` (each once unknown to it): the same numbers as
    `irpipe trec_eval -c ...`; the note names -c and the query the run lacks; -n keeps the per-query rows."""
    code, out, err = irpipe(capsys, "eval", RUN, "--qrels", QRELS, "-m", "map", "P.5", "-c", "-l", "2", "-M", "10",
                            "-J", "-q")
    assert code == 0, err
    rows = {line.split()[1]: line.split()[3:] for line in out.splitlines()[1:-1]}
    _, trec, _ = irpipe(capsys, "trec_eval", "-c", "-l", "2", "-M", "10", "-J", "-q", "-m", "map", "-m", "P.5",
                        QRELS, RUN)
    values = {(line.split("\t")[0].strip(), line.split("\t")[1]): line.split("\t")[2] for line in trec.splitlines()}
    assert rows.keys() == {"101", "102", "103", "99", "all"}
    assert all(rows[qid] == [values["map", qid], values["P_5", qid]] for qid in rows)
    note = out.splitlines()[-1]
    assert "(trec_eval -c)" in note and f"{RUN} lacks 1: each scores 0 here" in note
    assert "-M 10: each ranking's first 10 documents" in note and "-J: judged documents only" in note
    code, out, _ = irpipe(capsys, "eval", RUN, "--qrels", QRELS, "-m", "map", "-q", "-n")
    assert code == 0 and sorted(line.split()[1] for line in out.splitlines()[1:-1]) == ["101", "102", "103", "99"]
    assert irpipe(capsys, "eval", RUN, "--qrels", QRELS, "-n")[0] == 2  # -n alone would print nothing


def test_trec_evals_order_in_irpipe_eval_points_at_irpipe_trec_eval(capsys):
    code, out, err = irpipe(capsys, "eval", "-m", "map", QRELS, RUN)
    assert code == 2 and "irpipe trec_eval -m map QRELS RUN" in err


# -- against trec_eval itself ------------------------------------------------------------------------------------

JAR_BINARIES = {("Linux", "x86_64"): "linux-amd64", ("Linux", "i686"): "linux-i386",
                ("Darwin", "arm64"): "macosx-aarch64", ("Darwin", "x86_64"): "macosx-x86_64"}


@pytest.fixture(scope="session")
def reference(tmp_path_factory) -> tuple[str, int]:
    """(a trec_eval binary, its major version): $IRPIPE_TREC_EVAL, `trec_eval` on PATH, else Pyserini's (the binary
    Anserini's jar carries and `python -m pyserini.eval.trec_eval` runs, extracted)."""
    binary = os.environ.get("IRPIPE_TREC_EVAL") or shutil.which("trec_eval")
    if not binary:
        from pipeline.java import anserini_jar

        try:
            jar = anserini_jar()
        except MissingResourceError as error:
            pytest.skip(f"no trec_eval to compare with: none on PATH or in $IRPIPE_TREC_EVAL, and {error}")
        suffix = JAR_BINARIES.get((platform.system(), platform.machine()))
        if suffix is None:
            pytest.skip(f"no trec_eval to compare with: Pyserini's jar has none for {platform.system()} "
                        f"{platform.machine()} (set IRPIPE_TREC_EVAL)")
        binary = tmp_path_factory.mktemp("trec_eval") / "trec_eval"
        with zipfile.ZipFile(jar) as archive:
            binary.write_bytes(archive.read(f"trec_eval/trec_eval-{suffix}"))
        binary.chmod(0o755)
    version = subprocess.run([str(binary), "-v"], capture_output=True, text=True, timeout=60).stderr
    major = re.search(r"version (\d+)", version)
    return str(binary), int(major[1]) if major else 9


def differences(reference, qrels: Path, run: Path, flags: list[str]) -> list:
    """The lines where `irpipe trec_eval FLAGS -m all_trec` and the reference differ, on the measures both compute
    (10.0's iprec_at_recall aside: irpipe's is 9.0.8's; before 10.0, -c -q prints no line for a missing query)."""
    binary, version = reference
    theirs = subprocess.run([binary, *flags, "-m", "all_trec", str(qrels), str(run)], capture_output=True, text=True,
                            timeout=600, check=True).stdout.splitlines()
    theirs = [line for line in theirs if not NOT_COMPUTED.match(line.split("\t")[0].strip())]
    ours = trec_eval_report(run, qrels, ["all_trec"], complete="-c" in flags, per_query="-q" in flags,
                            rel_level=int(flags[flags.index("-l") + 1]) if "-l" in flags else 1,
                            depth=int(flags[flags.index("-M") + 1]) if "-M" in flags else None,
                            judged_only="-J" in flags, summary="-n" not in flags).splitlines()
    if version >= 10:
        theirs, ours = ([line for line in lines if not line.startswith("iprec_at_recall")] for lines in (theirs, ours))
    elif "-c" in flags and "-q" in flags:
        answered = {line.split()[0] for line in run.read_text().splitlines()}
        ours = [line for line in ours if line.split("\t")[1] in answered | {"all"}]
    assert len(theirs) > 0
    if len(ours) != len(theirs):
        return [f"{len(ours)} lines here, {len(theirs)} there"]
    return [(mine, its) for mine, its in zip(ours, theirs) if mine != its]


FLAGS = [[], ["-c"], ["-q"], ["-c", "-q"], ["-M", "10", "-q"], ["-c", "-J", "-q"], ["-c", "-n", "-q"]]


def _checked(reference, qrels: Path, run: Path, flag_sets, partial: bool) -> int:
    compared = 0
    for flags in flag_sets:
        if partial and "-c" not in flags and reference[1] >= 10:
            continue  # 10.0 exits 4 on a run lacking a judged query without -c
        assert differences(reference, qrels, run, flags) == [], flags
        compared += 1
    return compared


def _partial(run: Path, drop: set[str], to: Path) -> Path:
    to.write_text("".join(line + "\n" for line in run.read_text().splitlines() if line.split()[0] not in drop))
    return to


def test_equal_to_trec_eval_on_the_fixture(reference, tmp_path):
    assert _checked(reference, QRELS, RUN, FLAGS + [["-l", "2", "-c", "-q"]], partial=True) > 0


@pytest.mark.slow
@needs_shared_data
def test_equal_to_trec_eval_on_cacm_bm25(reference, cacm_index, cache, tmp_path, capsys):
    """CACM BM25 from `irpipe search --dataset cacm` (64 queries, 52 judged), whole and less 5 judged queries."""
    run = tmp_path / "cacm.trec"
    assert irpipe(capsys, "search", "--dataset", "cacm", "--index", cacm_index, "--output", run)[0] == 0
    qrels = Path(os.environ["IRPIPE_MIRROR"]) / "cacm" / "CACM" / "qrels.cacm.txt"
    assert _checked(reference, qrels, run, FLAGS, partial=False) == len(FLAGS)
    partial = _partial(run, {"10", "11", "12", "14", "15"}, tmp_path / "partial.trec")
    assert _checked(reference, qrels, partial, FLAGS, partial=True) > 0


@pytest.mark.slow
@needs_shared_data
def test_equal_to_trec_eval_on_dl19_candidates(reference, shared_data, cache, tmp_path):
    """DL19's BM25 top-100 (`ir.candidates()`, graded qrels, ties in score), at -l 2 and 1, whole and less 3 judged
    queries."""
    import pipeline as ir

    run = ir.candidates().run("dl19-passage").write(tmp_path / "dl19.trec")
    qrels = shared_data / "msmarco-passage-dl19-dl20-bm25top100" / "qrels" / "qrels.dl19-passage.txt"
    graded = [["-l", "2", *flags] for flags in FLAGS]
    assert _checked(reference, qrels, run, graded + [["-c", "-q"]], partial=False) == len(graded) + 1
    partial = _partial(run, {"1037798", "104861", "1063750"}, tmp_path / "partial.trec")
    assert _checked(reference, qrels, partial, graded, partial=True) > 0
