"""Reward guards: what stops cheap manipulations from out-scoring a real answer.

A reward is judged by what maximises it. Each guard here is a named part of the reward config
(``reward.guards.<name>``), measures one property of the judged text, and is either a visible
*penalty term* in the reward (``copy``, ``repetition``, ``length``, ``grounding``, ``data_values``, ``ending``, and
``copy_credit``, ``information`` and ``likelihood_floor``, which read the judge's token log-probabilities) or a visible
*rewrite* of the judged text before the judge reads it (``injection``). Nothing changes a judge's
score silently: :class:`GuardReport` carries what each guard measured, what it did, and what it
cost, and the reward logs it as a component. What the reward starts from, the judge's score or
the information the output gives about its source, is no guard: it is the reward's main term
(``reward.term``, :mod:`judge_reward.terms`).

Penalty guards share one shape: a statistic ``x`` of the text, a ``threshold`` up to which ``x``
is free, and a ``weight`` (in the reward's units) that is paid in full when ``x`` reaches its worst
value: ``penalty = weight * clip((x - threshold) / (worst - threshold), 0, 1)``.

The statistics work on lower-cased word tokens (``\\w+``; in a script written without spaces, such
as Chinese or Japanese, each character is a token), so they apply to any language, any task and any
aspect file; none is tuned to a probe's wording. What does depend
on the language is data: the word lists (function words, words that cannot end a sentence, number
words, list conjunctions) and the phrasing the injection guard removes are in
``judge_reward/wordlists/*.yaml``, each keyed by the language code that ``reward.guards.language``
names (English, ``en``, shipped), and sentences are cut by pysbd in that language. A language is
added by adding its key to the files its enabled guards read (:meth:`GuardsConfig.language_data`).
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import ClassVar, Literal, Optional, Sequence, Union

from .config import (  # noqa: F401 (ConfigError re-exported)
    ConfigError,
    FiniteFloat,
    Fraction,
    FractionBelowOne,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Section,
    Text,
    Weight,
    build_section,
)
from .meaning import (Domain, Meaning, ends_inside_value, named_positions, names_slot, parse_meaning, unnamed_values,
                      uses_notation)
from .sentences import sentence_spans, splits
from .wordlists import (function_words, has_entry, languages, list_conjunctions, number_words, open_choice,
                        open_endings, phrasing)

# Scripts written without spaces between words (Han ideographs, Japanese kana): each character is a
# word of its own, so that copies, repetition, length and grounding are counted in them as in scripts
# that separate words (a Chinese clause would otherwise be one "word", found in no source).
UNSPACED = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
UNSPACED_CHAR = re.compile(rf"(?=\w)[{UNSPACED}]")
_WORD = rf"(?=\w)[{UNSPACED}]|[^\W{UNSPACED}]+"  # \w+, with a character of an unspaced script alone
WORD = re.compile(_WORD)
TOKEN = re.compile(rf"{_WORD}|[^\w\s]")


def whole_word(word: str) -> str:
    """A pattern for ``word`` standing as a word of its own: between word boundaries, or anywhere when
    written in an unspaced script (each of its characters is a word)."""
    return re.escape(word) if all(UNSPACED_CHAR.match(c) for c in word) else rf"\b{re.escape(word)}\b"


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def tokens(text: str) -> list[str]:
    """Words and punctuation marks (each mark a token of its own)."""
    return TOKEN.findall(text.lower())


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


# -- statistics ------------------------------------------------------------------------------------


def copied_share(output: Sequence[str], source_grams: set, n: int) -> float:
    """Share of the output's word n-grams that also occur in the source (1 - novel n-gram share)."""
    grams = ngrams(output, n)
    if not grams:
        return 0.0
    return sum(g in source_grams for g in grams) / len(grams)


def copied_fragments(output: Sequence[str], source: Sequence[str], index: dict | None = None) -> list[int]:
    """Lengths of the verbatim fragments the output shares with the source, found greedily from the
    left (the longest match at each position, as Grusky et al. 2018 define extractive fragments)."""
    return [n for _, n in fragment_spans(output, source, index)]


def fragment_spans(output: Sequence[str], source: Sequence[str], index: dict | None = None) -> list[tuple[int, int]]:
    """(first output word, length) of each greedy verbatim fragment (see :func:`copied_fragments`)."""
    if index is None:
        index = word_positions(source)
    out, i = [], 0
    while i < len(output):
        best = 0
        for j in index.get(output[i], ()):
            k = 1
            while i + k < len(output) and j + k < len(source) and output[i + k] == source[j + k]:
                k += 1
            best = max(best, k)
        if best:
            out.append((i, best))
            i += best
        else:
            i += 1
    return out


def word_positions(tokens: Sequence[str]) -> dict[str, list[int]]:
    index: dict[str, list[int]] = {}
    for i, w in enumerate(tokens):
        index.setdefault(w, []).append(i)
    return index


def long_copy_share(output: Sequence[str], source: Sequence[str], min_fragment: int, index: dict | None = None) -> float:
    """Share of the output's words that sit in verbatim source fragments of at least ``min_fragment`` words."""
    if not output:
        return 0.0
    return sum(f for f in copied_fragments(output, source, index) if f >= min_fragment) / len(output)


# How tokenizers write a leading space or newline in a token's text (SentencePiece, byte-level BPE).
_TOKEN_SPACE = str.maketrans({"\u2581": " ", "\u0120": " ", "\u010a": "\n"})
_BYTE_TOKEN = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")


def copied_token_mask(token_texts: Sequence[str], text: str, source: "SourceStats", min_fragment: int,
                      near_copy_words: int = 0) -> list[bool]:
    """For each token of ``text`` (the judge's tokens, in order), whether it overlaps a copy of the
    source (:func:`copy_spans`: a verbatim fragment of at least ``min_fragment`` words, from its
    first word to its last, and with ``near_copy_words`` a near copy). Tokens are placed by their
    characters; a byte-fallback token counts as one character."""
    return token_mask(token_texts, copy_spans(text, source, min_fragment, near_copy_words))


def token_mask(token_texts: Sequence[str], spans: Sequence[tuple[int, int]]) -> list[bool]:
    """For each token (the judge's tokens of a text, in order), whether it overlaps one of the
    character ``spans`` of that text. Tokens are placed by their characters; a byte-fallback token
    counts as one character."""
    return [k >= 0 for k in token_span_index(token_texts, spans)]


def token_span_index(token_texts: Sequence[str], spans: Sequence[tuple[int, int]]) -> list[int]:
    """For each token (the judge's tokens of a text, in order), the index of the first of the
    character ``spans`` of that text it overlaps, or -1. Tokens are placed as :func:`token_mask`
    places them.

    >>> token_span_index(["\u2581The", "\u2581cat.", "\u2581It", "\u2581sat."], [(0, 8), (8, 16)])
    [0, 0, 1, 1]
    """
    index, pos = [], 0
    for tok in token_texts:
        end = pos + (1 if _BYTE_TOKEN.match(tok) else len(tok.translate(_TOKEN_SPACE)))
        index.append(next((k for k, (a, b) in enumerate(spans) if a < end and b > pos), -1))
        pos = end
    return index


def sentence_lift(conditional: Sequence[float], unconditional: Sequence[float], sentence_of_token: Sequence[int],
                  min_information: float) -> tuple[float, int]:
    """How much the sentences that say nothing about the source raise the mean log-probability of
    the output's tokens, and how many of them raise it.

    A sentence says nothing about the source when reading it raised the log-probability of the
    sentence's tokens by less than ``min_information`` nats per token on average (their mean
    pointwise mutual information with the source). What such sentences add to the score is read
    two ways, and the larger is the lift:

    * against the other tokens: a sentence that says nothing and whose mean log-probability
      (``conditional``) is above the mean of the output's other tokens raises the score; the lift
      is the mean over every token minus the mean without those sentences;
    * against the tokens that say something (the other sentences' and those outside every
      sentence): each sentence that says nothing adds its share of the tokens times what its mean
      exceeds theirs, summed.

    Each reading misses what the other sees: among the other tokens, a second generic sentence the
    judge finds likelier raises their mean above the first one's, which then no longer counts; and
    against the tokens that say something, a generic sentence added after an honest one that says
    little and scores low is not above them, though it raises the score. With one such sentence
    the two agree. The lift is 0 when no such sentence raises the score, or when every token is in
    one (an output that says nothing about its source is ``grounding``'s to judge); a sentence that
    says nothing and lowers the score costs the output already and is left in.
    ``sentence_of_token``: each token's sentence (:func:`token_span_index`; -1: none).

    >>> cond, uncond = [-3.0, -3.0, -1.0, -1.0], [-6.0, -6.0, -1.1, -1.0]
    >>> lift, n = sentence_lift(cond, uncond, [0, 0, 1, 1], min_information=0.2)
    >>> round(lift, 3), n     # sentence 1 gained 0.05 nats per token from the source: -2.0 - (-3.0)
    (1.0, 1)
    >>> sentence_lift(cond, uncond, [0, 0, 1, 1], min_information=0.0)
    (0.0, 0)
    """
    tokens: dict[int, list[int]] = {}
    for k, s in enumerate(sentence_of_token):
        if s >= 0:
            tokens.setdefault(s, []).append(k)
    idle = {s: at for s, at in tokens.items()
            if sum(conditional[k] - unconditional[k] for k in at) / len(at) < min_information}
    said = [c for c, s in zip(conditional, sentence_of_token) if s not in idle]
    if not idle or not said:
        return 0.0, 0
    total, n = sum(conditional), len(conditional)
    own = {s: sum(conditional[k] for k in at) for s, at in idle.items()}
    # against the other tokens
    above_others = {s for s, at in idle.items() if own[s] / len(at) > (total - own[s]) / (n - len(at))}
    rest = [c for c, s in zip(conditional, sentence_of_token) if s not in above_others]
    by_others = total / n - sum(rest) / len(rest) if above_others else 0.0
    # against the tokens that say something
    reference = sum(said) / len(said)
    excess = [len(at) / n * (own[s] / len(at) - reference) for s, at in idle.items()]
    by_reference = sum(e for e in excess if e > 0)
    return max(0.0, by_others, by_reference), max(len(above_others), sum(e > 0 for e in excess))


# Words for matching copies: a hyphenated word is one word ("Mer-son" reads as "merson"), so that
# hyphens inserted into copied words do not hide them.
MATCH_WORD = re.compile(rf"(?=\w)[{UNSPACED}]|[^\W{UNSPACED}]+(?:[-\u2010\u2011][^\W{UNSPACED}]+)*")
NEAR_COPY_MIN_CHARS = 4  # near copies follow content words: 4+ letters, not function words


def match_words(text: str) -> list[re.Match]:
    return list(MATCH_WORD.finditer(text.lower()))


def _key(match: re.Match) -> str:
    return re.sub(r"[-\u2010\u2011]", "", match.group())


def near_copy_spans(output: Sequence[str], source: Sequence[str], index: dict, min_matched: int) -> list[tuple[int, int]]:
    """(first, last + 1) positions in ``output`` of runs that follow the source with small edits:
    greedy from the left, a run extends over exact matches and over one edit at a time (a source
    word or two left out, an output word inserted, or one word replaced) while the next word
    matches again; it counts when at least ``min_matched`` of its words match. Applied to content
    words, it finds a source passage rewritten by swapping, dropping or inserting function words
    and the odd content word (what a verbatim-fragment rule misses)."""
    spans, i = [], 0
    while i < len(output):
        best_matched, best_end = 0, i
        for j in index.get(output[i], ()):
            k, m, matched, end = i + 1, j + 1, 1, i + 1
            while k < len(output):
                if m < len(source) and output[k] == source[m]:
                    k, m, matched, end = k + 1, m + 1, matched + 1, k + 1
                    continue
                step = next(((dk, dm) for dk, dm in ((0, 1), (0, 2), (1, 0), (1, 1))
                             if k + dk < len(output) and m + dm < len(source) and output[k + dk] == source[m + dm]), None)
                if step is None:
                    break
                k, m = k + step[0], m + step[1]
            if matched > best_matched:
                best_matched, best_end = matched, end
        if best_matched >= min_matched:
            spans.append((i, best_end))
            i = best_end
        else:
            i += 1
    return spans


