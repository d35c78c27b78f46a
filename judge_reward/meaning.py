"""Meaning representations: the data a data-to-text output puts into words.

A data-to-text source is structured: a dialogue act such as ``inform(name='X', food=Chinese,
area=riverside)`` (BAGEL, SFRES) or an attribute list such as ``name[The Eagle], eatType[coffee
shop]`` (E2E NLG). :func:`parse_meaning` reads either notation into its acts and (slot, value)
pairs; :func:`unnamed_values` says which values a text does not name. The ``data_values`` guard
(:class:`judge_reward.guards.DataValuesGuard`) reads both: an output that leaves most of its data
out, whose sentences name none of it, or that pastes the notation itself.

>>> m = parse_meaning("inform(name='Sushi Ran', food=japanese, kids_allowed=yes)")
>>> m.acts, m.slots
(('inform',), (('name', 'Sushi Ran'), ('food', 'japanese'), ('kids_allowed', 'yes')))
>>> m.spoken_values(unspoken={"yes", "no"})
('Sushi Ran', 'japanese')
>>> unnamed_values(["sushi", "ran", "is", "in", "the", "city", "centre"], ["Sushi Ran", "citycentre", "japanese"])
['japanese']
"""

from __future__ import annotations

import functools
import os
import re
from typing import Sequence
from dataclasses import dataclass

__all__ = ["Domain", "Meaning", "ends_inside_value", "named_positions", "parse_meaning", "unnamed_values", "uses_notation"]

_ACT = re.compile(r"(\w+)\s*\(([^()]*)\)")
_ASSIGNMENT = re.compile(r"(\w+)\s*=\s*('[^']*'|\"[^\"]*\"|[^,;]*)")
_BRACKETED = re.compile(r"(\w+)\s*\[([^\[\]]*)\]")
_TOKEN = re.compile(r"\w+")
_SEPARATORS = re.compile(r"[\s,;|&?]*")  # between items: SFRES writes "inform(...) ?request(...)"
_BRACKETED_ITEM = re.compile(r"[\w\s]*\[[^\[\]]*\]")  # an item whole: E2E's "customer rating[5 out of 5]"
_BARE_SLOT = re.compile(r"\w+")  # a slot named without a value: request(food)


@dataclass(frozen=True)
class Meaning:
    """A parsed meaning representation: its act names (empty for an attribute list) and its
    (slot, value) pairs in order, quotes removed."""

    acts: tuple[str, ...]
    slots: tuple[tuple[str, str], ...]
    asked: tuple[str, ...] = ()
    """Slots named without a value (``request(food)``, ``select(area)``): a text may list any of
    their values."""

    def spoken_values(self, unspoken=frozenset(), alternatives: str = "or") -> tuple[str, ...]:
        """The values a text is expected to name, one per slot that gives it: a value written ``a or
        b`` (a choice put to the user) gives each alternative, and a value in ``unspoken`` (compared
        in lower case: ``yes``, ``dont_care``, which a text says in its own words or not at all)
        gives none. A value two slots give (BAGEL's delexicalised ``X`` for a venue and the one it
        is near) is listed twice: a text names both only by saying it twice.

        >>> parse_meaning("inform(name='X', near='X', food=dont_care)").spoken_values({"dont_care"})
        ('X', 'X')
        """
        return tuple(part for _, parts in self.spoken_by_slot(unspoken, alternatives) for part in parts)

    def spoken_by_slot(self, unspoken=frozenset(), alternatives: str = "or") -> tuple[tuple[str, tuple[str, ...]], ...]:
        """Each (slot, value) pair with the values a text is expected to name for it, as
        :meth:`spoken_values` reads them (none for a value in ``unspoken``: a choice left open).

        >>> parse_meaning("inform(near='a or b', food=dont_care)").spoken_by_slot({"dont_care"})
        (('near', ('a', 'b')), ('food', ()))
        """
        split = re.compile(rf"\s+{re.escape(alternatives)}\s+", re.IGNORECASE) if alternatives else None
        skip = {u.lower() for u in unspoken}
        return tuple((slot, tuple(part for part in (p.strip() for p in (split.split(value) if split else [value]))
                                  if part and part.lower() not in skip))
                     for slot, value in self.slots)


