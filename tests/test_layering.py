"""Every module imports, and the dependency direction holds: states does no I/O, adapters never
reach into the journal or the engine, and the journal never reaches into adapters or engine."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import tomllib
from pathlib import Path

import pytest

import vibesys

PACKAGE = Path(vibesys.__file__).parent
MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages([str(PACKAGE)], prefix="vibesys.")
    if not m.name.endswith(("local_wrapper", "__main__"))
)

#: package -> prefixes its modules must never import
FORBIDDEN = {
    "vibesys.states": (
        "vibesys.journal_schema",
        "vibesys.engine",
        "vibesys.adapters",
        "vibesys.cli",
        "vibesys.config",
        "sqlite3",
        "sqlite_utils",
        "subprocess",
        "socket",
        "paramiko",
        "pydantic",
        "time",
        "datetime",
        "os",
        "io",
        "pathlib",
        "random",
    ),
    "vibesys.journal_schema": ("vibesys.engine", "vibesys.adapters", "vibesys.cli"),
    "vibesys.adapters": (
        "vibesys.journal_schema",
        "vibesys.engine",
        "vibesys.states",
        "vibesys.cli",
    ),
    "vibesys.config": (
        "vibesys.journal_schema",
        "vibesys.engine",
        "vibesys.states",
        "vibesys.cli",
        "vibesys.adapters",
    ),
    "vibesys.engine": ("vibesys.cli",),
}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name: str) -> None:
    importlib.import_module(name)


def test_layers() -> None:
    problems = []
    for path in PACKAGE.rglob("*.py"):
        module = "vibesys." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for package, banned in FORBIDDEN.items():
            if module == package or module.startswith(package + "."):
                for imported in imports_of(path):
                    if any(imported == b or imported.startswith(b + ".") for b in banned):
                        problems.append(f"{module} imports {imported}")
    assert problems == []


def test_the_checker_catches_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import sqlite3\nfrom vibesys.engine import Engine\n")
    assert imports_of(bad) == {"sqlite3", "vibesys.engine"}


def test_wrapper_is_stdlib_only() -> None:
    wrapper = PACKAGE / "adapters" / "local_wrapper.py"
    assert not [m for m in imports_of(wrapper) if m.startswith("vibesys")]


#: The public names and where each one is defined, written out (not read from vibesys._PUBLIC).
PUBLIC_API = {
    "DriveOptions": "vibesys.engine",
    "Engine": "vibesys.engine",
    "FailureClass": "vibesys.states",
    "FakeAttempt": "vibesys.adapters.fake",
    "FakeBackend": "vibesys.adapters.fake",
    "JobState": "vibesys.states",
    "Journal": "vibesys.journal_schema",
    "Outcome": "vibesys.states",
    "RetryPolicy": "vibesys.engine",
    "VibesysError": "vibesys.errors",
    "drive": "vibesys.engine",
    "register": "vibesys.adapters.registry",
    "AdapterEntry": "vibesys.adapters.registry",
    "journal_path": "vibesys.journal_schema",
    "open_journal": "vibesys.journal_schema",
    "reconcile": "vibesys.engine",
    "replay": "vibesys.states",
    "wait_for": "vibesys.engine",
}


def test_public_api() -> None:
    assert set(vibesys.__all__) == {*PUBLIC_API, "__version__"}
    for name, module in PUBLIC_API.items():
        assert getattr(vibesys, name) is getattr(importlib.import_module(module), name), name
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    assert vibesys.__version__ == project["project"]["version"]
    with pytest.raises(AttributeError):
        _ = vibesys.NoSuchThing  # type: ignore[attr-defined]
