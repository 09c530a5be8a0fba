"""The pipeline spec grammar: the command line says what Python says, parsed without `eval()`.

    pipeline := fusion ('>>' fusion)*          a >> b        (lowest precedence, as in Python)
    fusion   := cutoff ('+' cutoff)*           a + b         the sum of the scores (PyTerrier's +; rrf(a, b) fuses ranks)
    cutoff   := atom ('%' INT)*                a % 100       (highest precedence, as in Python)
    atom     := NAME [ '(' [arg (',' arg)*] ')' ] | '(' pipeline ')'
    arg      := NAME '=' value | value
    value    := number | 'quoted string' | true | false | none | null | bare-word (paths, dataset names: trecqa/train)
                | '[' [value (',' value)*] ']' | pipeline (a stage as an argument, e.g. of fusion(...))

`parse("bm25(k1=0.9,b=0.4) % 100 >> hcan(ckpt=models/hcan)")` returns the same Stage objects that
`ir.bm25(k1=0.9, b=0.4) % 100 >> ir.hcan(ckpt="models/hcan")` builds in Python (`import pipeline as ir`: every
stage is a name of the package, spelt as here). Errors point at the bad token.
A bare value means what it means in a `--set KEY=VALUE` flag (`parse_scalar`): `none` and `null` are both None.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from pipeline.errors import ConfigError, printable
from pipeline.log import logger
from pipeline.stage import Stage
from pipeline.stages import get_stage_class

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<op>>>|[%+(),=\[\]])
  | (?P<string>'[^']*'|"[^"]*")
  | (?P<word>[A-Za-z0-9_.:/~@-]+)
""", re.VERBOSE)


class SpecError(ConfigError):
    """A spec that does not parse: the message, the spec (what is not printable in it escaped), a caret under the
    fault."""

    def __init__(self, spec: str, position: int, message: str):
        self.spec, self.position = spec, position
        shown, before = printable(spec), len(printable(spec[:position]))
        super().__init__(f"{printable(message)}\n  {shown}\n  {' ' * before}^")


@dataclass
class _Token:
    kind: str
    text: str
    position: int


def _tokenize(spec: str) -> list[_Token]:
    tokens, position = [], 0
    while position < len(spec):
        match = _TOKEN.match(spec, position)
        if not match:
            raise SpecError(spec, position, f"unexpected character {spec[position]!r}")
        if match.lastgroup != "space":
            tokens.append(_Token(match.lastgroup, match.group(), position))
        position = match.end()
    tokens.append(_Token("end", "", len(spec)))
    return tokens


MAX_DEPTH = 32  # brackets inside brackets: the parser recurses at each, and no real pipeline nests past a few


def _check_depth(spec: str, tokens: list[_Token]) -> None:
    """A SpecError at the first bracket nested deeper than MAX_DEPTH (the parser's recursion would end in a
    RecursionError traceback at ~250)."""
    depth = 0
    for token in tokens:
        if token.kind == "op" and token.text in "([":
            depth += 1
            if depth > MAX_DEPTH:
                raise SpecError(spec, token.position, f"brackets nested deeper than {MAX_DEPTH} levels")
        elif token.kind == "op" and token.text in ")]":
            depth -= 1


