"""The docstring examples (``>>>``) in the library run and print what they say: a formula's doctest
that drifted from the code fails here."""

import doctest
import importlib
import pkgutil

import pytest

import judge_reward

MODULES = sorted(m.name for m in pkgutil.walk_packages(judge_reward.__path__, "judge_reward.")
                 if not m.name.endswith("__main__"))


def test_the_walk_finds_the_modules_with_examples():
    assert {"judge_reward.scoreboard", "judge_reward.methods.base", "judge_reward.guards"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} docstring examples failed (run pytest --doctest-modules {name.replace('.', '/')}.py)"
