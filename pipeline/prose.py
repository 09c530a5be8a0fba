"""Tables in prose made from results: a Markdown table between markers is rewritten from eval/results/*.json
(`irpipe leaderboard --prose`), and `--prose --check` fails where a table differs from what the results say.

A marker is an HTML comment (invisible once rendered) holding YAML, and the table runs to `<!-- /results -->`:

    <!-- results
    table: experiments                       # a row per experiment: label, each measure, its file
    measures: [AP, RR, P@1]
    rows: {trecqa-clean-test-idf-overlap: IDF-overlap floor, trecqa-mrnn-distance: "MRNN, distance"}
    bold: [trecqa-mrnn-distance]             # optional: rows in bold
    -->

    table: seeds                             # a row per seed of one experiment, then mean ± sd
    experiment: wikiqa-mrnn-contextual-distance
    columns: {"kept epoch (dev AP)": {0: 3 (0.7413), 1: 3 (0.7412), mean: ""}}   # optional: columns of text

    table: comparison                        # one experiment's baseline, run and `beside` rows, with p-values
    experiment: main-job
    labels: {baseline: BM25 (baseline), main-job: "ADDAX, seed 0", biencoder: bi-encoder}

Scores are as in the results file, 4 decimals (a seeded experiment's mean ± its sample sd); a p-value is two
significant digits, under a header naming its test (a seeded experiment's: the two-sided paired t-test over
per-query seed means); a seed-0 p-value that results from before 2026-12-02 hold in `baseline.pending` reads
"seed-0 only, pending re-run" (bench/studies/seed_mean_pvalues.py). A marker naming a result, measure or row that is not
there is an InputError naming the file and line of the marker.
"""
from __future__ import annotations

import re
from pathlib import Path

from pipeline.data.files import read_json
from pipeline.data.yaml_files import parse_yaml
from pipeline.errors import InputError
from pipeline.provenance import PENDING
from pipeline.significance import format_pvalue

START = re.compile(r"^<!-- results\s*$")
END = "<!-- /results -->"
DEFAULT_FILES = ("README.md", "docs/*.md", "eval/*.md")


def _score(result: dict, measure: str, where: tuple[Path, int]) -> str:
    if measure not in result.get("measures", {}):
        raise InputError(where[0], f"{result['name']} has no {measure} (it has {', '.join(result['measures'])})",
                         line=where[1], field="measures")
    sd = result.get("sd", {}).get(measure)
    return f"{result['measures'][measure]:.4f}" + (f" ± {sd:.4f}" if sd is not None else "")


def _row(cells: list[str], bold: bool = False) -> str:
    return "| " + " | ".join(f"**{c}**" if bold and c else c for c in cells) + " |"


