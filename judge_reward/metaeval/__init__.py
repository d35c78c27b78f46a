"""Meta-evaluation: how well do metric (judge) scores agree with human judgments?

* :mod:`.correlation`: sample-, dataset- and system-level Pearson / Spearman / Kendall.
* :mod:`.significance`: group bootstrap CIs, Williams test, paired bootstrap and permutation tests.
* :mod:`.datasets`: SummEval, Topical-Chat and generic JSONL/CSV loaders.
* :mod:`.rouge`: multi-reference ROUGE-1/2/L baselines.
* :mod:`.report`: :func:`evaluate` -> :class:`MetaEvalReport` (used by the CLI, benchmarks, callback).
* :mod:`.callback`: :class:`CorrelationCallback` for ``transformers.Trainer`` (import it from there;
  it is not imported here so that this package does not pull in transformers).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Each name loads its module on first use: the statistics pull in scipy (most of a second), which
# `judge-reward --help` and the loaders alone do not need.
_MODULE_OF = {
    "correlation": ("LEVELS", "METHODS", "correlate", "dataset_level", "drop_missing", "level_value", "per_group",
                    "sample_level", "system_level"),
    "datasets": ("DatasetError", "HumanRatedItem", "MetaEvalDataset", "TableFormat", "load_csv", "load_dataset",
                 "load_jsonl", "load_references", "load_summeval", "load_topical_chat"),
    "report": ("AspectResult", "Cell", "Comparison", "MetaEvalConfig", "MetaEvalReport", "evaluate"),
    "significance": ("Interval", "PairedResult", "WilliamsResult", "bootstrap_ci", "paired_bootstrap_test",
                     "permutation_test", "williams_t", "williams_test"),
}
_SOURCE = {name: module for module, names in _MODULE_OF.items() for name in names}

if TYPE_CHECKING:
    from .correlation import (LEVELS, METHODS, correlate, dataset_level, drop_missing, level_value, per_group,
                              sample_level, system_level)
    from .datasets import (DatasetError, HumanRatedItem, MetaEvalDataset, TableFormat, load_csv, load_dataset,
                           load_jsonl, load_references, load_summeval, load_topical_chat)
    from .report import AspectResult, Cell, Comparison, MetaEvalConfig, MetaEvalReport, evaluate
    from .significance import (Interval, PairedResult, WilliamsResult, bootstrap_ci, paired_bootstrap_test,
                               permutation_test, williams_t, williams_test)


def __getattr__(name: str):
    module = _SOURCE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


__all__ = sorted(_SOURCE)
