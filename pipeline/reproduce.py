"""`irpipe reproduce`: every pinned experiment (an eval/*.yaml with expected scores) with the cost of its last cold
run, and a selection of them run again, printed as a matrix of pinned against measured -- Pyserini's 2CR runner
(pipeline/STYLE.md), with its comparator (`experiment.status`: OK / OKISH / FAIL) and a FAIL that sets the exit
status.

    irpipe reproduce                      # the list: name, dataset, cost class, last reproduced, status then
    irpipe reproduce --max-cost 10m       # every pin whose last cold run took 10 minutes or less
    irpipe reproduce trecqa-hcan --all --ci --dry-run

Each selected experiment runs as `irpipe run eval/NAME.yaml` in a child process, by default with an empty cache
of its own (a temporary IRPIPE_CACHE: datasets from the mirror, indexes built, models trained), so that it
reproduces the whole work and its wall time is the cost recorded (pipeline/provenance.py). `--warm` uses the
user's cache instead: faster, and a run that reuses cached work keeps the last cold cost. A path the pin's `make:`
names that is not there yet (a pretrained backbone) is made first by its command, timed (`make_missing`). The list
and the costs come from the recorded results (eval/results); a run's result goes to runs/results (untracked: the
checkout stays as it was) unless `--record` writes it to the recorded ones.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from pipeline import cold_attempts, cold_runs, provenance
from pipeline.errors import ConfigError
from pipeline.experiment import RECORDED_RESULTS, Experiment
from pipeline.provenance import format_seconds

COST_UNITS = {"s": 1, "m": 60, "h": 3600}
NOT_EXPERIMENTS = {"references.yaml"}  # eval/ YAML files that are data, not experiments
ARCHIVE = "archive"  # eval/archive/: experiment files out of the pins, each saying why (`archived:`)


@dataclass
class Pin:
    """A pinned experiment and its last recorded result (None: never run since results were kept)."""
    experiment: Experiment
    path: Path
    result: dict | None

    @property
    def name(self) -> str:
        return self.experiment.name

    @property
    def cost(self) -> float | None:
        return provenance.cost_seconds(self.result)

    def command(self) -> str:
        return f"irpipe run {_shown(self.path)} --check"


def pins(eval_dir: Path, results_dir: Path) -> list[Pin]:
    """The experiments of `eval_dir` with expected scores, each with its results file when there is one. Only the
    folder's own files: eval/archive/ (archived experiments, each saying why in `archived:`) is not read, and a file
    that says `archived:` is no pin wherever it lies (docs/reproducing.md, what is pinned)."""
    found = []
    for path in sorted(Path(eval_dir).glob("*.yaml")):
        if path.name in NOT_EXPERIMENTS:
            continue
        experiment = Experiment.load(path)
        if experiment.expected and not experiment.archived:
            found.append(Pin(experiment, path, provenance.previous(Path(results_dir) / f"{experiment.name}.json") or None))
    return found


def archived(eval_dir: Path) -> list[Experiment]:
    """The archived experiments of `eval_dir` (its archive/ folder), each with its `archived:` reason."""
    return [Experiment.load(path) for path in sorted((Path(eval_dir) / ARCHIVE).glob("*.yaml"))]


def parse_cost(text: str) -> float:
    """Seconds of a --max-cost value: 90, 90s, 10m, 2h, 1.5h."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text or "")
    if not match:
        raise ConfigError(f"--max-cost takes a duration such as 90s, 10m or 2h, got {text!r}", "--max-cost")
    return float(match.group(1)) * COST_UNITS[match.group(2) or "s"]