def parse_meaning(source: str) -> Meaning | None:
    """The acts and slots of ``source`` in dialogue-act notation (``act(slot=value, ...)``, several
    acts side by side allowed) or attribute-list notation (``slot[value], ...``); ``None`` when the
    source is in neither (prose)."""
    acts = _ACT.findall(source)
    if acts and _only(_ACT, source):
        slots = tuple((k, v.strip().strip("'\"").strip()) for _, body in acts for k, v in _ASSIGNMENT.findall(body))
        asked = tuple(item.strip() for _, body in acts for item in body.split(",") if _BARE_SLOT.fullmatch(item.strip()))
        return Meaning(tuple(name for name, _ in acts), slots, asked)
    bracketed = _BRACKETED.findall(source)
    if bracketed and _only(_BRACKETED_ITEM, source):
        return Meaning((), tuple((k, v.strip()) for k, v in bracketed))
    return None


def _only(notation: re.Pattern, source: str) -> bool:
    """Whether ``source`` is nothing but ``notation``'s items and separators between them: prose with
    a bracket in it ("the minister [Ms Smith] said ...") is not data."""
    return _SEPARATORS.fullmatch(notation.sub("", source)) is not None


class _Text:
    """A text's lower-cased words run together, with where each word starts in the run: what a
    value's words are looked for in."""

    def __init__(self, text_words: Sequence[str]):
        self.words = list(text_words)
        self.joined, self.starts = "", []
        for w in self.words:
            self.starts.append(len(self.joined))
            self.joined += w

    def mentions(self, part: str) -> list[set[int]]:
        """Each mention of one word of a value, as the indices of the text's words it covers: a
        word of three or more characters wherever it occurs in the words run together
        (``citycentre`` covers "city" and "centre"), a shorter one where it is a word of the text."""
        if len(part) < 3:
            return [{i} for i, w in enumerate(self.words) if w == part]
        return [{i for i, s in enumerate(self.starts) if s < m.end() and s + len(self.words[i]) > m.start()}
                for m in re.finditer(re.escape(part), self.joined)]


def unnamed_values(text_words: Sequence[str], values: Sequence[str]) -> list[str]:
    """The ``values`` a text does not name, given its lower-cased words (``judge_reward.guards.words``).
    A value is named when each of its words of three or more characters occurs in the text's words
    run together (so ``citycentre`` is found in "city centre", ``moderate`` in "moderately",
    "Sushi Ran" in "sushi ran") and each shorter one (a delexicalised ``X``, a number) is a word of
    the text; a value with no word characters is taken as named. A value listed k times is named
    as many times as the text says it, at most k: "X is a restaurant" names one of ``X, X``.

    >>> unnamed_values(["x", "is", "a", "restaurant"], ["X", "X"])
    ['X']
    """
    text = _Text(text_words)
    named = _named_positions(text, values)
    missing, seen = [], {}
    for v in values:
        seen[v] = seen.get(v, 0) + 1
        if v not in named or (seen[v] > 1 and seen[v] > _times_named(text, v)):
            missing.append(v)
    return missing


def slot_name_words(slot: str) -> list[str]:
    """The words of a slot's name, lower-cased ("kids_allowed" -> kids, allowed)."""
    return [w for w in re.split(r"[_\W]+", slot.lower()) if w]


