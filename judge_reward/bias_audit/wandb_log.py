"""W&B logging for audits.

An audit becomes one W&B run (``job_type="bias-audit"``): every number of the report as a scalar
under ``audit/<level>/<score>/<category>/<statistic>`` (also in the run summary), the figure as an
image, and the per-category table. With ``WANDB_MODE=offline`` the run is written locally and can
be synced later (the tests read it back with ``tests/wandb_offline.py``).
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
