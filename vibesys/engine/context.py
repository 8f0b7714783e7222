"""A new invocation's id, and the job's context: the working directory and environment of
`vibesys run`, recorded at PREPARED, so every attempt gets exactly them, whichever process
submits it (`run`, `wait`, `reconcile` from another directory, with another environment).

The working directory goes into the journal. The environment may hold secrets, so it never
does: it is written to `context.env.json` in the invocation directory, created readable
by the owner only (mode 0600), and the journal records only that file's path.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path

from vibesys.adapters.base import JobContext
from vibesys.errors import BackendMisconfigured, UsageError
from vibesys.journal_schema import Invocation

ENV_FILE = "context.env.json"


def new_invocation_id() -> str:
    """16 hex digits: the creation time in milliseconds (11), then 20 random bits (5).

    Ids sort by creation, as Slurm's job ids do. That is also what the journal's b-trees want:
    the rows of the invocations being driven sit at the end of each table, in pages that
    stay warm, where random ids sent every commit to a cold page of its own and split pages
    all over the tables (more pages, and more bytes of WAL, per transition)."""
    random_bits = int.from_bytes(os.urandom(3), "big") >> 4  # 20 bits (no `secrets` import)
    return f"{time.time_ns() // 1_000_000:011x}{random_bits:05x}"


def record_environment(invocation_dir: Path, env: Mapping[str, str]) -> Path:
    """Write `env` to the invocation directory, owner-only, before the invocation is recorded."""
    path = invocation_dir / ENV_FILE
    try:
        invocation_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"env": dict(env)}, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise UsageError(
            f"cannot write the invocation directory {invocation_dir}: {exc.strerror or exc}"
        ) from None
    return path


def load_context(inv: Invocation) -> JobContext:
    """The context recorded for `inv`. Invocations recorded before contexts existed run in
    this process's working directory and environment, as they always did."""
    if inv.env_file is None or inv.cwd is None:
        return JobContext(os.getcwd(), dict(os.environ))
    try:
        with open(inv.env_file, encoding="utf-8") as handle:
            env = json.load(handle)["env"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BackendMisconfigured(
            f"the recorded environment of {inv.id} cannot be read ({inv.env_file}: {exc})",
            fix="restore the file, or run the command again",
        ) from None
    return JobContext(inv.cwd, {str(k): str(v) for k, v in env.items()})