def copy_spans(text: str, source: "SourceStats", min_fragment: int, near_copy_words: int = 0) -> list[tuple[int, int]]:
    """Character spans of ``text`` (lower-cased) that copy the source: verbatim fragments of at
    least ``min_fragment`` words, and with ``near_copy_words`` runs of at least that many content
    words (function words of the source's language left out) that follow the source with small
    edits (:func:`near_copy_spans`)."""
    found = match_words(text)
    keys = [_key(m) for m in found]
    spans = [(found[start].start(), found[start + n - 1].end())
             for start, n in fragment_spans(keys, source.match_keys, source.match_positions) if n >= min_fragment]
    if near_copy_words:
        content = [k for k, w in enumerate(keys) if is_content_word(w, NEAR_COPY_MIN_CHARS, True, source.language)]
        runs = near_copy_spans([keys[k] for k in content], source.content_keys, source.content_positions, near_copy_words)
        spans += [(found[content[a]].start(), found[content[b - 1]].end()) for a, b in runs]
    return spans


def copy_credit(conditional: Sequence[float], unconditional: Sequence[float], mask: Sequence[bool],
                contrast: bool = False, budget: int | None = None) -> float:
    """What reading the source added to the copied tokens' log-probabilities (only gains count),
    per token of the whole output: subtracting it from the mean log-probability scores copied
    tokens as if the judge had not read the source. With ``contrast`` the amount is the whole
    conditional log-prob of copied tokens plus the unconditional one of the others, so that the
    mean minus it is the mean pointwise mutual information of the uncopied tokens (copied: 0); with
    a ``budget`` too, the mean minus it is :func:`source_information` over that budget."""
    if not conditional:
        return 0.0
    if contrast:  # without a budget, the information is averaged over the output's own tokens
        information = source_information(conditional, unconditional, mask, budget or len(conditional))
        return sum(conditional) / len(conditional) - information
    gain = sum(max(0.0, c - u) for c, u, m in zip(conditional, unconditional, mask) if m)
    return gain / len(conditional)


def source_information(conditional: Sequence[float], unconditional: Sequence[float], mask: Sequence[bool],
                       budget: int) -> float:
    """What the output says about its source, in nats per budget token: the sum over its first
    ``budget`` tokens of what reading the source added to their log-probabilities (pointwise mutual
    information; copied tokens, ``mask``, count 0), divided by ``budget``. A shorter output cannot
    reach a longer one's total; tokens past the budget add nothing."""
    gains = [0.0 if m else c - u for c, u, m in zip(conditional, unconditional, mask)]
    return sum(gains[:budget]) / budget


# Sentence-final marks: Latin . ! ?, CJK 。！？｡, Devanagari ।, Arabic ؟, Greek ; (question mark),
# Armenian ։, Ethiopic ።; then maybe closing quotes or brackets (Latin, CJK 」』）).
SENTENCE_FINAL = ".!?\u3002\uff01\uff1f\uff61\u0964\u061f\u037e\u0589\u1362"
TERMINAL = re.compile(rf"[{re.escape(SENTENCE_FINAL)}](\s*[\"'\u201d\u2019)\]\u300d\u300f\uff09])*\s*$")


# a comma, colon, dash or opening bracket (Latin, and CJK's ，、；：（「『)
TRAILING_MARK = re.compile(r"[,;:\-\u2013\u2014(\[{\uff0c\u3001\uff1b\uff1a\uff08\u300c\u300e]\s*$")


def ends_cut(text: str, source: "SourceStats | None" = None, language: str = "en") -> bool:
    """Whether the text stops where no sentence ends: not :func:`ends_complete`, and its last word is
    one that cannot close a sentence in ``language`` (``wordlists/open_endings.yaml``), or it ends on a
    comma, colon, dash or opening bracket, or its last words begin one of its own earlier sentences
    again (:func:`starts_over`), or (given the ``source``) its last words copy a source sentence that
    goes on after them, or stop inside one of the data's values (a meaning representation's:
    :meth:`SourceStats.stops_mid_sentence`)."""
    text = text.strip()
    if not text or ends_complete(text):
        return False
    if TRAILING_MARK.search(text):
        return True
    last = words(text)
    return bool(last) and (last[-1] in open_endings(language) or starts_over(text, language)
                           or (source is not None and source.stops_mid_sentence(last)))


def starts_over(text: str, language: str = "en") -> bool:
    """Whether a text's last sentence is the start of one of its earlier sentences word for word
    (fewer words than that sentence has): a text that began again and was cut off, as one looping
    until its token limit is. Called on a text without terminal punctuation (:func:`ends_cut`).

    >>> starts_over("Amber India serves Indian food. Amber India")
    True
    >>> starts_over("Amber India serves Indian food. Amber India serves Indian food")
    False
    """
    text = text.strip()
    spans = sentence_spans(text, language)
    if len(spans) < 2:
        return False
    last = words(text[spans[-1][0]:spans[-1][1]])
    return bool(last) and any(len(earlier) > len(last) and earlier[:len(last)] == last
                              for earlier in (words(text[a:b]) for a, b in spans[:-1]))


def needs_sentence_end(text: str, language: str = "en") -> bool:
    """Whether ``ending.mode: judge`` asks the judge about this text: it has no terminal punctuation
    and no text rule already calls it cut (:func:`ends_cut` without a source)."""
    return bool(text.strip()) and not ends_complete(text) and not ends_cut(text, language=language)


def ends_complete(text: str) -> bool:
    """Whether the text ends as a finished sentence does: ``. ! ?`` (or another script's sentence-final
    mark, :data:`SENTENCE_FINAL`: ``。`` ``！`` ``？`` ``।`` ...), maybe followed by closing quotes or
    brackets (``... 'ludicrous.'``, ``... ludicrous . '``, ``...」``). A closing quote or bracket alone is
    not an ending: a summary cut inside quoted words ends with one (``is now 'cooperating '``).

    >>> ends_complete("Der Rat schloss die Brücke."), ends_complete("市议会决定关闭旧桥。"), ends_complete("市议会决定关闭旧桥")
    (True, True, False)
    """
    return bool(TERMINAL.search(text.strip()))


def repeated_share(output: Sequence[str], n: int) -> float:
    """Share of the output's word n-grams that repeat an earlier one (1 - distinct n-gram ratio)."""
    grams = ngrams(output, n)
    if len(grams) < 2:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


def overused_share(text_words: Sequence[str], max_uses: int, min_chars: int = 4, language: str = "en") -> float:
    """Share of the output's content words (:func:`content_words`, function words skipped) that
    are a word's use beyond its ``max_uses``-th: a name said again and again between other words,
    which no repeated word triple shows ("Charles Manuel of Iowa in Iowa has surrendered his state
    license in Iowa to the Iowa Board": 2 of 10)."""
    counts = Counter(content_words(text_words, min_chars, skip_function_words=True, language=language))
    total = sum(counts.values())
    return sum(max(0, c - max_uses) for c in counts.values()) / total if total else 0.0


def is_content_word(word: str, min_chars: int, skip_function_words: bool = False, language: str = "en") -> bool:
    """At least ``min_chars`` long, or a character of a script without spaces (``min_chars`` counts
    the letters of a word; such a character is a word however short), and with
    ``skip_function_words`` not a function word of ``language`` (``wordlists/function_words.yaml``):
    words that carry no content are in every source, so a sentence of generic prose built from them
    ("more details may come to light over time") would pass as grounded if they counted
    (grounding's default ``min_chars``, 4, leaves the shorter ones out)."""
    return ((len(word) >= min_chars or bool(UNSPACED_CHAR.fullmatch(word)))
            and not (skip_function_words and word in function_words(language)))


def content_words(text_words: Sequence[str], min_chars: int, skip_function_words: bool = False,
                  language: str = "en") -> list[str]:
    """The words a grounding check counts (:func:`is_content_word`)."""
    return [w for w in text_words if is_content_word(w, min_chars, skip_function_words, language)]


def novel_word_share(output: Sequence[str], source_words: set, min_chars: int, skip_function_words: bool = False,
                     language: str = "en") -> float:
    """Share of the output's content words (:func:`content_words`) absent from the source."""
    content = content_words(output, min_chars, skip_function_words, language)
    if not content:
        return 1.0
    return sum(w not in source_words for w in content) / len(content)


MIN_SENTENCE_CONTENT = 3  # a sentence with fewer content words says too little to judge alone


def _sentence_verdicts(text: str, source_words: set, min_chars: int, threshold: float,
                       skip_function_words: bool = False, language: str = "en"):
    """Each sentence or line of ``text`` (:func:`~judge_reward.sentences.sentence_spans`): its span,
    its number of content words, and whether it is unsupported (see :func:`unsupported_sentence_share`)."""
    for span in sentence_spans(text, language):
        sentence = words(text[span[0]:span[1]])
        size = content_words(sentence, min_chars)  # what the sentence weighs in the share
        # the verdict reads only the words that can show grounding (function words are everywhere)
        evidence = content_words(sentence, min_chars, skip_function_words, language)
        new = sum(w not in source_words for w in evidence)
        unsupported = bool(evidence) and (new / len(evidence) > threshold if len(evidence) >= MIN_SENTENCE_CONTENT
                                          else new == len(evidence))
        yield span, len(size), unsupported


def unsupported_sentence_share(text: str, source_words: set, min_chars: int, threshold: float,
                               skip_function_words: bool = False, language: str = "en") -> tuple[float, list[str]]:
    """Share of the text's content words that sit in *unsupported* sentences, and those sentences.

    A sentence is unsupported when it has at least three content words and more than ``threshold``
    of them are absent from the source, or fewer and none of them in the source (a line such as
    ``Quality?: #`` or ``- Coherence:``, which says nothing about the source). An appended sentence
    of filler or self-praise hides in the whole-text share (one sentence of four) but stands out
    alone: nearly all of its words are new.
    """
    total, unsupported, found = 0, 0, []
    for (a, b), size, flagged in _sentence_verdicts(text, source_words, min_chars, threshold, skip_function_words,
                                                    language):
        total += size
        if flagged:
            unsupported += size
            found.append(text[a:b].strip())
    return (unsupported / total if total else 0.0), found


def unsupported_spans(text: str, source_words: set, min_chars: int, threshold: float,
                      skip_function_words: bool = False, language: str = "en") -> list[tuple[int, int]]:
    """Character spans of the unsupported sentences of ``text`` (:func:`unsupported_sentence_share`)."""
    return [span for span, _, flagged in _sentence_verdicts(text, source_words, min_chars, threshold,
                                                             skip_function_words, language) if flagged]


@functools.cache
def list_separator(language: str = "en") -> re.Pattern:
    """What separates a list's items: a comma, semicolon, colon, slash, bullet or spaced dash (CJK's
    ，、；： too), or a conjunction of ``language`` (``wordlists/list_conjunctions.yaml``: "and", "or")."""
    conjunctions = "".join("|" + whole_word(w) for w in list_conjunctions(language))
    return re.compile(rf"\s*(?:[,;:/&|\u2022\u00b7\uff0c\u3001\uff1b\uff1a]|\s-\s{conjunctions})\s*", re.I)