def select(found: list[Pin], names: list[str], max_cost: float | None, everything: bool,
           ci: bool, archive: list[Experiment] = ()) -> tuple[list[Pin], list[tuple[Pin, str]]]:
    """(selected, [(left out, why)]) of the pins: `names` (a pin's whole name picks that pin alone; else globs or
    substrings of names), `ci` (ci: true), and
    `max_cost` (the last cold run's seconds at most; an unmeasured pin is left out, saying so) narrow `everything`
    or the pins the names pick. A name that matches nothing is a ConfigError, naming the `archive` files it
    matches with why each was archived and how to run it. The selected come cheapest first (cold_runs.order)."""
    if not (names or max_cost is not None or everything or ci):
        return [], []
    whole = {pin.name for pin in found}
    for name in names:
        if not any(_matches(pin.name, name, whole) for pin in found):
            gone = "".join(f"; archived: {old.path} ({old.archived}); run it with `irpipe run {old.path} --results-dir "
                           f"{Path(old.path).parent / 'results'} --check`" for old in archive if _matches(old.name, name))
            raise ConfigError(f"no pinned experiment matches {name!r} (irpipe reproduce lists them){gone}", "NAME")
    chosen = [pin for pin in found if not names or any(_matches(pin.name, name, whole) for name in names)]
    chosen = [pin for pin in chosen if not ci or pin.experiment.ci]
    selected, left = [], []
    for pin in chosen:
        if max_cost is not None and pin.cost is None:
            left.append((pin, "unmeasured: no cold run recorded (run it by name, or --all, to measure it)"))
        elif max_cost is not None and pin.cost > max_cost:
            left.append((pin, f"costs {format_seconds(pin.cost)} > {format_seconds(max_cost)}"))
        else:
            selected.append(pin)
    return sorted(selected, key=cold_runs.order), left


def _matches(name: str, pattern: str, whole: set[str] = frozenset()) -> bool:
    """`pattern` is a pin's whole name (one of `whole`: that pin alone), a glob, or a substring of names."""
    if pattern in whole:
        return name == pattern
    return fnmatch(name, pattern) if any(c in pattern for c in "*?[") else pattern in name


def listing(found: list[Pin], archive: list[Experiment] = (), cold: dict | None = None, here: str = "") -> str:
    """The pins as a table: name, dataset, ci, cost class and last cold run, last run's date and status, and the
    cold re-run here (`cold`, the record of pipeline/cold_runs.py; `here` this installation's software key); the
    count of `archive` and the hours left of the cold re-run under it."""
    cold = cold if cold is not None else {"pins": {}}
    rows = [("experiment", "dataset", "ci", "cost", "last cold run", "last run", "status", "cpu", "cold here")]
    for pin in found:
        result = pin.result or {}
        rows.append((pin.name, pin.experiment.dataset, "yes" if pin.experiment.ci else "no",
                     provenance.cost_class(result), format_seconds(pin.cost) if pin.cost is not None else "",
                     result["date"][:10] if result.get("date") else "undated" if result else "never run",
                     _status(result), "moves" if provenance.cpu_notes(pin.experiment.pipeline) else "",
                     cold_runs.state(cold, pin.name, pin.path, here)))
    measured = sum(pin.cost is not None for pin in found)
    under_way = cold_attempts.under_way(pin.name for pin in found)
    return (_table(rows) + f"\n{len(found)} pinned experiments, {measured} with a measured cost (the wall time of "
            f"their last cold run: nothing from the cache, {os.cpu_count()} cores here); cpu: moves = it trains a model "
            f"measured to move with the CPU's kernels ({provenance.CPU_SENSITIVITY.name})"
            + (f"\n{len(archive)} archived, not listed: {Path(archive[0].path).parent}/ (each file's archived: says why)"
               if archive else "")
            + "\n" + cold_runs.left(found, cold, here) + (f"\n{under_way}" if under_way else ""))


def _status(result: dict) -> str:
    statuses = {c.get("status") for c in result.get("checks", {}).values()}
    return next((s for s in ("FAIL", "OKISH", "OK") if s in statuses), "-")


def _table(rows: list[tuple]) -> str:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)


