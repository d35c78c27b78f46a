"""Damage: copies of real outputs made worse on purpose, to see whether a reward notices.

A valid reward scores a damaged copy below the output it came from. Each family is one kind of
damage that people rate low (a wrong number, a negated claim, words or sentences out of order, an
invented sentence, a cut-off ending, ...); :func:`damage` builds one copy per family, or ``None``
where the family does not apply to that output (no number to change, a single sentence to
reverse). The copies are deterministic given the output, the source and ``seed``.

The validity scoreboard (:mod:`judge_reward.scoreboard`) reports, per family, the share of items
whose damaged copy the reward scores below the original.

>>> out = "The council voted 7 to 2 on Tuesday. The bridge is closed to cars."
>>> damage(out, "The town council voted 7 to 2 to close the bridge.")["change_number"]
'The council voted 8 to 2 on Tuesday. The bridge is closed to cars.'
>>> damage(out, "")["reverse_sentences"]
'The bridge is closed to cars. The council voted 7 to 2 on Tuesday.'
"""

from __future__ import annotations

import random
import re
import zlib
from typing import Callable

from .probes import content_words, sentences, subject

NUMBER = re.compile(r"(?<![\w.,])\d+(?:[.,]\d+)*(?![\w])")
NUMBER_WORDS = {"two": "three", "three": "four", "four": "five", "five": "six", "six": "seven", "seven": "eight",
                "eight": "nine", "nine": "ten", "ten": "twelve", "twelve": "twenty", "twenty": "thirty",
                "hundred": "thousand", "thousand": "million", "million": "billion", "first": "second",
                "second": "third", "third": "fourth"}
# auxiliaries after which "not" reads as English negation; and the negations a copy can lose
AUXILIARIES = ("is", "was", "are", "were", "has", "have", "had", "will", "would", "can", "could", "should", "did",
               "does", "do", "may", "might", "must")
NEGATION = re.compile(r"\b(?:not|never)\s+|(?<=\w)\s?n't\b", re.IGNORECASE)
IRREGULAR_NEGATIONS = {"won't": "will", "can't": "can", "cannot": "can", "wo n't": "will", "ca n't": "can"}
# invented sentences: fluent, dated, confident claims the source does not make ({name}: its subject)
INVENTED = (
    "Officials confirmed on Friday that {name} had already agreed to a second, larger deal worth $40 million.",
    "A spokesman for {name} later said the whole episode had been staged for a television programme.",
    "Three weeks later, {name} announced a full reversal after a vote of 312 to 9.",
    "Police have since arrested a 45-year-old man in connection with {name}'s earlier dispute in Lisbon.",
)


def _rng(output: str, family: str, seed: int) -> random.Random:
    return random.Random(zlib.crc32(f"{seed}\x00{family}\x00{output}".encode()))


def _bump_number(match: re.Match) -> str:
    digits = match.group(0)
    plain = digits.replace(",", "")
    if "." in plain:
        whole, frac = plain.split(".", 1)
        return f"{int(whole) + 1}.{frac}"
    value = int(plain)
    if 1900 <= value <= 2100:  # a year: another year
        return str(value - 3)
    new = value * 2 if value >= 10 else value + 1
    return f"{new:,}" if "," in digits else str(new)


def change_number(output: str, source: str, rng: random.Random) -> str | None:
    """One number (digits, or a number word such as "three") changed to another."""
    found = list(NUMBER.finditer(output))
    if found:
        m = rng.choice(found)
        return output[:m.start()] + _bump_number(m) + output[m.end():]
    words = [m for m in re.finditer(r"\b\w+\b", output) if m.group(0).lower() in NUMBER_WORDS]
    if not words:
        return None
    m = rng.choice(words)
    new = NUMBER_WORDS[m.group(0).lower()]
    new = new.capitalize() if m.group(0)[0].isupper() else new
    return output[:m.start()] + new + output[m.end():]


def flip_negation(output: str, source: str, rng: random.Random) -> str | None:
    """A negation removed ("not", "never", "n't") where the output has one, else "not" added after
    its first auxiliary verb ("was" -> "was not")."""
    for neg, plain in IRREGULAR_NEGATIONS.items():
        at = output.lower().find(neg)
        if at >= 0:
            return output[:at] + (plain.capitalize() if output[at].isupper() else plain) + output[at + len(neg):]
    m = NEGATION.search(output)
    if m:
        return output[:m.start()] + output[m.end():]
    aux = re.search(r"\b(" + "|".join(AUXILIARIES) + r")\b(?=\s+\w)", output, re.IGNORECASE)
    if not aux:
        return None
    return output[:aux.end()] + " not" + output[aux.end():]


