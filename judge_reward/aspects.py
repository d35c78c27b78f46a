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
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import Field

from .candidates import format_value
from .config import (  # noqa: F401 (CONFIG_DIR, ConfigError re-exported)
    CONFIG_DIR,
    ConfigError,
    Expect,
    PositiveFloat,
    Section,
    Text,
    build_section,
    read_mapping,
    read_yaml,
    resolve_config_path,
)

TASKS = ("summarization", "dialogue", "data_to_text", "translation", "generic", "open_ended")
"""``open_ended``: outputs with no source to read them against (a free answer, a story, a chat turn);
GPTScore's prompt then holds the aspect's instruction and the output alone."""


@dataclass(frozen=True)
class Scale:
    """The values a rating can take, lowest first."""

    values: tuple[float, ...]

    @classmethod
    def from_config(cls, raw: Any, where: str) -> "Scale":
        """A scale from its YAML form (``{min: 1, max: 5, step: 1}`` or ``{values: [0, 1]}``)."""
        return build_section(ScaleSection, raw, where).scale()

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
                f"unknown aspect {name!r} in {self.path}; known: {', '.join(sorted(self.aspects))}", field="aspects"
            ) from None

    def select(self, names: list[str] | None) -> list[Aspect]:
        if not names:
            return list(self.aspects.values())
        return [self.get(n) for n in names]


Number = Annotated[float, Field(allow_inf_nan=False), Expect("a number")]


@dataclass
class ScaleSection(Section):
    """An aspect's ``scale:``: either ``values`` or ``min``/``max`` (and ``step``)."""

    values: Optional[list[Number]] = None
    min: Optional[Number] = None
    max: Optional[Number] = None
    step: PositiveFloat = 1.0

    def check(self) -> None:
        if self.values is not None:
            if not self.values:
                raise ConfigError(f"expected a non-empty list of numbers, got {self.values!r}", field="values")
            if len(set(self.values)) != len(self.values):
                raise ConfigError(f"values must be distinct, got {self.values!r}", field="values")
            return
        for key in ("min", "max"):
            if getattr(self, key) is None:
                raise ConfigError("required field is missing (or give values: [...])", field=key)
        if self.max < self.min:
            raise ConfigError(f"max ({self.max!r}) is below min ({self.min!r}); the scale has no candidates")
        if self.count() > 1001:
            raise ConfigError(f"{self.count()} candidate values is too many to score (at most 1001)")

    def count(self) -> int:
        return int(round((self.max - self.min) / self.step)) + 1

    def scale(self) -> Scale:
        if self.values is not None:
            return Scale(tuple(sorted(float(v) for v in self.values)))
        return Scale(tuple(float(self.min + i * self.step) for i in range(self.count())))


@dataclass
class AspectSection(Section):
    """One entry of an aspect file's ``aspects:``; unset texts come from the file's top level."""

    definition: Text
    scale: ScaleSection
    criteria: Optional[str] = None
    steps: list[str] = field(default_factory=list)
    quality: Optional[str] = None
    task_introduction: Optional[str] = None
    source_label: Optional[str] = None
    output_label: Optional[str] = None
    reference_label: Optional[str] = None


@dataclass
class AspectFile(Section):
    """An aspect file (see the module docstring)."""

    aspects: dict[str, dict]
    task: Literal[TASKS] = "generic"
    task_introduction: str = ""
    source_label: str = "Source"
    output_label: str = "Response"
    reference_label: str = "Reference"

    def check(self) -> None:
        if not self.aspects:
            raise ConfigError("expected a non-empty mapping of aspect name to definition", field="aspects")


def load_aspects(name_or_path: str | Path) -> AspectSet:
    """Load and validate an aspect file (a path, or a built-in name such as ``"summeval"``)."""
    path = resolve_config_path(name_or_path, "aspects")
    top = build_section(AspectFile, read_mapping(path), file=str(path))
    shared = ("task_introduction", "source_label", "output_label", "reference_label")
    aspects = {}
    for name, spec in top.aspects.items():
        entry = build_section(AspectSection, spec, f"aspects.{name}", file=str(path))
        texts = {k: (getattr(entry, k) if getattr(entry, k) is not None else getattr(top, k)).strip() for k in shared}
        aspects[name] = Aspect(
            name=name,
            definition=entry.definition.strip(),
            scale=entry.scale.scale(),
            criteria=(entry.criteria if entry.criteria is not None else entry.definition).strip(),
            steps=tuple(s.strip() for s in entry.steps),
            quality=(entry.quality if entry.quality is not None else name.replace("_", " ")).strip(),
            task=top.task,
            **texts,
        )
    return AspectSet(str(path), top.task, aspects)
