import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SAMPLE_DATA = Path(__file__).parent / "fixtures" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The whole benchmark data folder ($JUDGE_REWARD_DATA, else ../shared/data; see judge_reward.data),
    for tests that reproduce published numbers. Without it they skip and say why, unless
    JUDGE_REWARD_REQUIRE_DATA=1 (CI, which has ../shared) makes that a failure."""
    from judge_reward.data import DataNotFoundError, resolve_data_path

    try:
        return resolve_data_path()
    except DataNotFoundError as err:
        message = f"benchmark data not found at {' or '.join(map(str, err.tried))}; set JUDGE_REWARD_DATA"
        if os.environ.get("JUDGE_REWARD_REQUIRE_DATA") == "1":
            pytest.fail(f"{message}; JUDGE_REWARD_REQUIRE_DATA=1 requires it")
        pytest.skip(message)


@pytest.fixture(scope="session")
def sample_data() -> Path:
    """A few records of the MIT/Apache-licensed sets, laid out like the data folder (tests/fixtures/README.md)."""
    return SAMPLE_DATA


@pytest.fixture(scope="session")
def gemma_backend():
    """The real embedded judge, loaded once per test session (slow tests only)."""
    from judge_reward.backends.hf import HFBackend, HFBackendConfig

    return HFBackend(HFBackendConfig(progress=False))


@pytest.fixture
def one_torch_thread(request):
    """Tiny models run faster on one thread: on a busy machine, waking a second one costs more than
    it saves. Tests marked ``slow`` (the real Gemma judge) keep every core."""
    import torch

    if request.node.get_closest_marker("slow"):
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    """W&B in offline mode writing under ``tmp_path``; yields the ``wandb`` folder it writes.

    wandb keeps its settings (the directory included) in a process-wide singleton from the first
    init, so it is torn down around the test for WANDB_DIR to apply."""
    import wandb

    wandb.teardown()
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    yield tmp_path / "wandb"
    wandb.finish()
    wandb.teardown()
