"""Run a server process on loopback: a free port, and waiting until it answers.

Shared by the tests and the benchmarks that start ``judge-reward serve`` (or another server) as a
subprocess. Needs ``httpx`` (the ``serve`` and ``openai`` extras).
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, log_path: Path, timeout: float = 180.0, probe: str = "/ready") -> None:
    """Poll ``url + probe`` until it answers 200; fail with the server's log if it exits or times out."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with code {proc.returncode} before it was ready:\n"
                               f"{Path(log_path).read_text()[-4000:]}")
        try:
            if httpx.get(url + probe, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"server not ready after {timeout:.0f}s:\n{Path(log_path).read_text()[-4000:]}")
        time.sleep(0.2)
