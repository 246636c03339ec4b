"""The one YAML reader of every file the project reads (configs, papers/*.yaml, schemas).

PyYAML reads YAML 1.1, whose plain scalars mean what few writers intend: `010` is 8, `no`,
`off` and `yes` are booleans, `1e-3` and `1.0e3` are text, `1_000` and `1:30` are numbers and
`2020-01-01` a date. This reader resolves them by YAML 1.2's core schema, as JSON and most
other readers do (`010` is 10, `no` is text, `1e-3` a number), and refuses a mapping key
written twice, which YAML readers settle silently by keeping the last.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.resolver import BaseResolver

from nmtbench.errors import InputError, invalid_yaml


class _Resolver(BaseResolver):
    """YAML 1.2's core schema: booleans are true and false only, integers decimal, 0o octal
    or 0x hexadecimal, floats as JSON writes them (with .inf and .nan), and no dates."""


for _tag, _pattern, _first in (
        ("bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
        ("int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", "-+0123456789"),
        ("float", r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                  r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)", "-+0123456789."),
        ("null", r"~|null|Null|NULL|", ["~", "n", "N", ""]),
        ("merge", r"<<", "<")):  # `<<: *defaults`, a mapping's copy (config.check_no_aliases)
    _Resolver.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}",
                                    re.compile(f"^(?:{_pattern})$"), list(_first))


class _Constructor(SafeConstructor):
    """PyYAML's safe constructor, with integers as YAML 1.2 reads them and a key written
    twice in a mapping refused."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        text = self.construct_scalar(node)
        try:
            return int(text, 0) if text[:2] in ("0o", "0x") else int(text, 10)
        except ValueError:  # an explicit !!int tag on something else
            raise ConstructorError(None, None, f"{text!r} is not an integer",
                                   node.start_mark) from None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # keys a `<<` merges may be
                continue  # written again, to override them
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ConstructorError(None, None, f"key {key!r} is written twice in one "
                                       "mapping", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_Constructor.add_constructor("tag:yaml.org,2002:int", _Constructor.construct_yaml_int)

try:  # libyaml's parser where PyYAML was built with it: about ten times faster, and every
    from yaml.cyaml import CParser  # snakemake process reads the config and paper files
except ImportError:
    CParser = None

if CParser is not None:
    class _Loader(CParser, _Constructor, _Resolver):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _Constructor.__init__(self)
            _Resolver.__init__(self)
else:
    class _Loader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser,
                  yaml.composer.Composer, _Constructor, _Resolver):
        def __init__(self, stream: str) -> None:
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)
            yaml.composer.Composer.__init__(self)
            _Constructor.__init__(self)
            _Resolver.__init__(self)


def load_yaml(text: str) -> Any:
    """YAML text read by YAML 1.2's core schema, safely (no Python tags), refusing a key
    written twice in a mapping (raises yaml.YAMLError, with the line where PyYAML has it)."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 (a safe constructor)


def read_yaml(path: str | Path) -> Any:
    """The YAML file `path` read by `load_yaml`: one that cannot be read, is not UTF-8 or is
    not valid YAML is an error naming it (and the line)."""
    try:
        return load_yaml(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise InputError(f"{path}: cannot read ({err.strerror})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not valid UTF-8") from None
    except yaml.YAMLError as err:
        raise invalid_yaml(path, err) from None