def render(spec: dict, results: dict[str, dict], where: tuple[Path, int]) -> list[str]:
    """The Markdown lines of the table the marker `spec` describes."""
    def result(name: str) -> dict:
        if name not in results:
            raise InputError(where[0], f"no results for {name!r} (eval/results/{name}.json; run irpipe run "
                                       f"eval/{name}.yaml)", line=where[1], field="experiment")
        return results[name]

    kind, measures = spec.get("table"), [str(m) for m in spec.get("measures") or []]
    extra = spec.get("columns") or {}
    if kind == "experiments":
        rows, bold = spec.get("rows") or {}, set(spec.get("bold") or [])
        if not measures:
            raise InputError(where[0], "an experiments table names its measures", line=where[1], field="measures")
        lines = [_row(["configuration", *measures, *extra, "file"]), _row(["---"] * (len(measures) + len(extra) + 2))]
        for name, label in rows.items():
            found = result(name)
            lines.append(_row([str(label), *(_score(found, m, where) for m in measures),
                               *(str((values or {}).get(name, "")) for values in extra.values()),
                               f"{name}.yaml"], name in bold))
        return lines
    if kind == "seeds":
        found = result(str(spec.get("experiment")))
        if not found.get("seeds"):
            raise InputError(where[0], f"{found['name']} has no seeds", line=where[1], field="experiment")
        measures = measures or list(found["measures"])
        lines = [_row(["seed", *measures, *extra]), _row(["---"] + ["---:"] * len(measures) + ["---"] * len(extra))]
        for seed, scores in found["seeds"].items():
            lines.append(_row([seed, *(f"{scores[m]:.4f}" for m in measures),
                               *(str((values or {}).get(int(seed), (values or {}).get(seed, ""))) for values in extra.values())]))
        lines.append(_row(["mean ± sd", *(_score(found, m, where) for m in measures),
                           *(str((values or {}).get("mean", "")) for values in extra.values())], bold=True))
        return lines
    if kind == "comparison":
        found = result(str(spec.get("experiment")))
        if "baseline" not in found:
            raise InputError(where[0], f"{found['name']} has no baseline to compare with", line=where[1], field="table")
        measures = measures or list(found["measures"])
        labels, baseline = spec.get("labels") or {}, found["baseline"]
        test = f"p, {baseline['test']}" if baseline.get("test") else "p"  # results from before 2026-12-02: none named
        lines = [_row(["run", *measures, f"{test} ({' / '.join(measures)})"]), _row(["---"] * (len(measures) + 2))]
        others = [(found["name"], found["measures"], baseline["pvalues"], baseline.get("pending") or {}),
                  *((label, row["measures"], row["pvalues"], {}) for label, row in (found.get("beside") or {}).items())]
        lines.append(_row([str(labels.get("baseline", "baseline")),
                           *(f"{baseline['measures'][m]:.4f}" for m in measures), ""]))
        for name, scores, pvalues, pending in others:
            lines.append(_row([str(labels.get(name, name)), *(f"{scores[m]:.4f}" for m in measures),
                               " / ".join(f"{format_pvalue(pending[m])} ({PENDING})" if m in pending else
                                          format_pvalue(pvalues.get(m)) for m in measures)]))
        return lines
    raise InputError(where[0], f"table must be experiments, seeds or comparison, got {kind!r}", line=where[1],
                     field="table")


def rewrite(text: str, path: Path, results: dict[str, dict]) -> str:
    """`text` with every marked table made again from `results`."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        out.append(lines[i])
        if not START.match(lines[i]):
            i += 1
            continue
        start = i + 1
        close = next((j for j in range(start, len(lines)) if lines[j].strip() == "-->"), None)
        end = next((j for j in range(start, len(lines)) if lines[j].strip() == END), None)
        if close is None or end is None or end < close:
            raise InputError(path, f"a results marker needs a closing --> and then {END}", line=start)
        spec = parse_yaml("\n".join(lines[start:close]), path, first_line=start + 1) or {}
        if not isinstance(spec, dict):
            raise InputError(path, "the results marker is a YAML mapping (table: ..., measures: ...)", line=start)
        out += lines[start:close + 1] + [""] + render(spec, results, (path, start)) + ["", END]  # blank lines: the
        # table is a block of its own between the comments, in every Markdown renderer
        i = end + 1
    return "\n".join(out)


def load_results(results_dir: Path) -> dict[str, dict]:
    found = {}
    for path in sorted(Path(results_dir).glob("*.json")):
        data = read_json(path)
        found[data.get("name", path.stem)] = data
    return found


def marked_files(root: Path, patterns=DEFAULT_FILES) -> list[Path]:
    """The Markdown files under `root` (README.md, docs/, eval/) that hold a results marker."""
    files = sorted({p for pattern in patterns for p in Path(root).glob(pattern)})
    return [p for p in files if any(START.match(line) for line in p.read_text(encoding="utf-8").split("\n"))]


def stale(files: list[Path], results: dict[str, dict]) -> dict[Path, str]:
    """file -> its text made again, for the files whose tables differ from the results."""
    changed = {}
    for path in files:
        text = path.read_text(encoding="utf-8")
        made = rewrite(text, path, results)
        if made != text:
            changed[path] = made
    return changed
