"""What `vibesys run -- true` and the read-only commands load, through the real entry point:
only what they use. The terminal's status line is text of our own (no rich); the bridge's
client is a file `session client-path` names, never a module a command imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

#: Runs the entry point with the given argv, then prints the loaded module names as JSON.
DUMP = (
    "import atexit, json, sys\n"
    "sys.argv = ['vibesys', *sys.argv[1:]]\n"
    "atexit.register(lambda: print(json.dumps(sorted(sys.modules))))\n"
    "from vibesys.cli.main import main\n"
    "main()\n"
)
NEVER = ("rich", "vibesys.bridge.client")


def loaded(cwd: Path, *argv: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", DUMP, *argv], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    modules: list[str] = json.loads(done.stdout.splitlines()[-1])
    return modules


def among(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


def test_a_local_run_and_the_reading_commands_load_no_rich_and_no_bridge_client(
    tmp_path: Path,
) -> None:
    assert among(loaded(tmp_path, "run", "--", "true"), NEVER) == []
    for argv in (["journal", "list"], ["states"]):
        assert among(loaded(tmp_path, *argv), (*NEVER, "pydantic")) == [], argv


def test_logs_reads_through_the_handles_reader_without_the_engine(tmp_path: Path) -> None:
    loaded(tmp_path, "run", "--", "true")
    listed = subprocess.run(
        [sys.executable, "-m", "vibesys", "journal", "list", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    invocation = json.loads(listed.stdout)["invocations"][0]["id"]
    modules = loaded(tmp_path, "logs", invocation)
    assert "vibesys.invocation.reading" in modules
    heavy = ("pydantic", "vibesys.engine", "vibesys.client", "sqlite_utils", "transitions")
    assert among(modules, heavy) == []


def test_help_loads_no_bridge_client(tmp_path: Path) -> None:
    # typer draws its help with rich: that is typer's, not ours.
    assert among(loaded(tmp_path, "--help"), ("vibesys.bridge.client",)) == []


def test_a_local_run_loads_no_pydantic(tmp_path: Path) -> None:
    """The requests are msgspec Structs and the run's end comes from its invocation: the
    JobResult (pydantic) is `run --json`'s alone, and no installed package is scanned for
    plugins. (The first run creates the journal, whose migrations load sqlite-utils'
    plugins: the second is the one measured.)"""
    loaded(tmp_path, "run", "--", "true")
    modules = loaded(tmp_path, "run", "--", "true")
    assert among(modules, ("pydantic", "pydantic_core", "importlib.metadata")) == []


def test_the_local_adapter_and_its_request_load_no_pydantic() -> None:
    program = (
        "import sys, vibesys.adapters.local\n"
        "print([m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core')])"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
