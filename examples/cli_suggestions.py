"""A typo on the command line gets the closest name, from the (sub)command it was given to -- a flag
(`irpipe search --hit 10`: did you mean --hits?), a command (`irpipe serch`: did you mean search?) or a flag's value
(`--output-format trek`: did you mean trec?) -- where Pyserini's argparse prints the usage alone (Python 3.11).

    python examples/cli_suggestions.py        # no data: each command stops at its arguments (exit 2)
"""
import subprocess
import sys

TYPOS = [["search", "--dataset", "cacm", "--output", "runs/x.trec", "--hti", "10"],  # a flag
         ["serch", "--dataset", "cacm"],                                              # a command
         ["search", "--dataset", "cacm", "--output", "runs/x.trec", "--output-format", "trek"]]  # a flag's value
# Pyserini: python -m pyserini.search.lucene --hti 10 ...  ->  "error: unrecognized arguments: --hti 10"
for words in TYPOS:
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", *words], capture_output=True, text=True)
    last = done.stderr.strip().splitlines()[-1]
    print(f"irpipe {' '.join(words)}\n  exit {done.returncode}: {last}")
    if done.returncode != 2 or "did you mean" not in last:
        sys.exit(1)
