"""Every YAML file irpipe reads (dataset.yaml, experiment files, results pins, the prose pages' results markers),
through one SafeLoader that refuses aliases and a key given twice, each an InputError naming the file and lines.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.data.files import read_text
from pipeline.errors import InputError


def _yaml_loader(path, first_line: int = 1):
    """PyYAML's SafeLoader, refusing aliases (`*name`: nested ones expand exponentially, a 1 KB file standing for
    gigabytes) and a key given twice in one mapping (PyYAML keeps the last: an `expected:` or `files:` written twice
    was read as the second alone), each an InputError naming its lines (`first_line`: the text's first line in
    `path`)."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise InputError(path, "YAML aliases (*name) are not allowed: write the value out",
                                 line=mark.line + first_line)
            return super().compose_node(parent, index)

        def construct_mapping(self, node, deep=False):
            seen = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True) if isinstance(key_node, yaml.ScalarNode) else None
                line = key_node.start_mark.line + first_line
                if key is not None and _hashable(key) and key in seen:
                    raise InputError(path, f"key {key!r} given twice, on lines {seen[key]} and {line}: YAML would "
                                           "keep the second alone; remove one", line=line, field=str(key))
                if key is not None and _hashable(key):
                    seen[key] = line
            return super().construct_mapping(node, deep)

    return StrictLoader


def _hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def parse_yaml(text: str, path: str | Path, first_line: int = 1):
    """YAML text (from `path`, starting at its line `first_line`) parsed safely, without aliases or duplicate keys
    (`_yaml_loader`); what it cannot read is an InputError naming the file and line."""
    import yaml

    try:
        return yaml.load(text, Loader=_yaml_loader(path, first_line))  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        if isinstance(error, yaml.reader.ReaderError):  # a character YAML refuses (a control character): its line
            _yaml_character(path, error, text, first_line)
        line = min(mark.line, text.count("\n")) + first_line if mark else None  # the text's end: its last line
        raise InputError(path, f"invalid YAML: {getattr(error, 'problem', None) or str(error).splitlines()[0]}",
                         line=line) from None
    except (ValueError, OverflowError) as error:  # a value PyYAML fails to make: "\\U30005266" (chr), 2024-13-01
        raise InputError(path, f"invalid YAML: a value it cannot read ({error})") from None
    except RecursionError:
        raise InputError(path, "invalid YAML: nested too deeply") from None


def load_yaml(path: str | Path):
    """A YAML file parsed safely, without aliases or duplicate keys (`parse_yaml`): every YAML file irpipe reads."""
    return parse_yaml(read_text(path), path)


def _yaml_character(path, error, text: str, first_line: int) -> None:
    """The InputError for a character YAML cannot hold (PyYAML's ReaderError gives its offset, not its line)."""
    code = error.character if isinstance(error.character, int) else ord(error.character)
    line = text.count("\n", 0, error.position) + first_line
    raise InputError(path, f"invalid YAML: U+{code:04X} is a character YAML does not allow (a control character): "
                           "remove it", line=line) from None