def names_slot(text_words: Sequence[str], slot: str, min_length: int = 3, stem: int = 5) -> bool:
    """Whether a text names ``slot`` by a word of its name (``kids_allowed``: "kids", "allowed"),
    given its lower-cased words (function words left out by the caller): a text word and a name's
    word of ``min_length`` or more characters of which one begins the other ("kid" and "kids") or
    that share their first ``stem`` letters ("allows" and "allowed"). A slot the data leaves open
    (``area=dont_care``) has no value to name; a text that says so names the slot.

    >>> names_slot(["you", "do", "not", "care", "which", "area"], "area")
    True
    >>> names_slot(["whether", "it", "allows", "kid", "s"], "kids_allowed")
    True
    >>> names_slot(["please", "confirm", "you", "do", "not", "care"], "price_range")
    False
    """
    name = [w for w in slot_name_words(slot) if len(w) >= min_length]
    for w in text_words:
        for part in name:
            common = len(os.path.commonprefix([w, part]))
            if len(w) >= min_length and (common == min(len(w), len(part)) or common >= stem):
                return True
    return False


def _times_named(text: _Text, value: str) -> int:
    """How many times the text says ``value``: the count of its least frequent word's mentions
    (:meth:`_Text.mentions`)."""
    counts = [len(text.mentions(p)) for p in _TOKEN.findall(value.lower())]
    return min(counts) if counts else 1


def named_positions(text_words: Sequence[str], values: Sequence[str]) -> dict[str, set[int]]:
    """Each of ``values`` the text names (as :func:`unnamed_values` reads them), with the indices of
    the words of ``text_words`` (lower-cased) that name it: its words of three or more characters
    wherever they occur in the words run together (``citycentre`` marks "city" and "centre"), its
    shorter ones where they are a word of the text. A value not named in full is left out; one with
    no word characters is named by no word.

    >>> named_positions(["x", "is", "in", "the", "city", "centre"], ["X", "citycentre", "cheap"])
    {'X': {0}, 'citycentre': {4, 5}}
    """
    return _named_positions(_Text(text_words), values)


def _named_positions(text: _Text, values: Sequence[str]) -> dict[str, set[int]]:
    named: dict[str, set[int]] = {}
    for value in dict.fromkeys(values):
        found: set[int] = set()
        for p in _TOKEN.findall(value.lower()):
            hits = text.mentions(p)
            if not hits:
                break
            found |= set().union(*hits)
        else:
            named[value] = found
    return named


def ends_inside_value(text_words: Sequence[str], values: Sequence[str]) -> bool:
    """Whether a text stops inside one of ``values``: its last words (lower-cased) are the first
    words, not all, of a value of several words, and it does not end with the whole of any value
    (a text cut inside a name or an address).

    >>> ends_inside_value(["it", "is", "at", "2327", "polk"], ["2327 polk street"])
    True
    >>> ends_inside_value(["serves", "arabian"], ["arabian nights restaurant", "arabian"])
    False
    """
    split = [tuple(_TOKEN.findall(v.lower())) for v in values]
    tail = tuple(text_words)
    if any(v and tail[-len(v):] == v for v in split):
        return False
    return any(tail[-j:] == v[:j] for v in split for j in range(1, len(v)) if j <= len(tail))


def uses_notation(text: str, meaning: Meaning) -> bool:
    """Whether ``text`` writes the data in its own notation: one of its act names followed by an
    opening bracket, or one of its slot names followed by ``=`` or ``[`` (spaces ignored), which no
    sentence about the data does."""
    squeezed = re.sub(r"\s+", "", text).lower()
    marks = [f"{act.lower()}(" for act in meaning.acts]
    marks += [f"{slot.lower()}{sign}" for slot, _ in meaning.slots for sign in ("=", "[")]
    return any(m in squeezed for m in marks)


