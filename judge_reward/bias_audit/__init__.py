"""Does an LLM judge prefer LLM-written text, and does RL training with it reinforce that?

* :func:`run_audit` reproduces the analysis of the G-Eval paper (Section 4, Figure 2) on the
  Zhang et al. (2023) human judgements, for any judge config, with the statistics a reviewer asks
  for (``judge-reward audit --config ... --out reports/<name>/``).
* :class:`SelfReinforcementCallback` audits the policy with the training judge during TRL
  training and flags (logs, warns or stops) when the judge's preference for the policy's text over
  human text keeps growing while its agreement with people does not.
* :class:`RewardDivergenceCallback` watches the reward's own training batches and flags when the
  reward keeps rising while measures the policy is not trained on get worse (the judge alone,
  overlap with references, unsupported numbers and names, unfinished text, damage sensitivity).
"""

from importlib import import_module

# Lazy: the monitor pulls in transformers/TRL (seconds), which `judge-reward --help` and the
# statistics do not need. Each public name maps to the module that defines it.
_EXPORTS = {
    "AuditConfig": "audit", "WandbConfig": "audit", "build_judge": "audit", "run_audit": "audit",
    "DataError": "data", "Study": "data", "load_held_out_articles": "data", "load_zhang2023": "data",
    "MonitorData": "monitor", "RuleConfig": "monitor", "SelfReinforcementCallback": "monitor",
    "SelfReinforcementConfig": "monitor", "SelfReinforcementWarning": "monitor", "check_rule": "monitor",
    "DivergenceConfig": "divergence", "DivergenceMonitor": "divergence", "RewardDivergenceCallback": "divergence",
    "RewardDivergenceWarning": "divergence", "check_divergence": "divergence", "replay": "divergence",
    "unsupported_share": "divergence",
    "PairedRows": "stats", "StatsConfig": "stats", "analyse": "stats",
}


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'judge_reward.bias_audit' has no attribute {name!r}")
    value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = sorted(_EXPORTS)