def run_one(pin: Pin, results_dir: Path, warm: bool, echo=print) -> tuple[dict | None, str]:
    """Run the pin as `irpipe run FILE --check` in a child process, its result written to `results_dir`: in the
    user's cache with `warm`, else in a cold-run folder of its own (pipeline/cold_attempts.py: an empty cache at the
    first attempt, resumed by the next attempt when this one ends without a result); (its new result, or None with
    the child's last error line)."""
    command = [sys.executable, "-m", "pipeline.cli", "-q", "run", str(pin.path), "--results-dir", str(results_dir)]
    written = Path(results_dir) / f"{pin.name}.json"
    replaced = _file_stamp(written)  # not its date: two runs within a second write the same one
    if warm:
        child = subprocess.run(command, capture_output=True, text=True)
        code, last = child.returncode, (child.stderr.strip().splitlines() or ["no output"])[-1]
    else:
        recipe, software = cold_runs.recipe_key(pin.path), cold_runs.current_software()
        where = cold_attempts.folder(pin.name, recipe, software)
        for old in cold_attempts.stale(pin.name, where):
            echo(f"    removed {old}: a cold run of another recipe or software, never to resume")
            cold_attempts.remove(old)
        if cold_attempts.damaged(where):  # its cache's work would come with no cost: not a cold run
            return None, (f"its cold run's ledger {where / cold_attempts.LEDGER} cannot be read, so the seconds of "
                          f"its earlier attempts are unknown and a result made from their work would not be a cold "
                          f"run; remove {where} to start the cold run over")
        attempts, seconds = cold_attempts.earlier_seconds(where)
        if attempts:
            echo(f"    resuming its cold run in {where}: {attempts} earlier attempt(s), {format_seconds(seconds)}")
        code, last = cold_attempts.run_attempt(command, dict(os.environ), where, pin.name, recipe, software)
    result = provenance.previous(written)
    if code not in (0, 1) or result.get("date") is None or _file_stamp(written) == replaced:
        kept = ("" if warm or code == cold_attempts.BUSY
                else f" (its work so far is kept in {where}: the next cold run of it resumes there)")
        return None, f"exit {code}: {last}{kept}"
    if not warm:
        result = cold_attempts.finish(result, where, written)
    return result, ""


def _file_stamp(path: Path) -> tuple[int, int] | None:
    """Which file is at `path` now (inode, modification time in ns; None when none is): the run's result is new when
    this changed (it is written atomically: a new file renamed into place)."""
    try:
        stat = Path(path).stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def _cold_folder(pin: Pin, software: str) -> Path:
    """Where the pin's cold run in the software `software` (cold_runs.software_key) keeps its cache and attempts."""
    return cold_attempts.folder(pin.name, cold_runs.recipe_key(pin.path), software)


def make_missing(pin: Pin, echo) -> tuple[float, str]:
    """Run the pin's `make:` commands whose path is not there (each an `irpipe` command, run by this Python, in the
    folder its paths are relative to: this one); (the seconds they took, "" or the error of the first that failed)."""
    seconds = 0.0
    for path, command in (pin.experiment.make or {}).items():
        if Path(path).exists():
            continue
        words = shlex.split(command)
        if words[:1] != ["irpipe"]:
            return seconds, f"make: {path}: `{command}` is not an irpipe command; make it by hand"
        echo(f"    make {path}: {command}")
        start = time.perf_counter()
        child = subprocess.run([sys.executable, "-m", "pipeline.cli", "-q", *words[1:]], capture_output=True,
                               text=True)
        if child.returncode != 0:
            last = (child.stderr.strip().splitlines() or ["no output"])[-1]
            return seconds, f"make: {path}: exit {child.returncode}: {last}"
        seconds += time.perf_counter() - start
    return seconds, ""


def matrix(rows: list[tuple[Pin, dict | None, str]]) -> str:
    """Pinned against measured, a line per (experiment, pinned measure), with the status and the run's cost."""
    lines = [("experiment", "measure", "pinned", "measured", "tolerance", "status", "wall time")]
    for pin, result, error in rows:
        if result is None:
            lines.append((pin.name, "", "", "", "", "ERROR", error))
            continue
        sd = result.get("sd", {})
        for measure, check in result["checks"].items():
            score = check["score"]
            shown = "" if score is None else f"{score:.4f}" + (f" ± {sd[measure]:.4f}" if measure in sd else "")
            lines.append((pin.name, measure, f"{check['expected']:.4f}", shown, f"{result['tolerance']:g}",
                          check["status"], _wall_time(result)))
    return _table(lines)


