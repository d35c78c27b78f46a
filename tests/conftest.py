import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The benchmark data folder ($JUDGE_REWARD_DATA, else ../shared/data; see judge_reward.data)."""
    from judge_reward.data import DataNotFoundError, resolve_data_path

    try:
        return resolve_data_path()
    except DataNotFoundError as err:
        pytest.fail(f"benchmark data not found: {err}")


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
