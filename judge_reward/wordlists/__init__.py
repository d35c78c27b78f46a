"""Word lists and phrasings as package data, keyed by language (English shipped; the files take others).

Each ``<name>.yaml`` here maps an ISO 639-1 code (the guards' ``reward.guards.language``) to that
language's entry. A language is added by adding its key to each file its guards read; a list that
is missing for the language asked for is an error, never English in its place.

>>> "the" in function_words("en") and "council" not in function_words("en")
True
"""

from __future__ import annotations

import functools
from importlib.resources import files
from typing import Any

import yaml

__all__ = ["function_words", "has_entry", "languages", "list_conjunctions", "number_words", "open_choice",
           "open_endings", "phrasing"]


@functools.cache
def _table(name: str) -> dict[str, Any]:
    return yaml.safe_load(files(__package__).joinpath(f"{name}.yaml").read_text(encoding="utf-8"))


def languages(name: str) -> list[str]:
    """The languages ``<name>.yaml`` has an entry for."""
    return sorted(_table(name))


def has_entry(name: str, language: str) -> bool:
    return language in _table(name)


def _entry(name: str, language: str) -> Any:
    table = _table(name)
    if language not in table:
        raise ValueError(f"{name.replace('_', ' ')}: no list for language {language!r}; the file has "
                         f"{', '.join(sorted(table))} (judge_reward/wordlists/{name}.yaml)")
    return table[language]


def _words(name: str, language: str) -> tuple[str, ...]:
    """A list written as words separated by white space, lower-cased, in the file's order."""
    return tuple(str(_entry(name, language)).lower().split())


@functools.cache
def function_words(language: str = "en") -> frozenset[str]:
    """The function words of ``language`` (``function_words.yaml``), lower-cased."""
    return frozenset(_words("function_words", language))


@functools.cache
def open_endings(language: str = "en") -> frozenset[str]:
    """Words of ``language`` that cannot close a sentence (``open_endings.yaml``), lower-cased."""
    return frozenset(_words("open_endings", language))


@functools.cache
def open_choice(language: str = "en") -> frozenset[str]:
    """Words of ``language`` that say a choice is left open ("any", "whether", "matter";
    ``open_choice.yaml``), lower-cased."""
    return frozenset(_words("open_choice", language))


def number_words(language: str = "en") -> tuple[str, ...]:
    """The number words up to ten of ``language`` (``number_words.yaml``), lower-cased."""
    return _words("number_words", language)


def list_conjunctions(language: str = "en") -> tuple[str, ...]:
    """The words of ``language`` that join a list's last items (``list_conjunctions.yaml``), lower-cased."""
    return _words("list_conjunctions", language)


class Phrasing(dict):
    """One language's entry of a phrasing file; a key it lacks is an error that names the file."""

    def __init__(self, name: str, language: str, entry: dict):
        super().__init__(entry)
        self.name, self.language = name, language

    def __missing__(self, key: str):
        raise ValueError(f"judge_reward/wordlists/{self.name}.yaml: language {self.language!r} has no {key!r}")


def phrasing(name: str, language: str = "en") -> Phrasing:
    """The entry of ``language`` in the phrasing file ``<name>.yaml`` (``injection``, ``chatter``):
    named regular expressions and lists of them."""
    return Phrasing(name, language, _entry(name, language))