def _wall_time(result: dict) -> str:
    """A run's seconds and whether they were the whole work: cold (over several attempts where it was resumed), or
    what it reused."""
    if result.get("reused"):
        return f"{format_seconds(result['seconds'])} (reused {', '.join(result['reused'])})"
    attempts = (result.get("cost") or {}).get("attempts")
    if attempts:
        return f"{format_seconds(result['cost']['seconds'])} (cold, {attempts} attempts)"
    return f"{format_seconds(result['seconds'])} (cold)"


def counts(rows: list[tuple[Pin, dict | None, str]]) -> dict[str, int]:
    """Experiments by their worst status (ERROR for a run that did not finish)."""
    tally = {"OK": 0, "OKISH": 0, "FAIL": 0, "ERROR": 0}
    for _, result, _ in rows:
        tally["ERROR" if result is None else _status(result) if result.get("checks") else "FAIL"] += 1
    return tally


def _shown(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def dry_run(selected: list[Pin], warm: bool, results_dir: Path | None = None) -> str:
    """The commands a run would make; `results_dir`: where they write (None: the run's default, runs/results)."""
    prefix = "" if warm else "IRPIPE_CACHE=$(mktemp -d) "
    where = ("" if results_dir is None else " --record" if Path(results_dir) == RECORDED_RESULTS
             else f" --results-dir {shlex.quote(str(results_dir))}")
    software = "" if warm else cold_runs.current_software()
    return "\n".join("".join(f"{command} && " for path, command in (pin.experiment.make or {}).items()
                              if not Path(path).exists())
                      + f"{prefix}{pin.command()}{where}   # {format_seconds(pin.cost)}"
                      + ("" if warm else _under_way(pin, software)) for pin in selected)


def _under_way(pin: Pin, software: str) -> str:
    """", resumes its cold run after N attempt(s) of ..." when a cold run of the pin waits to resume (", its cold run
    is running in another process" while one runs it)."""
    where = _cold_folder(pin, software)
    if cold_attempts.running(where):
        return ", its cold run is running in another process"
    attempts, seconds = cold_attempts.earlier_seconds(where)
    return f", resumes its cold run after {attempts} attempt(s) of {format_seconds(seconds)}" if attempts else ""


def run_selection(selected: list[Pin], results_dir: Path, warm: bool, echo, finished=None, needed=None) -> list:
    """Run the pins one after the other; `finished(pin, result)` is called as each one ends with a result, and
    `needed(pin)`, where given, just before each starts: a pin it says is no longer needed (another process re-ran it
    cold meanwhile) is skipped, saying so, and so is a pin whose cold run another process is running now -- so two
    `reproduce --record` processes side by side share the pins."""
    rows = []
    software = None if warm else cold_runs.current_software()
    for number, pin in enumerate(selected, start=1):
        if needed is not None and not needed(pin):
            echo(f"[{number}/{len(selected)}] {pin.name}: re-run cold here meanwhile (another process), skipped")
            continue
        if not warm and cold_attempts.running(_cold_folder(pin, software)):
            echo(f"[{number}/{len(selected)}] {pin.name}: its cold run is running in another process, skipped")
            continue
        start = time.perf_counter()
        echo(f"[{number}/{len(selected)}] {shlex.join(['irpipe', 'run', _shown(pin.path), '--check'])}"
             f"{'' if warm else ' (empty cache)'} ...")
        made, error = make_missing(pin, echo)
        result, error = run_one(pin, results_dir, warm, echo) if not error else (None, error)
        if result is not None and made:
            result["make_seconds"] = round(made, 2)  # the cold record's cost of the pin counts them too
        echo(f"    {'ERROR ' + error if result is None else _status(result)} in {time.perf_counter() - start:.1f} s")
        rows.append((pin, result, error))
        if finished is not None and result is not None:
            finished(pin, result)
    return rows

