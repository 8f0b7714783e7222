"""`vibesys run --adapter skypilot`, `vibesys clusters` and `journal show` as a user runs them,
on the scripted fake `sky` (tests/fake_sky.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli
from tests.helpers.skyfake import FakeSky, make_fake_sky


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeSky]:
    sky = make_fake_sky(tmp_path)
    yield sky
    sky.stop_jobs()


def sky_run(fake: FakeSky, tmp_path: Path, *args: str) -> list[str]:
    config = fake.clusters_config()
    return [
        "run",
        "--adapter",
        "skypilot",
        "--profile",
        "test",
        "--run-id",
        "campaign-1",
        "--clusters-config",
        str(config),
        "--retry-delay",
        "0",
        *args,
    ]


def test_help_shows_the_skypilot_options_only(tmp_path: Path) -> None:
    done = vibesys_cli("run", "--adapter", "skypilot", "--help", cwd=tmp_path)
    assert done.returncode == 0
    for flag in ("--profile", "--run-id", "--clusters-config", "--nodes", "--artifact"):
        assert flag in done.stdout
    assert "--partition" not in done.stdout and "--slurm-config" not in done.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--profile", "nope"), "no profile 'nope' (profiles: test)"),
        (("--accelerators-per-node", "2"), "profile 'test' cannot serve [resources]"),
        (("--run-id", "a b"), "--run-id: 'a b': use letters"),
        (("--partition", "gpu"), "--partition is not an option of the skypilot adapter"),
        (("--artifact", "../x"), "--artifact '../x': must be a relative path"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    fake: FakeSky, tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    done = vibesys_cli(*sky_run(fake, tmp_path, *args), "--", "true", cwd=tmp_path, env=fake.env())
    assert done.returncode == 2, done.stderr
    assert needle in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert not (tmp_path / ".vibesys").exists()
    assert fake.calls("launch") == []


def test_another_skypilot_version_is_refused_at_startup(fake: FakeSky, tmp_path: Path) -> None:
    fake.version = "0.13.0"
    done = vibesys_cli(*sky_run(fake, tmp_path), "--", "true", cwd=tmp_path, env=fake.env())
    assert done.returncode == 2
    assert "SkyPilot 0.13.0" in done.stderr and "exactly 0.14.1" in done.stderr
    assert not (tmp_path / ".vibesys").exists()


def test_a_campaign_from_the_command_line(fake: FakeSky, tmp_path: Path) -> None:
    env = fake.env()
    ok = vibesys_cli(*sky_run(fake, tmp_path), "--", "sh", "-c", "echo hi", cwd=tmp_path, env=env)
    assert (ok.returncode, ok.stdout) == (0, "hi\n"), ok.stderr
    bad = vibesys_cli(*sky_run(fake, tmp_path, "--json"), "--", "sh", "-c", "exit 3",
                      cwd=tmp_path, env=env)  # fmt: skip
    assert bad.returncode == 3, bad.stderr
    shown = json.loads(bad.stdout)
    [cluster] = shown["clusters"]
    assert (cluster["attempt"], cluster["state"], cluster["allocation_job"]) == (1, "up", "200")
    assert shown["attempts"][0]["provenance"]["allocation_job_id"] == "200"

    listed = vibesys_cli("clusters", "--json", cwd=tmp_path)
    [lease] = json.loads(listed.stdout)["clusters"]
    assert (lease["name"], lease["state"]) == (cluster["name"], "up")
    text = vibesys_cli("journal", "show", shown["id"], cwd=tmp_path).stdout
    assert f"cluster {lease['name']}  lease {lease['id']}  up  allocation 200" in text

    released = vibesys_cli("clusters", "release", lease["name"], cwd=tmp_path, env=env)
    assert released.returncode == 0, released.stderr
    assert "released" in released.stdout
    table = vibesys_cli("clusters", cwd=tmp_path).stdout.splitlines()
    assert table[0].split()[:4] == ["LEASE", "CLUSTER", "STATE", "ALLOCATION"]
    assert table[1].split()[:4] == [str(lease["id"]), lease["name"], "released", "200"]
    assert vibesys_cli("clusters", "--live", cwd=tmp_path).stdout == "no cluster leases\n"
    again = vibesys_cli("clusters", "release", lease["name"], cwd=tmp_path, env=env)
    assert again.returncode == 2 and "no live cluster lease named" in again.stderr
    assert (len(fake.calls("launch")), len(fake.calls("down"))) == (1, 1)


def test_the_portable_request_from_an_experiment_files_resources_table(
    fake: FakeSky, tmp_path: Path
) -> None:
    experiment = tmp_path / "experiment.toml"
    experiment.write_text(
        '[experiment]\nname = "mine"\n[resources]\nnodes = 3\naccelerators_per_node = 0\n'
    )
    args = sky_run(fake, tmp_path, "--json", "--resources", str(experiment), "--nodes", "1")
    done = vibesys_cli(*args, "--", "true", cwd=tmp_path, env=fake.env())
    assert done.returncode == 0, done.stderr
    # The journal keeps the portable request: the file's keys, the flag overriding one.
    resources = json.loads(done.stdout)["request"]["resources"]
    assert resources == {"nodes": 1, "accelerators_per_node": 0, "accelerator_backend": None}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[resources]\ngpus = 1\n", "experiment.toml [resources]: gpus: unknown key"),
        ("[resources]\nnodes = 0\n", "experiment.toml [resources]: nodes: "),
        ('[resources]\naccelerator_backend = "cuda"\n', "accelerator_backend = 'cuda', profile"),
        ("[experiment]\n", "experiment.toml: no [resources] table"),
        ("resources = 2\n", "experiment.toml: resources must be a table"),
        ("[resources\n", "experiment.toml: invalid TOML"),
    ],
)
def test_a_bad_resources_table_is_one_line_and_writes_nothing(
    fake: FakeSky, tmp_path: Path, text: str, needle: str
) -> None:
    experiment = tmp_path / "experiment.toml"
    experiment.write_text(text)
    args = sky_run(fake, tmp_path, "--resources", str(experiment))
    done = vibesys_cli(*args, "--", "true", cwd=tmp_path, env=fake.env())
    assert done.returncode == 2 and needle in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / ".vibesys").exists() and fake.calls("exec") == []


def test_a_run_on_a_busy_campaign_waits_its_turn_instead_of_being_refused(
    fake: FakeSky, tmp_path: Path
) -> None:
    import subprocess
    import sys
    import time

    env = fake.env()
    gate = tmp_path / "gate"
    first = vibesys_cli(
        *sky_run(fake, tmp_path, "--detach"),
        "--",
        "sh",
        "-c",
        f"while [ ! -e {gate} ]; do sleep 0.1; done; echo first",
        cwd=tmp_path,
        env=env,
    )
    assert first.returncode == 0, first.stderr
    first_id = first.stdout.strip()
    second = subprocess.Popen(
        [sys.executable, "-m", "vibesys", *sky_run(fake, tmp_path), "--", "echo", "second"],
        cwd=tmp_path,
        env={**__import__("os").environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)
    assert second.poll() is None  # it waits: not REJECTED
    assert len(fake.calls("exec")) == 1
    listed = vibesys_cli("journal", "list", cwd=tmp_path).stdout
    assert "WAITING (1 ahead)" in listed
    gate.touch()
    out, err = second.communicate(timeout=30)
    assert (second.returncode, out) == (0, "second\n"), err
    assert f"is waiting in campaign campaign-1's queue: 1 ahead ({first_id} first" in err
    assert vibesys_cli("wait", first_id, cwd=tmp_path, env=env).returncode == 0