class _Parser:
    def __init__(self, spec: str):
        self.spec, self.tokens, self.index = spec, _tokenize(spec), 0
        _check_depth(spec, self.tokens)

    @property
    def token(self) -> _Token:
        return self.tokens[self.index]

    def fail(self, message: str, token: _Token | None = None):
        raise SpecError(self.spec, (token or self.token).position, message)

    def take(self, text: str | None = None, kind: str | None = None) -> _Token:
        token = self.token
        if (text is not None and token.text != text) or (kind is not None and token.kind != kind):
            expected = repr(text) if text else kind
            self.fail(f"expected {expected}, found {token.text!r}" if token.kind != "end" else f"expected {expected} at the end")
        self.index += 1
        return token

    def accept(self, text: str) -> bool:
        if self.token.kind == "op" and self.token.text == text:
            self.index += 1
            return True
        return False

    def parse(self) -> Stage:
        if self.token.kind == "end":
            self.fail("empty pipeline: expected a stage such as bm25()")
        stage = self.pipeline()
        if self.token.kind != "end":
            self.fail(f"unexpected {self.token.text!r}: stages are joined with >>, + or % k")
        return stage

    def pipeline(self) -> Stage:
        stage = self.fusion()
        while self.accept(">>"):
            stage = stage >> self.fusion()
        return stage

    def fusion(self) -> Stage:
        stage = self.cutoff()
        while self.accept("+"):
            _note_plus_changed()
            stage = stage + self.cutoff()
        return stage

    def cutoff(self) -> Stage:
        stage = self.atom()
        while self.accept("%"):
            token = self.take(kind="word")
            if not token.text.isdigit() or int(token.text) < 1:
                self.fail(f"a cutoff needs a positive integer, found {token.text!r}", token)
            stage = stage % int(token.text)
        return stage

    def atom(self) -> Stage:
        if self.accept("("):
            stage = self.pipeline()
            self.take(")")
            return stage
        name_token = self.take(kind="word")
        args, kwargs = [], {}
        if self.accept("("):
            while not self.accept(")"):
                if (args or kwargs) and not self.accept(","):
                    self.fail("expected ',' or ')'" + (" at the end" if self.token.kind == "end" else f", found {self.token.text!r}"))
                if self.token.kind == "word" and self.tokens[self.index + 1].text == "=":
                    key = self.take().text
                    self.take("=")
                    if key in kwargs:
                        self.fail(f"argument {key!r} given twice", self.tokens[self.index - 2])
                    kwargs[key] = self.value()
                elif kwargs and self.token.kind in ("word", "string"):
                    self.fail("positional argument after keyword arguments")
                else:
                    args.append(self.value())
        return self._build(name_token, args, kwargs)

    def value(self):
        token = self.token
        if token.kind == "word" and self.tokens[self.index + 1].text == "(" or token.text == "(":
            return self.pipeline()  # a stage as an argument: fusion(bm25(k1=0.9), bm25(k1=1.2), method=weighted)
        if self.accept("["):
            items = []
            while not self.accept("]"):
                if items:
                    self.take(",")
                items.append(self.value())
            return items
        if token.kind == "string":
            self.index += 1
            return token.text[1:-1]
        if token.kind != "word":
            self.fail(f"expected a value, found {token.text!r}" if token.kind != "end" else "expected a value at the end")
        self.index += 1
        return parse_scalar(token.text)

    def _build(self, token: _Token, args: list, kwargs: dict) -> Stage:
        try:
            cls = get_stage_class(token.text)
        except KeyError as error:
            self.fail(str(error), token)
        try:
            return cls(*args, **kwargs)
        except (ValueError, TypeError, ConfigError) as error:
            message = str(error)                                           # model configs name themselves already
            self.fail(message if message.startswith(f"{token.text}: ") else f"{token.text}: {message}", token)


def parse_scalar(text: str):
    """A bare value, in a spec (`bm25(index=null)`) and in a KEY=VALUE flag (`--set bert=null`) alike: true / false,
    none / null (None; any case), an int, a float, else the text itself (a quoted 'null' in a spec stays text)."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse(spec: str) -> Stage:
    """Parse a pipeline spec into Stage objects (see the module docstring for the grammar)."""
    return _Parser(spec).parse()


@functools.lru_cache(maxsize=1)
def _note_plus_changed() -> None:
    """Once per process, where a spec uses `+`: its meaning changed on 2026-11-27, and a spec written before means
    another run now (no experiment file of eval/ used it)."""
    logger.warning("'a + b' in a spec sums the two runs' scores, as PyTerrier's + does; before 2026-11-27 it was "
                   "reciprocal rank fusion, which is now written rrf(a, b)")
