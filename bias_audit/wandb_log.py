"""W&B logging for audits, and reading back what an offline run wrote.

An audit becomes one W&B run (``job_type="bias-audit"``): every number of the report as a scalar
under ``audit/<level>/<score>/<category>/<statistic>`` (also in the run summary), the figure as an
image, and the per-category table. With ``WANDB_MODE=offline`` the run is written locally and can
be synced later; :func:`read_offline_run` reads such a run's history and summary back, so the
tests can check what was logged without a server.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .data import CATEGORIES


def flatten_report(report: dict) -> dict[str, float]:
    """Every scalar of the report's results, keyed by its path."""
    flat: dict[str, float] = {}

    def walk(prefix: str, node):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(f"{prefix}/{k}" if prefix else str(k), v)
        elif isinstance(node, bool):
            flat[prefix] = float(node)
        elif isinstance(node, (int, float)) and node is not None:
            flat[prefix] = float(node)

    walk("audit", report["results"])
    walk("audit/human_agreement", report["human_agreement"])
    walk("audit/runtime", {k: v for k, v in report["runtime"].items() if k != "judge_stats"})
    walk("audit/exclusions", report.get("exclusions", {}))
    flat["audit/failures_total"] = float(sum(report.get("failures", {}).values()))
    return flat


def log_audit(report: dict, paths: dict, config) -> dict:
    """Log one audit as a W&B run; returns the run's id, mode and local folder."""
    import wandb

    out_dir = Path(paths["json"]).parent
    run = wandb.init(
        project=config.project,
        entity=config.entity,
        name=config.name or report["name"],
        tags=list(config.tags),
        job_type="bias-audit",
        dir=os.environ.get("WANDB_DIR") or str(out_dir),
        config={"judge": report["judge"], "method": report["method"], "aspects": report["aspects"],
                "audit": report["config"]},
    )
    try:
        flat = flatten_report(report)
        main = report["results"]["judgement"]["mean"]["categories"]
        table = wandb.Table(columns=["category", "n", "human_mean", "llm_mean", "difference", "low", "high",
                                     "length_controlled", "p_value", "judge_prefers_llm"])
        for c in CATEGORIES:
            s = main[c]
            table.add_data(s["label"], s["n"], s["human_mean"]["value"], s["llm_mean"]["value"],
                           s["difference"]["value"], s["difference"]["low"], s["difference"]["high"],
                           s["length_controlled_difference"]["value"], s["paired_test"]["p_value"],
                           s["judge_prefers_llm"]["value"])
        run.log({**flat, "audit/figure": wandb.Image(str(paths["figure"])), "audit/categories": table})
        run.summary.update({**flat, "audit/verdict": json.dumps(report["verdict"], default=str),
                            "audit/failures": json.dumps(report.get("failures", {}))})  # by reason
        info = {"run_id": run.id, "mode": run.settings.mode, "dir": str(Path(run.dir).parent)}
    finally:
        run.finish()
    return info


# -- reading an offline run ---------------------------------------------------------------------
# A .wandb file is a LevelDB-style log: a 7-byte header (":W&B", magic, version), then 32 KiB
# blocks of records, each with a 7-byte header (crc32c, length, type: full/first/middle/last)
# around a serialised wandb_internal_pb2.Record.
_BLOCK, _HEADER = 32768, 7


def _records(path: Path):
    raw = path.read_bytes()
    if raw[:4] != b":W&B":
        raise ValueError(f"{path}: not a W&B run file (header {raw[:4]!r})")
    pos, pending = _HEADER, b""
    while pos + _HEADER <= len(raw):
        room = _BLOCK - pos % _BLOCK
        if room < _HEADER:
            pos += room  # block trailer padding
            continue
        length = int.from_bytes(raw[pos + 4:pos + 6], "little")
        kind = raw[pos + 6]
        if kind == 0 and length == 0:
            pos += room  # zero padding up to the next block
            continue
        if pos + _HEADER + length > len(raw):
            break  # a record wandb-core is still writing: the caller reads again later
        data = raw[pos + _HEADER:pos + _HEADER + length]
        pos += _HEADER + length
        if kind == 1:
            yield data
        elif kind == 2:
            pending = data
        elif kind == 3:
            pending += data
        elif kind == 4:
            yield pending + data
            pending = b""


def _key(item) -> str:
    return "/".join(item.nested_key) if item.nested_key else item.key


def read_offline_run(run_dir: str | Path) -> dict:
    """History rows (one dict per ``log`` call) and the final summary of an offline run folder."""
    from wandb.proto import wandb_internal_pb2 as pb

    run_dir = Path(run_dir)
    files = sorted(run_dir.glob("run-*.wandb"))
    if not files:
        raise FileNotFoundError(f"{run_dir}: no run-*.wandb file (is this an offline run folder?)")
    history, summary = [], {}
    for data in _records(files[0]):
        rec = pb.Record()
        rec.ParseFromString(data)
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            history.append({_key(i): json.loads(i.value_json) for i in rec.history.item})
        elif kind == "summary":
            for i in rec.summary.update:
                summary[_key(i)] = json.loads(i.value_json)
            for i in rec.summary.remove:
                summary.pop(_key(i), None)
    return {"history": history, "summary": summary}


def wait_for_offline_run(run_dir: str | Path, ready, timeout: float = 60.0) -> dict:
    """Re-read an offline run until ``ready(run)`` holds: wandb-core may still be writing the file
    for a moment after ``finish()`` returns. Returns the last read either way."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        run = read_offline_run(run_dir)
        if ready(run) or time.monotonic() > deadline:
            return run
        time.sleep(0.5)


def find_offline_runs(root: str | Path) -> list[Path]:
    """Offline run folders under ``root`` (a WANDB_DIR or an output folder), oldest first."""
    return sorted(Path(root).rglob("offline-run-*"), key=lambda p: p.name)