def is_bare_list(sentence: str, min_items: int, max_item_words: int, language: str = "en") -> bool:
    """Is the sentence nothing but a list: at least ``min_items`` items, none holding a function
    word? Items are the pieces between the separators of :func:`list_separator` ("," "/" "and" "or"
    ...) of at most ``max_item_words`` words, and each word of a longer piece whose words are all
    capitalised (names run together without commas). A sentence that lists names inside a clause
    ("backed by Taylor, Hoddle, Keegan and Eriksson") has a predicate and is prose."""
    items = 0
    skip = function_words(language)
    for piece in list_separator(language).split(sentence):
        found = WORD.findall(piece)
        if not found:
            continue
        if any(w.lower() in skip for w in found):
            return False
        if len(found) <= max_item_words:
            items += 1
        elif all(w[0].isupper() for w in found):
            items += len(found)
        else:
            return False
    return items >= min_items


def bare_list_share(text: str, min_items: int, max_item_words: int, language: str = "en") -> tuple[float, list[str]]:
    """Share of the text's words inside bare lists, and those lists: sentences or lines that are
    lists (:func:`is_bare_list`), and runs of at least ``min_items`` lines that are one bare item
    each (a bulleted list of keywords)."""
    total, listed, found = 0, 0, []
    run: list[str] = []  # consecutive lines of one bare item each

    def close_run() -> None:
        nonlocal listed
        if len(run) >= min_items:
            listed += sum(len(words(line)) for line in run)
            found.append(" / ".join(line.strip() for line in run))
        run.clear()

    for a, b in sentence_spans(text, language):
        span = text[a:b]
        n = len(words(span))
        total += n
        if not n:
            continue
        if is_bare_list(span, min_items, max_item_words, language):
            close_run()
            listed += n
            found.append(span.strip())
        elif span.endswith("\n") or b == len(text):
            if is_bare_list(span, 1, max_item_words, language):
                run.append(span)
            else:
                close_run()
        else:
            close_run()
    close_run()
    return (listed / total if total else 0.0), found


def without_sentences(text: str, sentences: Sequence[str], language: str = "en") -> str:
    """``text`` without the given sentences (as :func:`~judge_reward.sentences.sentence_spans` cuts
    them, stripped); a dropped sentence's line break stays."""
    drop = set(sentences)
    kept = []
    for a, b in sentence_spans(text, language):
        span = text[a:b]
        kept.append(span if span.strip() not in drop else ("\n" if span.endswith("\n") else ""))
    return "".join(kept)


# -- configs ----------------------------------------------------------------------------------------


@dataclass
class Guard(Section):
    """One guard: a section of ``reward.guards``, registered by name in :data:`GUARD_TYPES`.

    ``requires()`` says what it reads besides the output (``needs`` unless its settings change
    it): ``source`` (the text the output is judged against; without one the reward refuses to build
    rather than read the prompt as the source), ``tokens`` (the judge's per-token log-probabilities
    with and without the source, :class:`~judge_reward.methods.base.TokenLogprobs`: the reward's
    token terms), ``sentence_end`` (the judge's next-token answer, :meth:`judge_reward.Judge.sentence_end`),
    ``masked_pass`` (a second judge pass with the output's numbers masked). A text guard's
    ``measure`` reads one output (:class:`GuardInput`) and returns what it measured and its charge,
    or ``None`` where it does not apply (no source words); the guards that read the judge's tokens
    are charged by the reward (:mod:`judge_reward.reward`).
    """

    needs: ClassVar[frozenset[str]] = frozenset()
    charge_fields: ClassVar[tuple[str, ...]] = ("weight",)
    """The fields that are amounts charged in the judge's units (``reward.units: spread`` scales
    them by the judge's spread); a weight that multiplies a quantity already in those units (the
    token terms' shortfalls, ``value_echo``'s lift) is not one."""

    def requires(self) -> frozenset[str]:
        return self.needs

    def measure(self, x: "GuardInput") -> tuple[dict, float] | None:
        raise NotImplementedError(f"{type(self).__name__} is charged by the reward from the judge's answers, "
                                  "not measured on the text alone")


@dataclass(frozen=True)
class GuardInput:
    """What the text guards read of one output (built once per output by :func:`apply_guards`).

    ``output``: the text after :func:`neutralise`; ``words``: its words; ``source``: the source's
    statistics, or None; ``removed_spans``: what :func:`neutralise` removed; ``sentence_end``: the
    judge's probability of a sentence end after the output, where asked; ``unsupported``:
    grounding's share of words in unsupported sentences and those sentences (``sentence_threshold``
    set), shared with ``copy`` and ``length``; ``grounded``: the output without them."""

    output: str
    words: list[str]
    source: "SourceStats | None"
    language: str
    removed_spans: int = 0
    sentence_end: float | None = None
    unsupported: tuple[float, list[str]] | None = None
    grounded: str = ""


@dataclass
class CopyGuard(Guard):
    """Copying from the source: the share of the output's words inside verbatim source fragments of
    at least ``min_fragment`` words.

    A likelihood judge rewards copying (a model predicts text it has just read), so a policy
    learns to paste the source or its lead. Short shared phrases (names, quotes, a clause) are
    free; whole copied passages are not. ``threshold`` is the share that is free, the full
    ``weight`` is paid from ``full_at`` (1.0: only when every word of the output sits in such a
    passage).

    A ``full_at`` well below 1 makes the charge saturate: every output that copies at least that
    share pays the same ``weight``, so the judge's order among mostly-copied outputs is kept and
    only outputs that copy less than ``full_at`` gain on them.
    """

    section_path: ClassVar[str] = "reward.guards.copy"

    enabled: bool = False
    min_fragment: PositiveInt = 20
    near_copy_words: NonNegativeInt = 0
    """With a positive number, words of near copies count as copied too: runs of at least this many
    content words that follow the source with small edits (``copy_credit.near_copy_words``); the
    share is then taken over match words (a hyphenated word is one). 0: verbatim fragments only."""
    threshold: FractionBelowOne = 0.3
    full_at: Fraction = 1.0
    weight: Weight = 1.0
    grounded_only: bool = False
    """Take the share over the words outside the sentences ``grounding`` finds unsupported (needs
    ``grounding.sentence_threshold``): a sentence of filler, praise or invented claims appended to
    a mostly copied output does not dilute its copied share (it paid less than the copy penalty it
    removed: probe families ``self_praise``, ``filler``, ``invented_detail``)."""

    def check(self) -> None:
        if self.full_at <= self.threshold:
            raise ConfigError(f"must be above threshold ({self.threshold}), got {self.full_at}", field="full_at")

    needs: ClassVar[frozenset[str]] = frozenset({"source"})

    def measure(self, x: "GuardInput") -> tuple[dict, float] | None:
        if x.source is None or not x.source.words:
            return None
        judged = x.grounded if self.grounded_only else x.output
        if self.near_copy_words:
            text = canonical(judged)
            found = match_words(text)
            spans = copy_spans(text, x.source, self.min_fragment, self.near_copy_words)
            share = sum(any(a <= m.start() < b for a, b in spans) for m in found) / len(found) if found else 0.0
        else:
            share = long_copy_share(words(judged), x.source.words, self.min_fragment, x.source.positions)
        return {"long_copy_share": share}, self.weight * _ramp(share, self.threshold, self.full_at)


@dataclass
class CopyCreditGuard(Guard):
    """Copied text earns nothing for having been read: the judge's gain from the source on the
    output's tokens inside verbatim source fragments of at least ``min_fragment`` words
    (conditional minus unconditional log-probability, gains only), per output token, times
    ``weight``, is the penalty. At weight 1 a copied token scores what it would have scored had the
    judge not read the source, so no weight has to outbid what copying is worth.

    Likelihood judges only: GPTScore with ``gptscore.unconditional: true`` and ``normalise: none``
    (the penalty is in nats per token). Unlike the other guards it reads the judge's token
    log-probabilities, so it is computed with the scores (``Reward``), not from the text alone.
    A guard: a charge (>= 0) on the judge's score for what copied words gained from the source. The
    information the output gives about its source, with copied words worth 0, is the reward's main
    term ``reward.term: information``, not this guard.
    """

    section_path: ClassVar[str] = "reward.guards.copy_credit"
    charge_fields: ClassVar[tuple[str, ...]] = ()

    enabled: bool = False
    min_fragment: PositiveInt = 4
    near_copy_words: NonNegativeInt = 0
    """With a positive number, tokens of a near copy count as copied too: a run of at least this
    many content words (4+ letters, not function words) that follows the source with small edits
    (a word swapped, dropped or inserted between matches; hyphens inside words ignored). 0: verbatim
    fragments only."""
    weight: Weight = 1.0
    contrast: bool = False
    """Deprecated: the reward's main term spelt as a penalty. ``contrast: true`` (weight 1) made the
    reward the information the output gives about its source, which is now ``reward.term:
    information`` (:class:`~judge_reward.terms.InformationTerm`, logged as ``term/information``);
    a config that still says it is read as that term, with a ``FutureWarning`` giving the new
    spelling, and the same reward."""
    grounded_only: bool = False
    """Tokens of the sentences that ``grounding`` finds unsupported (needs its ``sentence_threshold``)
    earn no information either, and ``likelihood_floor.uncopied_only`` leaves them out: an opener,
    a sign-off or filler says nothing about the source, yet a judge may find a word of it likelier
    after the source ("Sure" at the start, +5 nats), and readable words lift the floor's mean (probe
    family ``chat_wrapper``). In no shipped config: on ``default`` with
    ``grounding.skip_function_words`` a GRPO policy learned to paste the article (docs/grpo_hacking.md,
    run 23): its own loose sentences, flagged, earned nothing and paid grounding; copied ones paid
    nothing."""
    budget_tokens: Optional[PositiveInt] = None
    """Deprecated, with ``contrast``: the information term's ``budget_tokens``
    (``reward.information.budget_tokens``)."""

    def check(self) -> None:
        if self.budget_tokens is not None and not self.contrast:
            raise ConfigError(f"needs contrast: true, got budget_tokens {self.budget_tokens} without it",
                              field="budget_tokens")

    needs: ClassVar[frozenset[str]] = frozenset({"source", "tokens"})


@dataclass
class InformationGuard(Guard):
    """Too little said about the source. ``information`` is what reading the source added to the
    judge's log-probabilities of the output's own (uncopied) words, summed over its first
    ``budget_tokens`` tokens and divided by ``budget_tokens`` (nats per token of the budget). Below
    ``floor`` the shortfall times ``weight`` is the penalty; above it nothing changes, so the
    judge's score decides among outputs that say enough.

    The floor, not a bonus, because each way to raise the information alone is an exploit: a bare
    name carries the most information per token, a list of the source's names the most in total.
    What it stops: outputs that the judge finds likely whatever the source (a numbered list,
    boilerplate), a name alone, a truncated summary, a pasted lead (copied words are worth 0).
    Likelihood judges only, like ``copy_credit`` (GPTScore with ``gptscore.unconditional: true``,
    ``normalise: none``).
    """

    section_path: ClassVar[str] = "reward.guards.information"
    charge_fields: ClassVar[tuple[str, ...]] = ()

    enabled: bool = False
    budget_tokens: PositiveInt = 32
    floor: FiniteFloat = 0.8
    min_fragment: PositiveInt = 4
    """Tokens inside verbatim source fragments of at least this many words count 0."""
    near_copy_words: NonNegativeInt = 0
    """Tokens of near copies count 0 too (see ``copy_credit.near_copy_words``)."""
    grounded_only: bool = False
    """Tokens of unsupported sentences count 0 too (see ``copy_credit.grounded_only``)."""
    weight: Weight = 3.0

    needs: ClassVar[frozenset[str]] = frozenset({"source", "tokens"})


