"""verl's own reward loop (verl 0.9.1, CPU) scoring samples with judge_reward.trainers.verl on a real service.

verl pins transformers below this project's floor, so this runs in a separate environment that has
verl and judge-reward installed ``--no-deps`` (the adapter needs only its HTTP client there), while
``judge-reward serve`` runs from the project's own environment, named by ``JUDGE_REWARD_SERVE_PYTHON``
(.ci/run builds both)::

    JUDGE_REWARD_SERVE_PYTHON=.venv-ci/bin/python .venv-verl/bin/python -m pytest -m verl tests/test_verl_env.py

Two of verl's paths are run: its ``RewardLoopManager`` (Ray actors as reward-loop workers, the
async ``compute_score_async``; the extra keys gathered into the batch as verl does in training)
and one ``RewardLoopWorker`` in this process (the plain ``compute_score`` in verl's thread pool).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.verl

ROOT = Path(__file__).resolve().parents[1]
ARTICLE = "The council met on Tuesday. It approved a new park and a cycle lane beside the river."
RESPONSES = ["The council approved a park.", "A cycle lane was approved.", "The council met on Tuesday.",
             "A park and a lane by the river.", "", "It approved a new park."]  # "": the judge cannot score it
NEUTRAL = -1.0
# Writes the tiny judge (a random char-level Llama) with the serving environment's transformers.
WRITE_JUDGE = """
import json, sys
sys.path[:0] = [TESTS]
from tiny_models import make_model, make_tokenizer
out = sys.argv[1]
tok = make_tokenizer("char")
make_model(tok, "llama", seed=3).save_pretrained(out + "/model")
tok.save_pretrained(out + "/model")
open(out + "/judge.yaml", "w").write(
    "backend: {kind: hf, model: %s, device: cpu, dtype: float32}\\n"
    "aspects_file: summeval\\naspects: [coherence]\\nmethod: geval\\ncache: {memory: false}\\n" % json.dumps(out + "/model"))
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """``judge-reward serve`` from the project's environment on a free loopback port; yields its URL."""
    # verl's wheel installs a top-level `tests` package of its own, so the doubles are imported from tests/
    from doubles.servers import free_port, wait_ready

    python = os.environ.get("JUDGE_REWARD_SERVE_PYTHON")
    if not python:
        pytest.fail("JUDGE_REWARD_SERVE_PYTHON: not set; name the python of an environment with judge-reward's "
                    "dependencies (e.g. .venv-ci/bin/python), which serves the judge")
    work = tmp_path_factory.mktemp("judge")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    subprocess.run([python, "-c", WRITE_JUDGE.replace("TESTS", repr(str(ROOT / "tests"))), str(work)], check=True, env=env)
    port, log = free_port(), work / "server.log"
    proc = subprocess.Popen([python, "-m", "judge_reward.cli", "serve", "--config", str(work / "judge.yaml"),
                             "--port", str(port), "--max-wait-ms", "50", "--log-level", "warning"],
                            cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc, log, timeout=300)
        yield url
    finally:
        proc.terminate()
        proc.wait(60)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    """The policy's tokenizer (the tiny char tokenizer, built with verl's transformers)."""
    from tiny_models import make_tokenizer

    path = tmp_path_factory.mktemp("policy")
    make_tokenizer("char").save_pretrained(path)
    return path


def verl_config(tokenizer_dir: Path, name: str, urls: list[str], num_workers: int):
    """verl's own ``reward`` section (its reward.yaml defaults) pointing at the adapter."""
    import verl
    from omegaconf import OmegaConf

    reward = OmegaConf.load(Path(verl.__file__).parent / "trainer" / "config" / "reward" / "reward.yaml")
    reward.num_workers = num_workers
    reward.custom_reward_function.path = "pkg://judge_reward.trainers.verl"
    reward.custom_reward_function.name = name
    # what `+reward.custom_reward_function.reward_kwargs.<key>=...` adds on verl's command line
    reward.custom_reward_function.reward_kwargs = {"urls": urls, "aspects": ["coherence"], "neutral_score": NEUTRAL}
    return OmegaConf.create({"actor_rollout_ref": {"model": {"path": str(tokenizer_dir), "tokenizer_path": None}},
                             "reward": reward})


