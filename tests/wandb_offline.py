"""Read back what an offline W&B run wrote (``WANDB_MODE=offline``), without a server: the tests'
check that each W&B logger's numbers reached W&B. wandb has no public reader of offline runs
(``wandb sync`` needs a server), so this minimal one lives with the tests; the package itself reads
what a trainer logged from ``trainer.state.log_history``.

A run folder ``wandb/offline-run-*/`` holds ``run-<id>.wandb``: a 7-byte header (``:W&B``, a magic
number, a version), then serialised ``wandb_internal_pb2.Record`` messages framed as LevelDB log
records (32 KiB blocks; each chunk has a 7-byte header: crc32c, length, type FULL/FIRST/MIDDLE/LAST).

wandb-core writes the file from its own process and may still be writing it for a moment after
``wandb.finish()`` returns; a finished run's file ends with its ``exit`` record, after every history
row and summary update. So readers of a finished run wait for that record
(:func:`wait_for_offline_run`, :func:`read_history`), and readers of a live one for a condition on
what was logged.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

_BLOCK, _HEADER = 32 * 1024, 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _payloads(data: bytes):
    if data[:4] != b":W&B":
        raise ValueError(f"not a W&B run file (header {data[:4]!r})")
    pos, pending = _HEADER, b""
    while pos + _HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:  # the rest of a block too short for a header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + _HEADER])
        if kind == 0 and length == 0:  # zero padding up to the next block
            pos += left
            continue
        if pos + _HEADER + length > len(data):
            return  # a chunk still being written: the caller reads again later
        chunk = data[pos + _HEADER:pos + _HEADER + length]
        pos += _HEADER + length
        if kind == _FULL:
            yield chunk
        elif kind == _FIRST:
            pending = chunk
        elif kind == _MIDDLE:
            pending += chunk
        elif kind == _LAST:
            yield pending + chunk
            pending = b""
        else:
            raise ValueError(f"unknown record chunk type {kind} at byte {pos}")


def _run_file(run_dir: Path) -> Path:
    files = sorted(run_dir.glob("run-*.wandb"))
    if not files:
        raise FileNotFoundError(f"{run_dir}: no run-*.wandb file (is this an offline run folder?)")
    return files[0]


def _key(item) -> str:
    return item.key or "/".join(item.nested_key)


def _parse(data: bytes) -> dict:
    from wandb.proto import wandb_internal_pb2 as pb

    history, summary, finished = [], {}, False
    for payload in _payloads(data):
        record = pb.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "history":
            history.append({_key(i): json.loads(i.value_json) for i in record.history.item})
        elif kind == "summary":
            for i in record.summary.update:
                summary[_key(i)] = json.loads(i.value_json)
            for i in record.summary.remove:
                summary.pop(_key(i), None)
        elif kind == "exit":
            finished = True
    return {"history": history, "summary": summary, "finished": finished}


def read_offline_run(run_dir: str | Path) -> dict:
    """``{"history": [one dict per log call], "summary": {...}, "finished": bool}`` of an offline run
    folder, as written so far (``finished``: its exit record is there, so everything else is too)."""
    return _parse(_run_file(Path(run_dir)).read_bytes())


def wait_for_offline_run(run_dir: str | Path, ready=None, timeout: float = 60.0) -> dict:
    """Re-read an offline run until ``ready(run)`` holds (``run`` as :func:`read_offline_run` gives
    it; by default: the run is finished). Returns the last read either way: the caller's assertions
    say what was missing."""
    ready = ready or (lambda run: run["finished"])
    deadline = time.monotonic() + timeout
    while True:
        run = read_offline_run(run_dir)
        if ready(run) or time.monotonic() > deadline:
            return run
        time.sleep(0.2)


def read_history(run_dir: str | Path, timeout_s: float = 30.0) -> list[dict]:
    """Every ``wandb.log`` row of a finished offline run, read once its exit record is written."""
    return wait_for_offline_run(run_dir, timeout=timeout_s)["history"]


def find_offline_runs(root: str | Path) -> list[Path]:
    """Offline run folders under ``root`` (a WANDB_DIR or an output folder), oldest first."""
    return sorted(Path(root).rglob("offline-run-*"), key=lambda p: p.name)


def finish_run() -> Path:
    """Finish the active W&B run and return its folder (``.../offline-run-*``)."""
    import wandb

    if wandb.run is None:
        raise RuntimeError("no active W&B run to finish")
    run_dir = Path(wandb.run.dir).parent
    wandb.finish()
    return run_dir
