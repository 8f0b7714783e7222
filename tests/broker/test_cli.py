"""`vibesys broker serve` refuses to start, in one line and without a traceback, when the
configuration, the workspace or read_only_paths would not work."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.cli import vibesys_cli


def config(tmp_path: Path, agent_gpu: bool = True, read_only: tuple[str, ...] = ()) -> Path:
    lines = [
        "[slurm]",
        'name = "local"',
        f"remote_workspace_root = {json.dumps(str(tmp_path / 'remote'))}",
        "[slurm.transport]",
        'kind = "local"',
    ]
    if agent_gpu:
        lines += [
            "[vibesys.agent_gpu]",
            'partitions = ["main"]',
            "max_gpus = 1",
            "max_time_minutes = 10",
            "default_time_minutes = 5",
            f"read_only_paths = {json.dumps(list(read_only))}",
        ]
    path = tmp_path / "slurm.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def serve(tmp_path: Path, toml: Path, workspace: Path) -> tuple[int, str]:
    done = vibesys_cli(
        "broker",
        "serve",
        "--slurm-config",
        str(toml),
        "--workspace",
        str(workspace),
        "--state-dir",
        str(tmp_path / "state"),
        cwd=tmp_path,
    )
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "state" / "token").exists()
    return done.returncode, done.stderr.strip()


def test_no_agent_gpu_table(tmp_path: Path) -> None:
    code, err = serve(tmp_path, config(tmp_path, agent_gpu=False), tmp_path)
    assert code == 2 and err.endswith("no [vibesys.agent_gpu] table; GPU commands are off")


def test_a_missing_workspace(tmp_path: Path) -> None:
    code, err = serve(tmp_path, config(tmp_path), tmp_path / "nope")
    assert (
        code == 2 and err == f"vibesys: error: --workspace {tmp_path / 'nope'}: no such directory"
    )


def test_a_workspace_inside_a_read_only_path(tmp_path: Path) -> None:
    (tmp_path / "ro" / "ws").mkdir(parents=True)
    code, err = serve(
        tmp_path, config(tmp_path, read_only=(str(tmp_path / "ro"),)), tmp_path / "ro" / "ws"
    )
    assert code == 2 and "lies inside the read-only path" in err


def test_a_venv_python_that_would_dangle(tmp_path: Path) -> None:
    venv, python = tmp_path / "venv", tmp_path / "py" / "bin" / "python3.12"
    (venv / "bin").mkdir(parents=True)
    python.parent.mkdir(parents=True)
    python.symlink_to("/usr/bin/python3")
    (venv / "bin" / "python").symlink_to(python)
    (tmp_path / "ws").mkdir()
    code, err = serve(tmp_path, config(tmp_path, read_only=(str(venv),)), tmp_path / "ws")
    assert code == 2
    assert err.splitlines() == [
        "vibesys: error: vibesys.agent_gpu.read_only_paths lists paths holding symlinks that a "
        "confined job could not follow, so the job would fail with 'No such file':",
        f"  {venv}: {venv}/bin/python -> {python} reaches {python}, which the job cannot see; "
        f"add {python} (or the directory that holds it) to read_only_paths",
    ]


def test_the_client_path_is_printed(tmp_path: Path) -> None:
    done = vibesys_cli("broker", "client-path", cwd=tmp_path)
    path = Path(done.stdout.strip())
    assert done.returncode == 0 and path.name == "client.py"
    assert "import vibesys" not in path.read_text()


def test_a_read_only_path_inside_the_workspace(tmp_path: Path) -> None:
    # The agent could swap it for a symlink to anything, and bwrap would mount what it names.
    (tmp_path / "ws" / "data").mkdir(parents=True)
    toml = config(tmp_path, read_only=(str(tmp_path / "ws" / "data"),))
    code, err = serve(tmp_path, toml, tmp_path / "ws")
    assert code == 2 and "lies inside the workspace" in err


def test_a_state_dir_too_long_for_a_socket_leaves_no_token(tmp_path: Path) -> None:
    state = tmp_path / ("s" * 120)  # AF_UNIX socket paths end near 108 bytes
    (tmp_path / "ws").mkdir()
    done = vibesys_cli(
        "broker", "serve", "--slurm-config", str(config(tmp_path)),
        "--workspace", str(tmp_path / "ws"), "--state-dir", str(state), cwd=tmp_path,
    )  # fmt: skip
    assert "Traceback" not in done.stderr
    assert done.returncode == 2 and done.stderr.startswith("vibesys: error: cannot listen on")
    assert not (state / "token").exists()  # no live token without a broker


def test_a_state_dir_that_cannot_be_made(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "file").write_text("")
    done = vibesys_cli(
        "broker", "serve", "--slurm-config", str(config(tmp_path)),
        "--workspace", str(tmp_path / "ws"), "--state-dir", str(tmp_path / "file" / "x"),
        cwd=tmp_path,
    )  # fmt: skip
    assert "Traceback" not in done.stderr
    assert done.returncode == 2 and done.stderr.startswith("vibesys: error: --state-dir")


def test_a_slurm_gpu_key_that_cannot_be_carried_over_is_refused_by_name(tmp_path: Path) -> None:
    old = tmp_path / "slurm-gpu.toml"
    old.write_text(
        "[slurm_gpu]\npartitions = ['main']\nmax_gpus = 1\nmax_time_minutes = 10\n"
        "default_time_minutes = 5\ngate_time_minutes = 5\ngate_command = ['x']\n"
    )
    (tmp_path / "ws").mkdir()
    code, err = serve(tmp_path, old, tmp_path / "ws")
    assert code == 2
    assert err == (
        f"vibesys: error: {old}: slurm_gpu.gate_command: unknown key, cannot be carried over to "
        "slurm.toml (known: partitions, max_gpus, max_time_minutes, default_time_minutes, "
        "windows_command, job_name_prefix, srun_arguments, read_only_paths, max_concurrent_jobs, "
        "srun_command, scancel_command, gate_gpus, gate_time_minutes)"
    )
    assert not (tmp_path / "state" / "slurm-operator.toml").exists()