def swap_content_words(output: str, source: str, rng: random.Random) -> str | None:
    """Two different content words of the output trade places (who did what to whom changes)."""
    spots = [m for m in re.finditer(r"(?<!\S)[^\W\d_]{4,}(?!\S)", output) if content_words(m.group(0))]
    distinct = {m.group(0).lower() for m in spots}
    if len(distinct) < 2:
        return None
    for _ in range(20):
        a, b = sorted(rng.sample(spots, 2), key=lambda m: m.start())
        if a.group(0).lower() != b.group(0).lower():
            return output[:a.start()] + b.group(0) + output[a.end():b.start()] + a.group(0) + output[b.end():]
    return None


def swap_names(output: str, source: str, rng: random.Random) -> str | None:
    """A name in the output (a capitalised word not opening a sentence) replaced by another name from
    the source: a fluent sentence about the wrong person or place."""
    def names(text: str) -> list[re.Match]:
        return [m for m in re.finditer(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,}\b", text)
                if content_words(m.group(0))]

    own = names(output)
    others = sorted({m.group(0) for m in names(source)} - {m.group(0) for m in own})
    if not own or not others:
        return None
    m = rng.choice(own)
    return output[:m.start()] + rng.choice(others) + output[m.end():]


def reverse_sentences(output: str, source: str, rng: random.Random) -> str | None:
    """The sentences in reverse order (pronouns before their names, effects before causes)."""
    parts = sentences(output)
    if len(parts) < 2:
        return None
    return " ".join(reversed(parts))


def shuffle_words(output: str, source: str, rng: random.Random) -> str | None:
    """The words of the output's longest sentence in random order."""
    parts = sentences(output)
    longest = max(range(len(parts)), key=lambda k: len(parts[k].split()), default=None)
    if longest is None or len(parts[longest].split()) < 4:
        return None
    words = parts[longest].split()
    for _ in range(10):
        rng.shuffle(words)
        if words != parts[longest].split():
            break
    parts[longest] = " ".join(words)
    return " ".join(parts)


def append_invented(output: str, source: str, rng: random.Random) -> str | None:
    """An invented sentence about the source's subject appended (a claim the source does not make)."""
    return f"{output.rstrip()} {rng.choice(INVENTED).format(name=subject(source) if source else 'the council')}"


def duplicate_sentence(output: str, source: str, rng: random.Random) -> str | None:
    """One sentence said a second time, right after itself (redundancy)."""
    parts = sentences(output)
    k = rng.randrange(len(parts)) if parts else None
    if k is None:
        return None
    return " ".join(parts[:k + 1] + [parts[k]] + parts[k + 1:])


def cut_mid_sentence(output: str, source: str, rng: random.Random) -> str | None:
    """The output cut in the middle of its last sentence (what a token limit does)."""
    parts = sentences(output)
    last = parts[-1].split() if parts else []
    if len(last) < 4:
        return None
    keep = rng.randrange(max(2, len(last) // 3), len(last) - 1)
    return " ".join(parts[:-1] + [" ".join(last[:keep]).rstrip(".,;:!?")])


FAMILIES: dict[str, Callable[[str, str, random.Random], str | None]] = {
    "change_number": change_number,
    "flip_negation": flip_negation,
    "swap_content_words": swap_content_words,
    "swap_names": swap_names,
    "reverse_sentences": reverse_sentences,
    "shuffle_words": shuffle_words,
    "append_invented": append_invented,
    "duplicate_sentence": duplicate_sentence,
    "cut_mid_sentence": cut_mid_sentence,
}
"""Damage family -> builder ``(output, source, rng) -> damaged copy | None``."""
SOURCE_FAMILIES = ("change_number", "flip_negation", "swap_names", "append_invented")
"""The families whose copy is wrong only against the source (a number, a negation, a name changed,
a claim added): as fluent as the original, so a reward that reads no source cannot tell them apart
from it, and the scoreboard reports them as not applicable there."""


def damage(output: str, source: str = "", families=None, seed: int = 0) -> dict[str, str]:
    """The damaged copies of ``output`` per family (families that do not apply, or whose copy equals
    the output, are left out). ``families``: names from :data:`FAMILIES` (default: all)."""
    names = list(FAMILIES) if families is None else list(families)
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown damage family {unknown[0]!r}; known: {', '.join(FAMILIES)}")
    out = {}
    for name in names:
        copy = FAMILIES[name](output, source or "", _rng(output, name, seed))
        if copy is not None and copy.strip() != output.strip():
            out[name] = copy
    return out
