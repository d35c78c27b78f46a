"""Sentences of a text, from pysbd (rule-based sentence boundary detection, Sadvilkar & Neumann 2020).

pysbd knows abbreviations, initials, decimals and ellipses in each of its languages, so "The U.S.
economy grew. It slowed." is two sentences, not three, and "Mr. Smith", "3.5" and "p.m." stay
whole. Every sentence split of this project comes from here: the guards' per-sentence checks (the
grounding verdicts, bare lists, the injection rewrite), the probe suite's leads and names, and the
damage families. A line break also ends a sentence (a form line, a bullet).

Straight single quotes are hidden from pysbd (it reads the text with U+02BC in their place, same
length): its single-quote rule takes an apostrophe after a space (tokenised text's " 's", "'90s")
for an opening quotation and then splits nothing until a closing one, which joined up to 386 words
of a SummEval article into one sentence. Double and curly quotes still hold a quotation together,
and a closing quote or bracket that pysbd leaves at the start of a sentence goes back to the one it
closes. Inside a line, a sentence ends only at a sentence-final mark: pysbd's cut after a dateline
("(CNN) One of ...") is undone.

Segmenters are built once per language and kept; the spans of a line are cached, since the guards
read the same output several times and training scores the same completion with several rewards.

>>> sentences("The U.S. economy grew. It slowed.")
['The U.S. economy grew.', 'It slowed.']
"""

from __future__ import annotations

import functools
import re

__all__ = ["sentence_spans", "sentences", "splits"]


_HIDE_APOSTROPHE = str.maketrans("'", "\u02bc")
_CLOSING = re.compile(r"[\"'\u2019\u201d\u00bb)\]]+(?=\s|$)")  # a closing quote or bracket, then a space
# a sentence-final mark (Latin, CJK, Devanagari, Arabic, Greek, Armenian, Ethiopic, an ellipsis), maybe closed
_ENDS = re.compile(r"[.!?\u2026\u3002\uff01\uff1f\uff61\u0964\u061f\u037e\u0589\u1362](?:\s*[\"'\u2019\u201d\u00bb)\]\u300d\u300f\uff09])*$")


@functools.cache
def _segmenter(language: str):
    import pysbd

    return pysbd.Segmenter(language=language, clean=False)


@functools.lru_cache(maxsize=16384)
def _line_spans(line: str, language: str) -> tuple[tuple[int, int], ...]:
    """Spans that cut one line (with its line break, if any) into sentences, end to end: the white
    space before a sentence belongs to it, the line break to the last one (as it closes it)."""
    if not line.strip():
        return ((0, len(line)),)
    masked = line.translate(_HIDE_APOSTROPHE)
    cores: list[tuple[int, int]] = []  # each sentence without the white space around it
    pos = 0
    for segment in _segmenter(language).segment(masked):
        core = segment.strip()
        if not core:
            continue
        start = masked.find(core, pos)
        if start < 0:  # pysbd changed the text (it should not with clean=False): the rest is one sentence
            break
        end = pos = start + len(core)
        closing = _CLOSING.match(line, start) if cores else None
        if closing:  # "... ready to run . ' Bolt was": the quote closes the sentence before
            cores[-1] = (cores[-1][0], closing.end())
            start = closing.end()
            while start < end and line[start].isspace():
                start += 1
            if start >= end:  # nothing but the quote
                continue
        if cores and not _ENDS.search(line, 0, cores[-1][1]):  # "(CNN) One of ...": no mark, no sentence end
            cores[-1] = (cores[-1][0], end)
            continue
        cores.append((start, end))
    if not cores:
        return ((0, len(line)),)
    cuts = [0, *(b for _, b in cores[:-1]), len(line)]
    return tuple((a, b) for a, b in zip(cuts, cuts[1:]) if b > a)


def sentence_spans(text: str, language: str = "en") -> list[tuple[int, int]]:
    """``(start, end)`` character spans that cut ``text`` into its sentences and lines, end to end
    (joined, the spans give the text back): the white space before a sentence is part of it, and a
    line break closes the sentence before it; a blank line is a span of its own."""
    spans, offset = [], 0
    for line in text.splitlines(keepends=True):
        spans += [(offset + a, offset + b) for a, b in _line_spans(line, language)]
        offset += len(line)
    return spans


def sentences(text: str, language: str = "en") -> list[str]:
    """The text's sentences, stripped of the white space around them (blank lines left out)."""
    return [s for s in (text[a:b].strip() for a, b in sentence_spans(text, language)) if s]


def splits(language: str) -> bool:
    """Whether pysbd has a sentence splitter for ``language`` (an ISO 639-1 code)."""
    from pysbd.languages import LANGUAGE_CODES

    return language in LANGUAGE_CODES
