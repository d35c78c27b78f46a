"""Read the rating a generated judge response commits to.

A generating judge (rate-explain, analyze-rate, free text, a G-Eval form filled by sampling)
answers in prose, and prose is full of numbers that are not ratings: "the response mentions 3
facts", "in 1995", "1. Read the conversation". :func:`parse_rating` tries a fixed list of rules,
strongest evidence first; the first rule that finds something decides:

1. **labelled** -- the last ``Rating: 3`` / ``Score: 80`` / ``Overall rating: 4`` anywhere in the
   text; failing that, the last line that starts with another label and a number
   (``Coherence: 3``, ``- Naturalness: 2``, ``1. Engagingness: 2``, ``Response: 2``). The value may
   sit on the next line (``Rating:\\n3``). Explanation labels (``Analysis:``, ``Rationale:``,
   ``Fact:``, see :data:`EXPLANATION_LABELS`) are never ratings, so an analysis that mentions
   numbers is not read.
2. **leading** -- the response opens with its rating: ``2``, ``2.5``, ``3 (good)``,
   ``2. The response is a bit strange``, ``- 2``, ``4/5``, ``4 stars``. A numbered-list marker
   directly before a number is skipped (``1. 2`` is 2), and a numbered question
   (``1. Does the response ...?``) is not a rating. Several different bare numbers on separate
   lines (``1. 1\\n2. 3``) are several ratings: a failure, not a guess.
3. **stated** -- the last sentence that states the rating: ``I would rate it a 1``, ``it
   receives a score of 0``, ``the groundedness score is 0``. A list of values (``a score of 1, 2,
   or 3``) and an explanation of the scale (``a score of 1 means ...``) are mentions, skipped.
4. **fraction** -- the last ``N/M`` or ``N out of M`` whose M is the top of the scale
   (``I'd give it 4/5``); fractions over another M are mentions (``1/3 of the facts``).
5. **stars** -- only for ``style="stars"`` (or no style): the last run of star glyphs
   (``★★★★☆`` is 4: ``☆`` is an empty star) or ``N stars``.
6. **trailing** -- the response ends with its rating: a number on its own last line, in
   parentheses at the end (``Good (3)``), or after the last sentence (``... history. 1``).

What a rule reads is then checked: a value outside the scale's range is a failure
(``out of scale: 7 not in 1-5``), never clipped; so are a fraction over another maximum (``8/10``
on a 1-5 scale) and a range (``Rating: 2-3``). Values *between* scale points (``2.5`` on 1-3,
``0.5`` on 0-1) are kept: a judge may hedge, and the mean over samples is continuous anyway.
Words are never turned into numbers (``Good``, ``Yes``): that would be a guess.

Every failure carries a reason string, so callers can count why parsing failed.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from .aspects import Scale
from .candidates import format_value

# Bump when a rule changes what a response parses to: cached scores depend on it.
PARSER_VERSION = "1"

# A signed decimal number. A trailing dot ("2.") is punctuation, not part of the number.
_NUM = r"[-+]?\d+(?:\.\d+)?"
# A rating value: the number, an optional "/ M" or "out of M" (kept so the maximum can be
# checked), and then no letter or digit ("3rd" and "30" are not "3").
_VALUE = rf"(?P<num>{_NUM})(?:\s*(?:/|\bout\s+of\b)\s*(?P<den>{_NUM}))?(?!\w)"
# A range or a list right after a value ("2-3", "2 to 3", "1, 2, or 3"): not one rating.
_RANGE_TAIL = re.compile(r"\s*(?:-|–|\bto\b|,|\bor\b)\s*(?:or\s+)?[-+]?\d")

# Labels that name a rating wherever they occur ("... at all. Rating: 0", "**Score:** 80").
_RATING_LABEL = re.compile(
    r"\b(?:rating|score|grade)\**[ \t]*(?:\([^)\n]*\))?[ \t]*\**[ \t]*[:=][ \t]*\**\s*" + _VALUE,
    re.IGNORECASE,
)
# Any short label that starts a line, optionally after a list marker or bold
# ("- Naturalness: 2", "1. Engagingness: 2", "**Coherence (1-3):** 3").
_LINE_LABEL = re.compile(
    r"^[ \t]*(?:[-*•]|\d+[.)])?[ \t]*\**[ \t]*(?P<label>[A-Za-z][A-Za-z' -]{0,40}?)[ \t]*\**[ \t]*"
    r"(?:\([^)\n]*\))?[ \t]*\**[ \t]*[:=][ \t]*\**\s*" + _VALUE,
    re.IGNORECASE | re.MULTILINE,
)
# Labels that introduce an explanation or a quoted input, never the rating itself.
EXPLANATION_LABELS = frozenset(
    {
        "analysis", "rationale", "explanation", "reason", "reasons", "reasoning", "justification",
        "comment", "comments", "note", "notes", "evidence", "fact", "interesting fact", "context",
        "conversation history", "history", "source", "document", "article", "summary", "step",
        "steps", "evaluation steps", "example",
    }
)  # fmt: skip

# A bullet ("- ", "* ") and a numbered-list marker directly before a number ("1. 2"). The bullet
# needs a space after it, so that "-1" stays a negative number.
_BULLET = r"(?:[-*•][ \t]+)?"
_LIST_BEFORE_NUMBER = r"(?:\d+[.)][ \t]+(?=[-+]?\d))?"
_LEADING = re.compile(r"^\s*" + _BULLET + _LIST_BEFORE_NUMBER + r"\**[ \t]*" + _VALUE)
_NUMBERED_QUESTION = re.compile(r"[.)][^\n]*\?[ \t]*(?:\n|$)")
_BARE_LINE = re.compile(r"^[ \t]*" + _BULLET + _LIST_BEFORE_NUMBER + rf"({_NUM})\.?[ \t]*$", re.MULTILINE)
# "I would rate it a 1", "receives a score of 0", "the score is 0", "would be rated as a 3".
_STATED = re.compile(
    r"\b(?:(?:score|rating|grade)\s+(?:of|is|would\s+be|will\s+be|should\s+be)"
    r"|rated?(?:\s+(?:it|this(?:\s+response)?))?(?:\s+(?:as|at))?)"
    r"\s+(?:an?\s+)?" + _VALUE,
    re.IGNORECASE,
)
# "A score of 1 means ...": the scale being explained (criteria echoed back), not a rating.
_MEANS_TAIL = re.compile(r"\s*(?:\([^)\n]*\))?\s*(?:means|indicates|is\s+(?:given|for|when))\b", re.IGNORECASE)
_FRACTION = re.compile(rf"(?<![\w./])(?P<num>{_NUM})\s*(?:/|\bout\s+of\b)\s*(?P<den>{_NUM})(?![\w/])", re.IGNORECASE)
_STAR_GLYPHS = re.compile(r"[★⭐☆](?:[ \t]?[★⭐☆])*")
_N_STARS = re.compile(rf"(?<![\w.])(?P<num>{_NUM})[ \t-]*stars?\b", re.IGNORECASE)
# The final number: on its own line, after the last sentence (optionally after a dash:
# "... at all. - 0"), or in parentheses ("Good (3)").
_TRAILING = re.compile(
    rf"(?:(?:^|[.?!:][ \t]|\n)[ \t]*(?:[-–][ \t]+)?\(?|\()[ \t]*(?P<num>{_NUM})[ \t]*\)?[ \t]*\.?\s*$"
)


@dataclass(frozen=True)
class ParsedRating:
    """A parsed rating: ``value`` on the scale, or ``None`` and the ``reason`` it failed.

    ``rule`` names the rule that decided (``labelled``, ``leading``, ...); ``None`` when no rule
    found anything.
    """

    value: float | None
    reason: str | None = None
    rule: str | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class _Context:
    style: str | None
    low: float
    high: float


@dataclass(frozen=True)
class _Found:
    """What a rule read: the number as written and the maximum it was written over, if any;
    or, when the rule saw a rating it cannot use, the reason."""

    num: float | None
    den: float | None = None
    reason: str | None = None


def _from_match(match: re.Match, text: str) -> _Found:
    den = match.groupdict().get("den")
    if den is None and _RANGE_TAIL.match(text, match.end("num")):
        written = text[match.start("num") :].split("\n")[0][:12].strip()
        return _Found(None, reason=f"a range, not one rating: {written!r}")
    return _Found(float(match.group("num")), float(den) if den is not None else None)


def rule_labelled(text: str, ctx: _Context) -> _Found | None:
    """The last ``Rating:``/``Score:`` label with a number; else the last line label with one."""
    hits = list(_RATING_LABEL.finditer(text))
    if hits:
        return _from_match(hits[-1], text)
    lines = [m for m in _LINE_LABEL.finditer(text) if m.group("label").strip().lower() not in EXPLANATION_LABELS]
    return _from_match(lines[-1], text) if lines else None


def rule_leading(text: str, ctx: _Context) -> _Found | None:
    """The number the response opens with. Several different bare-number lines are a failure."""
    bare = [float(m.group(1)) for m in _BARE_LINE.finditer(text)]
    if len(set(bare)) > 1:
        return _Found(None, reason="several ratings: " + ", ".join(format_value(v) for v in bare[:5]))
    match = _LEADING.match(text)
    if match is None or _NUMBERED_QUESTION.match(text, match.end()):
        return None
    return _from_match(match, text)


def rule_stated(text: str, ctx: _Context) -> _Found | None:
    """The last sentence that states a rating, skipping lists of values and scale explanations."""
    for match in reversed(list(_STATED.finditer(text))):
        after_value = match.end("num") if match.group("den") is None else match.end()
        if _RANGE_TAIL.match(text, after_value) or _MEANS_TAIL.match(text, match.end()):
            continue
        return _from_match(match, text)
    return None


def rule_fraction(text: str, ctx: _Context) -> _Found | None:
    """The last ``N/M`` or ``N out of M`` with M the top of the scale."""
    hits = [m for m in _FRACTION.finditer(text) if float(m.group("den")) == ctx.high]
    return _from_match(hits[-1], text) if hits else None


def rule_stars(text: str, ctx: _Context) -> _Found | None:
    """For the stars style: the last run of star glyphs (filled ones counted) or ``N stars``."""
    if ctx.style not in (None, "stars"):
        return None
    glyph = next(reversed(list(_STAR_GLYPHS.finditer(text))), None)
    words = next(reversed(list(_N_STARS.finditer(text))), None)
    if words is not None and (glyph is None or words.start() > glyph.start()):
        return _from_match(words, text)
    if glyph is not None:
        run = glyph.group(0)
        return _Found(float(run.count("★") + run.count("⭐")))
    return None


def rule_trailing(text: str, ctx: _Context) -> _Found | None:
    """The number the response ends with, if it stands apart from the last sentence."""
    match = _TRAILING.search(text)
    return _Found(float(match.group("num"))) if match else None


# Strongest evidence first; the first rule that finds anything decides.
RULES: tuple[tuple[str, Callable[[str, _Context], _Found | None]], ...] = (
    ("labelled", rule_labelled),
    ("leading", rule_leading),
    ("stated", rule_stated),
    ("fraction", rule_fraction),
    ("stars", rule_stars),
    ("trailing", rule_trailing),
)


def scale_bounds(scale: Scale | Sequence[float]) -> tuple[float, float]:
    """(low, high) of a :class:`Scale` or of a ``(low, high)`` pair."""
    if isinstance(scale, Scale):
        return scale.low, scale.high
    try:
        low, high = (float(v) for v in scale)
    except (TypeError, ValueError):
        raise ValueError(f"scale: expected a Scale or (low, high), got {scale!r}") from None
    if high < low:
        raise ValueError(f"scale: high ({high}) is below low ({low})")
    return low, high


def _check_style(style: str | None) -> None:
    from .prompts.rating import STYLES  # late import: keeps this module free of the prompt machinery

    if style is not None and style not in STYLES:
        raise ValueError(f"style={style!r}: expected one of {', '.join(STYLES)} (or None)")


def parse_rating(text: str | None, scale: Scale | Sequence[float], style: str | None = None) -> ParsedRating:
    """The rating ``text`` commits to, on ``scale`` (a :class:`Scale` or ``(low, high)``).

    ``style`` is the prompt style that produced the text (``prompts.rating.STYLES``); star glyphs
    are read only for ``"stars"`` or when no style is given. Deterministic: the rules in
    :data:`RULES` are tried in order and the first that finds a rating decides.
    """
    _check_style(style)
    low, high = scale_bounds(scale)
    ctx = _Context(style, low, high)
    described = f"{format_value(low)}-{format_value(high)}"
    if text is None or not text.strip():
        return ParsedRating(None, "empty response")
    for name, rule in RULES:
        found = rule(text, ctx)
        if found is None:
            continue
        if found.num is None:
            return ParsedRating(None, found.reason, name)
        if found.den is not None and found.den != high:
            written = f"{format_value(found.num)}/{format_value(found.den)}"
            return ParsedRating(None, f"different scale: {written} on a {described} scale", name)
        if not low <= found.num <= high:
            return ParsedRating(None, f"out of scale: {format_value(found.num)} not in {described}", name)
        return ParsedRating(found.num, None, name)
    return ParsedRating(None, "no rating found")


@dataclass
class SampleRatings:
    """The parsed ratings of several sampled responses to one prompt."""

    ratings: list[float]
    failed: int
    failure_reasons: dict[str, int] = field(default_factory=dict)
    rules: dict[str, int] = field(default_factory=dict)  # how many ratings each rule read

    @property
    def parsed(self) -> int:
        return len(self.ratings)

    @property
    def mean(self) -> float | None:
        """Mean of the parsed ratings; ``None`` when none parsed (failures are never counted as 0)."""
        return sum(self.ratings) / len(self.ratings) if self.ratings else None


def parse_samples(texts: Iterable[str | None], scale: Scale | Sequence[float], style: str | None = None) -> SampleRatings:
    """Parse every sampled response; keep the ratings and count the failures by reason."""
    ratings: list[float] = []
    reasons: Counter[str] = Counter()
    rules: Counter[str] = Counter()
    for text in texts:
        parsed = parse_rating(text, scale, style)
        if parsed.value is None:
            reasons[parsed.reason or "no rating found"] += 1
        else:
            ratings.append(parsed.value)
            rules[parsed.rule or "?"] += 1
    return SampleRatings(ratings, sum(reasons.values()), dict(reasons), dict(rules))
