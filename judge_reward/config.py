"""One config system for the whole project: typed sections, one YAML loader, one error.

Every config section (a judge's ``backend:``, ``gptscore:``, ``reward:``, ``reward.guards.copy``,
a training run's ``policy:``, the audit's ``stats:`` ...) is a dataclass deriving from
:class:`Section`. Its field types say what a value may be, with the constrained types below
(``PositiveInt``, ``Fraction``, ``Weight`` ...) or a ``Literal`` of choices, and
``Section.__post_init__`` checks every field against its type (pydantic, strict: ``true`` is not
a number, ``"5"`` is not an integer). A section built in Python and one read from YAML get the
same checks and the same messages. Checks across fields go in the section's ``check()``.

:func:`build_section` turns a mapping into a section: unknown keys are refused with the known
ones listed, nested sections are built the same way, and every error names the full path of the
field and its value::

    configs/judges/mine.yaml: reward.guards.copy.weight: expected a number >= 0, got -1

:func:`read_yaml` is the one YAML loader; :func:`resolve_config_path` maps built-in names onto the
files shipped in the package.
"""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING
import typing
from contextvars import ContextVar
from functools import lru_cache
from importlib.resources import files
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin

import yaml
from pydantic import Field, TypeAdapter, ValidationError

CONFIG_DIR = Path(str(files("judge_reward") / "configs"))
"""The built-in configs (``judges/``, ``aspects/``, ``audit/``, ``train/``), shipped as package data."""


class ConfigError(ValueError):
    """A configuration file or value is malformed; the message names the file, the field and the value.

    ``field`` is the dotted path of the bad field (empty when the problem is the file itself),
    ``problem`` what is wrong with it, ``file`` the file it came from, if any. An error raised
    inside a section names its field relative to the section; the section puts its own path in
    front once (``rooted``: the path is complete).
    """

    def __init__(self, problem: str, *, field: str = "", file: str = "", rooted: bool = False):
        self.problem, self.field, self.file, self.rooted = problem, field, file, rooted
        super().__init__(": ".join(p for p in (file, field, problem) if p))

    def within(self, prefix: str = "", file: str = "") -> "ConfigError":
        """The same error seen from the enclosing section at ``prefix`` (and from ``file``)."""
        field = self.field if self.rooted else join_path(prefix, self.field)
        return ConfigError(self.problem, field=field, file=self.file or file, rooted=True)


def join_path(prefix: str, field: str) -> str:
    if not prefix:
        return field
    if not field:
        return prefix
    return f"{prefix}{field}" if field.startswith("[") else f"{prefix}.{field}"


# -- constrained types ------------------------------------------------------------------------------
# Each carries the phrase an error message uses for it ("expected <phrase>, got <value>").


@dataclasses.dataclass(frozen=True)
class Expect:
    """Annotated metadata: how an error message describes a valid value."""

    phrase: str


PositiveInt = Annotated[int, Field(ge=1), Expect("a positive integer")]
NonNegativeInt = Annotated[int, Field(ge=0), Expect("an integer >= 0")]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False), Expect("a positive number")]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False), Expect("a non-negative number")]
Weight = NonNegativeFloat
"""A penalty or an aspect weight, in the reward's units."""
Fraction = Annotated[float, Field(ge=0, le=1), Expect("a number in [0, 1]")]
FractionBelowOne = Annotated[float, Field(ge=0, lt=1), Expect("a number in [0, 1)")]
OpenFraction = Annotated[float, Field(gt=0, lt=1), Expect("a number strictly between 0 and 1")]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False), Expect("a finite number")]
Text = Annotated[str, Field(min_length=1), Expect("non-empty text")]


# -- field checking ---------------------------------------------------------------------------------

_PLAIN = {int: "an integer", float: "a number", str: "text", bool: "true or false", dict: "a mapping",
          list: "a list", tuple: "a list"}


def _describe(hint: Any) -> str:
    """The phrase for "expected ..." in an error about a value of type ``hint``."""
    if get_origin(hint) is Annotated:
        base, *meta = get_args(hint)
        for m in meta:
            if isinstance(m, Expect):
                return m.phrase
        return _describe(base)
    origin, args = get_origin(hint), get_args(hint)
    if origin is Union:
        parts = [_describe(a) for a in args if a is not type(None)]
        return " or ".join(parts)  # null is allowed too, but rarely what was meant
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (list, tuple) and args:
        return f"a list of {_describe(args[0])}"
    if origin is dict and args:
        return f"a mapping of {_describe(args[0])} to {_describe(args[1])}"
    if origin is not None:
        return _PLAIN.get(origin, getattr(origin, "__name__", str(origin)))
    return _PLAIN.get(hint, getattr(hint, "__name__", str(hint)))