def _said(text_words: Sequence[str], longest: int, window: int = 3) -> dict[str, list[set[int]]]:
    """What a text says, as whole values could be written: each run of up to ``longest`` characters
    of consecutive words run together ("city centre" -> ``citycentre``), and each pair of words of
    three or more characters at most ``window`` words apart run together the other way round
    ("centre of the city" -> ``citycentre``, marked ``~`` to keep it for one-word values), mapped
    to the sets of the indices of the words that say it."""
    said: dict[str, list[set[int]]] = {}
    for i in range(len(text_words)):
        run = ""
        for k in range(i, len(text_words)):
            run += text_words[k]
            if len(run) > longest:
                break
            said.setdefault(run, []).append(set(range(i, k + 1)))
        if len(text_words[i]) >= 3:
            for j in range(i + 2, min(len(text_words), i + window + 2)):
                if len(text_words[j]) >= 3:
                    said.setdefault("~" + text_words[j] + text_words[i], []).append({i, j})
    return said


def _stems(text_words: Sequence[str], min_length: int = 4, ending: int = 3) -> dict[str, list[set[int]]]:
    """Each word of a text with an ending of up to ``ending`` letters taken off (keeping at least
    ``min_length``), mapped to where it stands: a one-word value said with an ending of its own
    ("moderately" for ``moderate``, "italians" for ``italian``), as :func:`unnamed_values` also
    finds it.

    >>> _stems(["moderately", "priced"])["moderate"]
    [{0}]
    """
    stems: dict[str, list[set[int]]] = {}
    for i, w in enumerate(text_words):
        for k in range(max(min_length, len(w) - ending), len(w)):
            stems.setdefault(w[:k], []).append({i})
    return stems


@functools.lru_cache(maxsize=1 << 16)
def _joined(value: str) -> str:
    """A value's words run together, lower-cased: how :func:`_said` keys it."""
    return "".join(_TOKEN.findall(value.lower()))


def _related(word: str, words: set[str]) -> bool:
    """Whether ``word`` is one of ``words`` or, at four or more characters, begins one of them or
    is begun by one ("shanghainese" and "shanghai", "cafes" and "cafe")."""
    return word in words or any(len(w) >= 4 and len(word) >= 4 and (word.startswith(w) or w.startswith(word))
                                for w in words)


