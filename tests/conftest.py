import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SHARED_DATA = Path(os.environ.get("JUDGE_REWARD_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.fail(f"benchmark data not found at {SHARED_DATA} (set JUDGE_REWARD_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def gemma_backend():
    """The real embedded judge, loaded once per test session (slow tests only)."""
    from judge_reward.backends.hf import HFBackend, HFBackendConfig

    return HFBackend(HFBackendConfig(progress=False))
