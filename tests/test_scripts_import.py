"""The scripts beside the library (benchmarks/, experiments/, examples/) import only names the
library still has: they are not run by the suite, so a renamed or moved name would otherwise break
them silently (a GRPO benchmark failing at its first evaluation, not at import)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for folder in ("benchmarks", "experiments", "examples") for p in (ROOT / folder).glob("*.py"))


def library_imports(path: Path) -> list[tuple[str, str, int]]:
    """(module, name, line) of every ``from judge_reward... import name`` in the file, nested ones included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "judge_reward":
            found += [(node.module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, "", node.lineno) for alias in node.names if alias.name.split(".")[0] == "judge_reward"]
    return found


def test_the_scripts_are_found():
    assert len(SCRIPTS) >= 10
    assert any(library_imports(p) for p in SCRIPTS)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_library_name_a_script_imports_exists(path: Path):
    missing = []
    for module, name, line in library_imports(path):
        try:
            mod = importlib.import_module(module)
        except ImportError as err:
            missing.append(f"{path.name}:{line}: {module} ({err})")
            continue
        if name and not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{path.name}:{line}: {module}.{name}")
    assert not missing, "; ".join(missing)