@dataclass(frozen=True)
class Domain:
    """The values a task's data gives, slot by slot: what an output for one input could claim that
    its own data does not (another venue's food, area or price). Built from the task's inputs
    (:meth:`from_sources`); read by :meth:`added_values`.

    ``values``: slot -> the values the data gives it (lower case), for the slots given two or more
    (a slot with one value in the whole task, ``type=restaurant``, is what every text says).
    ``placeholders``: values given to three or more kinds of slot (BAGEL writes every name, address,
    phone number and area it hides as ``X``): where the data gives one at most once, each mention
    stands for one thing, so a text that says it more often names something its data does not.
    Where the data gives it to several slots the count is not checked: the values it hides may be
    written as two ("near X and X" for one slot of BAGEL's rated sentences, which its raters rate
    no lower).

    >>> d = Domain.from_sources(["inform(name='X', food=chinese, area=riverside)",
    ...                          "inform(name='X', food=indian, near='X', phone='X')"])
    >>> d.added_values(["x", "is", "an", "indian", "place", "by", "the", "riverside"],
    ...                parse_meaning("inform(name='X', food=chinese, area=riverside)"))
    ['indian']
    >>> d.added_values(["x", "is", "near", "x"], parse_meaning("inform(name='X', food=chinese)"))
    ['x (said 2 times, the data gives it 1)']
    """

    values: dict[str, frozenset[str]]
    placeholders: frozenset[str]
    unspoken: frozenset[str] = frozenset()
    """The values read as unspoken, and the word joining alternatives, as :meth:`from_sources` was
    given them: a text's own data is read the same way."""
    alternatives: str = "or"

    @functools.cached_property
    def slot_words(self) -> frozenset[str]:
        """The words of the slots' names ("price", "range"): a text names a slot with them."""
        return frozenset(w for slot in self.values for w in slot_name_words(slot))

    @functools.cached_property
    def longest(self) -> int:
        """The length of the longest value run together: how far :func:`_said` runs (at least as
        far as the data's own values)."""
        return max([len(_joined(v)) for vals in self.values.values() for v in vals]
                   + [len(_joined(p)) for p in self.placeholders] + [0])

    @functools.cached_property
    def by_key(self) -> dict[str, list[tuple[int, str, str]]]:
        """Each value run together (:func:`_joined`) -> its (place in slot and value order, slot,
        value): :meth:`added_values` looks up the words a text says instead of trying every value."""
        index: dict[str, list[tuple[int, str, str]]] = {}
        order = ((slot, value) for slot, values in self.values.items() for value in sorted(values))
        for k, (slot, value) in enumerate(order):
            index.setdefault(_joined(value), []).append((k, slot, value))
        return index

    @classmethod
    def from_sources(cls, sources, unspoken=frozenset(), alternatives: str = "or",
                     placeholder_slots: int = 3) -> "Domain":
        """The domain of ``sources`` (meaning representations; prose among them is skipped), with
        the values in ``unspoken`` left out and a value written ``a or b`` split, as
        :meth:`Meaning.spoken_values` reads them."""
        given: dict[str, set[str]] = {}
        for source in sources:
            meaning = parse_meaning(source)
            if meaning is None:
                continue
            for slot, parts in meaning.spoken_by_slot(unspoken, alternatives):
                if parts:
                    given.setdefault(slot, set()).update(p.lower() for p in parts)
        slots_of: dict[str, int] = {}
        for vals in given.values():
            for v in vals:
                slots_of[v] = slots_of.get(v, 0) + 1
        placeholders = frozenset(v for v, n in slots_of.items() if n >= placeholder_slots)
        values = {slot: frozenset(vals - placeholders) for slot, vals in given.items() if len(vals) >= 2}
        return cls(values, placeholders, frozenset(u.lower() for u in unspoken), alternatives)

    def added_values(self, text_words: Sequence[str], meaning: Meaning) -> list[str]:
        """The values of the domain a text says that ``meaning`` does not give, given the text's
        lower-cased words. A value counts where the text says it whole (:func:`_said`; a one-word
        value also with an ending of its own, :func:`_stems`) outside
        the words that say the data's own values, unless its words are the data's own ("persian"
        in the name ``alborz persian cuisine``), it is a word of a slot's name ("range" of
        ``price_range``), or its slot is one the data asks about or leaves open
        (``request(food)``, ``food=dont_care``: a text may list the choices). A placeholder counts
        when the text says it more often than the data gives it, where the data gives it at most
        once."""
        by_slot = meaning.spoken_by_slot(self.unspoken, self.alternatives)
        own = [part.lower() for _, parts in by_slot for part in parts]
        own_words = {w for v in own for w in _TOKEN.findall(v)}
        said = _said(text_words, max([self.longest] + [len(_joined(v)) for v in own]))

        stems = _stems(text_words)

        def spans(value: str) -> list[set[int]]:  # where the text says the value whole
            joined = _joined(value)
            if " " in value.strip():
                return said.get(joined, [])
            return said.get(joined, []) + said.get("~" + joined, []) + stems.get(joined, [])

        covered = {i for v in set(own) for span in spans(v) for i in span}
        open_slots = set(meaning.asked) | {slot for slot, parts in by_slot if not parts}
        added = []
        keys = set(said) | set(stems) | {k[1:] for k in said if k.startswith("~")}
        for _, slot, value in sorted(e for key in keys for e in self.by_key.get(key, ())):
            if slot in open_slots or value in added or all(span <= covered for span in spans(value)):
                continue
            if not (value in own or value in self.slot_words
                    or all(_related(w, own_words) for w in _TOKEN.findall(value))):
                added.append(value)
        for p in sorted(self.placeholders):
            times, given = len(said.get(_joined(p), [])), own.count(p)
            if times > given <= 1:  # given to several slots, one may be said as two ("near X and X")
                added.append(f"{p} (said {times} times, the data gives it {given})")
        return added