@dataclass
class LikelihoodFloorGuard(Guard):
    """Text the judge finds unlikely: the shortfall of the judged aspects' mean log-probability per
    token (GPTScore's score given the source, before ``copy_credit``; or, with ``unconditional``,
    the score without the source) below ``floor`` nats, times
    ``weight``. Above the floor nothing changes. For rewards whose main term is the information
    (``reward.term: information``), which a list of the source's names maximises: a floor on how
    readable the output is, not a bonus, because every likely-text bonus is maximised by padding
    (a numbered list, a repeated phrase). GPTScore with ``normalise: none`` only."""

    section_path: ClassVar[str] = "reward.guards.likelihood_floor"
    charge_fields: ClassVar[tuple[str, ...]] = ()

    enabled: bool = False
    floor: FiniteFloat = -3.0
    weight: Weight = 2.0
    unconditional: bool = False
    """Floor the mean log-probability of the output after the aspect's instruction alone (no
    source; needs ``gptscore.unconditional: true``): how readable the text is on its own. The
    score given the source is raised most by copying it (GRPO run 9: a floor on it taught the
    policy to paste the lead); the source-free score is not."""
    uncopied_only: bool = False
    """With ``unconditional``: average over the tokens that the copy mask of the information term
    (``reward.term: information``; else ``copy_credit``'s, else the ``information`` guard's) leaves
    uncopied and that hold a letter or digit, the output's own
    words. Copied words earn no information, and must not lift the floor either: a list of names
    followed by a pasted passage read as readable on average (red-team, issue 15). The shortfall is then weighted by the share
    of the output's tokens that are its own, so a mostly copied output pays little and a wholly
    copied one nothing (its information is 0 anyway)."""
    budget_tokens: Optional[PositiveInt] = None
    """With ``uncopied_only``: the floor also holds over the output's first ``budget_tokens``
    tokens, the ones that earn information (set it to ``reward.information.budget_tokens``), and the larger
    of the two shortfalls is charged. Text past the budget earns nothing and must not lift the
    floor of the text that does: a list of the source's names in the budget followed by a readable
    summary read as readable on average (probe family ``near_copy``, issue 15)."""

    per_token: bool = False
    """With ``budget_tokens``: charge each own token's shortfall below ``floor`` over the budget's
    first tokens, summed and divided by ``budget_tokens`` (the information's own denominator), times
    ``weight``, instead of the shortfall of their mean. A readable token adds no shortfall and takes
    none away, so readable words put before the output cannot lift the floor of the words that earn
    the information (a chat assistant's preface worded as no ``chatter`` pattern lists, "The main
    points, in a couple of sentences:", beat 4 of 20 human highlights through the mean). Every
    unlikely own token pays, so real text pays more often: set ``floor`` lower (measured at -6,
    weight 1, against ``default``'s mean floor: docs/rewards.md; not in any shipped config)."""

    def check(self) -> None:
        if self.budget_tokens is not None and not self.uncopied_only:
            raise ConfigError(f"needs uncopied_only: true, got budget_tokens {self.budget_tokens} without it",
                              field="budget_tokens")
        if self.per_token and self.budget_tokens is None:
            raise ConfigError("needs budget_tokens, got per_token without it", field="per_token")

    def requires(self) -> frozenset[str]:
        return frozenset({"tokens"}) if self.unconditional else frozenset()


@dataclass
class RepetitionGuard(Guard):
    """Repetition inside the output: the share of its word n-grams that repeat an earlier one."""

    section_path: ClassVar[str] = "reward.guards.repetition"

    enabled: bool = False
    n: PositiveInt = 3
    threshold: FractionBelowOne = 0.1
    weight: Weight = 1.0
    full_at: Fraction = 1.0
    """The repeated share at which the full ``weight`` is paid. An output said twice repeats about
    half of its n-grams, so the default (1.0) charges it a little under half the weight; a task whose
    honest outputs repeat nothing (single sentences built from data) can charge it in full sooner."""
    punctuation: bool = True
    """Count punctuation marks as tokens, so runs of bare marks (``The . The . . . .``, a policy's
    way round a word-only count in the GRPO run) repeat like words do."""
    max_word_uses: Optional[PositiveInt] = None
    """Also charge content words used more than this many times (:func:`overused_share`; None:
    off): the source's main name put in again every few words pads the length and breaks copied
    fragments apart while every trigram stays new (probe ``repeat_word/subject_after_every_5_words``
    beat the real summary on 8/20 articles under ``geval_gemma`` without it; GRPO run 20's policy
    wrote it on 2 of 8 held-out articles). The charge grows from 0 at ``word_threshold`` to the full
    ``weight`` at ``word_full_at``; the larger of the two repetition charges is taken."""
    word_threshold: FractionBelowOne = 0.15
    word_full_at: Fraction = 0.4

    def check(self) -> None:
        if self.full_at <= self.threshold:
            raise ConfigError(f"must be above threshold ({self.threshold}), got {self.full_at}", field="full_at")
        if self.word_full_at <= self.word_threshold:
            raise ConfigError(f"must be above word_threshold ({self.word_threshold}), got {self.word_full_at}",
                              field="word_full_at")

    def measure(self, x: "GuardInput") -> tuple[dict, float]:
        share = repeated_share(tokens(x.output) if self.punctuation else x.words, self.n)
        measured: dict = {"repeated_share": share}
        ramp = _ramp(share, self.threshold, self.full_at)
        if self.max_word_uses is not None:
            overused = overused_share(x.words, self.max_word_uses, language=x.language)
            measured["overused_word_share"] = overused
            ramp = max(ramp, _ramp(overused, self.word_threshold, self.word_full_at))
        return measured, self.weight * ramp


@dataclass
class LengthGuard(Guard):
    """Length in words, against a floor and a ceiling relative to the source (and/or absolute).

    Too short (a lone colon, an opener with nothing after it): the penalty grows as the output
    falls from ``min_words`` to 0 words. Too long: it grows from the lowest ceiling (``max_words``,
    ``max_source_ratio`` x the source's length, ``max_words_base + max_words_per_slot`` x the
    source's slots) to ``full_at`` x that ceiling.
    """

    section_path: ClassVar[str] = "reward.guards.length"

    enabled: bool = False
    min_words: NonNegativeInt = 5
    max_words: Optional[PositiveInt] = None
    max_source_ratio: Optional[PositiveFloat] = 0.5
    max_words_per_slot: Optional[PositiveFloat] = None
    """Data-to-text: a ceiling that grows with the data, ``max_words_base`` plus this many words per
    (slot, value) pair of the source's meaning representation (:mod:`judge_reward.meaning`; a prose
    source sets none). What a sentence says about its data takes room in proportion to it: a
    sentence of filler, praise or invented news appended to a one-slot act (``confirm(kids_allowed=yes)``)
    doubles its length though it names nothing the guard could miss."""
    max_words_base: NonNegativeInt = 18
    full_at: PositiveFloat = 2.0
    """The over-length charge is paid in full at this multiple of the ceiling (above 1)."""
    weight: Weight = 1.0
    grounded_only: bool = False
    """Against ``min_words``, count only the words outside the sentences ``grounding`` finds
    unsupported (needs ``grounding.sentence_threshold``): a sentence of filler, praise or invented
    claims appended to a short output does not bring it to the length wanted (it paid less than the
    shortfall it removed: probe families ``self_praise``, ``filler``, ``invented_detail``)."""

    def requires(self) -> frozenset[str]:
        needs_source = self.max_source_ratio is not None or self.max_words_per_slot is not None
        return frozenset({"source"}) if needs_source else frozenset()

    def check(self) -> None:
        if self.full_at <= 1:
            raise ConfigError(f"must be above 1 (a multiple of the ceiling), got {self.full_at}", field="full_at")

    def measure(self, x: "GuardInput") -> tuple[dict, float]:
        n = len(x.words)
        n_short = len(words(x.grounded)) if self.grounded_only else n
        ceilings = [self.max_words] if self.max_words else []
        if self.max_source_ratio is not None and x.source is not None and x.source.words:
            ceilings.append(max(self.min_words, self.max_source_ratio * len(x.source.words)))
        meaning = x.source.meaning if x.source is not None else None
        if self.max_words_per_slot is not None and meaning is not None:
            ceilings.append(max(self.min_words, self.max_words_base + self.max_words_per_slot * len(meaning.slots)))
        ceiling = min(ceilings) if ceilings else None
        short = _ramp(self.min_words - n_short, 0, self.min_words) if self.min_words else 0.0
        long = _ramp(n, ceiling, self.full_at * ceiling) if ceiling else 0.0
        measured: dict = {"words": n, "ceiling": ceiling}
        if self.grounded_only:
            measured["grounded_words"] = n_short
        return measured, self.weight * max(short, long)


@dataclass
class GroundingGuard(Guard):
    """Text about something else: the share of the output's content words absent from the source.

    A summary, answer or reply built on its source reuses the source's names and terms; fluent text
    about another item, or a content-free opener, does not. ``min_chars`` keeps short function words
    out; ``skip_function_words`` the longer ones too.
    Turn it off for tasks whose outputs legitimately leave the source's vocabulary (open dialogue).
    """

    section_path: ClassVar[str] = "reward.guards.grounding"

    enabled: bool = False
    min_chars: PositiveInt = 4
    threshold: FractionBelowOne = 0.5
    weight: Weight = 1.0
    sentence_threshold: Optional[FractionBelowOne] = None
    """Also judge each sentence alone: a sentence of at least three content words, more than this
    share of which are absent from the source, is unsupported, and the share of the output's content
    words in unsupported sentences is charged from 0 (the penalty is the larger of the two ramps).
    Catches one appended sentence of filler or self-praise, which the whole-text share dilutes."""
    per_sentence: Optional[Fraction] = None
    """With ``sentence_threshold``: charge each unsupported sentence this share of ``weight`` (up to
    the full weight) instead of the share of the output's content words they hold. A share falls
    as grounded text is added, so an output with an unsupported sentence gained by growing (a
    rewritten lead sentence put before a real summary, probe family ``near_copy``); a count does
    not."""
    skip_function_words: bool = False
    """Leave the function words of ``min_chars`` or more letters (English: ``with``, ``will``, ``more``,
    ``over``, ...; the guards' ``language``'s list in ``wordlists/function_words.yaml``) out of the
    whole-text share and of each sentence's verdict; a flagged sentence still weighs all its content
    words in the charged share. Every source has them, so without this a sentence of generic prose
    built from them passes as grounded (the probe suite's ``filler_c_start``: 5 of its 15 words of
    four or more letters are function words). Off by default, and in the shipped ``default``, whose
    reward was verified by GRPO runs without it."""

    def check(self) -> None:
        if self.per_sentence is not None and self.sentence_threshold is None:
            raise ConfigError(f"needs sentence_threshold, got per_sentence {self.per_sentence} without it",
                              field="per_sentence")

    needs: ClassVar[frozenset[str]] = frozenset({"source"})

    def measure(self, x: "GuardInput") -> tuple[dict, float] | None:
        if x.source is None or not x.source.words:
            return None
        share = novel_word_share(x.words, x.source.word_set, self.min_chars, self.skip_function_words, x.language)
        measured: dict = {"novel_word_share": share}
        ramp = _ramp(share, self.threshold, 1.0)
        if x.unsupported is not None:
            share_unsupported, sentences = x.unsupported
            measured.update(unsupported_share=share_unsupported, unsupported_sentences=len(sentences))
            charged = share_unsupported if self.per_sentence is None else min(1.0, self.per_sentence * len(sentences))
            ramp = max(ramp, _ramp(charged, 0.0, 1.0))
        return measured, self.weight * ramp


