"""The site configuration an invocation runs with, as a user sees and changes it: recorded at
PREPARED (slurm.toml's rendering, or a [slurm_gpu] file's translation), the same whatever
becomes of the file, printed by `vibesys journal config`, named in `journal show`, and replaced
only explicitly (`--replace`), as a history row with its evidence. No Slurm is needed: the
invocations are recorded, never submitted."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import vibesys_cli
from vibesys.adapters.slurm.request import make_request
from vibesys.config.site import text_digest
from vibesys.engine import Engine
from vibesys.journal_schema import open_journal
from vibesys.states import Cancelled

SITE = """# the operator's notes, which the rendering drops
[slurm]
name = "lab"
remote_workspace_root = "{root}"
sbatch_arguments = ["--account=lab"]

[slurm.transport]
kind = "local"

[vibesys.agent_gpu]
partitions = ["main", "priority"]
max_gpus = 1
max_time_minutes = 10
default_time_minutes = 5
"""


def write_site(path: Path, **replace: str) -> Path:
    text = SITE.format(root=path.parent / "remote")
    for old, new in replace.items():
        text = text.replace(old, new)
    path.write_text(text)
    return path


def record(tmp_path: Path, site: Path) -> str:
    """An sbatch invocation recorded (PREPARED) the way `vibesys run` records it."""
    journal = open_journal(tmp_path / ".vibesys" / "journal.db")
    request = make_request("sbatch", {"slurm_config": site, "gpus": 2})
    inv = Engine(journal).prepare(adapter="sbatch", command=["true"], request=request)
    journal.close()
    return inv.id


def cli(tmp_path: Path, *args: str) -> Any:
    return vibesys_cli(*args, cwd=tmp_path)


def show(tmp_path: Path, invocation: str) -> dict[str, Any]:
    done = cli(tmp_path, "journal", "show", invocation, "--json")
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_the_recorded_rendering_is_the_files_meaning_and_outlives_it(tmp_path: Path) -> None:
    site = write_site(tmp_path / "slurm.toml")
    inv = record(tmp_path, site)
    printed = cli(tmp_path, "journal", "config", inv)
    assert printed.returncode == 0, printed.stderr
    rendering = tomllib.loads(printed.stdout)
    # Every default filled in, the comment gone; the trusted evaluation's 2 GPUs were accepted
    # although the agents may ask for 1.
    assert rendering["slurm"]["transport"] == {"kind": "local", "shell_command": ["bash", "-c"]}
    assert rendering["slurm"]["poll_max_seconds"] == 30.0 and "#" not in printed.stdout
    shown = show(tmp_path, inv)
    assert shown["site_digest"] == text_digest(printed.stdout)
    assert shown["request"]["gpus"] == 2 and "site_record" not in shown["request"]
    text = cli(tmp_path, "journal", "show", inv).stdout
    assert f"site            sha256:{shown['site_digest']}" in text
    as_json = json.loads(cli(tmp_path, "journal", "config", inv, "--json").stdout)
    assert (as_json["kind"], as_json["digest"]) == ("slurm.toml", shown["site_digest"])
    # The file goes; the invocation keeps what it was recorded with.
    site.unlink()
    assert cli(tmp_path, "journal", "config", inv).stdout == printed.stdout


def test_the_same_meaning_is_the_same_digest(tmp_path: Path) -> None:
    first = write_site(tmp_path / "a.toml")
    second = write_site(tmp_path / "b.toml", **{"# the operator's notes, which": "# other"})
    second.write_text(second.read_text() + "\n# more comments\n")
    digests = {show(tmp_path, record(tmp_path, p))["site_digest"] for p in (first, second)}
    assert len(digests) == 1
    journal = open_journal(tmp_path / ".vibesys" / "journal.db", readonly=True)
    assert journal.conn.execute("SELECT count(*) FROM site_configs").fetchone() == (1,)
    journal.close()


def test_replacing_the_site_is_explicit_and_recorded(tmp_path: Path) -> None:
    inv = record(tmp_path, write_site(tmp_path / "slurm.toml"))
    before = show(tmp_path, inv)["site_digest"]
    moved = write_site(
        tmp_path / "moved.toml",
        **{'kind = "local"': 'kind = "local"\nshell_command = ["sh", "-c"]'},
    )
    done = cli(tmp_path, "journal", "config", inv, "--replace", str(moved))
    assert done.returncode == 0, done.stderr
    assert "slurm.transport.shell_command" in done.stdout
    after = show(tmp_path, inv)
    assert after["site_digest"] not in (None, before)
    assert after["state"] == "PREPARED" and after["request"] == show(tmp_path, inv)["request"]
    row = after["history"][-1]
    assert (row["event"], row["from"], row["to"]) == ("SiteReplaced", "PREPARED", "PREPARED")
    evidence = row["evidence"]
    assert (evidence["old_digest"], evidence["new_digest"]) == (before, after["site_digest"])
    assert evidence["source"] == str(moved) and evidence["changed"] == (
        "slurm.transport.shell_command"
    )
    printed = cli(tmp_path, "journal", "config", inv).stdout
    assert tomllib.loads(printed)["slurm"]["transport"]["shell_command"] == ["sh", "-c"]
    assert cli(tmp_path, "journal", "verify").returncode == 0
    # The same file again changes nothing and writes nothing.
    again = cli(tmp_path, "journal", "config", inv, "--replace", str(moved))
    assert again.returncode == 0 and "unchanged" in again.stdout
    assert len(show(tmp_path, inv)["history"]) == len(after["history"])


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--replace", "nosuch.toml"), "nosuch.toml: no such file"),
        (("--replace", "bad.toml"), "slurm.transport.kind"),
        (("--replace", "slurm.toml", "--profile", "p"), "--profile names a SkyPilot profile"),
        (("--profile", "p"), "--profile needs --replace"),
    ],
)
def test_a_bad_replacement_is_one_line_and_writes_nothing(
    tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    inv = record(tmp_path, write_site(tmp_path / "slurm.toml"))
    write_site(tmp_path / "bad.toml", **{'kind = "local"': 'kind = "nfs"'})
    before = show(tmp_path, inv)
    done = cli(tmp_path, "journal", "config", inv, *args)
    assert done.returncode == 2 and needle in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert show(tmp_path, inv) == before


def test_a_done_invocation_is_not_carried_on_any_more(tmp_path: Path) -> None:
    site = write_site(tmp_path / "slurm.toml")
    inv = record(tmp_path, site)
    journal = open_journal(tmp_path / ".vibesys" / "journal.db")
    journal.commit_transition(journal.invocations.get(inv), Cancelled("nothing ran"))
    journal.close()
    done = cli(tmp_path, "journal", "config", inv, "--replace", str(site))
    assert done.returncode == 2 and f"invocation {inv} is DONE" in done.stderr


def test_an_invocation_without_a_site_says_so(tmp_path: Path) -> None:
    ran = cli(tmp_path, "run", "--", "true")
    assert ran.returncode == 0, ran.stderr
    inv = json.loads(cli(tmp_path, "journal", "list", "--json").stdout)["invocations"][0]["id"]
    done = cli(tmp_path, "journal", "config", inv)
    assert done.returncode == 2 and "has no recorded site configuration" in done.stderr


def test_an_invocation_recorded_before_sites_were_may_be_given_one(tmp_path: Path) -> None:
    """Recorded before m007 (no digest): it reads its file, until an operator records one."""
    site = write_site(tmp_path / "slurm.toml")
    inv = record(tmp_path, site)
    journal = open_journal(tmp_path / ".vibesys" / "journal.db")
    with journal.write_txn() as conn:
        conn.execute("UPDATE invocations SET site_digest=NULL WHERE id=?", (inv,))
    journal.close()
    assert cli(tmp_path, "journal", "config", inv).returncode == 2
    done = cli(tmp_path, "journal", "config", inv, "--replace", str(site))
    assert done.returncode == 0 and "none -> sha256:" in done.stdout, done.stderr
    evidence = show(tmp_path, inv)["history"][-1]["evidence"]
    assert (evidence["old_digest"], evidence["changed"]) == ("", "(none was recorded)")
    assert cli(tmp_path, "journal", "config", inv).returncode == 0
