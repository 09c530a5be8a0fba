"""Options declared once: a config dataclass's field says its kind, bounds or choices, when it applies and what it
means, and one validator reads that declaration (ir_measures' `ParamInfo` is the model).

    @dataclass
    class TrainOptions:
        momentum: float = option(0.9, "SGD momentum", at_least=0, below=1, when=When("optimizer=sgd", _sgd))

    check_declared("training", options)                      # every field against its bounds or choices
    check_applies("training", options, given, baseline)      # every given option that would change nothing: refused
    option_rows(TrainOptions)                                # (name, default, allowed, applies when, help) for docs

`check_declared` runs where a config is made (pipeline/rerank/config.py `make_config`, TrainOptions.check), so a
spec, a Python call, a YAML file and a checkpoint's config.json all meet the same checks, before any work. Field
metadata changes neither `dataclasses.asdict` nor, so, any recipe key. A field declared with a plain default has no
bounds: the dataclass kind check (pipeline/validate.py `field_problem`) is all it gets; a boolean field is held to
booleans here too, for the configs that check does not see (the runtime's).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from pipeline.validate import choice, default_of, in_bounds, problem

KEY = "irpipe.option"


@dataclass(frozen=True)
class When:
    """The condition under which an option acts: `text` for messages and tables, `test(values, context)` deciding it
    (`values`: the resolved config or options; `context`: what the config does not hold, e.g. {"dev": True})."""

    text: str
    test: Callable[[Any, dict], bool]

    def __call__(self, values, context: dict) -> bool | None:
        """Whether the option acts; None when the context lacks what the test needs (then nothing is refused)."""
        try:
            return bool(self.test(values, context))
        except KeyError:
            return None


def field_is(name: str, *allowed) -> When:
    """The option acts when the field `name` is one of `allowed` (`field_is("optimizer", "sgd")`)."""
    return When(f"{name}={'|'.join(map(_shown, allowed))}", lambda values, _: getattr(values, name) in allowed)


def given_in_context(name: str, text: str) -> When:
    """The option acts when the context says `name` is given (a dev set: `given_in_context("dev", "dev=DATASET")`)."""
    return When(f"with {text}", lambda _, context: context[name])


@dataclass(frozen=True)
class Declaration:
    help: str = ""
    choices: tuple = ()
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    optional: bool = False
    when: When | None = None
    check: Callable[[str, Any], None] | None = None  # a value rule of its own: check(owner, value) raises
    elsewhere: str = ""  # what a user who sets it where it does not act may have meant (added to the refusal)

    def allowed(self) -> str:
        """What values are allowed, in words ("" when only the kind is checked)."""
        if self.choices:
            return " | ".join(map(_shown, self.choices))
        if self.low is None and self.high is None:
            return ""
        return (("an integer " if self.integer else "") + self.bounds() + (", or none" if self.optional else ""))

    def describe(self) -> str:
        """One line: allowed values; when it acts: what it is ("" for an undeclared field)."""
        head = "; ".join(part for part in (self.allowed(), _when_words(self.when) if self.when else "") if part)
        return f"{head}: {self.help}" if head and self.help else head or self.help

    def bounds(self) -> str:
        parts = ([f"{'>' if self.low_open else '>='} {self.low}"] if self.low is not None else []) + \
                ([f"{'<' if self.high_open else '<='} {self.high}"] if self.high is not None else [])
        return " and ".join(parts)

    def validate(self, owner: str, name: str, value) -> None:
        if self.choices:
            choice(owner, name, value, self.choices)
        if self.low is not None or self.high is not None:
            low, high = self.low, self.high
            within = lambda v: ((low is None or (v > low if self.low_open else v >= low)) and  # noqa: E731
                                (high is None or (v < high if self.high_open else v <= high)))
            in_bounds(owner, name, value, self.bounds(), within, self.integer, self.optional)
        if self.check is not None and value is not None:
            self.check(owner, value)


def option(default=dataclasses.MISSING, help: str = "", *, choices=(), at_least=None, above=None, at_most=None,
           below=None, integer: bool = False, optional: bool = False, when: When | None = None,
           check: Callable | None = None, elsewhere: str = ""):
    """A dataclass field with its declaration (see the module docstring)."""
    declaration = Declaration(help, tuple(choices), above if above is not None else at_least,
                              below if below is not None else at_most, above is not None, below is not None,
                              integer, optional, when, check, elsewhere)
    return dataclasses.field(default=default, metadata={KEY: declaration})


def declarations(config_class) -> dict[str, Declaration]:
    """name -> Declaration of every field of the dataclass (an empty Declaration for a plain field)."""
    return {f.name: f.metadata.get(KEY, Declaration()) for f in dataclasses.fields(config_class)}


def check_declared(owner: str, values) -> None:
    """Every field of the config `values` within its declared bounds or choices, and a boolean where its default is
    one (a config that `field_problem` does not check, the runtime, would take `compile=maybe` as true): a
    ConfigError naming it."""
    for field in dataclasses.fields(values):
        value = getattr(values, field.name)
        if isinstance(default_of(field), bool) and not isinstance(value, bool):
            raise problem(owner, field.name, f"{field.name}={value!r}; expected true or false")
        field.metadata.get(KEY, Declaration()).validate(owner, field.name, value)


def check_applies(owner: str, values, given: dict, baseline: dict, context: dict) -> None:
    """Refuse each option of `given` that would change nothing: its condition is false for the resolved `values`
    while its value differs from `baseline` (what it would be if not given). Such an option only changes a recipe's
    key, so the same model would be trained again under another name."""
    for name, declaration in declarations(type(values)).items():
        if name not in given or declaration.when is None or given[name] == baseline.get(name):
            continue
        if declaration.when(values, context) is False:
            raise problem(owner, name, f"{name}={_shown(given[name])} acts only {_when_words(declaration.when)}; "
                          "here it would change nothing but the recipe's name (leave it out, or set what it needs)"
                          + (f". {declaration.elsewhere}" if declaration.elsewhere else ""))


def _shown(value) -> str:
    """A value as a spec writes it (true, not True; a word unquoted)."""
    return str(value).lower() if isinstance(value, bool) or value is None else str(value)


def _when_words(when: When) -> str:
    return when.text if when.text.startswith(("with ", "without ")) else f"with {when.text}"


def option_rows(config_class, defaults: dict | None = None) -> list[tuple[str, Any, str, str, str]]:
    """(name, default, allowed values, acts when, help) of every field, for docs and help text; `defaults` overrides
    the class's (a model's training defaults)."""
    rows = []
    for f in dataclasses.fields(config_class):
        declaration = f.metadata.get(KEY, Declaration())
        default = (defaults or {}).get(f.name, default_of(f))
        rows.append((f.name, default, declaration.allowed(),
                     _when_words(declaration.when) if declaration.when else "", declaration.help))
    return rows


def markdown_table(config_class, defaults: dict | None = None) -> str:
    """The option table of a config class (docs/options.md is made of these)."""
    lines = ["| option | default | allowed | acts | what it is |", "| --- | --- | --- | --- | --- |"]
    for name, default, allowed, when, help in option_rows(config_class, defaults):
        cells = [f"`{name}`", f"`{_shown(default) if default != '' else chr(34) * 2}`", allowed, when, help]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"
