"""Types shared by the scoring methods (G-Eval, GPTScore, generating rating prompts)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Protocol, Sequence

from ..aspects import Aspect
from ..backends.base import JudgeBackend


@dataclass(frozen=True)
class Item:
    """One text under judgment: ``output`` written for ``source``, optionally with a human ``reference``."""

    output: str
    source: str = ""
    reference: str | None = None
    id: str | None = None


@dataclass
class Score:
    """A method's judgment of one item on one aspect.

    ``value`` is ``None`` exactly when the judge failed; ``reason`` then says why (it is counted,
    never turned into a 0). ``details`` carries the evidence: the distribution, its mass and
    entropy (G-Eval), the token log-probabilities (GPTScore), the parsed ratings (sampling).
    """

    value: float | None
    reason: str | None = None
    details: dict = field(default_factory=dict)

    @classmethod
    def failure(cls, reason: str, **details) -> "Score":
        return cls(None, reason, details)


class Method(Protocol):
    """A scoring method: builds prompts for an aspect, asks a backend, turns answers into scores."""

    name: str

    def fingerprint(self) -> str:
        """Hash of everything in the method's configuration that changes a score (for the cache)."""
        ...

    def score(self, backend: JudgeBackend, aspect: Aspect, items: Sequence[Item]) -> list[Score]: ...


def config_fingerprint(name: str, config) -> str:
    payload = asdict(config) if is_dataclass(config) else config
    blob = json.dumps({"method": name, "config": payload}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
