"""Running the service: ``judge-reward serve`` and :func:`serve` (uvicorn, graceful shutdown)."""

from __future__ import annotations

import ipaddress
import logging
import threading
from typing import Any, Optional

import typer

from ..cli_errors import UserError, backend_options, user_errors
from .config import ServiceConfig

log = logging.getLogger(__name__)
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def judge_factory(judge_config: Any, quiet: bool = True):
    """A callable that builds the judge (run in the service's worker thread)."""
    from ..judge import Judge, JudgeConfig

    if isinstance(judge_config, JudgeConfig):
        cfg = judge_config
    elif isinstance(judge_config, dict):
        cfg = JudgeConfig(**judge_config)
    else:
        cfg = JudgeConfig.from_yaml(judge_config)
    if quiet and cfg.backend.get("kind", "hf") == "hf":
        cfg.backend.setdefault("progress", False)  # no progress bars per batch in a server log

    def build():
        return Judge(cfg)

    return build


def build_server(app, config: ServiceConfig):
    import uvicorn

    uv_config = uvicorn.Config(
        app, host=config.host, port=config.port, log_level=config.log_level,
        timeout_graceful_shutdown=config.graceful_timeout_s, limit_concurrency=config.max_connections,
        timeout_keep_alive=config.keep_alive_s,
        lifespan="on",
    )
    return uvicorn.Server(uv_config)


class ServerThread:
    """A real uvicorn server in a background thread (tests, benchmarks, notebooks)::

        with ServerThread(create_app(cfg, judge=judge), cfg) as server:
            httpx.post(server.url + "/v1/score", json=...)

    ``port=0`` picks a free port; :attr:`url` has the real one. Leaving the block shuts down
    gracefully (in-flight requests finish).
    """

    def __init__(self, app, config: ServiceConfig, ready_timeout: float = 120.0):
        self.app, self.config, self.ready_timeout = app, config, ready_timeout
        self.server = build_server(app, config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)
        self.port: int | None = None

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    def start(self, wait_ready: bool = True) -> "ServerThread":
        import time

        self.thread.start()
        deadline = time.monotonic() + self.ready_timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start on {self.config.host}:{self.config.port}")
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        if wait_ready:
            batcher = self.app.state.service.batcher
            if not batcher.wait_ready(max(0.0, deadline - time.monotonic())):
                self.stop()
                raise RuntimeError(f"the judge did not load: {batcher.error or 'timed out'}")
        return self

    def stop(self, timeout: float | None = 60.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)

    def __enter__(self) -> "ServerThread":
        return self if self.port is not None else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(judge_config: Any = "default", config: ServiceConfig | None = None, judge: Any = None) -> int:
    """Serve a judge until SIGINT/SIGTERM; in-flight requests finish first. Returns an exit code.

    ``judge_config`` is a judge YAML (path or built-in name), a mapping or a JudgeConfig; or pass a
    ready ``judge`` object. The model loads in the worker thread while ``/health`` already answers.
    """
    from .app import create_app

    config = config or ServiceConfig()
    if not _is_loopback(config.host) and config.token is None:
        log.warning("serving on %s without a token: anyone who can reach this port can use the judge", config.host)
    if judge is not None:
        app = create_app(config, judge=judge)
    else:
        app = create_app(config, judge_factory=judge_factory(judge_config))
    server = build_server(app, config)
    batcher = app.state.service.batcher
    failed = threading.Event()

    def watch_load():
        batcher.wait_ready(None)
        if batcher.error is not None:  # nothing to serve: stop instead of answering 503 forever
            log.error("judge failed to load: %s", batcher.error)
            failed.set()
            server.should_exit = True

    threading.Thread(target=watch_load, name="judge-load-watch", daemon=True).start()
    server.run()
    return 1 if failed.is_set() else 0


@user_errors
def serve_command(
    config: str = typer.Option("default", "--config", "-c", help="judge YAML (path or built-in name in judge_reward/configs/judges)"),
    host: str = typer.Option("127.0.0.1", help="interface to bind (loopback by default)"),
    port: int = typer.Option(8080, help="TCP port"),
    max_batch_size: int = typer.Option(64, help="items per judge call; concurrent requests are merged up to this"),
    max_wait_ms: float = typer.Option(10.0, help="how long a request may wait for others to fill its batch"),
    max_queue_items: int = typer.Option(4096, help="items waiting at most; beyond it requests get 503 + Retry-After"),
    max_request_items: int = typer.Option(1024, help="items (or OpenRLHF queries) per request at most"),
    max_body_mb: float = typer.Option(16.0, help="request body limit in MiB"),
    token: Optional[str] = typer.Option(
        None, envvar="JUDGE_REWARD_TOKEN", help="bearer token required on every request but /health and /ready"
    ),
    failure_reward: str = typer.Option(
        "lowest", help="reward /get_reward reports for items the judge failed on: 'lowest' (the lowest judged "
        "reward of the request, else of the run so far) or a number below the config's rewards"),
    aspects: Optional[str] = typer.Option(None, help="comma-separated default aspects (default: the config's)"),
    method: Optional[str] = typer.Option(None, help="default method: gptscore, geval or rating"),
    model: Optional[str] = typer.Option(None, help="override backend.model"),
    device: Optional[str] = typer.Option(None, help="override backend.device (cpu, cuda, auto)"),
    torch_threads: Optional[int] = typer.Option(None, help="torch intra-op threads for a local judge"),
    keep_alive: int = typer.Option(75, help="seconds an idle keep-alive connection stays open"),
    graceful_timeout: float = typer.Option(30.0, help="seconds in-flight requests get to finish on shutdown"),
    log_level: str = typer.Option("info", help="uvicorn log level"),
):
    """Serve the judge over HTTP: OpenRLHF's /get_reward, /v1/score, /health, /ready, /metrics."""
    from ..judge import JudgeConfig

    cfg = JudgeConfig.from_yaml(config)
    if aspects:
        cfg.aspects = [a.strip() for a in aspects.split(",") if a.strip()]
    if method:
        cfg.method = method
    if cfg.backend.get("kind", "hf") == "hf":
        cfg.backend.update({k: v for k, v in {"model": model, "device": device}.items() if v is not None})
    elif model:
        cfg.backend["model"] = model
    with backend_options(model=("--model", model), device=("--device", device)):
        cfg.validate()  # unknown aspects, methods and fields fail here, not after the model loads
    from ..reward import check_reward
    check_reward(cfg)  # and the reward /get_reward returns
    if failure_reward != "lowest":
        try:
            failure_reward = float(failure_reward)
        except ValueError:
            raise UserError(f"--failure-reward: expected 'lowest' or a number, got {failure_reward!r}") from None
    if not max_body_mb > 0:
        raise UserError(f"--max-body-mb: expected a positive number of MiB, got {max_body_mb}")
    if log_level.lower() not in LOG_LEVELS:
        raise UserError(f"--log-level: unknown value {log_level!r}; choose one of {', '.join(LOG_LEVELS)}")
    service = ServiceConfig(
        host=host, port=port, max_batch_size=max_batch_size, max_wait_ms=max_wait_ms,
        max_queue_items=max_queue_items, max_request_items=max_request_items,
        max_body_bytes=int(max_body_mb * 1024 * 1024), token=token, failure_reward=failure_reward,
        graceful_timeout_s=graceful_timeout, log_level=log_level, torch_threads=torch_threads,
        keep_alive_s=keep_alive,
    )
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    code = serve(cfg, service)
    raise typer.Exit(code)

