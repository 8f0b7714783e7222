"""`vibesys run` without typer (vibesys/cli/run_options.py): for every plain form the entry
point's parser hands `execute_run` exactly the values the typer command would, and every
other form goes to typer. Both are built from the same option tables; these tests are what
keeps them from drifting apart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.helpers.cli import vibesys_cli
from vibesys.cli import run_command
from vibesys.cli.run_options import parse_run_argv

PLAIN: list[list[str]] = [
    ["--", "true"],
    ["true"],
    ["echo", "--name", "x"],  # options end at the command's first word
    ["--", "a", "--", "b"],
    ["--name", "n", "--max-retries", "5", "--retry-delay=0.5", "--", "true"],
    ["--detach", "--json", "--", "true"],
    ["--no-detach", "--unreachable-timeout", "30", "--", "true"],
    ["--journal", "j/x.db", "--adapter", "local", "--", "true"],
    ["--adapter", "sbatch", "--slurm-config", "s.toml", "--gpus", "2", "--time=9", "--", "x"],
    ["--adapter", "sbatch", "--artifact", "a", "--artifact=b/*.json", "--exclude", "e", "x"],
    ["--adapter", "sbatch", "--partition", "gpu", "--candidate", "c", "--after", "abc", "x"],
    ["--adapter", "srun", "--gpus", "0", "--", "x"],
    ["--adapter", "skypilot", "--run-id", "r", "--down", "--nodes", "2", "--", "x"],
    ["--adapter", "skypilot", "--resources", "e.toml", "--accelerators-per-node", "4", "x"],
    ["--adapter", "nope", "--", "true"],  # typer passes it on; check_run refuses it
    ["--gpus", "1", "--", "true"],  # likewise: an option of another adapter
    ["--max-retries", "many", "--", "true"],  # a text option: check_run's to judge
]

TYPERS_OWN: list[list[str]] = [
    [],
    ["--help"],
    ["--adapter", "sbatch", "--help"],
    ["--name", "a", "--name", "b", "--", "true"],
    ["--gpus", "x", "--", "true"],
    ["--gpus", "-1", "--", "true"],
    ["--gpus", "٣", "--", "true"],
    ["--name", "--", "true"],
    ["--name", "", "--", "true"],
    ["--name", " padded", "--", "true"],
    ["--json=yes", "--", "true"],
    ["-x", "--", "true"],
    ["--nme", "x", "--", "true"],
    ["--name"],
    ["--"],
    ["--name", "x"],
]


def typer_values(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any] | None:
    """What the typer command hands `execute_run` for `vibesys run ARGV` (None: it refused)."""
    from vibesys.cli.app import app

    seen: list[dict[str, Any]] = []

    def record(values: dict[str, Any]) -> int:
        seen.append(dict(values))
        return 0

    monkeypatch.setattr(run_command, "execute_run", record)
    result = CliRunner().invoke(app, ["run", *argv], prog_name="vibesys")
    return seen[0] if seen and result.exit_code == 0 else None


def normalised(values: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list | tuple) else v for k, v in values.items()}


@pytest.mark.parametrize("argv", PLAIN, ids=" ".join)
def test_a_plain_run_gets_what_typer_would_give(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VIBESYS_JOURNAL", raising=False)
    fast = parse_run_argv(argv)
    assert fast is not None, "this form must take the fast path"
    slow = typer_values(argv, monkeypatch)
    assert slow is not None
    assert normalised(fast) == normalised(slow)


@pytest.mark.parametrize("argv", TYPERS_OWN, ids=" ".join)
def test_every_other_form_goes_to_typer(argv: list[str]) -> None:
    assert parse_run_argv(argv) is None


@pytest.mark.parametrize("env", ["elsewhere/j.db", ""])
def test_the_journal_variable_reads_as_typer_reads_it(
    env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIBESYS_JOURNAL", env)
    fast = parse_run_argv(["--", "true"])
    slow = typer_values(["--", "true"], monkeypatch)
    if fast is None:  # an empty variable: typer decides alone
        assert env == ""
        return
    assert slow is not None and normalised(fast) == normalised(slow)
    explicit = parse_run_argv(["--journal", "mine.db", "--", "true"])
    assert explicit is not None and explicit["journal"] == Path("mine.db")


def test_a_run_imports_neither_typer_nor_click_nor_dataclasses(tmp_path: Path) -> None:
    """The point of the fast path: `vibesys run` starts without typer, click or their pydantic
    adapters (dozens are started at once on a login node), and its records are msgspec
    Structs, not dataclasses (building one costs about a millisecond at import; the run path
    has some seventy). The first run in a project makes the journal, with sqlite-utils (which
    imports click); the second is what is measured."""
    assert vibesys_cli("run", "--", "true", cwd=tmp_path).returncode == 0
    code = (  # the entry point ends the process itself: the modules are listed on its way out
        "import atexit, sys, runpy; sys.argv=['vibesys','run','--','true']\n"
        "cli = ('typer', 'click', 'rich', 'dataclasses', 'pydantic')\n"
        "bad = lambda: sorted(m for m in sys.modules if m.split('.')[0] in cli)\n"
        "atexit.register(lambda: print(bad()[:3], flush=True))\n"
        "runpy.run_module('vibesys', run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "[]", done.stdout + done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--max-retries", "many", "--", "true"],
        ["run", "--adapter", "nope", "--", "true"],
        ["run", "--gpus", "1", "--", "true"],
        ["run", "--", "true"],
    ],
)
def test_the_fast_path_answers_as_the_typer_app(argv: list[str], tmp_path: Path) -> None:
    """Same status, same stderr (one line for bad input, nothing recorded), same output."""
    typer = "import sys; from vibesys.cli.app import main; sys.argv[0] = 'vibesys'; main()"
    fast_dir, slow_dir = tmp_path / "fast", tmp_path / "slow"
    fast_dir.mkdir()
    slow_dir.mkdir()
    fast = vibesys_cli(*argv, cwd=fast_dir)
    slow = subprocess.run(
        [sys.executable, "-c", typer, *argv],
        cwd=slow_dir,
        capture_output=True,
        text=True,
        check=False,
    )
    strip = str.maketrans("", "", "0123456789abcdef")  # invocation ids differ
    assert fast.returncode == slow.returncode
    assert fast.stderr.translate(strip) == slow.stderr.translate(strip)
    assert fast.stdout == slow.stdout
    assert (fast_dir / ".vibesys").exists() == (slow_dir / ".vibesys").exists()


def test_an_unknown_failpoint_is_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    done = vibesys_cli(
        "run", "--", "true", cwd=tmp_path, env={"VIBESYS_FAILPOINTS": "after_nothing"}
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "vibesys: error: VIBESYS_FAILPOINTS names unknown failpoint 'after_nothing' "
        "(see vibesys debug failpoints)"
    ]
    assert not (tmp_path / ".vibesys").exists()
