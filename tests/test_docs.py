"""docs/ stays true to the code: generated parts are fresh; journal.md names every column."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from vibesys.journal_schema import open_journal
from vibesys.states.diagram import mermaid

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
HINT = "docs are stale; regenerate them with:  python docs/gen_docs.py"


def _load_gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vibesys_gen_docs", DOCS / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen_docs() -> ModuleType:
    return _load_gen_docs()


@pytest.fixture(scope="module")
def wanted(gen_docs: ModuleType) -> dict[Path, str]:
    result: dict[Path, str] = gen_docs.expected()
    return result


def test_generated_docs_are_fresh(gen_docs: ModuleType, wanted: dict[Path, str]) -> None:
    stale = [p.relative_to(ROOT).as_posix() for p in gen_docs.stale(wanted)]
    assert stale == [], f"{HINT}\nstale: {', '.join(stale)}"


def test_architecture_holds_the_diagram_of_the_table() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    assert f"```mermaid\n{mermaid()}```" in text, HINT


def test_cli_reference_covers_every_command(wanted: dict[Path, str]) -> None:
    from typer.main import get_command

    from vibesys.cli.app import app

    def walk(command: object, path: list[str]) -> list[str]:
        found = [" ".join(["vibesys", *path])]
        for name, sub in getattr(command, "commands", {}).items():
            if not getattr(sub, "hidden", False):
                found += walk(sub, [*path, name])
        return found

    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    for command in walk(get_command(app), []):
        assert f"## `{command}`\n" in text, f"{command} is missing from docs/cli.md; {HINT}"
    assert "vibesys journal show" in text and "--journal" in text


def test_journal_doc_names_every_column(tmp_path: Path) -> None:
    text = (DOCS / "journal.md").read_text(encoding="utf-8")
    store = open_journal(tmp_path / "journal.db")
    try:
        tables = [
            row[0]
            for row in store.conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"
            )
        ]
        missing = []
        for table in tables:
            if f"`{table}`" not in text:
                missing.append(table)
            for column in store.conn.execute(f'PRAGMA table_info("{table}")'):
                if f"`{column[1]}`" not in text:
                    missing.append(f"{table}.{column[1]}")
    finally:
        store.close()
    assert missing == [], f"docs/journal.md does not describe: {', '.join(missing)}"


def test_docs_hold_no_machine_paths() -> None:
    pattern = re.compile(r"/(?:work|root|home/\w+|Users/\w+)/")
    for path in sorted(DOCS.glob("*.md")):
        found = pattern.findall(path.read_text(encoding="utf-8"))
        assert found == [], f"{path.name} holds a machine-specific path: {found[0]}"


def test_check_mode_reports_a_stale_file(
    gen_docs: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    architecture = tmp_path / "architecture.md"
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    architecture.write_text(text.replace("stateDiagram-v2", "stateDiagram-v1"), encoding="utf-8")
    monkeypatch.setattr(gen_docs, "ARCHITECTURE", architecture)
    fresh = gen_docs.render_architecture(architecture.read_text(encoding="utf-8"))
    assert gen_docs.stale({architecture: fresh}) == [architecture]
    assert "stateDiagram-v2" in fresh
