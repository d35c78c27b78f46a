"""Meta-evaluation: how well do metric (judge) scores agree with human judgments?

* :mod:`.correlation`: sample-, dataset- and system-level Pearson / Spearman / Kendall.
* :mod:`.significance`: group bootstrap CIs, Williams test, paired bootstrap and permutation tests.
* :mod:`.datasets`: SummEval, Topical-Chat and generic JSONL/CSV loaders.
* :mod:`.rouge`: multi-reference ROUGE-1/2/L baselines.
* :mod:`.report`: :func:`evaluate` -> :class:`MetaEvalReport` (used by the CLI, benchmarks, callback).
* :mod:`.callback`: :class:`CorrelationCallback` for ``transformers.Trainer`` (import it from there;
  it is not imported here so that this package does not pull in transformers).
"""

from .correlation import (
    LEVELS,
    METHODS,
    correlate,
    dataset_level,
    drop_missing,
    level_value,
    per_group,
    sample_level,
    system_level,
)
from .datasets import (
    DatasetError,
    HumanRatedItem,
    MetaEvalDataset,
    TableFormat,
    load_csv,
    load_dataset,
    load_jsonl,
    load_references,
    load_summeval,
    load_topical_chat,
)
from .report import AspectResult, Cell, Comparison, MetaEvalConfig, MetaEvalReport, evaluate
from .significance import (
    Interval,
    PairedResult,
    WilliamsResult,
    bootstrap_ci,
    paired_bootstrap_test,
    permutation_test,
    williams_t,
    williams_test,
)

__all__ = [
    "LEVELS", "METHODS", "AspectResult", "Cell", "Comparison", "DatasetError", "HumanRatedItem", "Interval",
    "MetaEvalConfig", "MetaEvalDataset", "MetaEvalReport", "PairedResult", "TableFormat", "WilliamsResult",
    "bootstrap_ci", "correlate", "dataset_level", "drop_missing", "evaluate", "level_value", "load_csv",
    "load_dataset", "load_jsonl", "load_references", "load_summeval", "load_topical_chat", "paired_bootstrap_test",
    "per_group", "permutation_test", "sample_level", "system_level", "williams_t", "williams_test",
]
