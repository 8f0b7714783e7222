"""vibesys never imports `sky`: only the SDK helper does, and SkyPilot's own interpreter runs it
as a script (its pins clash with ours, and importing it takes seconds)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "vibesys"
HELPER = PACKAGE / "adapters" / "skypilot" / "sdk_helper.py"


def _imported(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_no_module_but_the_helper_imports_sky() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(
            name for name in _imported(path) if name == "sky" or name.startswith("sky.")
        )
        for path in PACKAGE.rglob("*.py")
        if path != HELPER
    }
    assert {path: names for path, names in offenders.items() if names} == {}
    assert "sky" in _imported(HELPER)  # the helper does: the check above looks at the right thing
    importers = [p for p in PACKAGE.rglob("*.py") if any("sdk_helper" in n for n in _imported(p))]
    assert importers == []


def test_loading_the_adapter_imports_no_sky() -> None:
    probe = (
        "import sys, vibesys.adapters.skypilot, vibesys.cli.app; "
        "print(sorted(m for m in sys.modules if m == 'sky' or m.startswith('sky.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
