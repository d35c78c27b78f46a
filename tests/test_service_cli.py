"""``judge-reward serve`` as users run it: a subprocess, a judge YAML, SIGTERM with a request in flight."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from judge_reward.judge import Judge
from judge_reward.methods.base import Item
from tests.doubles.servers import free_port, wait_ready
from tiny_models import make_model, make_tokenizer

ROOT = Path(__file__).resolve().parents[1]
ARTICLE = "The council met on Tuesday. It approved a new park and a cycle lane beside the river."


@pytest.fixture(scope="module")
def judge_yaml(tmp_path_factory) -> Path:
    """A judge YAML whose backend is the tiny char-level Llama saved to disk."""
    work = tmp_path_factory.mktemp("tiny_judge")
    tok = make_tokenizer("char")
    make_model(tok, "llama", seed=3).save_pretrained(work / "model")
    tok.save_pretrained(work / "model")
    path = work / "judge.yaml"
    path.write_text(
        f"backend: {{kind: hf, model: {json.dumps(str(work / 'model'))}, device: cpu, dtype: float32}}\n"
        "aspects_file: summeval\naspects: [coherence]\nmethod: geval\ncache: {memory: false}\n"
    )
    return path


def start(args: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
    import os

    return subprocess.Popen(
        [sys.executable, "-m", "judge_reward.cli", "serve", *args], cwd=ROOT, stdout=log.open("w"),
        stderr=subprocess.STDOUT, env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )


def test_sigterm_lets_in_flight_requests_finish(judge_yaml, tmp_path):
    port, log = free_port(), tmp_path / "server.log"
    url = f"http://127.0.0.1:{port}"
    # A long batching wait keeps the request in flight when SIGTERM arrives.
    proc = start(["--config", str(judge_yaml), "--port", str(port), "--max-wait-ms", "3000", "--max-batch-size", "8"],
                 log, env={"JUDGE_REWARD_TOKEN": "t0ken"})
    try:
        wait_ready(url, proc, log)
        auth = {"Authorization": "Bearer t0ken"}
        items = [{"source": ARTICLE, "output": "The council approved a park.", "id": "p"},
                 {"source": ARTICLE, "output": "A lane.", "id": "l"}]
        answer = {}

        def in_flight():
            answer["response"] = httpx.post(url + "/v1/score", json={"items": items}, headers=auth, timeout=60)
            answer["at"] = time.monotonic()

        worker = threading.Thread(target=in_flight)
        worker.start()
        while "judge_reward_queue_items 2.0" not in httpx.get(url + "/metrics", headers=auth).text:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        sigterm_at = time.monotonic()
        refused_at = None
        while refused_at is None and time.monotonic() - sigterm_at < 5:  # the listener closes at once
            try:
                httpx.get(url + "/health", timeout=1)
                time.sleep(0.05)
            except httpx.TransportError:
                refused_at = time.monotonic()
        worker.join(60)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert refused_at is not None and refused_at < answer["at"], text  # new connections refused meanwhile
    response = answer["response"]
    assert response.status_code == 200, text
    # uvicorn finishes its graceful shutdown, then re-raises the SIGTERM it caught (exit by signal).
    assert code in (0, -signal.SIGTERM), text
    assert "Waiting for connections to close" in text and "Application shutdown complete" in text
    expected = Judge.from_config(judge_yaml).score([Item(it["output"], it["source"]) for it in items])
    got = response.json()["results"]
    assert [r["id"] for r in got] == ["p", "l"]
    for r, e in zip(got, expected):
        assert r["scores"]["coherence"]["value"] == pytest.approx(e["coherence"].value, abs=1e-6)


def test_bad_configuration_fails_before_serving(judge_yaml, tmp_path):
    absent = tmp_path / "absent.yaml"
    absent.write_text("backend: {kind: hf, model: /no/such/model}\naspects: [coherence]\n")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")  # looks like a model directory, but cannot load
    broken = tmp_path / "broken.yaml"
    broken.write_text(f"backend: {{kind: hf, model: {model}}}\naspects: [coherence]\n")
    cases = {  # name: (arguments, exit code, what the log says); started together, as each one imports torch
        "missing": (["--config", str(tmp_path / "nope.yaml")], 2, "nope.yaml"),
        "unknown": (["--config", str(judge_yaml), "--aspects", "coherence,wit"], 2, "unknown aspect 'wit'"),
        # no such model: a mistake, found before serving
        "absent": (["--config", str(absent)], 2, "backend.model: '/no/such/model' is neither"),
        # the model cannot load: the server stops instead of serving 503s
        "broken": (["--config", str(broken), "--port", str(free_port())], 1, "judge failed to load"),
    }
    running = {name: start(args, tmp_path / f"{name}.log") for name, (args, _, _) in cases.items()}
    try:
        for name, (_, code, says) in cases.items():
            assert running[name].wait(120) == code, name
            assert says in (tmp_path / f"{name}.log").read_text(), name
    finally:  # a failed case leaves no server of the others running
        for proc in running.values():
            if proc.poll() is None:
                proc.kill()