@dataclass
class EndingGuard(Guard):
    """An output that stops mid-sentence (a truncated answer): the full ``weight`` when the text
    does not end with terminal punctuation (``. ! ?``) or a closing quote or bracket.

    ``mode: cut`` charges only an ending no finished sentence has: no terminal punctuation *and*
    a last word that cannot close a sentence (an article, preposition, conjunction, auxiliary or
    possessive: ``... had another dig at``; the guards' ``language``'s list in
    ``wordlists/open_endings.yaml``), a trailing comma, colon, dash or opening bracket, a last
    sentence that begins one of the output's earlier sentences again (a generation that loops back
    to its start, cut by a token limit: :func:`starts_over`), or last words copied from a source
    sentence that goes on after them (a pasted passage cut by a token limit).
    Some honest outputs end without a full stop (4-7% of SummEval's system outputs and human
    highlights); ``mode: punctuation`` charges those too.

    ``mode: judge`` asks the judge instead of the source: an output without terminal punctuation
    whose last word can close a sentence is charged when the judge gives a sentence end right after
    it a probability under ``end_probability`` (:meth:`judge_reward.Judge.sentence_end`, one
    next-token request per such output, GPTScore judges); the trailing marks and the words that
    cannot close a sentence are charged as in ``cut``. A system that trims a copied sentence's tail
    (``... sold for $ 137,000 at auction on saturday``) is not charged; a summary cut where no
    sentence stops (``... was rescued by his parents before emergency``) is."""

    section_path: ClassVar[str] = "reward.guards.ending"
    charge_fields: ClassVar[tuple[str, ...]] = ("weight", "unfinished_weight")

    enabled: bool = False
    weight: Weight = 1.0
    mode: Literal["punctuation", "cut", "judge"] = "punctuation"
    unfinished_weight: Weight = 0.0
    """With ``mode: cut`` or ``judge``: what an ending with no terminal punctuation that is not cut pays."""
    end_probability: Fraction = 0.02
    """With ``mode: judge``: below this probability of a sentence end after the output, it is cut."""

    def requires(self) -> frozenset[str]:
        return frozenset({"sentence_end"}) if self.mode == "judge" else frozenset()

    def measure(self, x: "GuardInput") -> tuple[dict, float]:
        complete = ends_complete(x.output)
        if self.mode == "judge":
            cut = ends_cut(x.output, language=x.language) or (not complete and x.sentence_end is not None
                                                              and x.sentence_end < self.end_probability)
        else:
            cut = not complete if self.mode == "punctuation" else ends_cut(x.output, x.source, x.language)
        measured = {"complete": complete, "cut": cut, **({"sentence_end": x.sentence_end} if x.sentence_end is not None else {})}
        return measured, self.weight if cut else (0.0 if complete else self.unfinished_weight)


@dataclass
class WordListGuard(Guard):
    """A sentence or line that is nothing but a list of names or keywords (keyword stuffing): at
    least ``min_items`` short pieces between commas, "and", slashes or bullets, none holding a
    function word (:func:`is_bare_list`). A list of the source's names says the most about the
    source per word and adds its names to the judge's context, so it lifts a likelihood judge's
    information and a form-filling judge's relevance without saying anything about them (probe
    family ``near_copy``: the names before a real summary). The penalty grows with the share of the
    output's words in such lists, from 0 to the full ``weight`` at ``full_at``. A list inside a
    clause ("backed by Taylor, Hoddle, Keegan and Eriksson") is prose and is not charged. The function
    words and the conjunctions ("and", "or") are the guards' ``language``'s (``wordlists/function_words.yaml``,
    ``wordlists/list_conjunctions.yaml``)."""

    section_path: ClassVar[str] = "reward.guards.word_list"

    enabled: bool = False
    min_items: PositiveInt = 4
    max_item_words: PositiveInt = 3
    full_at: Fraction = 0.25
    weight: Weight = 1.0

    def measure(self, x: "GuardInput") -> tuple[dict, float]:
        share, lists = bare_list_share(x.output, self.min_items, self.max_item_words, x.language)
        return {"listed_share": share, "lists": len(lists)}, self.weight * _ramp(share, 0.0, self.full_at)


@dataclass
class DataValuesGuard(Guard):
    """Data-to-text: an output that leaves out its data, says something else, or pastes the data's
    notation (the source is a meaning representation, :mod:`judge_reward.meaning`).

    Three charges, the largest of which is paid, and a fourth paid on top of it:

    * **missing values**: ``missing_slope * m + weight * ramp(m, free, missing_full)``, where ``m``
      is the share of the data's ``n`` spoken values (:meth:`~judge_reward.meaning.Meaning.spoken_values`,
      one per slot: BAGEL's ``X`` for a venue and the one it is near counts twice) the output does
      not name (:func:`~judge_reward.meaning.unnamed_values`) and ``free`` is ``missing_free`` or
      ``free_values`` of them, whichever is more (never all ``n``; none, with ``free_needs_words``,
      when the output has no word of its own to say them with). A sentence written for other
      data, or one cut short, drops most of them; an honest one seldom drops more than one, said in
      its own words ("centre of town" for ``citycentre``).
    * **sentences that name none of the data**: ``unnamed_weight * ramp(u, unnamed_free, unnamed_full)``,
      where ``u`` is the share of the output's words of four or more characters that stand in
      sentences naming none of the spoken values: filler, praise, an invented aside (a short
      opener, "I have a restaurant for you .", weighs little). A sentence that names some of them
      adds the words of each stretch of ``unnamed_run`` or more such words between its values:
      the same filler run on without a full stop.
    * **the notation**: ``notation_weight`` when the output writes the data as it was given
      (``inform(``, ``name=``, ``food[``: :func:`~judge_reward.meaning.uses_notation`).
    * **values the data does not give** (with a ``domain``): ``added_weight`` when the output says a
      value that other inputs of the task give and this one does not (another venue's food, area or
      price; BAGEL's ``X`` once more than the data has it:
      :meth:`~judge_reward.meaning.Domain.added_values`). Another act's sentence says them; an
      honest one does not.

    A source that is not a meaning representation is not measured (the guard does not apply); a
    meaning representation with no spoken value (``confirm(area=dont_care)``) is checked for its
    notation only, and with ``open_values`` for the slot it leaves open (one value to say: the
    slot's name beside a word that leaves the choice open).

    >>> from judge_reward.guards import GuardsConfig, SourceStats, apply_guards
    >>> guards = GuardsConfig.from_dict({"data_values": {"enabled": True}})
    >>> src = SourceStats("inform(name='Sushi Ran', food=japanese, area='nob hill', kids_allowed=yes)")
    >>> apply_guards(guards, "Sushi Ran is a Japanese place in Nob Hill that welcomes children.", src).total
    0.0
    >>> cut = apply_guards(guards, "Sushi Ran is a", src).measured["data_values"]
    >>> ", ".join(cut["missing"])
    'japanese, nob hill'
    >>> apply_guards(guards, "inform(name='Sushi Ran', food=japanese)", src).total
    4.0
    >>> task = GuardsConfig.from_dict({"data_values": {"enabled": True, "domain": [
    ...     "inform(name='Sushi Ran', food=japanese)", "inform(name='Ananda Fuara', food=vegetarian)"]}})
    >>> claims = apply_guards(task, "Sushi Ran is a vegetarian place in Nob Hill.", src).measured["data_values"]
    >>> ", ".join(claims["added"])
    'vegetarian'
    """

    section_path: ClassVar[str] = "reward.guards.data_values"
    charge_fields: ClassVar[tuple[str, ...]] = ("weight", "missing_slope", "unnamed_weight", "notation_weight",
                                                "added_weight")
    needs: ClassVar[frozenset[str]] = frozenset({"source"})

    enabled: bool = False
    weight: Weight = 4.0
    missing_free: FractionBelowOne = 0.5
    """Up to this share of the data's values may go unnamed for free (a value said in other words:
    ``cheap`` as "affordable", ``riverside`` as "by the river")."""
    missing_full: Fraction = 0.75
    free_values: NonNegativeInt = 1
    """This many values may go unnamed for free when ``missing_free`` allows fewer (an act of two
    or three values), but never all of them."""
    unnamed_weight: Weight = 4.0
    unnamed_free: FractionBelowOne = 0.25
    unnamed_full: Fraction = 0.5
    """The share of the output's words in sentences naming none of the data at which
    ``unnamed_weight`` is paid in full: a sentence as long as the one about the data beside it."""
    unnamed_run: Optional[PositiveInt] = 10
    """Inside a sentence that names some of the data, a stretch of this many words of four or more
    characters naming none of it counts as unnamed (None: sentences only). Honest sentences
    about the data run up to 9 such words between values (BAGEL, SFRES: 1 of ~15,000 at 9, none
    longer); a sentence of filler appended without a full stop runs 10-15."""
    missing_slope: Weight = 0.0
    """Added to the missing-values charge: ``missing_slope * m`` from the first value left
    unnamed, so that of two readings of the same data the one naming fewer of its values scores
    lower (a sentence cut short, another act's sentence). It charges honest sentences that say a
    value in other words too, so it is an option, not a guard setting: 0 (off) in the preset;
    its measured cost per data set is in docs/presets.md."""
    notation_weight: Weight = 4.0
    free_needs_words: bool = False
    """Values left out are free (``missing_free``, ``free_values``) only when the output has a word of
    its own: a content word (four or more characters, not a function word) naming none of the
    values, which could say one otherwise ("by the river" for ``riverside``). A sentence of nothing
    but the data's values, such as one cut after its first ones ("X is a restaurant" for an act
    that also gives an address), has none, and pays from the first value it leaves out."""
    unspoken: list[Text] = field(default_factory=lambda: ["yes", "no", "none", "dont_care", "dontcare"])
    """Values a text does not name as written (compared in lower case): flags and placeholders of the
    data set's notation. BAGEL adds ``placetoeat`` (``type=placetoeat``, said of every venue)."""
    open_values: list[Text] = field(default_factory=list)
    """Values that leave their slot open (``area=dont_care``: any area will do), compared in lower
    case. Such a slot has no value to name, but a text that says so names the slot by a word of its
    name (:func:`~judge_reward.meaning.names_slot`) and has a word that leaves a choice open ("you
    do not mind which area", "whether kids are allowed": the guards' ``language``'s list in
    ``wordlists/open_choice.yaml``); it counts as one more value, said or left out. One cut before
    the slot ("Please confirm that you do not care") leaves it out, and so does one cut after the
    slot's name ("May I confirm that the price range"). Like ``unspoken``,
    these are never expected as written. Empty: not checked."""
    alternatives: str = "or"
    """The word that joins the alternatives of a value offered as a choice (``near='marina or
    japantown'``): each alternative is a value of its own."""
    domain: Optional[Union[Text, list[Text]]] = None
    """The task's data, whose values an output must not claim for an input that does not give
    them: ``inputs`` (the inputs the reward is validated, probed, scored or trained on:
    ``judge-reward validate``, ``probe``, ``score`` and ``train`` give them, in Python
    :meth:`judge_reward.Reward.use_inputs`), the path of a file of meaning representations (JSON or
    JSONL records with a ``source`` field, or one per line), or a list of them. None: not checked."""
    added_weight: Weight = 4.0
    """Charged when the output says a value of the ``domain`` its own data does not give."""
    _domain: Optional[Domain] = field(default=None, init=False, repr=False, compare=False)

    def use_inputs(self, sources: Sequence[str]) -> None:
        """Read ``sources`` (the task's inputs) as the ``domain`` when it is ``inputs``."""
        if self.domain == "inputs":
            self._domain = Domain.from_sources(sources, self.not_said(), self.alternatives)

    def task_domain(self) -> Domain | None:
        """The ``domain``'s values, read on first use; None when it is not set."""
        if self.domain is None or self._domain is not None:
            return self._domain
        if self.domain == "inputs":
            raise ConfigError("'inputs' needs the task's inputs, and none were given: run it through "
                              "judge-reward validate/probe/score/train, call Reward.use_inputs(sources), or "
                              "give the path of a file of the task's meaning representations",
                              field="domain").within(self.section_path)
        if isinstance(self.domain, list):
            sources = self.domain
        else:
            from .data import read_sources  # data reads files; the guards need it only here

            def bad(problem: str) -> ConfigError:
                return ConfigError(problem, field="domain").within(self.section_path)

            sources = read_sources(self.domain, bad)
        self._domain = Domain.from_sources(sources, self.not_said(), self.alternatives)
        return self._domain

    def not_said(self) -> list[str]:
        """The values a text is not expected to say as written: ``unspoken`` and ``open_values``."""
        return [*self.unspoken, *self.open_values]

    def open_slots(self, meaning: Meaning) -> list[str]:
        """The slots ``meaning`` leaves open (given one of ``open_values``), each once."""
        left_open = {v.lower() for v in self.open_values}
        return list(dict.fromkeys(slot for slot, value in meaning.slots if value.lower() in left_open))

    def check(self) -> None:
        if self.missing_full <= self.missing_free:
            raise ConfigError(f"must be above missing_free ({self.missing_free}), got {self.missing_full}",
                              field="missing_full")
        if self.unnamed_full <= self.unnamed_free:
            raise ConfigError(f"must be above unnamed_free ({self.unnamed_free}), got {self.unnamed_full}",
                              field="unnamed_full")

    def measure(self, x: "GuardInput") -> tuple[dict, float] | None:
        meaning: Meaning | None = x.source.meaning if x.source is not None else None
        if meaning is None:
            return None
        values = meaning.spoken_values(self.not_said(), self.alternatives)
        notation = uses_notation(x.output, meaning)
        measured: dict = {"values": len(values), "notation": notation}
        charges = [self.notation_weight if notation else 0.0]
        domain = self.task_domain()
        added = []
        if domain is not None:
            added = measured["added"] = domain.added_values(x.words, meaning)
        open_slots = self.open_slots(meaning)
        if values or open_slots:
            n = len(values) + len(open_slots)
            missing = unnamed_values(x.words, values)
            if open_slots:
                measured["left_open"] = len(open_slots)
                said = [w for w in x.words if w not in function_words(x.language)]
                # the slot named and said to be open: "the price range" alone says nothing about it
                opened = not open_choice(x.language).isdisjoint(x.words)
                missing += [f"{slot} (left open)" for slot in open_slots if not (opened and names_slot(said, slot))]
            share = len(missing) / n
            free = max(self.missing_free, min(self.free_values, n - 1) / n)
            if self.free_needs_words and missing:
                naming = set().union(*named_positions(x.words, values).values())
                own_words = sum(is_content_word(w, 4, True, x.language) for i, w in enumerate(x.words) if i not in naming)
                measured["own_words"] = own_words
                if not own_words:  # nothing but the data's values: no word that could say the one left out
                    free = 0.0
            measured.update(missing=missing, missing_share=share)
            charges.append(self.missing_slope * share
                           + self.weight * _ramp(share, free, max(self.missing_full, min(1.0, free + 1 / n))))
        if values:
            total, unnamed, runs, unnamed_words = 0, [], [], 0
            for a, b in sentence_spans(x.output, x.language):
                sentence = x.output[a:b]
                sentence_words = words(sentence)
                size = len(content_words(sentence_words, 4, language=x.language))
                total += size
                if not size:
                    continue
                named = named_positions(sentence_words, values)
                if not named:
                    unnamed.append(sentence.strip())
                    unnamed_words += size
                elif self.unnamed_run:
                    for run, run_size in self._value_free_runs(sentence_words, set().union(*named.values()), x.language):
                        runs.append(run)
                        unnamed_words += run_size
            unnamed_share = unnamed_words / total if total else 0.0
            measured.update(unnamed_sentences=unnamed, unnamed_runs=runs, unnamed_share=unnamed_share)
            charges.append(self.unnamed_weight * _ramp(unnamed_share, self.unnamed_free, self.unnamed_full))
        # a value claimed is another error than one left out: paid on top (a cut copy of a sentence
        # that claims one still pays for the values it drops)
        return measured, max(charges) + (self.added_weight if added else 0.0)

    def _value_free_runs(self, sentence_words: list[str], named: set[int], language: str) -> list[tuple[str, int]]:
        """The stretches of ``sentence_words`` between the words at ``named`` (those naming a value)
        that hold ``unnamed_run`` or more words of four or more characters: each one's text and
        that count."""
        runs, current, count = [], [], 0
        for i, w in enumerate(sentence_words + [None]):  # None closes the last stretch
            if w is None or i in named:
                if count >= self.unnamed_run:
                    runs.append((" ".join(current), count))
                current, count = [], 0
            else:
                current.append(w)
                count += is_content_word(w, 4, language=language)
        return runs


