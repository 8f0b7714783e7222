"""Edges found in review: a reader that goes away (`| head`), a lease name of digits that are
not ASCII, and a prewarm that meets a bad SSH configuration: each is one line or silence,
never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli


def test_logs_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    ran = vibesys_cli(
        "run", "--", sys.executable, "-c", "print('x' * 4_000_000)", cwd=tmp_path, timeout=120
    )
    assert ran.returncode == 0
    [line] = vibesys_cli("journal", "list", "--json", cwd=tmp_path).stdout.splitlines()
    [row] = json.loads(line)["invocations"]
    invocation = row["id"]
    reader = subprocess.Popen(
        [sys.executable, "-m", "vibesys", "logs", invocation],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert reader.stdout is not None
    assert reader.stdout.read(10) == b"x" * 10
    reader.stdout.close()  # `| head -c 10`
    _, err = reader.communicate(timeout=60)
    assert b"Traceback" not in err
    assert reader.returncode == 1


def test_a_lease_name_of_unicode_digits_is_a_name(tmp_path: Path) -> None:
    done = vibesys_cli("clusters", "release", "²", cwd=tmp_path)
    assert "Traceback" not in done.stderr
    assert done.returncode == 2 and "no live cluster lease named ²" in done.stderr


def test_a_prewarm_that_meets_a_bad_ssh_configuration_stays_silent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from vibesys.adapters import transports
    from vibesys.config.slurm import SshTransportConfig

    def refuse(config: object) -> object:
        raise RuntimeError("passphrase_env is not set")

    monkeypatch.setattr(transports, "runner_from_config", refuse)
    escaped: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: escaped.append(args.exc_value))
    before = set(threading.enumerate())
    config = SshTransportConfig.model_validate(
        {"kind": "ssh", "host": "127.0.0.1", "user": "nobody", "port": 22}
    )
    transports.prewarm(config)
    for thread in set(threading.enumerate()) - before:
        thread.join(timeout=10)
    assert escaped == []  # the first real command reports it, in one line
