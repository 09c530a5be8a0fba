"""Chinese sets: LCQMC and BQ question pairs (matching), THUCNews titles and InsuranceQA-zh questions (domains).

- LCQMC: `sentence1<TAB>sentence2<TAB>label`. BQ: CSV with a header `sentence1,sentence2,label` (UTF-8 BOM).
- THUCNews: `title<TAB>class index`, class names in class.txt (one per line, in index order).
- InsuranceQA-zh: `qid ++$++ domain ++$++ zh question ++$++ en question`; records and topics are the Chinese
  questions (the answer texts are not available, so there are no qrels).
LCQMC and BQ also read as ranking tasks (`PairsAsRanking`: text_a a query, its rows its labelled candidates), so
rerankers train on them (`irpipe train kwbert --train lcqmc/dev`) and score them (`candidates() >> ...`).
Records are {"id", "text", "domain"} (+ "en" for InsuranceQA-zh); THUCNews ids are 0-based line positions.
"""
from __future__ import annotations

import csv
from typing import Iterator

from pipeline.data.files import numbered_lines, open_text
from pipeline.data.sets.base import Dataset, LabelledPair, PairsAsRanking
from pipeline.data.topics import Topics
from pipeline.errors import InputError


def _label(text: str, path, number: int) -> int:
    if text.strip() not in ("0", "1"):
        raise InputError(path, f"label {text!r} is not 0 or 1", number, "label")
    return int(text)


class LcqmcDataset(PairsAsRanking, Dataset):
    provides = ("pairs", "topics", "qrels", "run")

    def pairs(self) -> Iterator[LabelledPair]:
        path = self.path("pairs")
        for number, line in numbered_lines(path):
            parts = line.split("\t")
            if len(parts) != 3:
                raise InputError(path, f"expected 3 tab-separated columns, found {len(parts)}", number, "columns")
            yield LabelledPair(parts[0].strip(), parts[1].strip(), _label(parts[2], path, number))


class BqDataset(PairsAsRanking, Dataset):
    provides = ("pairs", "topics", "qrels", "run")

    def pairs(self) -> Iterator[LabelledPair]:
        path = self.path("pairs")
        with open_text(path) as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header != ["sentence1", "sentence2", "label"]:
                raise InputError(path, f"expected the header sentence1,sentence2,label, found {header}", 1, "header")
            for row in reader:
                if len(row) != 3:
                    raise InputError(path, f"expected 3 columns, found {len(row)}", reader.line_num, "columns")
                yield LabelledPair(row[0].strip(), row[1].strip(), _label(row[2], path, reader.line_num))


class ThucnewsDataset(Dataset):
    provides = ("records",)

    def records(self) -> Iterator[dict]:
        classes = [name for _, name in numbered_lines(self.path("classes"))]
        path = self.path("titles")
        for index, (number, line) in enumerate(numbered_lines(path)):
            text, _, label = line.rpartition("\t")
            if not label.strip().isdigit() or int(label) >= len(classes):
                raise InputError(path, f"class index {label!r} is not one of 0..{len(classes) - 1}", number, "label")
            yield {"id": str(index), "text": text.strip(), "domain": classes[int(label)].strip()}


class InsuranceQaZhDataset(Dataset):
    provides = ("records", "topics")

    def records(self) -> Iterator[dict]:
        path = self.path("questions")
        for number, line in numbered_lines(path):
            parts = [part.strip() for part in line.split("++$++")]
            if len(parts) != 4:
                raise InputError(path, f"expected 4 fields separated by ++$++, found {len(parts)}", number, "columns")
            qid, domain, zh, en = parts
            if not zh:
                raise InputError(path, "empty Chinese question", number, "zh")
            yield {"id": qid, "text": zh, "domain": domain, "en": " ".join(en.split())}

    def topics(self) -> Topics:
        return Topics({record["id"]: record["text"] for record in self.records()})
