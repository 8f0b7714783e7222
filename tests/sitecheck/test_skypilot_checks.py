"""The checks of a SkyPilot profile against the scripted fake `sky`: the pinned version, the
login entry of SkyPilot's ~/.slurm/config (read here; the remote attempt directories on this
host), the certificate next to that entry's identity (valid, expiring soon, expired), the
artifact root. And `vibesys check --profile` as users run it: the JSON object and the exit
statuses."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli
from tests.helpers.skyfake import FakeSky, make_fake_sky
from vibesys.sitecheck import CheckOptions, load_skypilot_site, run_site_checks

#: 2026-01-21 00:00 UTC: the certificates below are dated around it.
NOW = 1768953600.0
UTC_ENV = {**os.environ, "TZ": "UTC"}


def keygen(*args: str) -> None:
    subprocess.run(["ssh-keygen", "-q", *args], check=True, env=UTC_ENV, stdin=subprocess.DEVNULL)


@pytest.fixture
def fake(tmp_path: Path) -> FakeSky:
    return make_fake_sky(tmp_path)


def sky_home(tmp_path: Path, identity: Path | None) -> Path:
    """SkyPilot's client HOME with a login entry for the profile's infra (slurm/localslurm)."""
    home = tmp_path / "sky-home"
    (home / ".slurm").mkdir(parents=True)
    lines = ["Host localslurm", "  HostName 127.0.0.1", "  Port 2222", "  User root"]
    if identity is not None:
        lines.append(f"  IdentityFile {identity}")
    (home / ".slurm" / "config").write_text("\n".join(lines) + "\n")
    return home


def environ(fake: FakeSky, home: Path, login: str = "local") -> dict[str, str]:
    return {**fake.env(), "VIBESYS_SKY_HOME": str(home), "VIBESYS_SKY_LOGIN": login}


def check(
    fake: FakeSky,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    login: str = "local",
    **profile: object,
) -> dict[str, tuple[str, str, str]]:
    env = environ(fake, home, login)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    site = load_skypilot_site("test", fake.clusters_config(**profile), env)
    report = run_site_checks(site, CheckOptions(timeout_seconds=20, now=lambda: NOW))
    assert report.kind == "skypilot" and report.site == "test"
    return {row.name: (str(row.status), row.detail, row.fix) for row in report.rows}


def test_a_ready_profile_is_all_green(
    tmp_path: Path, fake: FakeSky, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = check(fake, sky_home(tmp_path, None), monkeypatch)
    assert list(rows) == ["skypilot", "login-node", "certificate", "partitions", "artifact-root"]
    assert rows["skypilot"] == (
        "ok",
        f"SkyPilot 0.14.1 in {fake.venv} (the pinned release)",
        "",
    )
    status, detail, _ = rows["login-node"]
    assert status == "ok" and detail.startswith(
        "VIBESYS_SKY_LOGIN=local: remote attempt directories are read on this host; local:"
    )
    assert rows["certificate"] == ("ok", "no identity file configured: no certificate to check", "")
    assert rows["partitions"] == (
        "ok",
        "allocation_time 00:20:00 fits a partition SkyPilot may pick (sinfo: main MaxTime 30 "
        "min (default), priority MaxTime 120 min)",
        "",
    )
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
    assert rows["artifact-root"] == (
        "ok",
        f"{fake.remote} is writable by {user} (created by this check)",
        "",
    )
    assert fake.remote.is_dir() and list(fake.remote.iterdir()) == []


def test_another_skypilot_version_fails_with_the_install_fix(
    tmp_path: Path, fake: FakeSky, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.version = "0.13.0"
    rows = check(fake, sky_home(tmp_path, None), monkeypatch)
    assert rows["skypilot"] == (
        "fail",
        f"SkyPilot 0.13.0 in {fake.venv}, but vibesys needs exactly 0.14.1 "
        "(run scripts/skypilot-env)",
        "install the pinned SkyPilot with scripts/skypilot-env (or set VIBESYS_SKY_VENV to it)",
    )
    assert rows["artifact-root"][0] == "ok"  # the other checks do not depend on it


@pytest.mark.parametrize(
    ("validity", "status", "says"),
    [
        (
            "20260101000000:20260301000000",
            "ok",
            "valid until 2026-03-01 00:00 UTC (39.0 days left)",
        ),
        ("20260101000000:20260123000000", "warn", "expires 2026-01-23 00:00 UTC (2.0 days left)"),
        ("20260101000000:20260120000000", "fail", "expired 2026-01-20 00:00 UTC (1.0 days ago)"),
    ],
)
def test_the_certificate_of_skypilots_login(
    tmp_path: Path,
    fake: FakeSky,
    monkeypatch: pytest.MonkeyPatch,
    validity: str,
    status: str,
    says: str,
) -> None:
    ca, key = tmp_path / "ca", tmp_path / "id_ed25519"
    keygen("-t", "ed25519", "-N", "", "-f", str(ca))
    keygen("-t", "ed25519", "-N", "", "-f", str(key))
    keygen("-s", str(ca), "-I", "op", "-n", "root", "-V", validity, f"{key}.pub")
    rows = check(fake, sky_home(tmp_path, key), monkeypatch)
    assert rows["certificate"][:2] == (status, f"{key}-cert.pub (key id 'op') {says}")
    if status != "ok":
        assert rows["certificate"][2].startswith(f"renew the SSH certificate {key}-cert.pub")


def test_no_login_entry_names_the_file_to_fix(
    tmp_path: Path, fake: FakeSky, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "empty-home"
    home.mkdir()
    rows = check(fake, home, monkeypatch, login="ssh")
    config = home / ".slurm" / "config"
    status, detail, fix = rows["login-node"]
    assert (status, detail) == (
        "fail",
        f"{config}: no such file (SkyPilot's Slurm login configuration)",
    )
    assert fix.startswith(
        f"add Host localslurm (HostName, User, IdentityFile, UserKnownHostsFile) to {config}"
    )
    assert rows["artifact-root"] == (
        "skipped",
        "needs login-node, which failed",
        "repair login-node first",
    )


def test_an_allocation_longer_than_the_partitions_allow_fails_its_row(
    tmp_path: Path, fake: FakeSky, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fake login node's sinfo: main 30 min (default), priority 2 hours."""
    home, source = sky_home(tmp_path, None), fake.local / "clusters.toml"
    listing = "(sinfo: main MaxTime 30 min (default), priority MaxTime 120 min)"
    rows = check(fake, home, monkeypatch, allocation_time="99-00:00:00")
    assert rows["partitions"] == (
        "fail",
        "allocation_time 99-00:00:00 of [profiles.test] exceeds the MaxTime of every partition "
        f"it may use (main MaxTime 30 min, priority MaxTime 120 min) {listing}",
        f"lower allocation_time of [profiles.test] in {source} to what the partition allows, "
        "or name one that allows it in infra (`vibesys check --profile test` lists the limits)",
    )
    assert rows["artifact-root"][0] == "ok"  # it does not depend on the limits
    # The partition infra names is the one compared: an hour fits priority, not main.
    hour = {"allocation_time": "01:00:00"}
    rows = check(fake, home, monkeypatch, infra="slurm/localslurm/main", **hour)
    assert rows["partitions"][:2] == (
        "fail",
        f"allocation_time 01:00:00 of [profiles.test] exceeds partition main's MaxTime (30 min) "
        f"{listing}",
    )
    rows = check(fake, home, monkeypatch, infra="slurm/localslurm/priority", **hour)
    assert rows["partitions"][:2] == (
        "ok",
        f"allocation_time 01:00:00 fits partition priority {listing}",
    )
    rows = check(fake, home, monkeypatch, infra="slurm/localslurm/gpu", **hour)
    assert rows["partitions"][:2] == (
        "fail",
        f"infra slurm/localslurm/gpu names partition 'gpu', which sinfo does not list {listing}",
    )
    fake.control("fake-sinfo", "")
    status, detail, fix = check(fake, home, monkeypatch)["partitions"]
    assert (status, detail) == (
        "fail",
        "sinfo on the login node exited 1: slurm_load_partitions: Unable to contact slurm "
        "controller",
    )
    assert fix.startswith("check that sinfo answers on the login node")


