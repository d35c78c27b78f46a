"""Does an LLM judge prefer LLM-written text, and does RL training with it reinforce that?

* :func:`run_audit` reproduces the analysis of the G-Eval paper (Section 4, Figure 2) on the
  Zhang et al. (2023) human judgements, for any judge config, with the statistics a reviewer asks
  for (``judge-reward audit --config ... --out reports/<name>/``).
* :class:`SelfReinforcementCallback` audits the policy with the training judge during TRL
  training and flags (logs, warns or stops) when the judge's preference for the policy's text over
  human text keeps growing while its agreement with people does not.
"""

from .audit import AuditConfig, WandbConfig, build_judge, run_audit
from .data import DataError, Study, load_held_out_articles, load_zhang2023
from .monitor import (
    MonitorData,
    RuleConfig,
    SelfReinforcementCallback,
    SelfReinforcementConfig,
    SelfReinforcementWarning,
    check_rule,
)
from .stats import PairedRows, StatsConfig, analyse

__all__ = [
    "AuditConfig", "DataError", "MonitorData", "PairedRows", "RuleConfig", "SelfReinforcementCallback",
    "SelfReinforcementConfig", "SelfReinforcementWarning", "StatsConfig", "Study", "WandbConfig", "analyse",
    "build_judge", "check_rule", "load_held_out_articles", "load_zhang2023", "run_audit",
]