@dataclass
class InjectionGuard(Guard):
    """Text that talks to the judge instead of doing the task, removed before the judge reads it.

    Removed: lines or sentences that imitate a rating (``<label>: <number>``, ``Score: 5/5``,
    ``rated 5 out of 5``) where the label is a generic rating word or one of the aspect file's
    aspect names; evaluation-form headings; text addressed to an evaluator, grader, judge or
    reviewer, or telling the reader to ignore instructions; and text about the output itself
    (``this summary is ...``, with the aspect file's output label). Each removed span costs
    ``weight_per_span`` (so an injection never ties with the clean text) up to ``max_penalty``.

    With ``chatter``, also what a chat assistant wraps around the output for its user, which is not
    the task's output either: an announcement at the start (``Sure! Here is the summary:``, ``Here's
    a short overview of the article.``), a summing-up preface (``To sum it up for you:``), a bare
    heading of the output's label (``Summary:``, ``**TL;DR**``; at the start of a later line too), and
    a sign-off or offer of more (``I hope this helps!``, ``Let me know if you would like a longer
    version.``); a text that is nothing but such wrapping is judged as it is. Read by the judge,
    such words raise a likelihood-based reward: the opener is likelier once the judge has read the
    source, and readable words lift the readability floor (docs/rewards.md, "A chat assistant's
    wrapping"). Wrapping worded otherwise still reaches the judge (``experiments/unlisted_wrappers.py``).

    The wording is the guards' ``language``'s (``wordlists/injection.yaml``, with ``chatter``
    ``wordlists/chatter.yaml``); the structure around it (a label, a colon, a number) is not.
    """

    section_path: ClassVar[str] = "reward.guards.injection"
    charge_fields: ClassVar[tuple[str, ...]] = ("weight_per_span", "max_penalty")

    enabled: bool = False
    weight_per_span: Weight = 0.5
    max_penalty: Weight = 1.0
    chatter: bool = False

    def measure(self, x: "GuardInput") -> tuple[dict, float]:
        """Per removed span (:func:`neutralise` removed it before the judge read the output)."""
        return {"removed_spans": x.removed_spans}, min(self.max_penalty, self.weight_per_span * x.removed_spans)


@dataclass
class ValueEchoGuard(Guard):
    """A value written in the output cannot raise a form-filling judge's value (G-Eval, rating).

    Such a judge copies a number it reads near its form slot, however the number is dressed (a
    filled form, ``Coherence?: 5``, ``five out of five``, look-alike letters, a JSON block): no list
    of wordings can be complete. So the reward scores the output a second time with every number
    and number word (the guards' ``language``'s, ``wordlists/number_words.yaml``) masked
    (:func:`mask_values`) and charges each aspect what its value with the
    numbers exceeds its value without them (normalised, less ``margin``), times ``weight``; with
    ``weight`` 1 and ``margin`` 0 an aspect is worth at most its masked value. A failed masked
    pass fails the reward. Costs one more judge pass for each output that holds a number.
    """

    section_path: ClassVar[str] = "reward.guards.value_echo"
    charge_fields: ClassVar[tuple[str, ...]] = ()

    enabled: bool = False
    weight: Weight = 1.0
    margin: Weight = 0.0

    needs: ClassVar[frozenset[str]] = frozenset({"masked_pass"})


@dataclass
class LiftGuard(Guard):
    """What sentences that say nothing about the source add to the judge's score.

    GPTScore's score is the mean log-probability of the output's tokens, so any sentence the judge
    finds likelier than the rest raises it, whatever it says: a generic sentence appended to a
    summary ("Overall, this is an important development, and it will be interesting to see what
    happens next.") beat half of the held-out writer summaries it was added to
    (docs/research/writer_summaries.md). A sentence says nothing about the source when reading the
    source raised its tokens' log-probabilities by less than ``min_information`` nats per token on
    average; the charge is how much such sentences raise the mean (:func:`sentence_lift`), times
    ``weight``, as a weighted mean over the judged aspects. At weight 1 the output scores what it
    would without them; a sentence of the output's own that the source makes likelier (a name, an
    event, a number the article gives) is never charged, nor is one the judge finds less likely
    than the rest, so an honest output pays only for a sentence that lifts its score without being
    about its source.

    Likelihood judges only: GPTScore with ``gptscore.unconditional: true`` and ``normalise: none``
    (the charge is in nats per token).
    """

    section_path: ClassVar[str] = "reward.guards.lift"
    charge_fields: ClassVar[tuple[str, ...]] = ()

    enabled: bool = False
    min_information: FiniteFloat = 0.2
    """Nats per token: a sentence whose tokens the source made likelier by less than this on
    average says nothing about it."""
    weight: Weight = 1.0

    needs: ClassVar[frozenset[str]] = frozenset({"source", "tokens"})


TEXT_GUARDS = ("injection", "copy", "repetition", "length", "grounding", "data_values", "word_list", "ending")
"""The guards :func:`apply_guards` measures on the text, in the order their charges are reported."""

GUARD_TYPES = {
    "injection": InjectionGuard,
    "value_echo": ValueEchoGuard,
    "copy": CopyGuard,
    "copy_credit": CopyCreditGuard,
    "information": InformationGuard,
    "likelihood_floor": LikelihoodFloorGuard,
    "lift": LiftGuard,
    "repetition": RepetitionGuard,
    "length": LengthGuard,
    "grounding": GroundingGuard,
    "data_values": DataValuesGuard,
    "ending": EndingGuard,
    "word_list": WordListGuard,
}


