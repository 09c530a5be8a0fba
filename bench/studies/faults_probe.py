"""What `irpipe index / encode / train / run` show on a full tmpfs (0 bytes free) and on a read-only one: exit status,
what is left on it, and the first and last lines of stderr (eval/FAULTS.md). Needs root (it mounts tmpfs).

    .venv/bin/python bench/studies/faults_probe.py [full|ro] [index-big|index-tiny|encode|train|run-output|run-cache ...]
"""
import json, os, subprocess, sys, shutil
from pathlib import Path

from pipeline.rerank.bert import save_tiny_bert

REPO = Path(__file__).resolve().parents[2]
base = Path(os.environ.get("PROBE_DIR", "/tmp/irpipe-faults-probe"))
shutil.rmtree(base, ignore_errors=True); base.mkdir(parents=True)
bert = save_tiny_bert(base / "tiny-bert")
data = base / "qa"; data.mkdir()
rows = [(1, "what colour is the sky", "the sky is blue"), (0, "what colour is the sky", "grass grows"),
        (1, "what colour is grass", "grass is green"), (0, "what colour is grass", "the sky is blue")]
(data / "pairs.tsv").write_text("".join(f"{l}\t{a}\t{b}\n" for l, a, b in rows))
(data / "dataset.yaml").write_text("kind: pairs\nfiles: {pairs: pairs.tsv}\n")
coll = base / "tiny"; coll.mkdir()  # a TREC collection: 6 documents (the pairs' texts, 3 more), the pairs' 2 questions
texts = [*dict.fromkeys(b for _, _, b in rows), "coal is black", "a coal mine in wales", "nothing to see here"]
(coll / "docs.jsonl").write_text("".join(json.dumps({"id": f"d{n}", "contents": t}) + "\n"
                                         for n, t in enumerate(texts)))
(coll / "topics.tsv").write_text("1\twhat colour is the sky\n2\twhat colour is grass\n")
(coll / "qrels.txt").write_text("1 0 d0 1\n2 0 d2 1\n")
(coll / "dataset.yaml").write_text("name: tiny-trec\nfiles: {topics: topics.tsv, qrels: qrels.txt, "
                                   "corpus: docs.jsonl}\n")
with open(base / "big.jsonl", "w") as out:
    for n in range(20000):
        out.write(json.dumps({"id": f"d{n}", "contents": f"word{n % 997} text {n} " * 3}) + "\n")

def mount(name, size="2m", free=None, ro=False):
    m = base / name; m.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(m)], check=True)
    if free is not None:
        fd = os.open(m / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        os.close(fd)
        os.truncate(m / "filler", max(0, os.path.getsize(m / "filler") - free))
    if ro:
        subprocess.run(["mount", "-o", "remount,ro", str(m)], check=True)
    return m

def irpipe(*argv, env=None):
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "-q", *map(str, argv)], cwd=str(REPO),
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    return done.returncode, done.stderr

cases = {}
KINDS = [(k, o) for k, o in (("full", dict(free=0)), ("ro", dict(ro=True))) if k in sys.argv[1:] or len(sys.argv) == 1]
WHAT = [a for a in sys.argv[1:] if a not in ("full", "ro")]
for kind, opts in KINDS:
    for what in ("index-big", "index-tiny", "encode", "train", "run-output", "run-cache"):
        if WHAT and what not in WHAT:
            continue
        m = mount(f"{kind}-{what}", **opts)
        cache = base / f"cache-{kind}-{what}"
        env = {"IRPIPE_CACHE": str(cache), "OMP_NUM_THREADS": "1"}
        if what == "index-big":
            argv = ["index", "--input", base / "big.jsonl", "--output", m / "idx", "--threads", "1"]
        elif what == "index-tiny":
            argv = ["index", "--input", coll / "docs.jsonl", "--output", m / "idx", "--threads", "1"]
        elif what == "encode":
            argv = ["encode", "--model", "biencoder", "--set", f"bert={bert}", "--dataset", data, "--output", m / "store"]
        elif what == "train":
            argv = ["train", "monobert", "--train", data, "--output", m / "model", "--epochs", "1", "--set", f"bert={bert}",
                    "--set", "max_length=32", "--threads", "1"]
        elif what == "run-output":
            argv = ["run", "bm25() % 4", "--dataset", coll, "--output", m / "run.trec", "--results-dir", base / "res"]
        elif what == "run-cache":
            env["IRPIPE_CACHE"] = str(m / "cache")
            argv = ["run", "bm25() % 4", "--dataset", coll, "--output", base / f"run-{kind}.trec", "--results-dir", base / "res"]
        code, err = irpipe(*argv, env=env)
        left = sorted(str(p.relative_to(m)) for p in m.rglob("*") if p.name != "filler")
        print(f"===== {kind} {what}: exit {code}; left: {left[:8]}")
        lines = err.strip().splitlines()
        print(("TRACEBACK " if "Traceback" in err else "") + f"{len(lines)} lines of stderr; first 2, last 4:")
        print("\n".join(lines[:2] + ["..."] + lines[-4:]) if len(lines) > 6 else "\n".join(lines))
        subprocess.run(["umount", str(m)])
