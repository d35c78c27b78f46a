"""The judge: a backend, an aspect set, a scoring method and a cache, built from one YAML file.

Data path: items -> method's prompt builder -> backend -> Score per (item, aspect). A judge config
maps one-to-one onto :class:`JudgeConfig`::

    backend: {kind: hf, model: embedded:gemma3-270m, dtype: auto}
    aspects_file: summeval            # built-in name or path
    aspects: [coherence, fluency]     # default: all aspects in the file
    method: gptscore                  # gptscore | geval | rating
    gptscore: {direction: src_hypo}
    geval: {mode: exact, steps: manual}
    rating: {style: rate_explain, n: 20}
    cache: {memory: true, path: null}
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Sequence

from .aspects import Aspect, AspectSet, load_aspects
from .config import ConfigError, Section, build_section, check_known_fields, load_section, resolve_config_path  # noqa: F401
from .backends.base import JudgeBackend
from .cache import NOT_CACHED, CacheConfig, JudgmentCache, judgment_key
from .methods.base import Item, Score
from .methods.geval import GEval, GEvalConfig
from .methods.gptscore import GPTScore, GPTScoreConfig
from .reward_config import RewardConfig
from .validated import ValidatedWith

METHODS = ("gptscore", "geval", "rating")
BACKENDS = ("hf", "openai")


@dataclass
class JudgeConfig(Section):
    """Everything that defines a judge (see the module docstring for the YAML form)."""

    backend: dict = field(default_factory=lambda: {"kind": "hf"})
    """``kind: hf`` (:class:`~judge_reward.backends.hf.HFBackendConfig` fields) or ``kind: openai``."""
    aspects_file: str = "summeval"
    aspects: Optional[list[str]] = None
    method: Literal[METHODS] = "gptscore"
    gptscore: Optional[dict] = field(default_factory=dict)
    geval: Optional[dict] = field(default_factory=dict)
    rating: Optional[dict] = field(default_factory=dict)
    cache: Optional[dict] = field(default_factory=dict)
    reward: Optional[dict] = field(default_factory=dict)
    """How scores become one reward (:class:`~judge_reward.reward.RewardConfig` fields: aspects,
    weights, normalise, partial, guards); what ``judge-reward score``, the service and the TRL reward
    functions built from this config all return."""
    validated_with: Optional[ValidatedWith] = None
    """The judge the reward was validated with (:class:`ValidatedWith`); ``None``: not recorded."""

    source_file: Optional[str] = field(default=None, init=False, repr=False, compare=False)
    """The YAML file this config was read from (errors found later name it too)."""

    @classmethod
    def load(cls, path_or_config: str | Path | dict | "JudgeConfig") -> "JudgeConfig":
        """A judge config from a YAML path or built-in name, a mapping, or a JudgeConfig (as given)."""
        if isinstance(path_or_config, JudgeConfig):
            return path_or_config
        if isinstance(path_or_config, dict):
            return build_section(cls, path_or_config, "judge config")
        if isinstance(path_or_config, (str, Path)):
            return cls.from_yaml(path_or_config)
        raise ConfigError(f"expected a judge config: a YAML path or built-in name, a mapping or a JudgeConfig; "
                          f"got {path_or_config!r:.80}", field="judge")

    @classmethod
    def from_yaml(cls, path: str | Path) -> "JudgeConfig":
        path = resolve_config_path(path, "judges")
        config = load_section(cls, path, "judges")
        config.source_file = str(path)
        return config

    def check(self) -> None:
        for name in ("gptscore", "geval", "rating", "cache", "reward"):  # an empty YAML section reads as null
            if getattr(self, name) is None:
                setattr(self, name, {})
        kind = self.backend.get("kind", "hf")
        if kind not in BACKENDS:
            raise ConfigError(f"unknown value {kind!r}; choose one of {BACKENDS}", field="backend.kind")
        build_section(RewardConfig, self.reward, "reward")  # a bad reward section fails when the config loads

    def validate(self, methods: Sequence[str] = ()) -> list[Aspect]:
        """Check everything a :class:`Judge` needs except the model (which takes seconds to minutes to
        load): the fields changed since construction, the aspects, the sections of ``self.method`` and
        of ``methods``, the cache and the backend sections. Returns the selected aspects."""
        try:
            self.__post_init__()  # fields changed since construction are checked again
            aspects = load_aspects(self.aspects_file).select(self.aspects)
            for name in dict.fromkeys([self.method, *methods]):
                build_method(name, self)
            build_section(CacheConfig, self.cache, "cache")
            backend_section(self.backend)
        except ConfigError as err:
            raise err.within(file=self.source_file or "") from None
        return aspects


def backend_section(spec: dict):
    """(backend class, its validated config) for a ``backend:`` mapping; nothing is loaded."""
    spec = dict(spec)
    kind = spec.pop("kind", "hf")
    if kind == "hf":
        from .backends.hf import HFBackend, HFBackendConfig
        from .backends.loading import device_problem, model_spec_problem

        config = build_section(HFBackendConfig, spec, "backend")
        for name, check in (("model", model_spec_problem), ("device", device_problem)):
            problem = check(getattr(config, name))
            if problem:
                raise ConfigError(problem, field=f"backend.{name}")
        return HFBackend, config
    from .backends.openai_compat import OpenAIBackend, OpenAIBackendConfig

    return OpenAIBackend, build_section(OpenAIBackendConfig, spec, "backend")


def build_backend(spec: dict) -> JudgeBackend:
    backend_cls, config = backend_section(spec)
    return backend_cls(config)


def build_method(name: str, config: JudgeConfig):
    if name == "gptscore":
        return GPTScore(build_section(GPTScoreConfig, config.gptscore, "gptscore"))
    if name == "geval":
        # The shared layout lists the judge's aspects in every prompt (one prefix for all of them).
        return GEval(build_section(GEvalConfig, config.geval, "geval"),
                     panel=load_aspects(config.aspects_file).select(config.aspects))
    if name == "rating":
        from .methods.rating import RatingConfig, RatingMethod

        return RatingMethod(build_section(RatingConfig, config.rating, "rating"))
    raise ConfigError(f"method: unknown value {name!r}; choose one of {METHODS}")


class JudgeSections:
    """What a judge reads of its config, without a backend: its aspects and its methods (built from
    their sections once, on first use). :func:`~judge_reward.reward.check_reward` runs the reward's checks on
    it before any model loads; :class:`Judge` adds the backend and the cache."""

    def __init__(self, config: JudgeConfig):
        self.config = config
        self.aspect_set: AspectSet = load_aspects(config.aspects_file)
        self.aspects: list[Aspect] = self.aspect_set.select(config.aspects)
        self._methods: dict[str, Any] = {}

    def method(self, name: str | None = None):
        name = name or self.config.method
        if name not in self._methods:
            self._methods[name] = build_method(name, self.config)
        return self._methods[name]


class Judge(JudgeSections):
    """Scores items on aspects. ``score`` never raises for a bad item: it returns a failed Score."""

    def __init__(self, config: JudgeConfig | None = None, backend: JudgeBackend | None = None):
        config = config or JudgeConfig()
        if backend is None:
            config.validate()  # every section (backend, methods, cache) before the model loads
        super().__init__(config)
        self.backend = backend if backend is not None else build_backend(self.config.backend)
        self.cache = JudgmentCache(build_section(CacheConfig, self.config.cache, "cache"))
        self.method(self.config.method)  # validate the default method's section now, not mid-run
        self.failures: Counter[str] = Counter()
        self.calls = 0
        self.seconds = 0.0

    @classmethod
    def from_config(cls, path_or_config: str | Path | dict | JudgeConfig, backend: JudgeBackend | None = None) -> "Judge":
        return cls(JudgeConfig.load(path_or_config), backend)

    @property
    def aspect_names(self) -> list[str]:
        return [a.name for a in self.aspects]

    def score(
        self, items: Sequence[Item], aspects: Sequence[str] | None = None, method: str | None = None
    ) -> list[dict[str, Score]]:
        """Score every item on every aspect; result ``i`` maps aspect name to the Score of ``items[i]``."""
        start = time.perf_counter()
        items = [self._check_item(it, k) for k, it in enumerate(items)]
        chosen = [self.aspect_set.get(a) for a in aspects] if aspects else self.aspects
        scorer = self.method(method)
        fingerprint = scorer.fingerprint()
        results: list[dict[str, Score]] = [{} for _ in items]
        work = []  # (aspect, cache keys, indices of the items not in the cache)
        for aspect in chosen:
            # a task's template changed: its old judgments are stale
            aspect_key = aspect.content_hash() + scorer.prompt_revision(aspect)
            keys = [judgment_key(self.backend.model_id, fingerprint, aspect_key, it) for it in items]
            todo = []
            for k, key in enumerate(keys):
                hit = self.cache.get(key)
                if hit is not None:
                    results[k][aspect.name] = hit
                else:
                    todo.append(k)
            if todo:
                work.append((aspect, keys, todo))
        # A method that can score several aspects in one backend call does (their rows share prefixes).
        batches = [(aspect, [items[k] for k in todo]) for aspect, _, todo in work]
        if self.cache.config.replay_only:
            fresh_all = [[Score.failure(NOT_CACHED) for _ in batch] for _, batch in batches]
        elif hasattr(scorer, "score_aspects"):
            fresh_all = scorer.score_aspects(self.backend, batches) if batches else []
        else:
            fresh_all = [scorer.score(self.backend, aspect, batch) for aspect, batch in batches]
        for (aspect, keys, todo), fresh in zip(work, fresh_all):
            for k, score in zip(todo, fresh):
                results[k][aspect.name] = score
                self.cache.put(keys[k], score)
                if score.value is None:
                    self.failures[score.reason or "unknown"] += 1
        self.calls += 1
        self.seconds += time.perf_counter() - start
        return results

    def sentence_end(self, items: Sequence[Item], aspect: str | None = None) -> list[Score]:
        """GPTScore's :meth:`~judge_reward.methods.gptscore.GPTScore.sentence_end` for each item (with
        ``aspect``'s prompt, default the first), through the judge's cache; failures are counted."""
        items = [self._check_item(it, k) for k, it in enumerate(items)]
        chosen = self.aspect_set.get(aspect) if aspect else self.aspects[0]
        scorer = self.method("gptscore")
        fingerprint = "sentence_end/" + scorer.context_fingerprint()
        keys = [judgment_key(self.backend.model_id, fingerprint, chosen.content_hash(), it) for it in items]
        results: list[Score | None] = [self.cache.get(k) for k in keys]
        todo = [k for k, hit in enumerate(results) if hit is None]
        if todo:
            start = time.perf_counter()
            fresh = ([Score.failure(NOT_CACHED) for _ in todo] if self.cache.config.replay_only
                     else scorer.sentence_end(self.backend, chosen, [items[k] for k in todo]))
            for k, score in zip(todo, fresh):
                results[k] = score
                self.cache.put(keys[k], score)
                if score.value is None:
                    self.failures[score.reason or "unknown"] += 1
            self.seconds += time.perf_counter() - start
        return results  # type: ignore[return-value]

    @staticmethod
    def _check_item(item: Any, index: int) -> Item:
        if isinstance(item, dict):
            unknown = set(item) - {"output", "source", "reference", "id"}
            if "output" not in item:
                raise ValueError(f"items[{index}].output: required field is missing")
            if unknown:
                raise ValueError(f"items[{index}]: unknown field(s) {sorted(unknown)}")
            item = Item(**item)
        if not isinstance(item, Item):
            raise TypeError(f"items[{index}]: expected an Item or a mapping, got {type(item).__name__}")
        for name in ("output", "source"):
            if not isinstance(getattr(item, name), str):
                raise TypeError(f"items[{index}].{name}: expected text, got {getattr(item, name)!r}")
        return item

    def stats(self) -> dict:
        return {
            "calls": self.calls,
            "seconds": self.seconds,
            "failures": dict(self.failures),
            "cache_hits": self.cache.hits,
            "cache_misses": self.cache.misses,
            **({"backend": self.backend.stats()} if callable(getattr(self.backend, "stats", None)) else {}),
        }

    def describe(self) -> dict:
        return {"model": self.backend.model_id, "config": asdict(self.config)}
