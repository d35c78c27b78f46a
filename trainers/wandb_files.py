"""Read back what an offline W&B run wrote (``WANDB_MODE=offline``), without a server.

A run directory ``wandb/offline-run-*/`` holds ``run-<id>.wandb``: a 7-byte header (``:W&B``, a
magic number, a version) and then protobuf ``Record`` messages framed as LevelDB log records
(32 KiB blocks; each chunk has a 7-byte header: crc32, length, type FULL/FIRST/MIDDLE/LAST).
Used by the tests and by ``judge-reward train`` to confirm that judge metrics reached W&B.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

BLOCK = 32 * 1024
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def _payloads(data: bytes):
    if data[:4] != b":W&B":
        raise ValueError("not a W&B transaction log (missing ':W&B' header)")
    pos, pending = HEADER, b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # the rest of a block too short for a header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        if kind == 0 and length == 0:  # zero padding at the end of a block
            pos += left
            continue
        chunk = data[pos + HEADER:pos + HEADER + length]
        pos += HEADER + length
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield pending + chunk
            pending = b""
        else:
            raise ValueError(f"unknown record chunk type {kind} at byte {pos}")


def run_file(run_dir: str | Path) -> Path:
    files = sorted(Path(run_dir).glob("run-*.wandb"))
    if not files:
        raise FileNotFoundError(f"no run-*.wandb file in {run_dir}")
    return files[0]


def _settled(path: Path, settle_s: float, timeout_s: float) -> bytes:
    """The file's bytes once its size stopped changing (wandb's service may still be flushing)."""
    deadline = time.monotonic() + timeout_s
    size = -1
    while True:
        now = path.stat().st_size
        if now == size or time.monotonic() > deadline:
            return path.read_bytes()
        size = now
        time.sleep(settle_s)


def read_history(run_dir: str | Path, settle_s: float = 0.5, timeout_s: float = 15.0) -> list[dict]:
    """Every ``wandb.log`` row of an offline run, as ``{key: value}`` dicts in logging order."""
    from wandb.proto import wandb_internal_pb2 as pb

    rows = []
    for payload in _payloads(_settled(run_file(run_dir), settle_s, timeout_s)):
        record = pb.Record()
        record.ParseFromString(payload)
        if record.WhichOneof("record_type") != "history":
            continue
        row = {}
        for item in record.history.item:
            key = item.key or "/".join(item.nested_key)
            row[key] = json.loads(item.value_json)
        rows.append(row)
    return rows


def latest_offline_run(wandb_dir: str | Path) -> Path:
    runs = sorted(Path(wandb_dir).glob("offline-run-*"), key=lambda p: p.stat().st_mtime)
    if not runs:
        raise FileNotFoundError(f"no offline-run-* directory in {wandb_dir}")
    return runs[-1]


def finish_run() -> Path:
    """Finish the active W&B run and return its directory (``.../offline-run-*``)."""
    import wandb

    if wandb.run is None:
        raise RuntimeError("no active W&B run to finish")
    run_dir = Path(wandb.run.dir).parent
    wandb.finish()
    return run_dir
