"""`irpipe search` takes Pyserini's command line (`--bm25 --index --topics NAME|FILE --output --hits --batch-size
--threads --output-format`) with Pyserini's meaning: the same argument list writes the same bytes as
`python -m pyserini.search.lucene`; `--topics` takes Pyserini's name of topics irpipe has, else exit 2."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.data.runs import read_run
from support import needs_shared_data

BEIR = Path(__file__).resolve().parent / "fixtures" / "beir-tiny"
PYSERINI_CLI = """
import runpy, sys
from pipeline import java
java.start()
common = sys.argv[1:-2]
for output_format, output in zip(("trec", "msmarco"), sys.argv[-2:]):  # one process: importing Pyserini is slow
    sys.argv = ["pyserini.search.lucene", *common, "--output-format", output_format, "--output", output]
    runpy.run_module("pyserini.search.lucene", run_name="__main__")
"""


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("pyserini-flags")
    assert main(["-q", "index", "--input", str(BEIR / "corpus.jsonl"), "--output", str(folder / "index")]) == 0
    (folder / "topics.tsv").write_text("q1\tcolour of the sky\nq2\tgreen grass in spring\nq3\tcolliery\n"
                                       "q6\tnight sky\nq9\tsky grass coal\n")
    return folder / "index"


@pytest.mark.slow
def test_pyserinis_argument_list_writes_pyserinis_bytes(index, tmp_path):
    topics = index.parent / "topics.tsv"
    common = ["--bm25", "--index", str(index), "--topics", str(topics), "--hits", "4", "--batch-size", "2",
              "--threads", "2"]
    theirs = [tmp_path / "pyserini.trec", tmp_path / "pyserini.msmarco"]
    subprocess.run([sys.executable, "-c", PYSERINI_CLI, *common, *map(str, theirs)], check=True, capture_output=True)
    for output_format, pyserini in zip(("trec", "msmarco"), theirs):
        ours, plain = tmp_path / f"irpipe.{output_format}", tmp_path / f"plain.{output_format}"
        assert main(["-q", "search", *common, "--output-format", output_format, "--output", str(ours),
                     "--run-tag", "Anserini"]) == 0
        assert ours.read_text() == pyserini.read_text() and len(ours.read_text().splitlines()) > 5
        # --bm25 and --batch-size change nothing
        assert main(["-q", "search", "--index", str(index), "--topics", str(topics), "--hits", "4", "--output-format",
                     output_format, "--output", str(plain), "--run-tag", "Anserini"]) == 0
        assert plain.read_text() == ours.read_text()


@needs_shared_data
def test_topics_by_pyserinis_name(index, tmp_path, capsys):
    for name, dataset, count in [("dl19-passage", "dl19-passage", 43), ("dl20", "dl20-passage", 54)]:
        output = tmp_path / f"{name}.trec"
        assert main(["-q", "search", "--bm25", "--topics", name, "--index", str(index), "--output", str(output),
                     "--hits", "2"]) == 0
        from pipeline.data.registry import get_dataset

        topics = get_dataset(dataset).topics()
        assert len(topics) == count and set(read_run(output).ranking) <= set(topics)
    from argparse import Namespace

    from pipeline.commands.data_args import PARTS, dataset_from_args

    args = Namespace(dataset=None, **{key: None for key in PARTS})
    args.topics, args.index = "msmarco-passage-dev-subset", str(index)
    dataset = dataset_from_args(args)
    assert len(dataset.topics()) == 6980 and dataset.index_dir == index  # dev-small's topics, the index given


def test_unknown_topics_names_and_prebuilt_indexes_are_exit_2(index, tmp_path, capsys):
    output = str(tmp_path / "x.trec")
    assert main(["search", "--topics", "msmarco-passage-dev-subsett", "--index", str(index), "--output", output]) == 2
    err = capsys.readouterr().err
    assert "--topics msmarco-passage-dev-subsett: no such file, nor the name of topics irpipe has" in err
    assert "did you mean msmarco-passage-dev-subset" in err
    assert main(["search", "--topics", "robust04", "--index", str(index), "--output", output]) == 2
    assert "Pyserini's names known here: dl19-passage, dl20" in capsys.readouterr().err
    assert main(["search", "--topics", "msmarco-passage-dev-subset", "--dataset", str(BEIR), "--output", output]) == 2
    assert "give it without --dataset" in capsys.readouterr().err
    assert main(["search", "--bm25", "--index", "msmarco-v1-passage", "--topics", "dl19-passage", "--output",
                 output]) == 2
    assert "Pyserini's prebuilt indexes are not downloaded here" in capsys.readouterr().err
    assert main(["search", "--index", str(index), "--topics", str(index.parent / "topics.tsv"), "--batch-size", "0",
                 "--output", output]) == 2
    assert "--batch-size" in capsys.readouterr().err


@pytest.mark.slow
@needs_shared_data
def test_irpipe_pyserini_runs_pyserinis_own_cli_and_equals_irpipe_search(cacm_index, cacm_topics_file, tmp_path):
    """`irpipe pyserini search.lucene ...` (Pyserini's CLI on irpipe's JVM, where `python -m pyserini.search.lucene`
    fails for want of Java 21) writes the run `irpipe search` writes from the same arguments, on CACM, and
    `irpipe pyserini eval.trec_eval` scores it as `irpipe trec_eval` does."""
    common = ["--index", str(cacm_index), "--topics", str(cacm_topics_file), "--bm25", "--k1", "0.9", "--b", "0.4",
              "--hits", "1000"]
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "-q", "pyserini", "search.lucene", *common,
                           "--output", str(tmp_path / "pyserini.trec")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert main(["-q", "search", *common, "--output", str(tmp_path / "irpipe.trec"), "--run-tag", "Anserini"]) == 0
    theirs = (tmp_path / "pyserini.trec").read_text()
    assert sorted(theirs.splitlines()) == sorted((tmp_path / "irpipe.trec").read_text().splitlines())
    assert len(theirs.splitlines()) > 50_000
    qrels = cacm_topics_file.parent / "qrels.cacm.txt"  # Pyserini's trec_eval (a Java main, run as a subprocess)
    scored = subprocess.run([sys.executable, "-m", "pipeline.cli", "-q", "pyserini", "eval.trec_eval", "-m", "map",
                             str(qrels), str(tmp_path / "pyserini.trec")], capture_output=True, text=True)
    assert scored.returncode == 0, scored.stderr[-2000:]
    ours = subprocess.run([sys.executable, "-m", "pipeline.cli", "-q", "trec_eval", "-m", "map", str(qrels),
                           str(tmp_path / "irpipe.trec")], capture_output=True, text=True, check=True).stdout
    assert [line for line in scored.stdout.splitlines() if line.startswith("map")] == ours.splitlines()
    bad = subprocess.run([sys.executable, "-m", "pipeline.cli", "-q", "pyserini", "search.lucene", "--index"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr  # Pyserini's own argument errors, its own exit status
