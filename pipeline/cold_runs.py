"""The cold re-runs of the pins on this machine: one committed record (eval/benchmarks/reproduce-cold.json) that
`irpipe reproduce --record` updates as each pin finishes from an empty cache, so that re-running every pin can be
spread over several sessions.

    {"description": ..., "total_seconds": 5123.4, "counts": {"OK": 40, "OKISH": 1, "FAIL": 0},
     "pins": {"cacm-bm25": {"status": "OK", "checks": {"AP": {"pinned": 0.3114, "measured": 0.3114, "status": "OK"}},
                            "seconds": 9.0, "date": "2026-12-02T10:01:00+00:00", "load_average": 2.1, "cores": 2,
                            "cpu": "AMD EPYC", "isa": "AVX2",
                            "recipe": "sha256 of eval/cacm-bm25.yaml's fields (16 hex)",
                            "environment": "digest of the software that can move a number (16 hex)",
                            "commit": "b195f3b..."}}}

A pin is done here when its entry's `recipe` is the digest of its experiment file as it is now (the file is the
recipe: pipeline, dataset, seeds, expected scores; its description aside) and its `environment` the digest of this
installation's (`software_key`: Python, the libraries, the kernel settings a user chose); a pin whose recipe or
software changed is run again. The CPU is recorded beside it (model, widest vector instructions, cores), not keyed:
the project's machine gets another CPU from session to session (AVX2 one day, AVX-512 the next), and a key holding
it made every session start the whole re-run over. A pin whose numbers move with the CPU's kernels says so in
eval/benchmarks/cpu-sensitivity.yaml, and its tolerance covers the moves measured there.

Only a cold run enters the record: nothing read from the cache (`reused` empty), so its seconds are the cost of the
whole work. The hours left are the remaining pins' recorded cold costs; a pin never measured cold is counted apart,
its hours unknown (a last run that read trained models back, or ran before costs were recorded, took seconds that
say nothing of a cold run's).
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from pipeline import environment, provenance
from pipeline.data.files import atomic_write
from pipeline.data.yaml_files import load_yaml

RECORD_NAME = Path("benchmarks") / "reproduce-cold.json"  # under the eval folder
STATUSES = ("OK", "OKISH", "FAIL")
PROSE = ("description",)  # experiment-file fields that say, not run: outside the recipe key
# settings a run sets itself (deterministic=true: training/options.py make_deterministic), so a training pin's
# captured environment holds them where the machine, asked before the run, does not: outside the software key
SET_BY_IRPIPE = ("CUBLAS_WORKSPACE_CONFIG",)
THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # how many threads, like the cores: recorded, not keyed
WIDEST = (("amx_tile", "AMX"), ("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"))  # cpu flag -> `isa`
DESCRIPTION = ("Every pin re-run by `irpipe reproduce --record` from an empty cache on this machine: per pin its "
               "checks (pinned, measured, status), its cold wall time (seconds, the make: commands it ran first "
               "included, with the 1-minute load average at its end and the cores), the digest of its experiment "
               "file but its description (recipe) and of the software (environment: pipeline/cold_runs.py "
               "software_key), the CPU it ran on (cpu, and isa: its widest vector instructions), and the commit. "
               "`irpipe reproduce --all --record` runs only the pins whose recipe or software differ from these.")


def record_path(eval_dir: Path) -> Path:
    return Path(eval_dir) / RECORD_NAME


def recipe_key(path: Path) -> str:
    """The digest of an experiment file's fields but its prose (`description`): any change to what it runs or
    expects makes it another recipe; new numbers written into its description do not."""
    fields = {key: value for key, value in load_yaml(path).items() if key not in PROSE}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _bytes_key(path: Path) -> str:
    """The key of entries recorded before recipe_key left the prose out: the file's bytes, so they count while the
    file is byte for byte the one they ran."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def software_key(captured: dict) -> str:
    """The digest of the software parts of an environment (pipeline/environment.py `capture()`) that can move a
    number and that every process records, torch imported or not: Python, the libraries, and the kernel settings
    (less those a run sets itself, SET_BY_IRPIPE, and the thread counts). The commit is not in it (a recipe is its
    experiment file), nor the CPU (recorded beside it: `isa`)."""
    settings = {k: v for k, v in (captured.get("settings") or {}).items() if k not in SET_BY_IRPIPE + THREADS}
    parts = {"python": captured.get("python"), "libraries": captured.get("libraries"), "settings": settings}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def isa(captured: dict) -> str | None:
    """The widest vector instructions of the CPU an environment was captured on: AMX, AVX-512, AVX2 or AVX."""
    flags = set((captured.get("cpu") or {}).get("flags") or [])
    return next((name for flag, name in WIDEST if flag in flags), None)


def load(path: Path) -> dict:
    """The record ({"pins": {}} when there is none yet)."""
    found = provenance.previous(path)
    found.setdefault("pins", {})
    return found


def is_cold(result: dict) -> bool:
    """A run that read nothing from the cache: its cost was recorded with this very run."""
    cost = result.get("cost")
    return result.get("reused") == {} and isinstance(cost, dict) and cost.get("date") == result.get("date")


