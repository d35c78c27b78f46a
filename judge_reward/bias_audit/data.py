"""Loaders for Zhang et al. (2023), "Benchmarking Large Language Models for News Summarization".

``pairwise_evaluation_results.json`` holds one record per (article, freelance writer, evaluator):
the evaluator compared the writer's summary with the text-davinci-002 summary of the same article
(the "GPT-3.5" of the G-Eval paper). ``writer_summaries.json`` holds every writer summary of the
study, including articles that were never compared pairwise (used as held-out audit articles).

The preference fields mix JSON booleans and a string: ``true`` (the human-written summary was
better), ``false`` (the model summary was better) or ``"Equally Good"``. They are read with
``is True`` / ``is False`` / ``==``, never by truthiness, and anything else is an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from judge_reward.data import read_data_text

PAIRWISE_FILE = "pairwise_evaluation_results.json"
WRITERS_FILE = "writer_summaries.json"
LLM_FIELD = "text-davinci-002_summary"
LLM_NAME = "GPT-3.5 (text-davinci-002)"

# Preference labels, from the point of view of the people who judged.
HUMAN, LLM, TIE = "human", "llm", "tie"
# Categories of the G-Eval paper's Figure 2, in its order, with display names.
CATEGORIES = {
    "human_better": (HUMAN, "Human summary better"),
    "llm_better": (LLM, "GPT-3.5 summary better"),
    "equally_good": (TIE, "Equally good"),
}
PREFERENCE_TO_CATEGORY = {pref: name for name, (pref, _) in CATEGORIES.items()}


class DataError(ValueError):
    """A data file is missing or malformed; the message names the file, record, field and value."""


@dataclass(frozen=True)
class Judgement:
    """One evaluator's comparison of a writer's summary with the model summary of the same article."""

    article_id: str
    writer_id: str
    evaluator_id: str
    preference: str
    """``human`` (the writer's summary was better), ``llm`` or ``tie``."""
    informative_preference: str


@dataclass
class Study:
    """The Zhang et al. pairwise study: judgements plus the texts they refer to (each stored once)."""

    judgements: list[Judgement]
    articles: dict[str, str]
    llm_summaries: dict[str, str]
    writer_summaries: dict[tuple[str, str], str]
    path: str = ""

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """(article_id, writer_id) pairs in first-seen order."""
        return list(self.writer_summaries)

    def restrict(self, article_ids) -> "Study":
        """The same study limited to some articles (for smoke runs)."""
        keep = set(article_ids)
        return Study(
            [j for j in self.judgements if j.article_id in keep],
            {a: t for a, t in self.articles.items() if a in keep},
            {a: t for a, t in self.llm_summaries.items() if a in keep},
            {p: t for p, t in self.writer_summaries.items() if p[0] in keep},
            self.path,
        )

    def counts(self) -> dict:
        prefs = [j.preference for j in self.judgements]
        return {
            "judgements": len(self.judgements),
            "articles": len(self.articles),
            "pairs": len(self.writer_summaries),
            "evaluators": len({j.evaluator_id for j in self.judgements}),
            "preferences": {p: prefs.count(p) for p in (HUMAN, LLM, TIE)},
        }


@dataclass
class HeldOutArticle:
    """An article with its human-written summaries (one per writer)."""

    article_id: str
    article: str
    human_summaries: list[str] = field(default_factory=list)


def default_data_dir() -> Path:
    """``zhang2023`` in the data folder (``$JUDGE_REWARD_DATA``, else ``../shared/data``; see
    :func:`judge_reward.data.resolve_data_path`)."""
    from judge_reward.data import DataNotFoundError, resolve_data_path

    try:
        return resolve_data_path(None, "zhang2023")
    except DataNotFoundError as err:
        raise DataError(str(err)) from None


def _resolve(path: str | Path | None, filename: str) -> Path:
    path = Path(path) if path is not None else default_data_dir()
    if path.is_dir():
        path = path / filename
    if not path.exists():
        raise DataError(f"data: {path} does not exist (pass the zhang2023 folder or set JUDGE_REWARD_DATA)")
    return path


def _read_list(path: Path) -> list:
    try:
        raw = json.loads(read_data_text(path, DataError))
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(raw, list):
        raise DataError(f"{path}: expected a JSON list of records, got {type(raw).__name__}")
    return raw


def parse_preference(value, where: str) -> str:
    """Map the study's mixed-type preference field onto ``human`` / ``llm`` / ``tie``."""
    if value is True:
        return HUMAN
    if value is False:
        return LLM
    if value == "Equally Good":
        return TIE
    raise DataError(f"{where}: expected true, false or \"Equally Good\", got {value!r}")


def _field(record: dict, name: str, where: str) -> str:
    if name not in record:
        raise DataError(f"{where}.{name}: required field is missing")
    value = record[name]
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where}.{name}: expected non-empty text, got {value!r}")
    return value


