"""Test helpers that ship with the package: a fault-injecting OpenAI-compatible server (:mod:`.fake_openai`).

Imported lazily so that ``python -m judge_reward.testing.fake_openai`` runs the module only once.
"""

__all__ = ["FakeModel", "FakeOpenAIServer", "FakeServerConfig"]


def __getattr__(name):
    if name in __all__:
        from . import fake_openai

        return getattr(fake_openai, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
