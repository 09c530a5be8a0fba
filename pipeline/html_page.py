"""The reproduction page (`irpipe leaderboard --html`): one static HTML file made from eval/, in the manner of
Pyserini's 2CR pages -- a table per dataset, a row per pinned experiment:

    experiment and pipeline | each measure: our seed mean ± sd, the pinned score and its status | the published
    or peer number beside it (eval/references.yaml entries whose `for:` names the experiment) | the exact command,
    with a copy button | cost of the last cold run | last reproduced (date) and environment | per-query wins and
    losses against the baseline (an inline SVG of the result's `win_loss`) and that measure's p-value, its test
    named, where there is one

and, under each table, the dataset's published numbers that no row claims. Above the tables, the answers (ANSWERS):
for TREC DL 2019 / 2020 and for each seed model on its paper's datasets, the best pin by the paper's or the track's
measure, the published or peer number beside it and its command; then what training adds (TRAINING): every pin whose
baseline is its own model untrained (the same pipeline with epochs=0), start and trained side by side with the
paired p-value. No external resource: the page opens from disk. `check_in_browser` (pipeline/browser.py) loads it
in headless Chromium, fails on a console error and takes the screenshot.
"""
from __future__ import annotations

import json
import re
import statistics
from html import escape

from pipeline import environment, provenance
from pipeline.significance import PAIRED, format_pvalue

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;width:100%}th,td{border:1px solid #ddd;padding:4px 6px;vertical-align:top}
th{background:#f4f4f4;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}td.num b{white-space:nowrap}
.OK{color:#17692b}.OKISH{color:#a66a00}.FAIL{color:#b00020;font-weight:bold}.none{color:#888}
code{font-size:12px;background:#f6f6f6;padding:1px 3px;overflow-wrap:anywhere}.pinned{color:#666;font-size:12px}
td.name{min-width:180px;max-width:260px}td.name b{overflow-wrap:anywhere}td.command{min-width:180px;max-width:220px}
td.ref{max-width:180px}td.num .pinned{font-size:11px}
.scroll{overflow-x:auto}
button.copy{font-size:11px;margin-left:4px;cursor:pointer}details summary{cursor:pointer;color:#335}
pre{font-size:11px;max-width:420px;overflow:auto}.cpu{font-size:12px;color:#8a4b00}.ref{font-size:12px}svg{display:block}
"""
# The questions the page answers first: (question, dataset, the reranker the pipeline must use or None for any
# pipeline, the measure the best pin is chosen by: the track's or the model paper's)
ANSWERS = [
    ("TREC DL 2019 passage (MS MARCO judgements)", "dl19-passage", None, "nDCG@10"),
    ("TREC DL 2020 passage (MS MARCO judgements)", "dl20-passage", None, "nDCG@10"),
    ("HCAN on TrecQA (raw test)", "trecqa/raw-test", "hcan", "AP"),
    ("HCAN on TREC Microblog 2013", "microblog/2013", "hcan", "P@30"),
    ("HCAN on TREC Microblog 2014", "microblog/2014", "hcan", "P@30"),
    ("MRNN on TrecQA (clean test)", "trecqa/clean-test", "mrnn", "AP"),
    ("MRNN on WikiQA", "wikiqa/test", "mrnn", "AP"),
    ("MRNN on SQuAD v1.1 paragraphs (articles B)", "squad-v1.1/dev-articles-b", "mrnn", "R@5"),
    ("ADDAX on WikiQA", "wikiqa/test", "addax", "AP"),
    ("ADDAX on MS MARCO (TREC DL 2019 judgements)", "dl19-passage", "addax", "nDCG@10"),
    ("keyword-BERT on LCQMC questions (the paper's set is private)", "lcqmc/questions-test", "kwbert", "Success@1"),
]
SCRIPT = """
document.querySelectorAll("button.copy").forEach(function (button) {
  button.addEventListener("click", function () {
    var text = button.getAttribute("data-command");
    function done() { button.textContent = "copied"; setTimeout(function () { button.textContent = "copy"; }, 1500); }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallback(text); done(); });
    } else { fallback(text); done(); }
  });
});
function fallback(text) {
  var area = document.createElement("textarea");
  area.value = text; document.body.appendChild(area); area.select();
  try { document.execCommand("copy"); } finally { document.body.removeChild(area); }
}
document.body.setAttribute("data-ready", "yes");
"""


def render_page(pins: list, references: dict[str, list[dict]], title: str = "irpipe reproductions") -> str:
    """The page of `pins` (pipeline.reproduce.Pin: experiment, file, last result) beside `references`."""
    datasets: dict[str, list] = {}
    for pin in pins:
        datasets.setdefault((pin.result or {}).get("dataset") or pin.experiment.dataset, []).append(pin)
    measured = sum(pin.cost is not None for pin in pins)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>", f"<h1>{escape(title)}</h1>",
             f"<p>Generated by <code>irpipe leaderboard --html</code> from <code>eval/*.yaml</code>, "
             f"<code>eval/results/*.json</code> and <code>eval/references.yaml</code>: {len(pins)} pinned "
             f"experiments on {len(datasets)} datasets, {measured} with a measured cost. A score is our mean ± sample "
             f"sd over the seeds (one run where there are none), with the pinned score and the check's status under it "
             f"(OK: within the tolerance; OKISH: within 10×; FAIL). Cost: the wall time of the last cold run (nothing "
             f"from the cache). Reproduce one with its command, or many with <code>irpipe reproduce</code>.</p>",
             *_answers(pins, references), *_training(pins),
             '<nav id="datasets">' + " · ".join(f'<a href="#{_anchor(d)}">{escape(d)}</a>' for d in datasets)
             + "</nav>"]
    for dataset, rows in datasets.items():
        parts += _dataset_section(dataset, rows, references.get(dataset, []))
    parts += [f"<script>{SCRIPT}</script>", "</body></html>", ""]
    return "\n".join(parts)


def _anchor(name: str, kind: str = "d") -> str:
    return f"{kind}-" + "".join(c if c.isalnum() else "-" for c in name)


def best_pin(pins: list, dataset: str, model: str | None, measure: str):
    """The pin with the highest `measure` on `dataset` among those whose pipeline uses `model` (any: None), or None."""
    uses = re.compile(rf"\b{re.escape(model)}\(") if model else None
    scored = [(pin.result["measures"][measure], pin) for pin in pins
              if (pin.result or {}).get("dataset") == dataset and measure in (pin.result.get("measures") or {})
              and (uses is None or uses.search(pin.experiment.pipeline))]
    return max(scored, key=lambda pair: pair[0])[1] if scored else None


def _answers(pins: list, references: dict[str, list[dict]]) -> list[str]:
    """The summary table: for each of ANSWERS, its best pin, that pin's score, the published or peer number (what
    the pin's references give for the measure, else every number published on the dataset for it) and the command."""
    out = ['<section id="answers"><h2>The answers</h2><p>For TREC DL and for each seed model on its paper\'s datasets: '
           "the best pinned pipeline by the track's or the paper's measure, the published or peer number beside it and "
           "the command. The tables below have every pin.</p>",
           '<div class="scroll"><table class="answers"><thead><tr><th>question</th><th>best irpipe pipeline</th>'
           "<th>score</th><th>published / peer</th><th>command</th></tr></thead><tbody>"]
    for question, dataset, model, measure in ANSWERS:
        pin = best_pin(pins, dataset, model, measure)
        if pin is None:
            out.append(f'<tr data-question="{escape(question)}"><td>{escape(question)}</td>'
                       f'<td colspan="4" class="none">no pin on {escape(dataset)} reports {escape(measure)}</td></tr>')
            continue
        published = [entry for entry in references.get(dataset, []) if measure in (entry.get("scores") or {})]
        mine = [entry for entry in published if pin.name in (entry.get("for") or [])]
        result, command = pin.result, pin.command()
        spread = f" ± {result['sd'][measure]:.4f}" if measure in (result.get("sd") or {}) else ""
        status = (result.get("checks") or {}).get(measure, {}).get("status", "")
        out.append(f'<tr data-question="{escape(question)}" data-best="{escape(pin.name)}"><td>{escape(question)}</td>'
                   f'<td><a href="#{_anchor(pin.name, "e")}"><b>{escape(pin.name)}</b></a><br>'
                   f"<code>{escape(pin.experiment.pipeline)}</code></td>"
                   f'<td class="num" data-measure="{escape(measure)}">{escape(measure)} <b>{result["measures"][measure]:.4f}'
                   f'{spread}</b> <span class="{status}">{status}</span></td><td class="ref">'
                   + ("<br>".join(_reference(entry) for entry in (mine or published))
                      or f'<span class="none">none published on {escape(dataset)}</span>') + "</td>"
                   f'<td class="command"><code>{escape(command)}</code><button class="copy" type="button" '
                   f'data-command="{escape(command)}">copy</button><br>{_cost(pin)}</td></tr>')
    return out + ["</tbody></table></div></section>"]


def against_start(experiment) -> bool:
    """Whether the experiment's baseline is its own pipeline untrained: the same stages and options, epochs=0."""
    from pipeline.spec import SpecError, parse

    if not experiment.baseline:
        return False
    try:
        trained, start = (str(parse(spec.replace("{seed}", "0")))
                          for spec in (experiment.pipeline, experiment.baseline))
    except SpecError:
        return False
    without = lambda spec: re.sub(r"(, )?\bepochs=\d+(, )?",                     # noqa: E731
                                  lambda m: ", " if m.group(1) and m.group(2) else "", spec)
    return "epochs=0" in start and "epochs=0" not in trained and without(start) == without(trained)


def _training(pins: list) -> list[str]:
    """What training adds: each pin against its own untrained start, the start's and the trained model's mean (± sd
    over the seeds), the difference and the paired p-value per measure."""
    rows = [pin for pin in pins if pin.result and pin.result.get("baseline") and against_start(pin.experiment)]
    out = ['<section id="training"><h2>What training adds</h2><p>Each pin whose baseline is its own model untrained '
           "(the same pipeline with <code>epochs=0</code>, seed for seed): the start and the trained model side by "
           "side, their difference and the paired p-value against the start.</p>"]
    if not rows:
        return out + ['<p class="none">no pin is compared with its own start yet</p></section>']
    out.append('<div class="scroll"><table class="training"><thead><tr><th>experiment</th><th>dataset</th>'
               "<th>measure</th><th>untrained start</th><th>trained</th><th>Δ</th><th>p</th></tr></thead><tbody>")
    for pin in rows:
        result, baseline = pin.result, pin.result["baseline"]
        measures = [m for m in result.get("measures") or {} if m in (baseline.get("measures") or {})]
        for i, measure in enumerate(measures):
            start, trained = baseline["measures"][measure], result["measures"][measure]
            head = (f'<td rowspan="{len(measures)}"><a href="#{_anchor(pin.name, "e")}"><b>{escape(pin.name)}</b></a>'
                    f'</td><td rowspan="{len(measures)}">{escape(result.get("dataset", ""))}</td>') if i == 0 else ""
            out.append(f'<tr data-trained="{escape(pin.name)}" data-measure="{escape(measure)}">{head}'
                       f"<td>{escape(measure)}</td><td class=\"num\">{start:.4f}{_spread(baseline, measure)}</td>"
                       f'<td class="num">{trained:.4f}{_spread(result, measure)}</td>'
                       f'<td class="num">{trained - start:+.4f}</td><td class="num">'
                       f"{_pvalue(baseline, measure).removeprefix('; p ') or '—'}</td></tr>")
    return out + ["</tbody></table></div></section>"]


def _spread(result: dict, measure: str) -> str:
    """ ± the sample sd over the seeds: a result's `sd`, or from a baseline's per-seed scores."""
    if measure in (result.get("sd") or {}):
        return f" ± {result['sd'][measure]:.4f}"
    scores = [seed[measure] for seed in (result.get("seeds") or {}).values() if measure in seed]
    return f" ± {statistics.stdev(scores):.4f}" if len(scores) > 1 else ""


def _dataset_section(dataset: str, rows: list, published: list[dict]) -> list[str]:
    measures: list[str] = []
    for pin in rows:  # a result's measure names are the run's (RR@10 on TREC DL is RR(rel=2)@10), else the file's
        for measure in (pin.result or {}).get("checks") or pin.experiment.expected:
            if measure not in measures:
                measures.append(measure)
    header = "".join(f"<th>{escape(m)}</th>" for m in measures)
    baselines = any(pin.experiment.baseline for pin in rows)
    out = [f'<section id="{_anchor(dataset)}" data-dataset="{escape(dataset)}"><h2>{escape(dataset)}</h2>',
           f'<div class="scroll"><table class="pins"><thead><tr><th>experiment</th>{header}<th>published / peer</th><th>command</th>'
           f"<th>cost · last reproduced</th>" + ("<th>per-query vs baseline</th>" if baselines else "")
           + "</tr></thead><tbody>"]
    claimed = set()
    for pin in rows:
        mine = [entry for entry in published if pin.name in (entry.get("for") or [])]
        claimed |= {id(entry) for entry in mine}
        out.append(_row(pin, measures, mine, baselines))
    out.append("</tbody></table></div>")
    rest = [entry for entry in published if id(entry) not in claimed]
    if rest:
        out.append('<p class="ref">Published for this dataset, not matched to a row: '
                   + "; ".join(_reference(entry) for entry in rest) + "</p>")
    out.append("</section>")
    return out


def _row(pin, measures: list[str], references: list[dict], baselines: bool) -> str:
    result = pin.result or {}
    experiment = pin.experiment
    checks, sd = result.get("checks") or {}, result.get("sd") or {}
    cells = [f'<td class="name"><b>{escape(pin.name)}</b><br><code>{escape(experiment.pipeline)}</code>'
             + (f'<br><span class="pinned">baseline: <code>{escape(experiment.baseline)}</code></span>'
                if experiment.baseline else "")
             + _cpu_notes(experiment.pipeline) + "</td>"]
    for measure in measures:
        check = checks.get(measure)
        score = (result.get("measures") or {}).get(measure)
        if score is None:
            cells.append('<td class="num none">not run</td>')
            continue
        spread = f" ± {sd[measure]:.4f}" if measure in sd else ""
        pinned = (f'<br><span class="pinned">pinned {check["expected"]:.4f} ± {result.get("tolerance", 0):g} '
                  f'<span class="{check["status"]}">{check["status"]}</span></span>') if check else ""
        cells.append(f'<td class="num" data-measure="{escape(measure)}"><b>{score:.4f}{spread}</b>{pinned}</td>')
    cells.append('<td class="ref">' + ("<br>".join(_reference(entry) for entry in references) or
                                       '<span class="none">none</span>') + "</td>")
    command = pin.command()
    cells.append(f'<td class="command"><code>{escape(command)}</code><button class="copy" type="button" '
                 f'data-command="{escape(command)}">copy</button></td>')
    env = result.get("environment")
    date = (result.get("date") or "")[:10] or ("undated" if result else "never run")
    cells.append(f'<td class="cost">{_cost(pin)}<br>{escape(date)}'
                 f"<details><summary>environment</summary><p>{escape(environment.summary(env))}</p>"
                 + (f"<pre>{escape(json.dumps(env, indent=1))}</pre>" if env else "") + "</details></td>")
    if baselines:
        cells.append(f"<td>{_win_loss(result) if experiment.baseline else ''}</td>")
    return f'<tr id="{_anchor(pin.name, "e")}" data-experiment="{escape(pin.name)}">' + "".join(cells) + "</tr>"


def _cpu_notes(spec: str) -> str:
    """A line per model the pipeline trains that is measured to move with the CPU's kernels; its notes (one per
    measurement in eval/benchmarks/cpu-sensitivity.yaml) in the line's title."""
    notes: dict[str, list[str]] = {}
    for note in provenance.cpu_notes(spec):
        model, text = note.split(": ", 1)
        notes.setdefault(model, []).append(text)
    return "".join(f'<br><span class="cpu" title="{escape(chr(10).join(texts))}">moves with the CPU\'s kernels '
                   f'({escape(model)}: eval/benchmarks/cpu-sensitivity.yaml'
                   + (f", {len(texts)} measurements" if len(texts) > 1 else "") + ")</span>"
                   for model, texts in notes.items())


def _cost(pin) -> str:
    """The cost class of the pin's last cold run with its wall time, or 'unmeasured': never a guess."""
    klass = provenance.cost_class(pin.result)
    if pin.cost is None:
        return f'<span data-cost="{klass}">{klass}</span>'
    attempts = pin.result["cost"].get("attempts")  # a cold run resumed over several (pipeline/cold_attempts.py)
    shown = provenance.format_seconds(pin.cost) + (f", {attempts} attempts" if attempts else "")
    return f'<span data-cost="{klass}">{klass} ({shown})</span>'


def _reference(entry: dict) -> str:
    scores = ", ".join(f"{escape(str(m))} {escape(f'{v:.4f}' if isinstance(v, float) else str(v))}"
                       for m, v in (entry.get("scores") or {}).items())
    return f"{escape(str(entry.get('system', '')))}: {scores} <i>({escape(str(entry.get('source', '')))})</i>"


def _win_loss(result: dict, width: int = 220, height: int = 70) -> str:
    """Sorted per-query differences as bars (wins green, up; losses red, down), with the counts."""
    record = result.get("win_loss")
    if not record:
        return '<span class="none">no per-query record yet (recorded from the next run on)</span>'
    deltas = record["differences"]
    top = max((abs(d) for d in deltas), default=0) or 1.0
    step = width / max(len(deltas), 1)
    middle = height / 2
    bars = []
    for i, delta in enumerate(deltas):
        if delta == 0:
            continue
        size = abs(delta) / top * (middle - 2)
        y = middle - size if delta > 0 else middle
        bars.append(f'<rect x="{i * step:.1f}" y="{y:.1f}" width="{max(step, 0.6):.1f}" height="{size:.1f}" '
                    f'fill="{"#2a9d4b" if delta > 0 else "#c8323c"}"/>')
    label = (f'{record["measure"]}: {record["wins"]} better, {record["losses"]} worse, {record["ties"]} tied of '
             f'{record["queries"]} queries' + _pvalue(result.get("baseline") or {}, record["measure"]))
    return (f'<svg class="winloss" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{escape(label)}"><line x1="0" y1="{middle}" x2="{width}" y2="{middle}" stroke="#444" '
            f'stroke-width="0.6"/>{"".join(bars)}</svg><span class="pinned">{escape(label)}; max |Δ| {top:.3f}</span>')


def _pvalue(baseline: dict, measure: str) -> str:
    """The measure's p-value against the baseline with its test (and where a description stated it), or seed 0's
    marked as pending a re-run."""
    pending = (baseline.get("pending") or {}).get(measure)
    if pending is not None:
        return f"; p {format_pvalue(pending)} ({provenance.PENDING})"
    p = (baseline.get("pvalues") or {}).get(measure)
    stated = f"; from {provenance.STATED}" if measure in (baseline.get("stated") or ()) else ""
    return "" if p is None else f"; p {format_pvalue(p)} ({baseline.get('test') or PAIRED}{stated})"
