"""Loaders for human-rated benchmark data: SummEval, Topical-Chat, and generic JSONL/CSV.

Every loader returns a :class:`MetaEvalDataset`: one :class:`HumanRatedItem` per rated text,
holding the :class:`~judge_reward.methods.base.Item` a judge scores, the human scores by aspect,
and the group (document / dialogue context) and system it belongs to. Loaders validate every
record and raise :class:`DatasetError` naming the file, the record index and the field.

Data is read from a path; nothing is bundled (see ``/work/shared/data/README.md`` for the
upstream sources).
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..data import read_data_text, read_json, read_json_list
from ..methods.base import Item

SUMMEVAL_ASPECTS = ("coherence", "consistency", "fluency", "relevance")
# "overall" in summeval.json is the mean of the four, not a human rating, so it is not loaded.
TOPICAL_CHAT_ASPECTS = ("naturalness", "coherence", "engagingness", "groundedness", "understandability", "overall")
# The two of USR's six responses per context that people wrote: the conversation's own next turn,
# and one written afresh for the study. They are the set's references.
TOPICAL_CHAT_HUMAN_SYSTEMS = ("Original Ground Truth", "New Human Generated")


class DatasetError(ValueError):
    """A data file is malformed; the message names the file, the record index and the field."""


@dataclass(frozen=True)
class HumanRatedItem:
    """One rated text: what the judge sees (``item``), what humans said, where it belongs.

    ``group`` is the unit a summary-level correlation is computed within (SummEval ``doc_id``,
    the Topical-Chat dialogue context); ``system`` the model that wrote the output.
    ``references`` holds extra references for reference-based baselines (SummEval's 11).
    """

    item: Item
    human: dict[str, float]
    group: str
    system: str
    references: tuple[str, ...] = ()


@dataclass
class MetaEvalDataset:
    """A list of human-rated items with the aspects every item carries."""

    name: str
    records: list[HumanRatedItem]
    aspects: tuple[str, ...]
    path: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.records)

    @property
    def items(self) -> list[Item]:
        return [r.item for r in self.records]

    @property
    def groups(self) -> list[str]:
        return [r.group for r in self.records]

    @property
    def systems(self) -> list[str]:
        return [r.system for r in self.records]

    def human(self, aspect: str) -> list[float]:
        if aspect not in self.aspects:
            raise KeyError(f"aspect {aspect!r} is not rated in {self.name}; rated: {', '.join(self.aspects)}")
        return [r.human[aspect] for r in self.records]

    @property
    def references(self) -> list[tuple[str, ...]]:
        """Per item, all references: the extra ones if loaded, else the item's single reference."""
        out = []
        for i, r in enumerate(self.records):
            refs = r.references or ((r.item.reference,) if r.item.reference else ())
            if not refs:
                raise DatasetError(f"{self.name}: record {i} ({r.item.id}) has no reference for ROUGE")
            out.append(refs)
        return out

    def group_references(self) -> dict[str, tuple[str, ...]]:
        """Per group, every reference its records carry: the longest record's list first, in its
        order, then any other record's that it lacks (a Topical-Chat human response is listed by
        every record but its own). Groups whose records carry none are left out."""
        lists: dict[str, list[tuple[str, ...]]] = {}
        for r in self.records:
            if r.references:
                lists.setdefault(r.group, []).append(r.references)
        out = {}
        for group, refs in lists.items():
            merged = list(max(refs, key=len))  # repeats kept: a set may give an act the same sentence twice
            for more in refs:
                merged.extend(text for text in dict.fromkeys(more) if text not in merged)
            out[group] = tuple(merged)
        return out

    def first_groups(self, n: int | None) -> "MetaEvalDataset":
        """The records of the first ``n`` groups in file order (all when ``n`` is None)."""
        if n is None:
            return self
        if n < 1:
            raise ValueError(f"limit={n!r}: expected a positive number of groups")
        keep = set(list(dict.fromkeys(self.groups))[:n])
        return MetaEvalDataset(
            self.name, [r for r in self.records if r.group in keep], self.aspects, self.path, dict(self.meta)
        )

    def select_groups(self, groups: Iterable[str]) -> "MetaEvalDataset":
        """The records of the named groups, in file order; unknown names are an error."""
        wanted = set(groups)
        unknown = wanted - set(self.groups)
        if unknown:
            raise KeyError(f"groups not in {self.name}: {sorted(unknown)[:5]}")
        return MetaEvalDataset(
            self.name, [r for r in self.records if r.group in wanted], self.aspects, self.path, dict(self.meta)
        )


# --- validation helpers -------------------------------------------------------------------


def _where(path: Path | str, index: int) -> str:
    return f"{path}: record {index}"


def _text_field(rec: dict, key: str, where: str, optional: bool = False) -> str | None:
    if key not in rec or rec[key] is None:
        if optional:
            return None
        raise DatasetError(f"{where}: field {key!r} is missing")
    value = rec[key]
    if not isinstance(value, str):
        raise DatasetError(f"{where}: field {key!r} should be text, got {value!r:.80}")
    return value


def _score(value: Any, where: str, name: str) -> float:
    # bool is an int in Python; a true/false "score" is almost certainly a wrong column
    if isinstance(value, bool) or value is None:
        raise DatasetError(f"{where}: field {name!r} should be a number, got {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise DatasetError(f"{where}: field {name!r} should be a number, got {value!r:.80}") from None
    if not math.isfinite(out):
        raise DatasetError(f"{where}: field {name!r} should be a finite number, got {value!r}")
    return out


def _read_text(path: Path) -> str:
    return read_data_text(path, DatasetError)


def _read_json(path: Path) -> Any:
    return read_json(path, DatasetError)


def _read_json_list(path: Path) -> list:
    return read_json_list(path, DatasetError)


def _record(rec: Any, where: str) -> dict:
    if not isinstance(rec, dict):
        raise DatasetError(f"{where}: expected an object, got {rec!r:.80}")
    return rec


def _scores(rec: dict, aspects: Sequence[str], where: str, key: str = "scores") -> dict[str, float]:
    raw = rec.get(key)
    if not isinstance(raw, dict):
        raise DatasetError(f"{where}: field {key!r} should be a mapping of aspect to score, got {raw!r:.80}")
    missing = [a for a in aspects if a not in raw]
    if missing:
        raise DatasetError(f"{where}: field '{key}.{missing[0]}' is missing (has: {sorted(raw)})")
    return {a: _score(raw[a], where, f"{key}.{a}") for a in aspects}


# --- SummEval -------------------------------------------------------------------------------


def load_references(path: str | Path) -> dict[str, list[str]]:
    """SummEval's multi-reference file: ``{doc_id: [11 reference summaries]}``."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: expected a mapping of doc_id to a list of references")
    for doc_id, refs in data.items():
        if not isinstance(refs, list) or not refs or not all(isinstance(r, str) and r.strip() for r in refs):
            raise DatasetError(f"{path}: doc_id {doc_id!r}: expected a non-empty list of non-empty strings")
    return data


def load_summeval(
    path: str | Path,
    references: str | Path | None = None,
    aspects: Sequence[str] = SUMMEVAL_ASPECTS,
) -> MetaEvalDataset:
    """SummEval in the G-Eval/UniEval JSON format (1600 records: 100 documents x 16 systems).

    Items are ``Item(output=system_output, source=source, reference=reference,
    id="<doc_id>/<system_id>")``, grouped by ``doc_id``. With ``references`` (the file of 11
    references per document) every record also carries those, for multi-reference ROUGE.
    """
    path = Path(path)
    refs = load_references(references) if references is not None else None
    records = []
    for i, raw in enumerate(_read_json_list(path)):
        where = _where(path, i)
        rec = _record(raw, where)
        doc_id = _text_field(rec, "doc_id", where)
        system_id = _text_field(rec, "system_id", where)
        extra: tuple[str, ...] = ()
        if refs is not None:
            if doc_id not in refs:
                raise DatasetError(f"{where}: doc_id {doc_id!r} has no entry in references file {references}")
            extra = tuple(refs[doc_id])
        item = Item(
            output=_text_field(rec, "system_output", where),
            source=_text_field(rec, "source", where),
            reference=_text_field(rec, "reference", where, optional=True),
            id=f"{doc_id}/{system_id}",
        )
        records.append(HumanRatedItem(item, _scores(rec, aspects, where), doc_id, system_id, extra))
    return MetaEvalDataset("summeval", records, tuple(aspects), str(path))


# --- Topical-Chat ---------------------------------------------------------------------------


def load_topical_chat(path: str | Path, aspects: Sequence[str] = TOPICAL_CHAT_ASPECTS) -> MetaEvalDataset:
    """Topical-Chat / USR in UniEval format (360 records: 60 contexts x 6 responses).

    ``Item(output=system_output, source=<dialogue history>, reference=<the knowledge fact>)``;
    the group is the dialogue history (named ``ctx<k>`` by order of appearance) so that
    sample-level correlation is per context, as Chiang & Lee (2023) compute Kendall's tau.
    A record's ``references`` are its context's human-written responses
    (:data:`TOPICAL_CHAT_HUMAN_SYSTEMS`, in that order) other than itself: a human response is
    never its own reference.
    """
    path = Path(path)
    context_names: dict[str, str] = {}
    records = []
    for i, raw in enumerate(_read_json_list(path)):
        where = _where(path, i)
        rec = _record(raw, where)
        history = _text_field(rec, "source", where)
        system_id = _text_field(rec, "system_id", where)
        group = context_names.setdefault(history, f"ctx{len(context_names)}")
        item = Item(
            output=_text_field(rec, "system_output", where),
            source=history,
            reference=_text_field(rec, "context", where, optional=True),
            id=f"{group}/{system_id}",
        )
        records.append(HumanRatedItem(item, _scores(rec, aspects, where), group, system_id))
    human: dict[str, dict[str, str]] = {}  # group -> system -> the response that system's person wrote
    for r in records:
        if r.system in TOPICAL_CHAT_HUMAN_SYSTEMS:
            human.setdefault(r.group, {})[r.system] = r.item.output

    def others(r: HumanRatedItem) -> tuple[str, ...]:
        written = human.get(r.group, {})
        return tuple(written[s] for s in TOPICAL_CHAT_HUMAN_SYSTEMS if s in written and s != r.system)

    records = [replace(r, references=others(r)) for r in records]
    return MetaEvalDataset("topical_chat", records, tuple(aspects), str(path))


# --- data-to-text (BAGEL, SFRES) ------------------------------------------------------------

D2T_ASPECTS = ("informativeness", "naturalness", "quality")


def load_d2t(path: str | Path, aspects: Sequence[str] = D2T_ASPECTS) -> MetaEvalDataset:
    """BAGEL or SFRES as unified by BARTScore: a meaning representation (``source``) -> a system's
    sentence (``system_output``), rated 1-6, with the act's human references (``references``).

    Items are ``Item(output, source=<meaning representation>, reference=<first reference>)``; the
    group is the meaning representation (``mr<k>`` by order of appearance), so per-input statistics
    (selection) compare the outputs written for the same act; every record carries all references.
    """
    path = Path(path)
    names: dict[str, str] = {}
    seen: dict[str, int] = {}
    records = []
    for i, raw in enumerate(_read_json_list(path)):
        where = _where(path, i)
        rec = _record(raw, where)
        source = _text_field(rec, "source", where)
        refs = rec.get("references")
        if not isinstance(refs, list) or not refs or not all(isinstance(r, str) and r.strip() for r in refs):
            raise DatasetError(f"{where}: references: expected a non-empty list of texts, got {refs!r:.80}")
        group = names.setdefault(source, f"mr{len(names)}")
        seen[group] = seen.get(group, 0) + 1
        system = f"out{seen[group]}"
        item = Item(output=_text_field(rec, "system_output", where), source=source, reference=refs[0],
                    id=f"{group}/{rec.get('id', i)}")
        records.append(HumanRatedItem(item, _scores(rec, aspects, where), group, system, tuple(refs)))
    return MetaEvalDataset(path.stem, records, tuple(aspects), str(path))


# --- generic JSONL / CSV --------------------------------------------------------------------


@dataclass(frozen=True)
class TableFormat:
    """Which fields of a generic JSONL/CSV file hold what.

    Attributes:
        output: field with the text under judgment (required).
        source: field with the input / document (optional field; empty text when absent).
        reference: field with a reference text (optional).
        id: field with an item id (optional; defaults to the record index).
        group: field with the group for summary-level correlation (optional; without it every
            item is its own group, so sample level is undefined and reported as NaN).
        system: field with the system id (optional; defaults to "system").
        human: human score fields, by aspect name. Empty means: in JSONL, every entry of the
            ``scores`` mapping; in CSV, every column named ``human_<aspect>``.
    """

    output: str = "output"
    source: str = "source"
    reference: str = "reference"
    id: str = "id"
    group: str = "group"
    system: str = "system"
    human: tuple[str, ...] = ()


def _generic_record(rec: dict, fmt: TableFormat, aspects: Sequence[str], columns: dict[str, str], where: str, index: int):
    # CSV gives empty strings for empty cells; treat them as absent for the optional fields
    def optional(key: str) -> str | None:
        value = rec.get(key)
        if value is None or value == "":
            return None
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            raise DatasetError(f"{where}: field {key!r} should be text, got {value!r:.80}")
        return str(value)

    output = _text_field(rec, fmt.output, where)
    human = {}
    for aspect in aspects:
        column = columns[aspect]
        if column == f"scores.{aspect}":
            scores = rec.get("scores")
            if not isinstance(scores, dict) or aspect not in scores:
                raise DatasetError(f"{where}: field 'scores.{aspect}' is missing")
            human[aspect] = _score(scores[aspect], where, column)
        else:
            if column not in rec or rec[column] in (None, ""):
                raise DatasetError(f"{where}: field {column!r} is missing")
            human[aspect] = _score(rec[column], where, column)
    item_id = optional(fmt.id) or str(index)
    item = Item(output=output, source=optional(fmt.source) or "", reference=optional(fmt.reference), id=item_id)
    group = optional(fmt.group) or f"item{index}"
    return HumanRatedItem(item, human, group, optional(fmt.system) or "system")


def load_jsonl(path: str | Path, fmt: TableFormat = TableFormat()) -> MetaEvalDataset:
    """A JSONL file, one rated item per line (see :class:`TableFormat` for the field names)."""
    path = Path(path)
    rows: list[tuple[int, dict]] = []
    for lineno, line in enumerate(_read_text(path).splitlines()):
        if not line.strip():
            continue
        where = f"{path}: record {len(rows)} (line {lineno + 1})"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as err:
            raise DatasetError(f"{where}: not valid JSON ({err})") from None
        rows.append((lineno, _record(rec, where)))
    if not rows:
        raise DatasetError(f"{path}: no records")
    if fmt.human:
        columns = {h: h for h in fmt.human}
    else:
        first = rows[0][1].get("scores")
        if not isinstance(first, dict) or not first:
            raise DatasetError(
                f"{path}: record 0: field 'scores' is missing; give the human score fields explicitly "
                f"(TableFormat.human / --human-fields)"
            )
        columns = {a: f"scores.{a}" for a in first}
    records = [
        _generic_record(rec, fmt, list(columns), columns, f"{path}: record {i} (line {lineno + 1})", i)
        for i, (lineno, rec) in enumerate(rows)
    ]
    return MetaEvalDataset(path.stem, records, tuple(columns), str(path))


def load_csv(path: str | Path, fmt: TableFormat = TableFormat()) -> MetaEvalDataset:
    """A CSV file with a header row, one rated item per row (see :class:`TableFormat`)."""
    path = Path(path)
    with io.StringIO(_read_text(path), newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        rows = list(reader)
    if not rows:
        raise DatasetError(f"{path}: no records")
    if fmt.human:
        columns = {h: h for h in fmt.human}
        absent = [h for h in fmt.human if h not in header]
        if absent:
            raise DatasetError(f"{path}: human score column {absent[0]!r} is not in the header {header}")
    else:
        columns = {c[len("human_"):]: c for c in header if c.startswith("human_")}
        if not columns:
            raise DatasetError(f"{path}: no human score columns: name them human_<aspect> or pass TableFormat.human")
    if fmt.output not in header:
        raise DatasetError(f"{path}: output column {fmt.output!r} is not in the header {header}")
    records = [
        # +2: the header is line 1, so record 0 is on line 2
        _generic_record(rec, fmt, list(columns), columns, f"{path}: record {i} (line {i + 2})", i)
        for i, rec in enumerate(rows)
    ]
    return MetaEvalDataset(path.stem, records, tuple(columns), str(path))


LOADERS = ("summeval", "topical_chat", "d2t", "jsonl", "csv")


def load_dataset(
    kind: str,
    path: str | Path,
    references: str | Path | None = None,
    fmt: TableFormat = TableFormat(),
) -> MetaEvalDataset:
    """Load a dataset by kind name (``summeval``, ``topical_chat``, ``jsonl``, ``csv``)."""
    if kind == "summeval":
        return load_summeval(path, references)
    if references is not None:
        raise DatasetError(f"--references is only read for summeval, not {kind!r}")
    if kind == "topical_chat":
        return load_topical_chat(path)
    if kind == "d2t":
        return load_d2t(path)
    if kind == "jsonl":
        return load_jsonl(path, fmt)
    if kind == "csv":
        return load_csv(path, fmt)
    raise DatasetError(f"dataset={kind!r}: expected one of {', '.join(LOADERS)}")
