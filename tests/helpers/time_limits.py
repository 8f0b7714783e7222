"""Each test's time limit: pytest-timeout's, raised for the slow markers (conftest.py applies
them, and stops a run that still hangs past the limit)."""

from __future__ import annotations

import pytest

#: Per-test limits (seconds) by marker, over the default `timeout` in pyproject.toml. The Slurm
#: tests wait on a real scheduler (requeues take ~15 s, a job's own `--time 1` a minute or
#: more) and the first one may bring the cluster up; the crash tests kill and reconcile many
#: times. An explicit `@pytest.mark.timeout(N)` on a test wins over these.
MARKER_TIMEOUTS = {"slurm": 900.0, "crash": 300.0}


def timeout_of(item: pytest.Item) -> float:
    """The pytest-timeout limit that applies to `item` (0: none): its marker, else `--timeout`,
    else the `timeout` setting."""
    marker = item.get_closest_marker("timeout")
    if marker is not None and (marker.args or "timeout" in marker.kwargs):
        return float(marker.args[0] if marker.args else marker.kwargs["timeout"])
    given = item.config.getoption("timeout", None)
    return float(given if given is not None else item.config.getini("timeout") or 0)
