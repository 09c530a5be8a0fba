"""`irpipe reproduce`: the pinned experiments with their measured cost; a selection run again, pinned vs measured."""
from __future__ import annotations

import argparse
from pathlib import Path

from pipeline import cold_attempts, cold_runs
from pipeline.data.files import atomic_write
from pipeline.errors import InputError
from pipeline.experiment import LOCAL_RESULTS, RECORDED_RESULTS
from pipeline.reproduce import archived, counts, dry_run, listing, matrix, parse_cost, pins, run_selection, select

NAMED = 5  # the skipped pins named on one line; the rest counted


def define_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="experiments to run: a whole name (that pin alone), a part of names (hcan) or a glob "
                             "(trecqa-*); none and no other selection: list the pinned experiments with their cost")
    parser.add_argument("--max-cost", metavar="DURATION",
                        help="only those whose last cold run took at most this long (90s, 10m, 2h); an unmeasured "
                             "one is left out, saying so")
    parser.add_argument("--all", action="store_true", help="every pinned experiment (narrowed by the other flags)")
    parser.add_argument("--ci", action="store_true", help="only those the test suite runs (ci: true, the cheap class)")
    parser.add_argument("--warm", action="store_true",
                        help="use your irpipe cache (default: an empty one per experiment, so it retrains and "
                             "measures the cost of the whole work)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.add_argument("--eval-dir", default="eval", metavar="DIR", help="where the experiment files are")
    parser.add_argument("--results-dir", default=RECORDED_RESULTS, type=Path, metavar="DIR",
                        help="the recorded results: the list's costs and dates, and where --record writes")
    parser.add_argument("--record", action="store_true",
                        help=f"write each run's result to the recorded results (default: {LOCAL_RESULTS}, untracked), "
                             "and each cold run's checks and cost to EVAL_DIR/benchmarks/reproduce-cold.json; pins "
                             "already re-run cold there on their current file and this environment are skipped")
    parser.add_argument("--again", action="store_true",
                        help="with --record: run the pins already re-run cold here too")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="CHECKOUT",
                        help="take the cold runs another checkout recorded (a git worktree that ran reproduce "
                             "--record beside this one): its record's entries this one lacks or holds an earlier run "
                             "of, with their recorded results; runs nothing")


def main(args: argparse.Namespace) -> int:
    if args.merge:  # runs nothing: the other checkout's cold runs into this record
        return merge(args.merge, Path(args.eval_dir), args.results_dir)
    max_cost = parse_cost(args.max_cost) if args.max_cost is not None else None
    found, archive = pins(Path(args.eval_dir), args.results_dir), archived(Path(args.eval_dir))
    selected, left = select(found, args.names, max_cost, args.all, args.ci, archive)
    record_path = cold_runs.record_path(Path(args.eval_dir))
    cold, here = cold_runs.load(record_path), cold_runs.current_software()
    if not (args.names or max_cost is not None or args.all or args.ci):
        print(listing(found, archive, cold, here))
        return 0
    for pin, why in left:
        if pin.cost is not None:
            print(f"left out {pin.name}: {why}")
    unmeasured = [pin.name for pin, _ in left if pin.cost is None]
    if unmeasured:  # most pins, before a cold re-run: one line, not one each
        print(f"left out {len(unmeasured)} unmeasured (no cold run recorded; run them by name, or --all, to measure "
              f"them): {', '.join(unmeasured)}")
    if args.record and not args.again:
        done = [pin for pin in selected if cold_runs.done_here(cold, pin.name, pin.path, here)]
        if done:
            named = [f"{pin.name} ({cold['pins'][pin.name]['date'][:10]})" for pin in done[:NAMED]]
            more = f" and {len(done) - NAMED} more (the list without flags dates each)" if len(done) > NAMED else ""
            print(f"skipped {len(done)}, re-run cold here on their current file and this environment ({record_path}; "
                  f"--again runs them): " + ", ".join(named) + more)
        print(cold_runs.left(selected, cold, here).replace("cold re-run here", "this selection"))
        under_way = cold_attempts.under_way(pin.name for pin in selected)
        if under_way:
            print(under_way)
        selected = [pin for pin in selected if pin not in done]
    if args.dry_run or not selected:
        print(dry_run(selected, args.warm, args.results_dir if args.record else None) if selected
              else "nothing selected")
        return 0
    def finished(pin, result):
        if args.record and not args.warm:
            cold_runs.update(record_path, pin.name, pin.path, result)

    def needed(pin):  # the record as it is now: another reproduce may have re-run this pin since the start
        return not cold_runs.done_here(cold_runs.load(record_path), pin.name, pin.path, here)

    rows = run_selection(selected, args.results_dir if args.record else LOCAL_RESULTS, args.warm, echo=print,
                         finished=finished, needed=needed if args.record and not args.again else None)
    print()
    print(matrix(rows))
    tally = counts(rows)
    print(", ".join(f"{count} {status}" for status, count in tally.items()) + f" of {len(rows)} experiments")
    return 1 if tally["FAIL"] or tally["ERROR"] else 0


def merge(checkouts: list[Path], eval_dir: Path, results_dir: Path) -> int:
    """Each checkout's cold runs into this one's record (cold_runs.merge), with each taken pin's recorded result
    from the checkout's results folder (`results_dir` under it)."""
    record_path = cold_runs.record_path(eval_dir)
    names = {pin.name for pin in pins(eval_dir, results_dir)}
    for checkout in checkouts:
        theirs = cold_runs.record_path(checkout / eval_dir)
        if not theirs.is_file() or theirs.resolve() == record_path.resolve():
            raise InputError(str(theirs), "no other checkout's cold-run record there: give the root of a checkout "
                                          "that ran `irpipe reproduce --record`", field="--merge")
        taken, left = cold_runs.merge(record_path, theirs, names)
        for name in taken:
            result = checkout / results_dir / f"{name}.json"
            if result.is_file():
                with atomic_write(results_dir / f"{name}.json", "wb", encoding=None) as out:
                    out.write(result.read_bytes())
        print(f"{checkout}: took {len(taken)} cold run(s)" + (": " + ", ".join(taken) if taken else ""))
        if left:
            print(f"{checkout}: left {len(left)} that are no pins here (archived or removed): " + ", ".join(left))
    return 0
