"""Where the benchmark data lives: one rule for every command, config, benchmark and test.

Nothing with human ratings ships with the package (see the README). A data path resolves, in order:

1. an explicit value (a command-line option or a config field), used as given when it exists; a
   relative value that does not exist is then looked up under each data root below, so a config
   can say ``summeval/summeval.json``;
2. ``$JUDGE_REWARD_DATA`` (the data folder);
3. ``../shared/data`` relative to the current directory;
4. ``../shared/data`` beside the repository checkout this package was imported from.

When nothing matches, :class:`DataNotFoundError` lists every path that was tried.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from .aspects import ConfigError

ENV = "JUDGE_REWARD_DATA"
CHECKOUT = Path(__file__).resolve().parents[1]
"""The folder holding this package: a repository checkout when it has a ``pyproject.toml``."""


class DataNotFoundError(ConfigError):
    """No data at any of the places tried; the message lists them, ``tried`` holds them."""

    def __init__(self, message: str, tried: list[Path]):
        super().__init__(message)
        self.tried = tried


def data_roots() -> list[Path]:
    """The data folders to look in, in order (``$JUDGE_REWARD_DATA``, then the ``../shared/data`` folders)."""
    roots = []
    if os.environ.get(ENV):
        roots.append(Path(os.environ[ENV]).expanduser())
    roots.append(Path.cwd().parent / "shared" / "data")
    if (CHECKOUT / "pyproject.toml").is_file():  # a source checkout, not an installed package
        roots.append(CHECKOUT.parent / "shared" / "data")
    unique: dict[Path, Path] = {}
    for root in roots:
        unique.setdefault(root.resolve(), root)
    return list(unique.values())


def resolve_data_path(explicit: str | Path | None = None, *parts: str, what: str = "data") -> Path:
    """The first of: ``explicit`` as given, ``<root>/<explicit>`` for a relative ``explicit``, or
    ``<root>/<parts...>`` without one, over :func:`data_roots`. ``what`` names the option or field in
    the error, which lists every path tried."""
    tried: list[Path] = []
    if explicit is not None and str(explicit) != "":
        given = Path(explicit).expanduser()
        if given.exists():
            return given
        tried.append(given)
        if given.is_absolute():
            raise DataNotFoundError(f"{what}: no file at {str(given)!r}", tried)
        parts = given.parts
    for root in data_roots():
        candidate = root.joinpath(*parts)
        if candidate.exists():
            return candidate
        tried.append(candidate)
    hint = f"set {ENV} to the data folder" if not os.environ.get(ENV) else f"{ENV}={os.environ[ENV]} has no such entry"
    first, rest = tried[0], tried[1:]
    also = f"; also tried {', '.join(repr(str(p)) for p in rest)}" if rest else ""
    raise DataNotFoundError(f"{what}: no file at {str(first)!r}{also} ({hint}, or pass a path)", tried)


def read_data_text(path: Path, error: Callable[[str], Exception] = ValueError) -> str:
    """The UTF-8 text of a data file. A missing file, a folder, bytes that are not UTF-8 or a failed
    read raise ``error(message)``, the message starting with the file (each loader passes its own
    error type, so its callers catch what they already catch)."""
    path = Path(path)
    if not path.exists():
        raise error(f"{path}: no such file")
    if path.is_dir():
        raise error(f"{path}: is a folder, not a data file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{path}: not valid UTF-8 (byte 0x{err.object[err.start]:02x} at offset {err.start})") from None
    except OSError as err:
        raise error(f"{path}: cannot read ({err.strerror or err})") from None


def read_json(path: Path, error: Callable[[str], Exception] = ValueError) -> Any:
    """A JSON data file (read as :func:`read_data_text` does); bad JSON raises ``error`` naming the
    file, line and column."""
    try:
        return json.loads(read_data_text(path, error))
    except json.JSONDecodeError as err:
        raise error(f"{path}:{err.lineno}: not valid JSON ({err.msg} at column {err.colno})") from None


def read_json_list(path: Path, error: Callable[[str], Exception] = ValueError) -> list:
    """A JSON file holding a non-empty list of records."""
    data = read_json(path, error)
    if not isinstance(data, list):
        raise error(f"{path}: expected a JSON list of records, got {type(data).__name__}")
    if not data:
        raise error(f"{path}: no records")
    return data


def read_sources(path: str | Path, error: Callable[[str], Exception] = ValueError) -> list[str]:
    """The inputs (``source`` texts) a data file holds: a JSON list of records with a ``source``
    field (or of texts), JSONL records with one, or any other file one input per line. A record
    without a text ``source`` raises ``error`` naming the file, the record and the field."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        records = [(f"{path}: record {i}", r) for i, r in enumerate(read_json_list(path, error))]
    elif suffix == ".jsonl":
        records = []
        for lineno, line in enumerate(read_data_text(path, error).splitlines(), 1):
            if line.strip():
                try:
                    records.append((f"{path}:{lineno}", json.loads(line)))
                except json.JSONDecodeError as err:
                    raise error(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
    else:
        return [line.strip() for line in read_data_text(path, error).splitlines() if line.strip()]
    sources = []
    for where, record in records:
        text = record.get("source") if isinstance(record, dict) else record
        if not isinstance(text, str):
            raise error(f"{where}: field 'source' should be text, got {text!r:.80}")
        sources.append(text)
    return sources
