"""The public API of ``judge_reward``: every name in ``__all__`` resolves, and ``import judge_reward``
stays cheap (no TRL, transformers, torch, httpx, nor the trainer integration until a name asks for
it). Checked in a fresh interpreter."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HEAVY = ("trl", "transformers", "torch", "httpx", "peft", "datasets", "accelerate", "wandb", "scipy",
         "judge_reward.trainers", "judge_reward.bias_audit", "judge_reward.console", "judge_reward.service.client")

PROBE = """
import json, sys
HEAVY = %r
loaded = lambda: sorted(m for m in HEAVY if m in sys.modules)
import judge_reward
after_import = loaded()
resolved = {}
for name in judge_reward.__all__:
    value = getattr(judge_reward, name)
    resolved[name] = getattr(value, "__module__", None)
from judge_reward import JudgeReward, AsyncJudgeReward, JudgeRewardConfig
import judge_reward.trainers as trainers
same = all(getattr(trainers, n) is getattr(judge_reward, n) for n in ("JudgeReward", "AsyncJudgeReward", "JudgeRewardConfig"))
print(json.dumps({"after_import": after_import, "all": judge_reward.__all__, "resolved": resolved,
                  "dir": sorted(dir(judge_reward)), "same": same, "after_all": loaded()}))
""" % (HEAVY,)


def _probe() -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_public_api_resolves_and_imports_nothing_heavy():
    result = _probe()
    assert result["after_import"] == [], result["after_import"]
    names = result["all"]
    assert len(names) == len(set(names))
    for name in ("Judge", "Item", "Reward", "validate", "Scoreboard", "ScoreboardSettings",
                 "JudgeReward", "AsyncJudgeReward", "JudgeRewardConfig", "ServiceRewardFunction"):
        assert name in names, name
    # every public name is defined in the package itself (no re-exported third-party object)
    assert all(module and module.split(".")[0] == "judge_reward" for module in result["resolved"].values()), result["resolved"]
    assert result["resolved"]["JudgeReward"] == "judge_reward.trainers.reward"
    assert result["same"]
    assert set(names) <= set(result["dir"])
    # resolving the TRL reward functions loads the trainer integration, still not TRL itself
    assert "judge_reward.trainers" in result["after_all"] and "trl" not in result["after_all"]
