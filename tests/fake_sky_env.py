"""What a job of the fake `sky` (fake_sky.py, which imports this from its own directory) gets
of the environment: SkyPilot hands a job nothing of the client's environment but the task's
envs and the --env/--secret variables; the "login node" here is this host. Stdlib only."""

from __future__ import annotations

import os
import sys

#: What a job on the "cluster" inherits of this host's environment: the login node's own
#: basics and the fake's controls; SkyPilot hands a job nothing else of the client's
#: environment (the task's envs and the --env/--secret variables aside).
REMOTE_BASE = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "TMPDIR", "SLURM_CONF", "PYTHONPATH")


def inherited() -> dict[str, str]:
    """This host's variables a job sees: the login node's basics and the fake's controls."""
    return {k: v for k, v in os.environ.items() if k in REMOTE_BASE or k.startswith("FAKE_SKY_")}


def passed_variables(args: list[str]) -> tuple[dict[str, str], list[str]]:
    """The --env/--secret variables of `args` (NAME=VALUE, or NAME: this process's value, as
    SkyPilot's CLI reads them), and the other arguments."""
    found: dict[str, str] = {}
    rest: list[str] = []
    words = iter(args)
    for word in words:
        if word not in ("--env", "--secret"):
            rest.append(word)
            continue
        given = next(words)
        name, sep, value = given.partition("=")
        if not sep:
            if name not in os.environ:
                sys.stderr.write(f"Error: {name} is not set in local environment.\n")
                raise SystemExit(2)
            value = os.environ[name]
        found[name] = value
    return found, rest
