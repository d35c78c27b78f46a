"""The reward divergence monitor replayed on saved GRPO runs (docs/grpo_hacking/*/completions.jsonl),
as the docs report it: it flags the judge-alone runs within 40 steps of their exploit's onset and
stays quiet on the shipped reward's runs unless a measure the policy does not optimise degrades."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ("monitor_gptscore_alone", "monitor_geval_alone", "default_150", "default_lift", "default_lift_seed1")
# today's default, two seeds: the steps of each run's phase in which most completions ran to the
# token limit mid-sentence (the lead run on into its next sentence), and the check just after it
CUT_PASTE = {"default_lift": range(121, 141), "default_lift_seed1": range(91, 111)}


def test_replayed_monitor_flags_the_judge_alone_runs_and_only_the_default_runs_cut_phase(shared_data, tmp_path):
    out = tmp_path / "monitor.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "monitor_replay.py"), "--data", str(shared_data),
                           "--runs", *RUNS, "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = json.loads(out.read_text())
    # the judge alone: the exploit (the lead pasted until the limit cuts it; invented prose) begins
    # around step 20; flagged by step 40 at the latest
    for run in ("monitor_gptscore_alone", "monitor_geval_alone"):
        assert runs[run]["first_flag"] is not None and runs[run]["first_flag"] <= 40, run
    # the shipped default at 150 steps: the judge alone, overlap and unsupported facts all improve
    assert runs["default_150"]["flags"] == []
    # today's default, two seeds: only a cut-paste phase, where the cut share is past its level
    for run, phase in CUT_PASTE.items():
        flagged = runs[run]["flags"]
        assert flagged and all(f["step"] in phase and f["degraded"] == ["unfinished"] for f in flagged), run
        checks = {c["step"]: c for c in runs[run]["checks"]}
        assert all(checks[f["step"]]["signals"]["unfinished"]["recent"] >= 0.5 for f in flagged), run