@dataclass
class GuardsConfig(Section):
    """Every guard of a reward, each off unless its section says ``enabled: true`` (or just ``true``),
    and the ``language`` of the texts they read."""

    section_path: ClassVar[str] = "reward.guards"
    field_kind: ClassVar[str] = "guard"

    language: Text = "en"
    """The ISO 639-1 code of the outputs' and sources' language: which sentence splitter (pysbd's)
    and which entry of each ``judge_reward/wordlists/*.yaml`` file the guards read. A language is
    added by adding its key to the files its enabled guards read (:meth:`language_data`); one that
    lacks a file the enabled guards read is a config error, never English in its place."""

    injection: InjectionGuard = field(default_factory=InjectionGuard)
    value_echo: ValueEchoGuard = field(default_factory=ValueEchoGuard)
    copy: CopyGuard = field(default_factory=CopyGuard)
    copy_credit: CopyCreditGuard = field(default_factory=CopyCreditGuard)
    information: InformationGuard = field(default_factory=InformationGuard)
    likelihood_floor: LikelihoodFloorGuard = field(default_factory=LikelihoodFloorGuard)
    lift: LiftGuard = field(default_factory=LiftGuard)
    repetition: RepetitionGuard = field(default_factory=RepetitionGuard)
    length: LengthGuard = field(default_factory=LengthGuard)
    grounding: GroundingGuard = field(default_factory=GroundingGuard)
    data_values: DataValuesGuard = field(default_factory=DataValuesGuard)
    ending: EndingGuard = field(default_factory=EndingGuard)
    word_list: WordListGuard = field(default_factory=WordListGuard)

    @classmethod
    def from_dict(cls, raw, where: str | None = None) -> "GuardsConfig":
        return build_section(cls, raw, where)

    def check(self) -> None:
        grounding = self.grounding
        for name in ("copy", "length", "copy_credit", "information"):
            section = getattr(self, name)
            if section.enabled and section.grounded_only and not (grounding.enabled and grounding.sentence_threshold is not None):
                raise ConfigError("grounded_only needs the grounding guard on with sentence_threshold set",
                                  field=f"{name}.grounded_only")
        for data, readers in self.language_data().items():
            guards = f"the {', '.join(readers)} guard{'s' if len(readers) > 1 else ''}"
            if data == "sentences":
                if not splits(self.language):
                    raise ConfigError(f"pysbd has no sentence splitter for {self.language!r}, which {guards} "
                                      f"need{'' if len(readers) > 1 else 's'}", field="language")
            elif not has_entry(data, self.language):
                raise ConfigError(f"{self.language!r} has no entry in judge_reward/wordlists/{data}.yaml (it has "
                                  f"{', '.join(languages(data))}), which {guards} read{'' if len(readers) > 1 else 's'}; "
                                  f"add its key there", field="language")

    def source_guards(self) -> list[str]:
        """The enabled guards whose charge compares the output with its source (the article a summary
        is read against): with a prompt in the source's place they would charge an answer for the
        words its question lacks, or for being longer than half of it."""
        return self.requiring("source")

    def scaled(self, factor: float) -> "GuardsConfig":
        """A copy whose charges (each guard's :attr:`Guard.charge_fields`) are multiplied by ``factor``:
        guard strengths given in multiples of the judge's spread, in the judge's units."""
        from dataclasses import replace

        return replace(self, **{name: replace(getattr(self, name), **{f: getattr(getattr(self, name), f) * factor
                                                                      for f in cls.charge_fields})
                                for name, cls in GUARD_TYPES.items()})

    def requiring(self, need: str) -> list[str]:
        """The enabled guards that read ``need`` (:meth:`Guard.requires`): ``source``, ``tokens``,
        ``sentence_end`` or ``masked_pass``."""
        return [name for name in self.enabled if need in getattr(self, name).requires()]

    def language_data(self) -> dict[str, list[str]]:
        """What the enabled guards read of their language: a file of ``judge_reward/wordlists`` by
        name, or ``sentences`` (pysbd's splitter), each with the guards that read it."""
        near_copy = ["function_words"]
        reads = {
            "injection": ["injection", "sentences", *(["chatter"] if self.injection.chatter else [])],
            "value_echo": ["number_words"],
            "copy": near_copy if self.copy.near_copy_words else [],
            "copy_credit": near_copy if self.copy_credit.near_copy_words else [],
            "information": near_copy if self.information.near_copy_words else [],
            "lift": ["sentences"],
            "repetition": ["function_words"] if self.repetition.max_word_uses is not None else [],
            "grounding": [*(["function_words"] if self.grounding.skip_function_words else []),
                          *(["sentences"] if self.grounding.sentence_threshold is not None else [])],
            "ending": {"punctuation": [], "cut": ["open_endings", "sentences"], "judge": ["open_endings"]}[self.ending.mode],
            "word_list": ["function_words", "list_conjunctions", "sentences"],
            "data_values": ["sentences", "function_words", *(["open_choice"] if self.data_values.open_values else [])],
        }
        found: dict[str, list[str]] = {}
        for guard in self.enabled:
            for data in reads.get(guard, []):
                found.setdefault(data, []).append(guard)
        return found

    @property
    def enabled(self) -> list[str]:
        return [name for name in GUARD_TYPES if getattr(self, name).enabled]

    @property
    def reading_unconditional(self) -> list[str]:
        """The enabled guards that read the judge's source-free token log-probabilities
        (``gptscore.unconditional: true``)."""
        return self.requiring("tokens")


# -- the injection rewrite --------------------------------------------------------------------------

@functools.cache
def latin_lookalikes() -> dict[str, str]:
    """Letters of other scripts drawn like a Latin letter (Cyrillic "о", Greek "ο", Cherokee "Ꭺ", ...)
    -> that letter: Unicode's confusables table (UTS #39, from the ``confusable-homoglyphs`` package),
    the letters whose look-alike is one Latin letter. A capital drawn like "l" (Greek "Ι", Cyrillic
    "І") reads as "I". Inside a word that also has Latin letters they can only be there to dodge a
    pattern ("Cоhеrеnсе: 5" with Cyrillic o, e, с)."""
    from confusable_homoglyphs.categories import alias
    from confusable_homoglyphs.confusables import confusables_data

    table = {}
    for char, found in confusables_data.items():
        if len(char) != 1 or not unicodedata.category(char).startswith("L") or alias(char) in ("LATIN", "COMMON"):
            continue
        latin = [d["c"] for d in found if len(d["c"]) == 1 and d["c"].isascii() and d["c"].isalpha()]
        if latin:
            table[char] = "I" if latin[0] == "l" and char.isupper() else latin[0]
    return table


@functools.cache
def _latinise_table() -> tuple[frozenset, dict]:
    table = latin_lookalikes()
    return frozenset(table), str.maketrans(table)


# Chat-template and markup tags (<end_of_turn>, <|im_start|>, </s>, [INST]): a tokenizer reads the
# special ones as control tokens, which would let the judged text close its turn and open the judge's.
CONTROL_TAG = re.compile(r"<\|[^<>|\n]{1,40}\|>|</?[A-Za-z_][\w.:-]{0,40}/?>|\[/?(?:INST|SYS)\]|<</?SYS>>")