def batch(tokenizer_dir: Path):
    """A rollout batch as verl's trainer hands it to the reward loop: left-padded prompts, right-padded responses."""
    import numpy as np
    import torch
    from tensordict import TensorDict
    from transformers import AutoTokenizer

    from verl import DataProto

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    pad = tok.pad_token_id
    prompt = tok("Summarise: " + ARTICLE, add_special_tokens=False)["input_ids"][-24:]
    responses = [tok(r, add_special_tokens=False)["input_ids"] for r in RESPONSES]
    width = max(map(len, responses))
    prompts = torch.tensor([prompt] * len(responses))
    resp = torch.tensor([ids + [pad] * (width - len(ids)) for ids in responses])
    mask = torch.cat([torch.ones_like(prompts), torch.tensor([[1] * len(ids) + [0] * (width - len(ids))
                                                              for ids in responses])], dim=1)
    n = len(responses)
    return DataProto(
        batch=TensorDict({"prompts": prompts, "responses": resp, "attention_mask": mask,
                          "input_ids": torch.cat([prompts, resp], dim=1)}, batch_size=n),
        non_tensor_batch={
            "data_source": np.array(["news"] * n, dtype=object),
            "reward_model": np.array([{"ground_truth": None, "style": "model"}] * n, dtype=object),
            "extra_info": np.array([{"source": ARTICLE, "index": k} for k in range(n)], dtype=object),
        },
    )


def direct_rewards(url: str) -> list[float | None]:
    import httpx

    body = {"items": [{"source": ARTICLE, "output": r} for r in RESPONSES], "aspects": ["coherence"], "details": False}
    return [res["reward"] for res in httpx.post(url + "/v1/score", json=body, timeout=60).json()["results"]]


def check(rewards: list[float], extra: dict, want: list[float | None]) -> None:
    failed = [w is None for w in want]
    assert failed == [r == "" for r in RESPONSES]
    assert list(extra["judge_ok"]) == [0.0 if f else 1.0 for f in failed]
    for got, w, info_fail in zip(rewards, want, extra["judge_failure"]):
        if w is None:
            assert got == NEUTRAL and "empty" in info_fail
        else:
            assert got == pytest.approx(w, abs=1e-5) and info_fail == ""
    assert [r is None for r in extra["judge_reward"]] == failed
    assert [v is None for v in extra["judge/coherence"]] == failed


def test_verl_reward_loop_manager_with_ray_workers(service, tokenizer_dir):
    """verl's RewardLoopManager: 2 Ray reward-loop workers, a down replica beside the live one."""
    import ray

    from doubles.servers import free_port
    from verl.experimental.reward_loop import RewardLoopManager
    from verl.trainer.ppo.metric_utils import process_validation_metrics
    from verl.trainer.ppo.reward import extract_reward

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    down = f"http://127.0.0.1:{free_port()}"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}})
    try:
        manager = RewardLoopManager(verl_config(tokenizer_dir, "compute_score_async", [down, service], 2))
        data = batch(tokenizer_dir)
        out = manager.compute_rm_score(data)
    finally:
        ray.shutdown()
    reward_tensor, extra = extract_reward(out)
    rewards = reward_tensor.sum(dim=1).tolist()  # verl puts the score on the last response token
    want = direct_rewards(service)
    check(rewards, extra, want)
    assert set(out.meta_info["reward_extra_keys"]) == {"score", "judge_ok", "judge_failure", "judge_reward",
                                                       "judge/coherence", "judge_guard_penalty"}
    # verl's validation metrics average the numeric keys (judge_ok: the judged share) and skip the text ones.
    metrics = process_validation_metrics(["news"] * len(RESPONSES), [str(k) for k in range(len(RESPONSES))],
                                         {k: list(v) for k, v in extra.items()})
    assert metrics["news"]["judge_ok"]["mean@1"] == pytest.approx(5 / 6)
    assert "judge_failure" not in metrics["news"]
    print(json.dumps({"verl": __import__("verl").__version__, "rewards": rewards}))


def test_verl_reward_loop_worker_with_the_plain_compute_score(service, tokenizer_dir):
    """One RewardLoopWorker in this process: verl's naive manager runs compute_score in its thread pool."""
    from verl.experimental.reward_loop import RewardLoopWorker

    worker = RewardLoopWorker(verl_config(tokenizer_dir, "compute_score", [service], 1))
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(batch(tokenizer_dir)))
    rewards = [o["reward_score"] for o in outputs]
    extra = {k: [o["reward_extra_info"][k] for o in outputs] for k in outputs[0]["reward_extra_info"]}
    assert all(o["reward_extra_info"].keys() == outputs[0]["reward_extra_info"].keys() for o in outputs)
    check(rewards, extra, direct_rewards(service))
