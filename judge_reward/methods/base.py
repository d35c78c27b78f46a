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


@dataclass(frozen=True)
class TokenLogprobs:
    """The judge's log-probability of each token of the output, read with the source and without it.

    What the reward's token terms read (``information``, ``copy_credit``, ``likelihood_floor``): the
    information the output gives about its source is ``with_source[k] - without_source[k]`` summed
    over its tokens. GPTScore fills it when ``gptscore.unconditional`` is on; with
    ``gptscore.baseline_source``, ``without_source`` is read after that text in the source's place.

    Attributes:
        texts: the output's tokens as text, in order (their concatenation is the scored output).
        with_source: ``log p(token | source, instruction, earlier tokens)``, nats, one per token.
        without_source: the same with the source left out of the prompt (or, with
            ``gptscore.baseline_source``, replaced by that text).

    >>> t = TokenLogprobs(("The", " council"), (-1.0, -0.5), (-2.0, -3.0))
    >>> t.information()
    3.5
    >>> TokenLogprobs.from_json(t.to_json()) == t
    True
    """

    texts: tuple[str, ...]
    with_source: tuple[float, ...]
    without_source: tuple[float, ...]

    def __post_init__(self) -> None:
        if not len(self.texts) == len(self.with_source) == len(self.without_source):
            raise ValueError(f"TokenLogprobs: {len(self.texts)} tokens, {len(self.with_source)} log-probabilities "
                             f"with the source and {len(self.without_source)} without; expected one of each per token")

    def information(self) -> float:
        """Sum over the tokens of ``with_source - without_source`` (nats): what the source adds."""
        return float(sum(w - wo for w, wo in zip(self.with_source, self.without_source)))

    def to_json(self) -> dict:
        return {"texts": list(self.texts), "with_source": list(self.with_source),
                "without_source": list(self.without_source)}

    @classmethod
    def from_json(cls, raw: dict) -> "TokenLogprobs":
        return cls(tuple(raw["texts"]), tuple(raw["with_source"]), tuple(raw["without_source"]))


@dataclass
class Score:
    """A method's judgment of one item on one aspect.

    ``value`` is ``None`` exactly when the judge failed; ``reason`` then says why (it is counted,
    never turned into a 0). ``details`` carries the evidence: the distribution, its mass and
    entropy (G-Eval), the mean and summed log-probabilities (GPTScore), the parsed ratings
    (sampling). ``tokens``: the per-token log-probabilities with and without the source
    (:class:`TokenLogprobs`; GPTScore with ``unconditional``), else ``None``.
    """

    value: float | None
    reason: str | None = None
    details: dict = field(default_factory=dict)
    tokens: TokenLogprobs | None = None

    @classmethod
    def failure(cls, reason: str, **details) -> "Score":
        return cls(None, reason, details)


class Method(Protocol):
    """A scoring method: builds prompts for an aspect, asks a backend, turns answers into scores."""

    name: str

    def fingerprint(self) -> str:
        """Hash of everything in the method's configuration that changes a score (for the cache)."""
        ...

    def prompt_revision(self, aspect: Aspect) -> str:
        """What the cache key adds for ``aspect``: the revision of the prompt template its task uses,
        so that judgments of an earlier template are not replayed as the new one's; empty at the first."""
        ...

    def score(self, backend: JudgeBackend, aspect: Aspect, items: Sequence[Item]) -> list[Score]: ...


def config_fingerprint(name: str, config) -> str:
    payload = asdict(config) if is_dataclass(config) else config
    blob = json.dumps({"method": name, "config": payload}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