def load_zhang2023(path: str | Path | None = None) -> Study:
    """Load the pairwise study from its folder or from ``pairwise_evaluation_results.json``.

    Every record is checked: text fields must be non-empty strings, preferences one of the three
    values, and an article (or an (article, writer) pair) must carry the same texts everywhere.
    """
    path = _resolve(path, PAIRWISE_FILE)
    records = _read_list(path)
    judgements, articles, llm, writers = [], {}, {}, {}
    for n, rec in enumerate(records):
        where = f"{path.name}[{n}]"
        if not isinstance(rec, dict):
            raise DataError(f"{where}: expected a record (mapping), got {type(rec).__name__}")
        article_id = _field(rec, "article_id", where)
        writer_id = _field(rec, "writer_id", where)
        evaluator_id = _field(rec, "evaluator_id", where)
        stores = [
            (articles, article_id, "article_text"),
            (llm, article_id, LLM_FIELD),
            (writers, (article_id, writer_id), "writer_summary"),
        ]
        for store, key, name in stores:
            text = _field(rec, name, where)
            if store.setdefault(key, text) != text:
                raise DataError(f"{where}.{name}: differs from an earlier record of the same {key!r}")
        for name in ("overall_writer_better", "informative_writer_better"):
            if name not in rec:
                raise DataError(f"{where}.{name}: required field is missing")
        judgements.append(Judgement(
            article_id, writer_id, evaluator_id,
            parse_preference(rec["overall_writer_better"], f"{where}.overall_writer_better"),
            parse_preference(rec["informative_writer_better"], f"{where}.informative_writer_better"),
        ))
    if not judgements:
        raise DataError(f"{path}: no records")
    return Study(judgements, articles, llm, writers, str(path))


def load_held_out_articles(path: str | Path | None = None, exclude: set[str] | None = None) -> list[HeldOutArticle]:
    """Articles of ``writer_summaries.json`` with all their writer summaries, minus ``exclude``.

    The default use is the articles that the pairwise study never compared, so that the monitor's
    policy-vs-human gap and its agreement check run on different articles.
    """
    path = _resolve(path, WRITERS_FILE)
    out: dict[str, HeldOutArticle] = {}
    for n, rec in enumerate(_read_list(path)):
        where = f"{path.name}[{n}]"
        if not isinstance(rec, dict):
            raise DataError(f"{where}: expected a record (mapping), got {type(rec).__name__}")
        article_id = _field(rec, "article_id", where)
        if exclude and article_id in exclude:
            continue
        article, summary = _field(rec, "article", where), _field(rec, "summary", where)
        entry = out.setdefault(article_id, HeldOutArticle(article_id, article))
        if entry.article != article:
            raise DataError(f"{where}.article: differs from an earlier record of article {article_id!r}")
        entry.human_summaries.append(summary.strip())
    return list(out.values())


def n_words(text: str) -> int:
    """Length in whitespace-separated words: tokenizer-independent, comparable across judges."""
    return len(text.split())
