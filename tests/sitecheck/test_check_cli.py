"""`vibesys check` with bad input: one line naming the problem, exit status 2, nothing run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli


def bad(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = vibesys_cli("check", *args, cwd=tmp_path, env=env)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_an_unreadable_slurm_config(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    assert (
        bad(tmp_path, "--slurm-config", str(missing)) == f"vibesys: error: {missing}: no such file"
    )
    broken = tmp_path / "slurm.toml"
    broken.write_text('[slurm]\nname = "x"\nremote_workspace_root = "/a"\n')
    assert bad(tmp_path, "--slurm-config", str(broken)) == (
        f"vibesys: error: {broken}: slurm.transport: Field required"
    )


def test_an_unknown_profile_names_the_ones_there_are(tmp_path: Path) -> None:
    profiles = tmp_path / "clusters.toml"
    profiles.write_text(
        '[profiles.site-gpu]\nrunner = "skypilot"\ninfra = "slurm/login"\n'
        'allocation_time = "01:00:00"\nremote_artifact_root = "/scratch/$USER/v"\n'
    )
    assert bad(tmp_path, "--profile", "gpu", "--profiles", str(profiles)) == (
        f"vibesys: error: {profiles}: no profile 'gpu' (profiles: site-gpu)"
    )
    assert (
        bad(
            tmp_path,
            "--profile",
            "site-gpu",
            "--profiles",
            str(profiles),
            env={"VIBESYS_SKY_LOGIN": "nfs"},
        )
        == "vibesys: error: VIBESYS_SKY_LOGIN='nfs': use ssh or local"
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("--slurm-config", "a.toml", "--profile", "p"),
            "give --slurm-config or --profile, not both",
        ),
        (("--profiles", "c.toml"), "--profiles needs --profile"),
        (("--timeout", "0"), "--timeout 0: must be more than 0"),
        (("--job-wait", "-1"), "--job-wait -1: must be more than 0"),
        (("--cert-warn-days", "-2"), "--cert-warn-days -2: must not be negative"),
    ],
)
def test_contradictory_or_impossible_options(
    tmp_path: Path, args: tuple[str, ...], line: str
) -> None:
    assert bad(tmp_path, *args) == f"vibesys: error: {line}"
