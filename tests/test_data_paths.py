"""Data paths: an explicit value, then $JUDGE_REWARD_DATA, then ../shared/data; errors list what was tried."""

from pathlib import Path

import pytest

from judge_reward.aspects import CONFIG_DIR, ConfigError
from judge_reward.data import DataNotFoundError, data_roots, resolve_data_path


@pytest.fixture
def nowhere(tmp_path, monkeypatch):
    """A working directory and a checkout with no ../shared/data beside them, and no $JUDGE_REWARD_DATA."""
    work = tmp_path / "a" / "work"
    work.mkdir(parents=True)
    (tmp_path / "b" / "checkout").mkdir(parents=True)
    (tmp_path / "b" / "checkout" / "pyproject.toml").write_text("")
    monkeypatch.chdir(work)
    monkeypatch.delenv("JUDGE_REWARD_DATA", raising=False)
    monkeypatch.setattr("judge_reward.data.CHECKOUT", tmp_path / "b" / "checkout")
    return work


def _data(root: Path) -> Path:
    (root / "summeval").mkdir(parents=True)
    (root / "summeval" / "summeval.json").write_text("[]")
    return root


def test_an_explicit_path_that_exists_is_used_as_given(tmp_path, monkeypatch):
    path = _data(tmp_path / "mine") / "summeval" / "summeval.json"
    monkeypatch.setenv("JUDGE_REWARD_DATA", str(_data(tmp_path / "env")))
    assert resolve_data_path(path) == path
    assert resolve_data_path(str(path), "ignored") == path


def test_an_explicit_absolute_path_that_does_not_exist_is_an_error(tmp_path):
    with pytest.raises(DataNotFoundError, match=r"data.summeval: no file at '/nonexistent/x.json'$"):
        resolve_data_path("/nonexistent/x.json", what="data.summeval")
    assert issubclass(DataNotFoundError, ConfigError)


def test_the_environment_variable_comes_before_shared_data(tmp_path, monkeypatch):
    env = _data(tmp_path / "env")
    _data(tmp_path / "shared" / "data")
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    monkeypatch.setenv("JUDGE_REWARD_DATA", str(env))
    assert resolve_data_path(None, "summeval", "summeval.json") == env / "summeval" / "summeval.json"
    assert resolve_data_path("summeval/summeval.json") == env / "summeval" / "summeval.json"  # relative: under the root
    monkeypatch.delenv("JUDGE_REWARD_DATA")
    found = resolve_data_path(None, "summeval", "summeval.json")
    assert found.resolve() == (tmp_path / "shared" / "data" / "summeval" / "summeval.json").resolve()


def test_the_error_lists_every_path_tried(nowhere, monkeypatch):
    with pytest.raises(DataNotFoundError) as err:
        resolve_data_path("summeval/summeval.json", what="data.summeval")
    message = str(err.value)
    assert message.startswith("data.summeval: no file at 'summeval/summeval.json'")
    for root in data_roots():
        assert str(root / "summeval" / "summeval.json") in message
    assert str(nowhere.parent / "shared" / "data" / "summeval" / "summeval.json") in message  # ../ of the cwd
    assert str(nowhere.parents[1] / "b" / "shared" / "data" / "summeval" / "summeval.json") in message  # ../ of the checkout
    assert "set JUDGE_REWARD_DATA" in message
    monkeypatch.setenv("JUDGE_REWARD_DATA", str(nowhere / "env"))
    with pytest.raises(DataNotFoundError, match=r"env/zhang2023'.*JUDGE_REWARD_DATA=.*has no such entry"):
        resolve_data_path(None, "zhang2023")


def test_shipped_configs_hold_no_absolute_paths():
    import yaml

    def strings(node):
        if isinstance(node, dict):
            for v in node.values():
                yield from strings(v)
        elif isinstance(node, list):
            for v in node:
                yield from strings(v)
        elif isinstance(node, str):
            yield node

    files = sorted(CONFIG_DIR.rglob("*.yaml"))
    assert len(files) >= 16
    for path in files:
        for value in strings(yaml.safe_load(path.read_text())):
            assert not value.startswith(("/", "~")) and "/work/" not in value, (path, value)