def _literal_choices(hint: Any) -> tuple | None:
    """The choices of a ``Literal`` (or optional ``Literal``) type, else None."""
    if get_origin(hint) is Annotated:
        return _literal_choices(get_args(hint)[0])
    if get_origin(hint) is Literal:
        return get_args(hint)
    if get_origin(hint) is Union:
        values = [a for a in get_args(hint) if a is not type(None)]
        found = [_literal_choices(a) for a in values]
        if len(values) == 1 and found[0] is not None:  # an optional Literal (a Literal or a number is not a choice)
            return found[0] + ((None,) if type(None) in get_args(hint) else ())
    return None


def _is_tuple(hint: Any) -> bool:
    if get_origin(hint) is Annotated:
        return _is_tuple(get_args(hint)[0])
    if get_origin(hint) is Union:
        return any(_is_tuple(a) for a in get_args(hint))
    return hint is tuple or get_origin(hint) is tuple


def _section_type(hint: Any) -> type | None:
    """The Section class of a field that holds a nested section (optionally None), else None."""
    if get_origin(hint) is Union:
        found = [a for a in get_args(hint) if isinstance(a, type) and issubclass(a, Section)]
        return found[0] if found else None
    return hint if isinstance(hint, type) and issubclass(hint, Section) else None


@lru_cache(maxsize=None)
def _field_specs(cls: type) -> tuple:
    """Per checked field of ``cls``, built once per class: (name, type hint, validator or None,
    nested Section class or None, whether None is allowed for the nested section)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    specs = []
    for f in dataclasses.fields(cls):
        if not f.init or f.name.startswith("_"):
            continue
        hint = hints[f.name]
        nested = _section_type(hint)
        optional = get_origin(hint) is Union and type(None) in get_args(hint)
        adapter = None if hint is Any or nested is not None else TypeAdapter(hint)
        specs.append((f.name, hint, adapter, nested, optional))
    return tuple(specs)


def _unknown_value(value: Any, choices: tuple) -> str:
    shown = tuple(c for c in choices if c is not None)
    return f"unknown value {value!r}; choose one of {shown}" + (" (or null)" if None in choices else "")


def check_value(hint: Any, value: Any, field: str, adapter: TypeAdapter | None = None) -> Any:
    """``value`` checked (strictly) against the type ``hint``; a :class:`ConfigError` naming ``field``
    and the value otherwise. Lists are accepted where a tuple is expected (YAML has no tuples)."""
    if _is_tuple(hint) and isinstance(value, list):
        value = tuple(value)
    try:
        return (adapter or TypeAdapter(hint)).validate_python(value, strict=True)
    except ValidationError as err:
        choices = _literal_choices(hint)
        if choices is not None:
            raise ConfigError(_unknown_value(value, choices), field=field) from None
        first = err.errors()[0]
        loc = [p for p in first["loc"] if p != "[key]"]
        if not loc or _union_width(hint) > 1:  # (pydantic names a union's members in loc)
            raise ConfigError(f"expected {_describe(hint)}, got {value!r}", field=field) from None
        # an element of a list or mapping: name it and describe what an element may be
        inner = _element_hint(hint, key="[key]" in first["loc"])
        sub = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[:1])
        choices = _literal_choices(inner)
        if choices is not None:
            problem = _unknown_value(first["input"], choices)
        else:
            problem = f"expected {_describe(inner)}, got {first['input']!r}"
        raise ConfigError(problem, field=field + sub) from None


def _union_width(hint: Any) -> int:
    """How many non-null types a field accepts at its top level (1 for a plain or optional type)."""
    if get_origin(hint) is Annotated:
        return _union_width(get_args(hint)[0])
    if get_origin(hint) is Union:
        return len([a for a in get_args(hint) if a is not type(None)])
    return 1


def _element_hint(hint: Any, key: bool = False) -> Any:
    """The type of an element (or key) of a list, tuple or mapping type, through Optional/Annotated."""
    if get_origin(hint) is Annotated:
        return _element_hint(get_args(hint)[0], key)
    if get_origin(hint) is Union:
        inner = [a for a in get_args(hint) if get_origin(a) in (list, tuple, dict) or get_origin(a) is Annotated]
        return _element_hint(inner[0], key) if inner else hint
    args = get_args(hint)
    if get_origin(hint) is dict and len(args) == 2:
        return args[0] if key else args[1]
    if get_origin(hint) in (list, tuple) and args:
        return args[0]
    return hint


_BUILDING: ContextVar[str | None] = ContextVar("judge_reward_section_path", default=None)
"""The full path of the section :func:`build_section` is constructing (None outside it)."""


class Section:
    """Base of every config dataclass: fields are checked against their types when constructed.

    Subclasses are ``@dataclass`` classes; nested sections are fields typed with another
    ``Section`` (a mapping given for one is built with :func:`build_section`). Override
    :meth:`check` for rules that relate several fields, raising ``ConfigError(problem, field=name)``
    with the field's name inside this section. ``section_path`` is where the section usually sits
    (``geval``, ``reward.guards.copy``); it names the fields of a section built directly in Python.
    """

    section_path: ClassVar[str] = ""
    field_kind: ClassVar[str] = "field"
    """What an unknown key is called in the error (``unknown guard(s) ['copyy']``)."""

    def __post_init__(self):
        prefix = _BUILDING.get()
        prefix = type(self).section_path if prefix is None else prefix
        try:
            for name, hint, adapter, nested, optional in _field_specs(type(self)):
                value = getattr(self, name)
                if nested is not None:
                    if not (isinstance(value, nested) or (value is None and optional)):
                        object.__setattr__(self, name, _build(nested, value, join_path(prefix, name)))
                elif adapter is not None:
                    checked = check_value(hint, value, name, adapter)
                    if checked is not value:
                        object.__setattr__(self, name, checked)
            self.check()
        except ConfigError as err:
            raise err.within(prefix) from None

    def check(self) -> None:
        """Rules across fields; raise ``ConfigError(problem, field=...)``."""


def known_fields(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init]


def check_known_fields(cls, raw: dict, where: str = "") -> None:
    """Refuse keys of ``raw`` that are not fields of the dataclass ``cls``, listing the known ones."""
    known = known_fields(cls)
    unknown = sorted(set(raw) - set(known), key=str)
    if unknown:
        kind = getattr(cls, "field_kind", "field")
        raise ConfigError(f"unknown {kind}(s) {unknown}; known: {sorted(known)}", field=where)


def build_section(cls, raw: Any, where: str | None = None, *, file: str = ""):
    """A ``cls`` section from a mapping (None: all defaults), every error naming its full path.

    ``where`` is the section's path (``reward.guards.copy``; default: ``cls.section_path``), relative to
    the section being built when called from inside one; ``file`` the file it was read from. A
    section with an ``enabled`` field may be given as ``true``/``false`` (``copy: true``).
    """
    outer = _BUILDING.get()
    where = cls.section_path if where is None else where
    return _build(cls, raw, join_path(outer or "", where), file)


def _build(cls, raw: Any, where: str, file: str = ""):
    if isinstance(raw, cls):
        return raw
    if raw is None:
        raw = {}
    if isinstance(raw, bool) and "enabled" in known_fields(cls):
        raw = {"enabled": raw}
    token = _BUILDING.set(where)
    try:
        if not isinstance(raw, dict):
            raise ConfigError(f"expected a mapping, got {raw!r}")
        check_known_fields(cls, raw)
        for f in dataclasses.fields(cls):
            if f.init and f.name not in raw and f.default is MISSING and f.default_factory is MISSING:
                raise ConfigError("required field is missing", field=f.name)
        return cls(**raw)
    except ConfigError as err:
        raise err.within(where, file) from None
    finally:
        _BUILDING.reset(token)


# -- files ------------------------------------------------------------------------------------------


def resolve_config_path(name_or_path: str | Path, kind: str) -> Path:
    """A file that exists, as given; else a built-in name: ``<kind>/<name>.yaml`` in the package's configs.

    A path spelt from the repository root as before configs moved into the package
    (``configs/judges/default.yaml``) that does not exist maps onto the packaged file, so old
    commands keep working from any directory. A directory is never taken for the file: run from
    the data folder, ``summeval`` is both SummEval's folder and the built-in aspect file.
    """
    path = Path(name_or_path)
    if path.is_file():
        return path
    parts = PurePosixPath(str(name_or_path).replace("\\", "/")).parts
    if len(parts) > 1 and parts[0] == "configs":
        packaged = CONFIG_DIR.joinpath(*parts[1:])
        if packaged.is_file():
            return packaged
    builtin = CONFIG_DIR / kind / f"{name_or_path}.yaml"
    if builtin.is_file():
        return builtin
    known = sorted(p.stem for p in (CONFIG_DIR / kind).glob("*.yaml"))
    what = "a directory, not a file," if path.is_dir() else "no file"
    raise ConfigError(f"{what} {str(name_or_path)!r} and no built-in of that name (built-ins: {known})", field=kind)


def read_yaml(path: str | Path) -> Any:
    """The YAML document in ``path``; a mistake is one line naming the file (and line and column)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"not valid UTF-8 (byte {err.start + 1})", file=str(path)) from None
    except OSError as err:
        raise ConfigError(f"cannot read ({err.strerror or err})", file=str(path)) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"not valid YAML ({problem})", file=where) from None


def read_mapping(path: str | Path) -> dict:
    """The YAML mapping in ``path`` (an empty file is an empty mapping); anything else at the top
    level is a :class:`ConfigError` naming the file."""
    raw = read_yaml(path)
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"expected a mapping at the top level, got {type(raw).__name__}", file=str(path))
    return raw


def load_section(cls, path: str | Path, kind: str):
    """A top-level section read from a YAML file (a path or a built-in name of ``kind``)."""
    path = resolve_config_path(path, kind)
    return build_section(cls, read_mapping(path), file=str(path))
