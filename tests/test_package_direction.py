"""The engine (judge_reward) imports none of its consumers (judge_reward.trainers, judge_reward.bias_audit,
the console module judge_reward.console that assembles their commands), and the runtime does not import
the fault-injecting OpenAI server unless asked. Checked in fresh interpreters."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The packages built on the engine, inside its namespace; the engine must not import them.
CONSUMERS = ("judge_reward.trainers", "judge_reward.bias_audit", "judge_reward.console", "judge_reward.__main__")

PROBE = """
import importlib, json, os, pkgutil, sys
import judge_reward
CONSUMERS = %r
def walk(path, prefix):
    # pkgutil.walk_packages would import every package to list it, the consumers included
    for m in pkgutil.iter_modules(path, prefix):
        if m.name in CONSUMERS:
            continue
        yield m.name
        if m.ispkg:
            yield from walk([os.path.join(path[0], m.name.rsplit(".", 1)[1])], m.name + ".")

names = sorted(walk(list(judge_reward.__path__), "judge_reward."))
for name in names:
    importlib.import_module(name)
from judge_reward.backends.openai_compat import OpenAIBackend, OpenAIBackendConfig
from judge_reward.cli import app
from typer.testing import CliRunner
for args in (["--help"], ["score", "--help"], ["serve", "--help"], ["meta-eval", "--help"]):
    assert CliRunner().invoke(app, args).exit_code == 0, args
print(json.dumps({"modules": names, "loaded": sorted(sys.modules)}))
""" % (CONSUMERS,)


def _consumers(modules) -> list[str]:
    return [m for m in modules if any(m == c or m.startswith(c + ".") for c in CONSUMERS)]


def _doubles(modules) -> list[str]:
    return [m for m in modules if m.split(".")[0] == "tests" or "fake_openai" in m]


def _run(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_engine_imports_no_consumer_and_no_fake_server():
    result = _run(PROBE)
    assert "judge_reward.cli" in result["modules"] and "judge_reward.service.app" in result["modules"]
    assert "judge_reward.metaeval.report" in result["modules"]  # the walk goes into subpackages
    assert not _consumers(result["modules"]), result["modules"]
    loaded = result["loaded"]
    assert not _consumers(loaded), _consumers(loaded)
    # nothing left at the top level from before the consumers moved into the namespace
    assert not [m for m in loaded if m.split(".")[0] in ("trainers", "bias_audit", "judge_reward_cli")], loaded
    assert not _doubles(loaded), _doubles(loaded)
    # the test doubles live in the repository (tests/doubles), not in the runtime package
    assert not [m for m in result["modules"] if "testing" in m.split(".") or "fake_openai" in m], result["modules"]


def test_the_console_command_has_every_command():
    code = ("import json, sys\nfrom judge_reward.console import app\nfrom typer.main import get_command\n"
            "print(json.dumps({'commands': sorted(get_command(app).commands), 'loaded': sorted(sys.modules)}))")
    result = _run(code)
    assert result["commands"] == sorted(["score", "steps", "meta-eval", "serve", "probe", "validate", "train", "label-pairs", "audit"])
    assert not _doubles(result["loaded"]), _doubles(result["loaded"])


def test_python_m_judge_reward_is_the_console_command():
    proc = subprocess.run([sys.executable, "-m", "judge_reward", "--help"], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "judge-reward" in proc.stdout
    for command in ("score", "train", "label-pairs", "audit"):
        assert command in proc.stdout, proc.stdout


def test_the_console_command_needs_no_optional_extra():
    """A base install (no openai, serve, trl, audit or metaeval extra) runs judge-reward."""
    code = """
import importlib.abc, json, sys
EXTRAS = ("httpx", "fastapi", "uvicorn", "prometheus_client", "openai", "trl", "peft", "datasets", "accelerate",
          "wandb", "matplotlib", "rouge_score")
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in EXTRAS:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: an optional extra)")
sys.meta_path.insert(0, Block())
from typer.testing import CliRunner
from judge_reward.console import app
codes = [CliRunner().invoke(app, args).exit_code for args in (["--help"], ["score", "--help"], ["serve", "--help"])]
print(json.dumps({"codes": codes, "loaded": sorted(m for m in sys.modules if m.split(".")[0] in EXTRAS)}))
"""
    result = _run(code)
    assert result == {"codes": [0, 0, 0], "loaded": []}


def test_the_cli_starts_without_the_statistics():
    """`judge-reward --help` and every command's help load no scipy or torch: the statistics load when
    meta-eval runs (scipy was most of the start-up: `--help` took 1.2-1.7 s, 0.4 s without it), the
    models when a judge does."""
    result = _run("""
import json, sys
from judge_reward.cli import app
from typer.testing import CliRunner
for args in (["--help"], ["score", "--help"], ["meta-eval", "--help"], ["probe", "--help"]):
    assert CliRunner().invoke(app, args).exit_code == 0, args
import judge_reward.metaeval as metaeval
before = sorted(sys.modules)
assert metaeval.LEVELS == ("sample", "dataset", "system") and callable(metaeval.evaluate)
print(json.dumps({"loaded": before, "after": sorted(sys.modules)}))
""")
    assert not [m for m in result["loaded"] if m.split(".")[0] in ("scipy", "torch")]
    assert "scipy" in result["after"]  # the names still resolve, loading their module then


def test_the_data_path_imports_one_way():
    """item -> judge -> reward: the judge's modules (the judge, its config checks, the reward's
    settings) never import the reward module, which imports the judge; read from the source, so a
    function-level import counts too."""
    import ast

    def imported(path: Path) -> set[str]:
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(("." * node.level) + node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        return names

    for module in ("judge.py", "reward_config.py", "validated.py", "cache.py", "guards.py"):
        found = imported(ROOT / "judge_reward" / module)
        assert not found & {".reward", "judge_reward.reward"}, (module, sorted(found))
    assert ".judge" in imported(ROOT / "judge_reward" / "reward.py")
