"""Aspects: what a judge rates, on which scale, by which criteria.

An aspect file is YAML that maps one-to-one onto :class:`AspectSet` / :class:`Aspect`::

    task: summarization                 # picks GPTScore's instruction templates
    task_introduction: "You will read a news article and one summary of it. ..."
    source_label: News Article          # how the prompt names the input...
    output_label: Summary               # ...and the text under judgment
    aspects:
      coherence:
        definition: "..."               # one sentence; GPTScore's aspect definition
        scale: {min: 1, max: 5}         # or {values: [0, 1]}
        criteria: "..."                 # G-Eval's evaluation criteria
        quality: coherent and well organised   # adjective phrase for GPTScore's instruction
        steps: ["...", "..."]           # optional hand-written evaluation steps

Built-in files ship inside the package (``judge_reward/configs/aspects/``, read through
:mod:`importlib.resources`) and can be named without a path (``summeval``,
``topical_chat``, ``gptscore``). Every malformed field is reported by its path and value.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from importlib.resources import files
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from .candidates import format_value

CONFIG_DIR = Path(str(files("judge_reward") / "configs"))
"""The built-in configs (``judges/``, ``aspects/``, ``audit/``, ``train/``), shipped as package data."""
TASKS = ("summarization", "dialogue", "data_to_text", "translation", "generic")


class ConfigError(ValueError):
    """A configuration file or value is malformed; the message names the field and the value."""


@dataclass(frozen=True)
class Scale:
    """The values a rating can take, lowest first."""

    values: tuple[float, ...]

    @classmethod
    def from_config(cls, raw: Any, where: str) -> "Scale":
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: expected a mapping like {{min: 1, max: 5}}, got {raw!r}")
        if "values" in raw:
            values = raw["values"]
            if not isinstance(values, list) or not values:
                raise ConfigError(f"{where}.values: expected a non-empty list of numbers, got {values!r}")
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                raise ConfigError(f"{where}.values: every value must be a number, got {values!r}")
            if len(set(values)) != len(values):
                raise ConfigError(f"{where}.values: values must be distinct, got {values!r}")
            return cls(tuple(sorted(float(v) for v in values)))
        lo, hi, step = raw.get("min"), raw.get("max"), raw.get("step", 1)
        for key, v in (("min", lo), ("max", hi), ("step", step)):
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise ConfigError(f"{where}.{key}: expected a number, got {v!r}")
        if step <= 0:
            raise ConfigError(f"{where}.step: must be positive, got {step!r}")
        if hi < lo:
            raise ConfigError(f"{where}: max ({hi!r}) is below min ({lo!r}); the scale has no candidates")
        count = int(round((hi - lo) / step)) + 1
        if count > 1001:
            raise ConfigError(f"{where}: {count} candidate values is too many to score (at most 1001)")
        return cls(tuple(float(lo + i * step) for i in range(count)))

    @property
    def low(self) -> float:
        return self.values[0]

    @property
    def high(self) -> float:
        return self.values[-1]

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(format_value(v) for v in self.values)

    def describe(self) -> str:
        return f"{format_value(self.low)}-{format_value(self.high)}"

    def normalise(self, score: float) -> float:
        """Map a score on this scale onto [0, 1]."""
        if self.high == self.low:
            return 0.0
        return (score - self.low) / (self.high - self.low)


@dataclass(frozen=True)
class Aspect:
    name: str
    definition: str
    scale: Scale
    criteria: str
    steps: tuple[str, ...] = ()
    quality: str = ""
    task: str = "generic"
    task_introduction: str = ""
    source_label: str = "Source"
    output_label: str = "Response"
    reference_label: str = "Reference"

    @property
    def title(self) -> str:
        """The aspect's name as it appears in a form slot ("Coherence")."""
        return self.name.replace("_", " ").title()

    def content_hash(self) -> str:
        """A short hash of everything that shapes a prompt for this aspect."""
        payload = json.dumps(asdict(self), sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class AspectSet:
    path: str
    task: str
    aspects: dict[str, Aspect] = field(default_factory=dict)

    def get(self, name: str) -> Aspect:
        try:
            return self.aspects[name]
        except KeyError:
            raise ConfigError(
                f"aspects: unknown aspect {name!r} in {self.path}; known: {', '.join(sorted(self.aspects))}"
            ) from None

    def select(self, names: list[str] | None) -> list[Aspect]:
        if not names:
            return list(self.aspects.values())
        return [self.get(n) for n in names]


def resolve_config_path(name_or_path: str | Path, kind: str) -> Path:
    """A path that exists, as given; else a built-in name: ``<kind>/<name>.yaml`` in the package's configs.

    A path spelt from the repository root as before configs moved into the package
    (``configs/judges/default.yaml``) that does not exist maps onto the packaged file, so old
    commands keep working from any directory.
    """
    path = Path(name_or_path)
    if path.exists():
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
    raise ConfigError(f"{kind}: no file {str(name_or_path)!r} and no built-in of that name (built-ins: {known})")


def read_yaml(path: str | Path) -> Any:
    """The YAML document in ``path``; a mistake is one line naming the file (and line and column)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not valid UTF-8 (byte {err.start + 1})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{where}: not valid YAML ({problem})") from None


def _text(raw: dict, key: str, where: str, default: str | None = None) -> str:
    value = raw.get(key, default)
    if value is None:
        raise ConfigError(f"{where}.{key}: required field is missing")
    if not isinstance(value, str):
        raise ConfigError(f"{where}.{key}: expected text, got {value!r}")
    return value.strip()


def load_aspects(name_or_path: str | Path) -> AspectSet:
    """Load and validate an aspect file (a path, or a built-in name such as ``"summeval"``)."""
    path = resolve_config_path(name_or_path, "aspects")
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    task = raw.get("task", "generic")
    if task not in TASKS:
        raise ConfigError(f"{path}: task: unknown task {task!r}; expected one of {TASKS}")
    shared = {
        "task_introduction": _text(raw, "task_introduction", str(path), ""),
        "source_label": _text(raw, "source_label", str(path), "Source"),
        "output_label": _text(raw, "output_label", str(path), "Response"),
        "reference_label": _text(raw, "reference_label", str(path), "Reference"),
    }
    entries = raw.get("aspects")
    if not isinstance(entries, dict) or not entries:
        raise ConfigError(f"{path}: aspects: expected a non-empty mapping of aspect name to definition")
    aspects = {}
    for name, spec in entries.items():
        where = f"{path}: aspects.{name}"
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: expected a mapping, got {spec!r}")
        unknown = set(spec) - {"definition", "scale", "criteria", "steps", "quality", *shared}
        if unknown:
            raise ConfigError(f"{where}: unknown field(s) {sorted(unknown)}")
        if "scale" not in spec:
            raise ConfigError(f"{where}.scale: required field is missing")
        steps = spec.get("steps") or []
        if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
            raise ConfigError(f"{where}.steps: expected a list of strings, got {steps!r}")
        definition = _text(spec, "definition", where)
        aspects[name] = Aspect(
            name=name,
            definition=definition,
            scale=Scale.from_config(spec["scale"], f"{where}.scale"),
            criteria=_text(spec, "criteria", where, definition),
            steps=tuple(s.strip() for s in steps),
            quality=_text(spec, "quality", where, name.replace("_", " ")),
            task=task,
            **{k: _text(spec, k, where, v) for k, v in shared.items()},
        )
    return AspectSet(str(path), task, aspects)
