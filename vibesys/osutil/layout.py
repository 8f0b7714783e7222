"""Where an attempt's logs are kept on this host: `<invocation_dir>/<attempt>/stdout` and
`stderr`.

Every adapter keeps (or spools) its job's logs there, so the read-only `vibesys logs` finds
them from the journal alone, without building an adapter. Stdlib only."""

from __future__ import annotations

from pathlib import Path
from typing import Final

STDOUT: Final = "stdout"
STDERR: Final = "stderr"


def attempt_dir(invocation_dir: str | Path, attempt: int) -> Path:
    """The local directory of `attempt` of the invocation whose directory is `invocation_dir`."""
    return Path(invocation_dir) / str(attempt)


def log_paths(attempt_dir: Path) -> tuple[Path, Path]:
    """The local stdout and stderr files of the attempt whose directory is `attempt_dir`."""
    return attempt_dir / STDOUT, attempt_dir / STDERR