def canonical(text: str) -> str:
    """The output as the judge reads it under the injection guard: NFKC (full-width and styled
    letters, superscript and circled digits become plain ones), invisible format characters
    (zero-width spaces and joiners, soft hyphens, word joiners) dropped, letters of other scripts
    drawn like Latin ones (:func:`latin_lookalikes`) mapped to Latin inside words that also hold
    Latin letters, and control or
    markup tags broken (``<end_of_turn>`` becomes ``< end_of_turn>``) so that they are read as text.
    Ordinary prose in any script comes out as it went in, up to NFKC."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")

    lookalikes, to_latin = _latinise_table()

    def latinise(match: re.Match) -> str:
        word = match.group(0)
        if lookalikes.intersection(word) and any("a" <= ch.lower() <= "z" for ch in word):
            return word.translate(to_latin)
        return word

    text = WORD.sub(latinise, text)
    return CONTROL_TAG.sub(lambda m: m.group(0)[0] + " " + m.group(0)[1:], text)


VALUE_MASK = "#"


@functools.cache
def number_word_pattern(language: str = "en") -> re.Pattern:
    """The number words up to ten of ``language`` (``wordlists/number_words.yaml``), as whole words."""
    return re.compile(rf"(?i){'|'.join(whole_word(w) for w in number_words(language))}")


def mask_values(text: str, language: str = "en") -> tuple[str, int]:
    """``text`` with every number (any run of Unicode digits or numeric signs, with the separators
    inside it: ``5``, ``4.5``, ``５``, ``⑤``, ``10/10`` becomes ``#/#``) and every number word up to
    ten of ``language`` replaced by ``#``, and how many were replaced (see :class:`ValueEchoGuard`)."""
    out: list[str] = []
    count, i, n = 0, 0, len(text)
    while i < n:
        if unicodedata.category(text[i]).startswith("N"):
            j = i + 1
            while j < n and (unicodedata.category(text[j]).startswith("N")
                             or (text[j] in ".," and j + 1 < n and unicodedata.category(text[j + 1]).startswith("N"))):
                j += 1
            out.append(VALUE_MASK)
            count += 1
            i = j
        else:
            out.append(text[i])
            i += 1
    masked, words_masked = number_word_pattern(language).subn(VALUE_MASK, "".join(out))
    return masked, count + words_masked


NUMBER = r"\d+(?:\.\d+)?"
# Chat-template role tags ("[system]", "assistant note:"): markup, named in English whatever the language.
ROLE_TAG = r"^\W*\[?\s*(?:system|assistant)(?:\s+(?:prompt|message|note))?\s*[\]:]"
# Lines this short are judged whole as well as sentence by sentence: a form slot split by its own
# punctuation ("- Coherence?: 5" is the sentences "- Coherence?" and ": 5") is still a slot.
SHORT_LINE_WORDS = 8


def _fill(pattern: str, **slots: str) -> str:
    """A phrasing pattern (``wordlists/injection.yaml``) with its ``{slot}`` names filled in; regex
    quantifiers (``{0,2}``) hold no letters and stay."""
    def slot(match: re.Match) -> str:
        if match.group(1) not in slots:
            raise ValueError(f"judge_reward/wordlists: unknown slot {match.group(0)} in {pattern!r}; "
                             f"known here: {', '.join('{' + s + '}' for s in slots)}")
        return slots[match.group(1)]
    return re.sub(r"\{([a-z_]+)\}", slot, pattern)


@dataclass(frozen=True)
class InjectionPatterns:
    """The compiled patterns of :class:`InjectionGuard` for one aspect vocabulary and language."""

    rating: re.Pattern
    heading: re.Pattern
    addressed: re.Pattern
    self_reference: re.Pattern
    fraction: re.Pattern  # a short label and a score as a fraction, whatever the label
    language: str = "en"  # how sentences are cut (pysbd)
    opener: re.Pattern | None = None  # with chatter: a wrapper at the start of the output, stripped as a prefix
    sign_off: re.Pattern | None = None  # with chatter: a sentence or line of sign-off, anywhere
    line_heading: re.Pattern | None = None  # with chatter: a bare label heading at the start of a later line

    def opening(self, text: str) -> re.Match | None:
        """The chat wrapper that ``text`` starts with (an announcement, an interjection, a heading), if any."""
        return self.opener.match(text) if self.opener is not None else None

    def search(self, span: str) -> bool:
        """Does this sentence or line talk to the judge?"""
        span = span.strip()
        if not span:
            return False
        fraction = self.fraction.match(span)
        if fraction and float(fraction.group(1)) <= float(fraction.group(2)) <= 100:
            return True
        return bool(self.rating.search(span) or self.heading.search(span) or self.addressed.search(span)
                    or self.self_reference.search(span) or (self.sign_off is not None and self.sign_off.search(span)))

    @classmethod
    def for_aspects(cls, aspects, chatter: bool = False, language: str = "en") -> "InjectionPatterns":
        """The patterns for an aspect file's aspects (their titles and names as rating labels, their
        output labels as the output's nouns), as the reward builds them."""
        aspects = list(aspects)
        return cls.build([a.title for a in aspects] + [a.name for a in aspects], [a.output_label for a in aspects],
                         chatter, language)

    @classmethod
    def build(cls, aspect_titles: Sequence[str], output_labels: Sequence[str], chatter: bool = False,
              language: str = "en") -> "InjectionPatterns":
        """The patterns for these rating labels and output nouns; the wording is ``language``'s
        (``wordlists/injection.yaml``, with ``chatter`` also ``wordlists/chatter.yaml``), the
        structure around it (a label, a colon, a number; where a wrapper stands) is here."""
        said = phrasing("injection", language)
        labels = sorted({*said["rating_labels"], *(t.lower() for t in aspect_titles)}, key=len, reverse=True)
        label = "|".join(re.escape(x) for x in labels)
        out_of = said["out_of"]
        # "<label> (1-5): 4", "Score = 5/5", "coherence - 5 out of 5", never a scoreline ("that mark
        # 2-0 victory": no digit between label and separator, no "-<digit>" after); then the ratings
        # said in a sentence ("rate it 5", "give this a 5/5", "deserves a 5"). A count is not a
        # rating: "5th overall: 5 points behind" (a word after a bare number, unless it is the next
        # label of a form; "5 out of 5 stars" is a rating).
        after_value = rf"(?![\"'\u201d]?\s*(?!(?:{label})\b\s*[:=(])[^\W\d_])"
        in_a_sentence = "".join("|" + _fill(p, number=NUMBER, out_of=out_of) for p in said["ratings"])
        rating = re.compile(
            rf"(?i)(?:\b(?:{label})\b(?:\s*\(\s*{NUMBER}\s*(?:-|{said['range_to']})\s*{NUMBER}\s*\))?[^\n.:=\d]{{0,24}}(?::|=|\s-)\s*[\"'\u201c]?\**\s*{NUMBER}\b(?!-\d)(?:\s*(?:/|{out_of})\s*{NUMBER}|{after_value})"
            rf"{in_a_sentence})"
        )
        heading = re.compile("(?i)" + said["form_heading"])
        raters = "|".join(said["raters"])
        addressed = re.compile("(?i)" + "|".join([*(_fill(p, raters=raters) for p in said["addressed"]), ROLE_TAG]))
        nouns = sorted({*(o.lower() for o in output_labels), *said["output_nouns"]}, key=len, reverse=True)
        noun = "|".join(re.escape(x) for x in nouns if x)
        self_reference = re.compile("(?i)" + _fill(said["self_reference"], nouns=noun,
                                                   predicates="|".join(said["self_predicates"])))
        # a span that is only a short label and a score as a fraction ("Quality: 5/5.", "Overall verdict =
        # 9 out of 10"), whatever the label: a form line; the numerator must not exceed the denominator
        # (odds such as "Odds: 5/1" are news)
        fraction = re.compile(
            rf"(?i)^\W*(?:[^\W\d_]+[\s'-]+){{0,2}}[^\W\d_]+\W{{0,3}}\s*[:=]\s*\**\s*({NUMBER})\s*(?:/|{out_of})\s*({NUMBER})\W*$")
        if not chatter:
            return cls(rating, heading, addressed, self_reference, fraction, language)
        chat = phrasing("chatter", language)
        named = sorted({*nouns, *chat["nouns"]}, key=len, reverse=True)
        named_re = "|".join(re.escape(x).replace(r"\ ", r"\s+") for x in named if x)
        interjection = f"(?:{'|'.join(chat['interjections'])})"
        announce = f"(?:{'|'.join(chat['announcements'])})"
        # an announcement ends at its colon, or at the end of its sentence or line: what follows is the output
        announcement = (rf"(?:{interjection}\W{{1,3}}\s*)?{announce}\s+(?:(?:{'|'.join(chat['determiners'])})\s+)?"
                        rf"(?:[\w'-]+\s+){{0,4}}?(?:{named_re})\b[^\n:.!?]{{0,80}}(?::|[.!]+(?=\s)|\n|$)"
                        rf"|(?:{interjection}\W{{1,3}}\s*)?{chat['handover']}\W*?(?::|[.!]+|\n|$)")
        # a heading: the label alone on its line, or the label and a colon before the text on its line
        label_heading = (rf"(?:#{{1,6}}\s*)?[*_]{{0,2}}\s*(?:(?:{'|'.join(chat['heading_words'])})\s+){{0,2}}"
                         rf"(?:{named_re})(?:\s+{chat['heading_of']})?\s*[*_]{{0,2}}\s*"
                         rf"(?::\s*[*_]{{0,2}}|[*_]{{0,2}}\s*(?=\n)|$)")
        # a summing-up preface ends at a colon, a dash or the line; with a comma it is part of the sentence
        summing_up = (rf"(?:{'|'.join(chat['summing_up'])})(?:\s+{chat['addressee']})?"
                      rf"\s*(?::|[-\u2013\u2014](?=\s)|(?=\n))")
        alone = rf"{interjection}\s*[!.,]*[ \t]*(?:\n|$)"  # an interjection counts alone on its line
        opener = re.compile(rf"(?i)\s*(?:{announcement}|{label_heading}|{alone}|(?:{interjection}\W{{1,3}}\s*)?{summing_up})[ \t]*\n*")
        # after a title or a section of its own ("Guard slips at the Palace\n\nSummary: A guard ...")
        line_heading = re.compile(rf"(?i)[ \t]*{label_heading}[ \t]*")
        sign_off = re.compile("(?i)" + "|".join(chat["sign_offs"]))
        return cls(rating, heading, addressed, self_reference, fraction, language,
                   opener=opener, sign_off=sign_off, line_heading=line_heading)


def neutralise(text: str, patterns: InjectionPatterns) -> tuple[str, list[str]]:
    """The text in :func:`canonical` form without its spans (sentences or lines) that talk to the
    judge, and those spans; with none removed, the canonical text as it is.

    A chat assistant's wrapping (``chatter``) is removed only from around an output: a text that is
    nothing else ("Sure! Here is the summary:" alone) is judged as it is, a content-free output that
    the judge scores low, rather than emptied into a reward of ``None`` that teaches nothing."""
    clean, removed = _neutralise(text, patterns)
    if not clean and patterns.opener is not None:
        return _neutralise(text, replace(patterns, opener=None, sign_off=None, line_heading=None))
    return clean, removed


# a label line whose value stands alone on the next line ("- Coherence:" then "5") reads as one line
VALUE_ON_NEXT_LINE = re.compile(rf":[ \t]*\n[ \t]*(?=\**[ \t]*{NUMBER}[ \t]*(?:/[ \t]*{NUMBER}[ \t]*)?$)", re.MULTILINE)


def _neutralise(text: str, patterns: InjectionPatterns) -> tuple[str, list[str]]:
    text = VALUE_ON_NEXT_LINE.sub(": ", canonical(text))
    kept, removed = [], []
    for k, line in enumerate(text.splitlines(keepends=True)):
        heading = patterns.line_heading.match(line) if k and patterns.line_heading is not None else None
        if heading is not None and heading.group(0).strip():
            removed.append(heading.group(0).strip())  # "Summary:" on its own line, or before the text on it
            line = line[heading.end():]
        spans = [line[a:b] for a, b in sentence_spans(line, patterns.language)]
        if not any(patterns.search(span) for span in spans) and len(words(line)) <= SHORT_LINE_WORDS and patterns.search(line):
            spans = [line]
        for span in spans:
            if patterns.search(span):
                removed.append(span.strip())
                kept.append("\n" if span.endswith("\n") else "")
            else:
                kept.append(span)
    rest, openers = "".join(kept), []
    for _ in range(3):  # "Sure!", then "Here is the summary:", then "Summary:"
        opening = patterns.opening(rest)
        if opening is None or not opening.group(0).strip():
            break
        openers.append(opening.group(0).strip())
        rest = rest[opening.end():]
    removed = openers + removed
    if not removed:
        return text, removed
    clean = re.sub(r"[ \t]+\n", "\n", rest)
    clean = re.sub(r"\n{3,}", "\n\n", clean).strip()
    return clean, removed


# -- applying the guards ------------------------------------------------------------------------------


def _ramp(x: float, free: float, worst: float) -> float:
    if worst <= free:
        return 1.0 if x > free else 0.0
    return min(1.0, max(0.0, (x - free) / (worst - free)))


@dataclass
class GuardReport:
    """What the guards measured on one text and what they charged: ``penalties`` (name -> the
    amount subtracted from the reward) and ``measured`` (name -> statistics)."""

    penalties: dict[str, float] = field(default_factory=dict)
    measured: dict[str, dict] = field(default_factory=dict)
    failure: str | None = None
    """Set when a guard that asks the judge could not get its answer: the reward is then ``None``."""

    @property
    def total(self) -> float:
        return sum(self.penalties.values())


class SourceStats:
    """A source's words and their positions, computed once for the G completions that share it.
    ``language``: the source's (and its outputs') language, as ``reward.guards.language`` names it."""

    def __init__(self, source: str, language: str = "en"):
        self.language = language
        self.words = words(source)
        self.word_set = set(self.words)
        self.positions = word_positions(self.words)
        # what the copy mask matches against (hyphenated words whole)
        self.match_keys = [_key(m) for m in match_words(canonical(source))]
        self.match_positions = word_positions(self.match_keys)
        self._source = source

    @functools.cached_property
    def meaning(self) -> Meaning | None:
        """The source read as a meaning representation (data-to-text), or None for prose."""
        return parse_meaning(self._source)

    @functools.cached_property
    def content_keys(self) -> list[str]:
        """The match keys that are content words, what near copies follow (only near-copy options read them)."""
        return content_words(self.match_keys, NEAR_COPY_MIN_CHARS, True, self.language)

    @functools.cached_property
    def content_positions(self) -> dict[str, list[int]]:
        return word_positions(self.content_keys)

    @functools.cached_property
    def sentence_final(self) -> set[int]:
        """Word indices after which a sentence ends (:func:`~judge_reward.sentences.sentence_spans`:
        "U.S." or "Mr." inside a sentence does not end it, a line break does; the last word when the
        source ends as a finished sentence); computed on first use, by the ending guard's cut mode only."""
        lowered = self._source.lower()
        text = self._source if len(lowered) == len(self._source) else lowered  # positions must match
        found = list(WORD.finditer(lowered))
        cuts = [b for _, b in sentence_spans(text, self.language)[:-1]]  # where one sentence ends and the next begins
        final = set()
        for k, m in enumerate(found[:-1]):
            i = bisect.bisect_left(cuts, m.end())  # the first cut after the word
            if i < len(cuts) and cuts[i] <= found[k + 1].start():
                final.add(k)
        if found and ends_complete(self._source):
            final.add(len(found) - 1)
        return final

    def stops_mid_sentence(self, text_words: Sequence[str], k: int = 4) -> bool:
        """Whether the last ``k`` words of a text follow the source word for word and, wherever they
        do, the source's sentence goes on after them: a copy cut off mid-sentence. For data (a
        meaning representation), whether the text stops inside one of its values
        (:func:`~judge_reward.meaning.ends_inside_value`: "... called alamo square seafood" for
        ``name='alamo square seafood grill'``)."""
        meaning = self.meaning
        if meaning is not None and meaning.slots and ends_inside_value(text_words, meaning.spoken_values()):
            return True
        tail = list(text_words[-k:])
        if len(tail) < k:
            return False
        ends = [p for p in self.positions.get(tail[-1], ()) if p >= k - 1 and self.words[p - k + 1:p + 1] == tail]
        return bool(ends) and not any(p in self.sentence_final for p in ends)


def apply_guards(config: GuardsConfig, output: str, source: SourceStats | None, removed_spans: int = 0,
                 sentence_end: float | None = None) -> GuardReport:
    """Measure ``output`` (already neutralised) against ``source`` with every enabled penalty guard.
    ``sentence_end``: the judge's probability of a sentence end after the output (``ending.mode: judge``;
    needed only where :func:`needs_sentence_end`). The source's language must be ``config.language``."""
    language = config.language
    if source is not None and source.language != language:
        raise ValueError(f"the source was read as {source.language!r}, the guards are set to {language!r}: "
                         f"build it as SourceStats(source, {language!r})")
    report = GuardReport()
    toks = words(output)
    unsupported: tuple[float, list[str]] | None = None  # grounding's sentence verdicts, read by copy and length too
    if config.grounding.enabled and config.grounding.sentence_threshold is not None and source is not None and source.words:
        g = config.grounding
        unsupported = unsupported_sentence_share(output, source.word_set, g.min_chars, g.sentence_threshold,
                                                 g.skip_function_words, language)
    # grounded_only: the output without the sentences grounding finds unsupported
    grounded = without_sentences(output, unsupported[1], language) if unsupported and unsupported[1] else output
    x = GuardInput(output, toks, source, language, removed_spans, sentence_end, unsupported, grounded)
    for name in TEXT_GUARDS:
        guard = getattr(config, name)
        if guard.enabled and (got := guard.measure(x)) is not None:
            report.measured[name], report.penalties[name] = got
    return report