def entry(pin_path: Path, result: dict) -> dict:
    """The record's entry for a cold `result` of the experiment file `pin_path`."""
    checks = result.get("checks") or {}
    statuses = {check.get("status") for check in checks.values()}
    captured = result.get("environment") or {}
    cost = result["cost"]
    return {"status": next((s for s in reversed(STATUSES) if s in statuses), "FAIL"),
            "checks": {measure: {"pinned": check.get("expected"), "measured": _rounded(check.get("score")),
                                 "status": check.get("status")} for measure, check in checks.items()},
            "seconds": round(cost["seconds"] + result.get("make_seconds", 0.0), 2), "date": cost["date"],
            "load_average": cost.get("load_average"), "cores": cost.get("cores"),
            "cpu": (captured.get("cpu") or {}).get("model"), "isa": isa(captured),
            "recipe": recipe_key(pin_path), "environment": software_key(captured),
            "commit": (captured.get("git") or {}).get("commit"),
            **({"attempts": cost["attempts"]} if cost.get("attempts") else {})}  # resumed: pipeline/cold_attempts.py


def _rounded(score):
    return None if score is None or (isinstance(score, float) and math.isnan(score)) else round(score, 4)


def update(path: Path, name: str, pin_path: Path, result: dict) -> dict:
    """Add (or replace) a pin's entry from its cold `result` and write the record atomically, with the total cost and
    the counts over every entry; returns the record. A result that read from the cache is not a cold run: no change."""
    record = load(path)
    if not is_cold(result):
        return record
    return _write(path, {**record["pins"], name: entry(pin_path, result)})


def merge(path: Path, other: Path, names: set[str]) -> tuple[list[str], list[str]]:
    """Take into the record at `path` the entries of the record at `other` (another checkout's, such as a git
    worktree that ran `reproduce --record` beside this one) that it lacks or holds an earlier run of, of the pins
    `names` only (one archived here since the other checkout ran it is no pin); written atomically with the totals
    made again. Returns the names taken and, sorted, the names of `other` left out as no pins here."""
    pins, theirs = load(path)["pins"], load(other)["pins"]
    taken = [name for name, found in theirs.items()
             if name in names and (name not in pins or found["date"] > pins[name]["date"])]
    if taken:
        _write(path, {**pins, **{name: theirs[name] for name in taken}})
    return taken, sorted(set(theirs) - names)


def _write(path: Path, pins: dict) -> dict:
    """The record of `pins`, sorted, with the total cost and the counts over every entry, written atomically."""
    pins = dict(sorted(pins.items()))
    record = {"description": DESCRIPTION, "total_seconds": round(sum(e["seconds"] for e in pins.values()), 2),
              "counts": {status: sum(e["status"] == status for e in pins.values()) for status in STATUSES},
              "pins": pins}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as out:
        out.write(_text(record))
    return record


def _text(record: dict) -> str:
    """The record as JSON with one line per pin, so that a re-run pin is a one-line change in a diff."""
    head = {key: value for key, value in record.items() if key != "pins"}
    lines = [f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}," for key, value in head.items()]
    pins = [f"    {json.dumps(name)}: {json.dumps(entry, ensure_ascii=False)}"
            for name, entry in record["pins"].items()]
    return "{\n" + "\n".join(lines) + '\n  "pins": {\n' + ",\n".join(pins) + "\n  }\n}\n"


def done_here(record: dict, name: str, pin_path: Path, here: str) -> bool:
    """Whether the pin was re-run cold on its current recipe with the software whose software_key is `here`."""
    found = record.get("pins", {}).get(name)
    return (bool(found) and found.get("recipe") in (recipe_key(pin_path), _bytes_key(pin_path))
            and found.get("environment") == here)


def state(record: dict, name: str, pin_path: Path, here: str) -> str:
    """What the listing shows: the date, status and CPU (`isa`) of a cold run that counts here, `stale` (recipe or
    software since changed), or nothing."""
    found = record.get("pins", {}).get(name)
    if not found:
        return ""
    done = " ".join(str(part) for part in (found["date"][:10], found["status"], found.get("isa")) if part)
    return done if done_here(record, name, pin_path, here) else "stale"


def left(pins, record: dict, here: str) -> str:
    """How much of the cold re-run is left: the pins not done here, the hours of those with a measured cold cost, and
    the count of those without one (their last run, if any, read cached work or predates the cost field: its
    seconds are no estimate of a cold run, so they are not added up)."""
    todo = [pin for pin in pins if not done_here(record, pin.name, pin.path, here)]
    measured = [pin.cost for pin in todo if pin.cost is not None]
    never = sum(1 for pin in todo if not pin.result)  # no result, so no cost either
    unmeasured = len(todo) - len(measured)
    if not todo:
        return f"cold re-run here: {len(pins)} of {len(pins)} pins done, none left"
    return (f"cold re-run here: {len(pins) - len(todo)} of {len(pins)} pins done, {len(todo)} left: "
            f"{sum(measured) / 3600:.2f} h by the cold costs measured for {len(measured)} of them"
            + (f"; {unmeasured} with none measured ({unmeasured - never} last run from cached work or before costs "
               f"were recorded, {never} never run: their descriptions say what a run takes)" if unmeasured else ""))


def current_software() -> str:
    return software_key(environment.capture())


def order(pin) -> tuple:
    """Cheapest first, by the cold cost or else the last run's seconds; a pin never measured cold that trains a model
    (`train=` in the pipeline) after all the others, since its last run may have read the model back (0.1 s)."""
    seconds = pin.cost if pin.cost is not None else (pin.result or {}).get("seconds")
    unmeasured_training = pin.cost is None and "train=" in pin.experiment.pipeline.replace(" ", "")
    return (unmeasured_training, seconds if seconds is not None else math.inf)