def test_an_unwritable_artifact_root_fails_naming_the_profile_key(
    tmp_path: Path, fake: FakeSky, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    rows = check(
        fake, sky_home(tmp_path, None), monkeypatch, remote_artifact_root=str(blocker / "runs")
    )
    status, detail, fix = rows["artifact-root"]
    assert status == "fail" and detail.startswith(f"{blocker}/runs is not writable: mkdir:")
    assert fix == (
        f"make {blocker}/runs writable on the site's shared file system, or set "
        f"remote_artifact_root of [profiles.test] in {fake.local / 'clusters.toml'}"
    )


def test_home_in_the_artifact_root_is_expanded_there(
    tmp_path: Path, fake: FakeSky, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "op-home"))
    rows = check(fake, sky_home(tmp_path, None), monkeypatch, remote_artifact_root="$HOME/runs")
    status, detail, _ = rows["artifact-root"]
    assert status == "ok" and detail.startswith(f"{tmp_path}/op-home/runs ($HOME/runs) is writable")


def test_the_command_prints_one_json_object_and_exits_by_the_rows(
    tmp_path: Path, fake: FakeSky
) -> None:
    home = sky_home(tmp_path, None)
    config = fake.clusters_config()
    args = ("check", "--profile", "test", "--profiles", str(config), "--json")
    done = vibesys_cli(*args, cwd=tmp_path, env=environ(fake, home))
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert (shown["kind"], shown["site"], shown["source"], shown["overall"]) == (
        "skypilot",
        "test",
        str(config),
        "ok",
    )
    assert [(r["name"], r["status"], r["fix"]) for r in shown["rows"]] == [
        ("skypilot", "ok", None),
        ("login-node", "ok", None),
        ("certificate", "ok", None),
        ("partitions", "ok", None),
        ("artifact-root", "ok", None),
    ]
    fake.version = "0.12.3"
    done = vibesys_cli(*args[:-1], cwd=tmp_path, env=environ(fake, home))
    assert done.returncode == 1, done.stderr
    assert "  fail     skypilot       SkyPilot 0.12.3 in" in done.stdout
    assert done.stdout.endswith("overall: fail (4 ok, 1 fail)\n")


def test_an_unparsable_login_entry_is_the_login_rows_failure(
    tmp_path: Path, fake: FakeSky, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = sky_home(tmp_path, None)
    (home / ".slurm" / "config").write_text("Host localslurm\n  Port twenty-two\n")
    rows = check(fake, home, monkeypatch, login="ssh")
    status, detail, fix = rows["login-node"]
    assert status == "fail" and detail.startswith(f"{home / '.slurm' / 'config'}: ValueError"), (
        detail
    )
    assert fix.startswith("add Host localslurm")
    assert rows["certificate"][0] == "ok" and rows["artifact-root"][0] == "skipped"
