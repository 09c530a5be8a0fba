"""Answer-sentence selection (WikiQA, TrecQA) in the line-aligned a.toks / b.toks / sim.txt / id.txt form.

Line i of each file holds one (question, candidate sentence, 0/1 label, question id) pair; a question's
candidates are consecutive lines. The candidates of a question, in file order, form its ranking (score =
-position, so the shipped order is kept), their labels its qrels (0 = judged non-relevant), and every question
is kept, including those with no correct or only correct candidates (filter at evaluation time if needed).
Candidate ids are the docid column of id.txt where it has one (TrecQA dev/test: `qid 0 docid label`), else
`<qid>-<position>` with a 0-based position (WikiQA, TrecQA train: `qid` alone); a line of another field count is an
error, and ids follow the id rule (pipeline/data/ids.py). The same candidate id may stand under several
questions (the same sentence judged for several questions, as in IR data) when its text is the same each time; a
different text under the same id is an error naming both lines.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from pipeline.data.files import numbered_lines
from pipeline.data.ids import check_id, split_fields
from pipeline.data.qrels import Qrels
from pipeline.data.runs import Run
from pipeline.data.sets.base import Dataset
from pipeline.data.topics import Topics
from pipeline.errors import InputError


@dataclass
class _Candidates:
    topics: Topics
    qrels: Qrels
    run: Run


def aligned_columns(paths: dict[str, Path]) -> dict[str, list[tuple[int, str]]]:
    """The numbered lines of parallel files (a.toks, b.toks, sim.txt, id.txt...), which must have one line count."""
    columns = {key: list(numbered_lines(path, skip_blank=False)) for key, path in paths.items()}
    counts = {key: len(lines) for key, lines in columns.items()}
    if len(set(counts.values())) != 1:
        shortest = min(counts, key=counts.get)
        message = f"has {counts[shortest]} lines, but the line counts {counts} should all be equal"
        raise InputError(paths[shortest], message, counts[shortest] + 1)
    return columns


class AnswerSelectionDataset(Dataset):
    provides = ("topics", "qrels", "run", "docs")

    def _read(self) -> _Candidates:
        keys = ("questions", "answers", "labels", "ids")
        paths = {key: self.path(key) for key in keys}
        columns = aligned_columns(paths)
        queries: dict[str, str] = {}
        qrels: Qrels = {}
        ranking: dict[str, list[tuple[str, float]]] = {}
        texts: dict[str, str] = {}
        first_line: dict[str, int] = {}  # docid -> the line that gave its text
        previous = None
        for (number, question), (_, answer), (_, label), (_, ids) in zip(*(columns[key] for key in keys)):
            parts, printable = split_fields(ids)
            if len(parts) not in (1, 4):
                raise InputError(paths["ids"], f"expected 1 field (qid: WikiQA, TrecQA train) or 4 (qid 0 docid label: "
                                               f"TrecQA dev and test), found {len(parts)}", number, "columns")
            qid = parts[0]
            if not printable:
                check_id(qid, paths["ids"], number, "qid", "question id")
                if len(parts) == 4:
                    check_id(parts[2], paths["ids"], number, "docid", "candidate id")
            if qid != previous and qid in queries:
                raise InputError(paths["ids"], f"the candidates of question {qid!r} are not consecutive", number, "qid")
            previous = qid
            if label.strip() not in ("0", "1"):
                raise InputError(paths["labels"], f"label {label!r} is not 0 or 1", number, "label")
            if not question.strip():
                raise InputError(paths["questions"], "empty question", number, "question")
            if queries.setdefault(qid, question.strip()) != question.strip():
                message = f"question {qid!r} changes text within its candidates"
                raise InputError(paths["questions"], message, number, "question")
            hits = ranking.setdefault(qid, [])
            docid = parts[2] if len(parts) == 4 else f"{qid}-{len(hits)}"
            if docid in qrels.get(qid, {}):
                raise InputError(paths["ids"], f"candidate id {docid!r} appears twice under question {qid!r}",
                                 number, "docid")
            if texts.setdefault(docid, answer.strip()) != answer.strip():
                message = (f"candidate id {docid!r} has another text than on line {first_line[docid]} "
                           "(the same id must name the same sentence)")
                raise InputError(paths["answers"], message, number, "answer")
            first_line.setdefault(docid, number)
            hits.append((docid, -float(len(hits) + 1)))
            qrels.setdefault(qid, {})[docid] = int(label)
        return _Candidates(Topics(queries), qrels, Run(ranking, texts, tag=self.name.replace("/", "-")))

    def topics(self) -> Topics:
        return self._read().topics

    def qrels(self) -> Qrels:
        return self._read().qrels

    def run(self) -> Run:
        return self._read().run

    def docs(self) -> Iterator[dict]:
        """The candidate sentences as a small corpus ({"id", "contents", "qid"}: the first question it stands
        under); a candidate repeated under several questions is one document."""
        run = self._read().run
        first_qid = {}
        for qid, hits in run.ranking.items():
            for docid, _ in hits:
                first_qid.setdefault(docid, qid)
        return ({"id": docid, "contents": run.texts[docid], "qid": qid} for docid, qid in first_qid.items())
