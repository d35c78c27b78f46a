"""Meaning representations: the data a data-to-text output puts into words.

A data-to-text source is structured: a dialogue act such as ``inform(name='X', food=Chinese,
area=riverside)`` (BAGEL, SFRES) or an attribute list such as ``name[The Eagle], eatType[coffee
shop]`` (E2E NLG). :func:`parse_meaning` reads either notation into its acts and (slot, value)
pairs; :func:`mentions` says whether a text names a value. The ``data_values`` guard
(:class:`judge_reward.guards.DataValuesGuard`) reads both: an output that leaves most of its data
out, whose sentences name none of it, or that pastes the notation itself.

>>> m = parse_meaning("inform(name='Sushi Ran', food=japanese, kids_allowed=yes)")
>>> m.acts, m.slots
(('inform',), (('name', 'Sushi Ran'), ('food', 'japanese'), ('kids_allowed', 'yes')))
>>> m.spoken_values(unspoken={"yes", "no"})
('Sushi Ran', 'japanese')
>>> mentions("sushi ran serves Japanese food .", "Sushi Ran"), mentions("It is in the city centre.", "citycentre")
(True, True)
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

__all__ = ["Meaning", "mentions", "parse_meaning", "uses_notation"]

_ACT = re.compile(r"(\w+)\s*\(([^()]*)\)")
_ASSIGNMENT = re.compile(r"(\w+)\s*=\s*('[^']*'|\"[^\"]*\"|[^,;]*)")
_BRACKETED = re.compile(r"(\w+)\s*\[([^\[\]]*)\]")
_TOKEN = re.compile(r"\w+")


@dataclass(frozen=True)
class Meaning:
    """A parsed meaning representation: its act names (empty for an attribute list) and its
    (slot, value) pairs in order, quotes removed."""

    acts: tuple[str, ...]
    slots: tuple[tuple[str, str], ...]

    def spoken_values(self, unspoken=frozenset(), alternatives: str = "or") -> tuple[str, ...]:
        """The distinct values a text is expected to name: a value written ``a or b`` (a choice put to
        the user) gives each alternative, and a value in ``unspoken`` (compared in lower case: ``yes``,
        ``dont_care``, which a text says in its own words or not at all) gives none."""
        split = re.compile(rf"\s+{re.escape(alternatives)}\s+", re.IGNORECASE) if alternatives else None
        skip = {u.lower() for u in unspoken}
        out: dict[str, None] = {}
        for _, value in self.slots:
            for part in (split.split(value) if split else [value]):
                part = part.strip()
                if part and part.lower() not in skip:
                    out.setdefault(part, None)
        return tuple(out)


@functools.lru_cache(maxsize=4096)
def parse_meaning(source: str) -> Meaning | None:
    """The acts and slots of ``source`` in dialogue-act notation (``act(slot=value, ...)``, several
    acts side by side allowed) or attribute-list notation (``slot[value], ...``); ``None`` when the
    source is in neither (prose)."""
    acts = _ACT.findall(source)
    if acts:
        slots = tuple((k, v.strip().strip("'\"").strip()) for _, body in acts for k, v in _ASSIGNMENT.findall(body))
        return Meaning(tuple(name for name, _ in acts), slots)
    bracketed = _BRACKETED.findall(source)
    if bracketed:
        return Meaning((), tuple((k, v.strip()) for k, v in bracketed))
    return None


def _folded(text: str) -> tuple[str, frozenset[str]]:
    tokens = [t.lower() for t in _TOKEN.findall(text)]
    return "".join(tokens), frozenset(tokens)


def mentions(text: str, value: str) -> bool:
    """Whether ``text`` names ``value``: each word of the value of three or more characters occurs in
    the text's words run together in lower case (so ``citycentre`` is found in "city centre",
    ``moderate`` in "moderately", "Sushi Ran" in "sushi ran"), and each shorter one (a delexicalised
    ``X``, a number) as a word of its own. A value with no word characters is taken as named."""
    joined, words = _folded(text)
    parts = [p.lower() for p in _TOKEN.findall(value)]
    return all((p in joined) if len(p) >= 3 else (p in words) for p in parts)


def uses_notation(text: str, meaning: Meaning) -> bool:
    """Whether ``text`` writes the data in its own notation: one of its act names followed by an
    opening bracket, or one of its slot names followed by ``=`` or ``[`` (spaces ignored), which no
    sentence about the data does."""
    squeezed = re.sub(r"\s+", "", text).lower()
    marks = [f"{act.lower()}(" for act in meaning.acts]
    marks += [f"{slot.lower()}{sign}" for slot, _ in meaning.slots for sign in ("=", "[")]
    return any(m in squeezed for m in marks)
