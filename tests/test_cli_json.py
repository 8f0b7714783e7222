"""Every `--json` prints exactly one JSON object (issue 20): a reader parses one thing, and a
list is always under a named key beside its counts. Each command that takes `--json` runs here
on a small journal; a command that gains `--json` must be added, or the inventory test fails."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import vibesys_cli
from vibesys.adapters.slurm.request import make_request
from vibesys.engine import Engine
from vibesys.journal_schema import open_journal
from vibesys.states import Cancelled

SITE = """[slurm]
name = "lab"
remote_workspace_root = "{root}"

[slurm.transport]
kind = "local"
"""


class Scene:
    """A journal with a local invocation that ran and an sbatch one recorded (its site
    rendering kept) and cancelled before anything was sent."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.local = str(self.json_of("run", "--name", "ok", "--json", "--", "true")["id"])
        site = home / "slurm.toml"
        site.write_text(SITE.format(root=home / "remote"))
        journal = open_journal(home / ".vibesys" / "journal.db")
        request = make_request("sbatch", {"slurm_config": site})
        inv = Engine(journal).prepare(adapter="sbatch", command=["true"], request=request)
        journal.commit_transition(inv, Cancelled("nothing ran"))
        journal.close()
        self.sbatch = inv.id

    def cli(self, *args: str, **options: Any) -> Any:
        return vibesys_cli(*args, cwd=self.home, **options)

    def json_of(self, *args: str) -> Any:
        done = self.cli(*args)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Scene:
    return Scene(tmp_path_factory.mktemp("json"))


#: Every command with `--json`: its arguments on the scene (the check command's are in
#: tests/sitecheck/test_skypilot_checks.py, which needs its fake SkyPilot).
COMMANDS: dict[str, Callable[[Scene], list[str]]] = {
    "run": lambda s: ["run", "--json", "--", "true"],
    "wait": lambda s: ["wait", s.local, "--json"],
    "result": lambda s: ["result", s.local, "--json"],
    "journal show": lambda s: ["journal", "show", s.local, "--json"],
    "journal list": lambda s: ["journal", "list", "--json"],
    "journal list --state": lambda s: ["journal", "list", "--state", "running", "--json"],
    "journal config": lambda s: ["journal", "config", s.sbatch, "--json"],
    "reconcile": lambda s: ["reconcile", "--json"],
    "clusters": lambda s: ["clusters", "--json"],
    "clusters --live": lambda s: ["clusters", "--live", "--json"],
}
ELSEWHERE = {"check"}


@pytest.mark.parametrize("name", COMMANDS)
def test_every_json_output_is_one_object(scene: Scene, name: str) -> None:
    done = scene.cli(*COMMANDS[name](scene))
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)  # one document: json.loads refuses anything after it
    assert isinstance(shown, dict), f"{name} --json printed a {type(shown).__name__}"


def test_every_command_with_json_is_checked_and_says_one_object() -> None:
    from typer.main import get_command

    from vibesys.cli.app import app, refresh_run_options

    refresh_run_options()
    found: dict[str, str | None] = {}

    def walk(command: Any, path: list[str]) -> None:
        for param in getattr(command, "params", []):
            if "--json" in getattr(param, "opts", []):
                found[" ".join(path)] = param.help
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(get_command(app), [])
    assert set(found) == {name.split(" --")[0] for name in COMMANDS} | ELSEWHERE
    assert set(found.values()) == {"Print one JSON object."}


def test_lists_are_under_a_key_with_their_counts(scene: Scene) -> None:
    listed = scene.json_of("journal", "list", "--json")
    assert listed["count"] == len(listed["invocations"]) >= 2
    assert sum(listed["counts"].values()) == listed["count"] == listed["counts"]["DONE"]
    clusters = scene.json_of("clusters", "--json")
    assert clusters == {"clusters": [], "count": 0}


def test_reconcile_json_has_its_rows_and_its_exit_status(tmp_path: Path) -> None:
    crashed = vibesys_cli(
        "run", "--", "true", cwd=tmp_path, env={"VIBESYS_FAILPOINTS": "after_submit_intent"}
    )
    assert crashed.returncode == 137, crashed.stderr
    done = vibesys_cli("reconcile", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    [row] = shown["reconciled"]
    assert row["before"] == "SUBMITTING" and not row["failed"], row
    assert {k: v for k, v in shown.items() if k != "reconciled"} == {
        "unresolved": [],
        "failed": 0,
        "waiting": 0,
        "exit_status": 0,
    }
    # Resubmitted by that reconcile, the job may still run: once it has ended and is
    # collected, a reconcile has nothing left to do.
    assert vibesys_cli("wait", row["invocation"], cwd=tmp_path).returncode == 0
    again = vibesys_cli("reconcile", "--json", cwd=tmp_path)
    assert (again.returncode, json.loads(again.stdout)["reconciled"]) == (0, [])
