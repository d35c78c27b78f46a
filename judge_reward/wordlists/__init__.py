"""Word lists as package data, keyed by language (English shipped; the files take others).

>>> "the" in function_words("en") and "council" not in function_words("en")
True
"""

from __future__ import annotations

import functools
from importlib.resources import files

import yaml

__all__ = ["function_words"]


@functools.cache
def function_words(language: str = "en") -> frozenset[str]:
    """The function words of ``language`` (``function_words.yaml``), lower-cased."""
    table = yaml.safe_load(files(__package__).joinpath("function_words.yaml").read_text(encoding="utf-8"))
    if language not in table:
        raise ValueError(f"function words: no list for language {language!r}; the file has {', '.join(sorted(table))}")
    return frozenset(str(table[language]).lower().split())
