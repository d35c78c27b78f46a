"""Content-addressed cache of judgments, in memory and optionally on disk (sqlite).

The key hashes everything a score depends on: the model, the method's configuration (templates
included), the aspect definition and the texts. Only successful scores are cached, so a failure is
retried next time instead of being remembered. With ``replay_only`` a miss is a failure
(``not_cached``) instead of a model call.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Optional

from .config import Section
from .methods.base import Item, Score, TokenLogprobs


@dataclass
class CacheConfig(Section):
    """Judgment cache settings (a judge config's ``cache:`` section)."""

    section_path: ClassVar[str] = "cache"

    memory: bool = True
    """Keep judgments in memory for the life of the judge."""
    path: Optional[str] = None
    """sqlite file to persist judgments across runs (``None``: memory only)."""
    replay_only: bool = False
    """Answer only from the cache: an item with no cached judgment fails (reason ``not_cached``,
    counted like any judge failure) and the model is never asked. For replaying a scoreboard or a
    reward on a machine that lacks the hardware (or the dtype) the cache was filled with."""


def judgment_key(model_id: str, method_fingerprint: str, aspect_hash: str, item: Item) -> str:
    blob = json.dumps([model_id, method_fingerprint, aspect_hash, item.source, item.output, item.reference])
    return hashlib.sha256(blob.encode()).hexdigest()


NOT_CACHED = "not_cached"
"""Failure reason of an item a ``replay_only`` cache has no judgment for."""


class JudgmentCache:
    def __init__(self, config: CacheConfig | None = None):
        self.config = config or CacheConfig()
        self._memory: dict[str, Score] = {}
        self._lock = threading.Lock()
        self._db = None
        self.hits = 0
        self.misses = 0
        if self.config.path:
            Path(self.config.path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.config.path, check_same_thread=False)
            self._db.execute("CREATE TABLE IF NOT EXISTS judgments (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self._db.commit()

    def __getstate__(self) -> dict:  # picklable: the lock and the sqlite connection are made afresh
        state = self.__dict__.copy()
        del state["_lock"], state["_db"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.config.path, check_same_thread=False) if self.config.path else None

    def get(self, key: str) -> Score | None:
        with self._lock:
            hit = self._memory.get(key)
            if hit is None and self._db is not None:
                row = self._db.execute("SELECT value FROM judgments WHERE key = ?", (key,)).fetchone()
                if row is not None:
                    hit = _decode(json.loads(row[0]))
                    if self.config.memory:
                        self._memory[key] = hit
            if hit is None:
                self.misses += 1
            else:
                self.hits += 1
            return hit

    def put(self, key: str, score: Score) -> None:
        if score.value is None:
            return
        with self._lock:
            if self.config.memory:
                self._memory[key] = score
            if self._db is not None:
                self._db.execute(
                    "INSERT OR REPLACE INTO judgments VALUES (?, ?)",
                    (key, json.dumps({"value": score.value, "details": score.details,
                                      **({"tokens": score.tokens.to_json()} if score.tokens is not None else {})},
                                     default=str)),
                )
                self._db.commit()


# How GPTScore's per-token log-probabilities sat in ``details`` before they had their own type.
_LEGACY_TOKEN_KEYS = ("token_texts", "token_logprobs", "unconditional_token_logprobs")


def _decode(raw: dict) -> Score:
    """A stored judgment; one written before :class:`TokenLogprobs` existed keeps its tokens in
    ``details``, and they move to ``Score.tokens``."""
    details = dict(raw["details"])
    tokens = raw.get("tokens")
    if tokens is None and all(k in details for k in _LEGACY_TOKEN_KEYS):
        texts, cond, uncond = (details.pop(k) for k in _LEGACY_TOKEN_KEYS)
        tokens = {"texts": texts, "with_source": cond, "without_source": uncond}
    return Score(raw["value"], None, details, TokenLogprobs.from_json(tokens) if tokens is not None else None)
