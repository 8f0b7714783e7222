"""A job runs in its caller's own context: started under `unshare -n`, `setpriv --nnp
--bounding-set=-all`, inside a child cgroup, with `ulimit -t` (and other limits), `taskset`,
`nice`/`ionice`/`oom_score_adj`, or with signals ignored, the job of `vibesys run` sees exactly
what the same command started directly there sees: the fields of /proc/self/status that make a
context (ids, capabilities, no-new-privileges, seccomp, affinity, blocked and ignored signals,
umask), /proc/self/cgroup, its namespaces, `ulimit -a`. Run after run in one project, each
context in turn and then in the reverse order, so nothing of one run reaches the next.

Real kernel features, as root. Each context is checked to differ from the plain one first (a
context the kernel does not give here is skipped, naming why)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

#: The fields of /proc/self/status that are a context (not the process's own pid or memory).
FIELDS = (
    "Uid|Gid|Groups|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp|Seccomp_filters|"
    "Cpus_allowed_list|Mems_allowed_list|SigBlk|SigIgn|Umask"
)
PROBE = (
    f"grep -E '^({FIELDS}):' /proc/self/status"
    + r"""
echo "cgroup $(tr '\n' ' ' < /proc/self/cgroup)"
for ns in net mnt uts ipc user pid cgroup; do echo "ns $ns $(readlink /proc/self/ns/$ns)"; done
echo "oom_score_adj $(cat /proc/self/oom_score_adj) nice $(cut -d' ' -f19 /proc/self/stat)"
echo "ionice $(ionice -p $$)"
ulimit -a
"""
)

#: Joins the child cgroup CGROUP, then runs its arguments there.
JOIN_CGROUP = 'echo $$ > "$CGROUP/cgroup.procs" && exec "$@"'


def writable_cgroup() -> Path | None:
    """A cgroup directory this test may create a child in (cgroup v2 first, then v1's pids)."""
    with open("/proc/mounts", encoding="utf-8") as mounts:
        found = [line.split()[1:3] for line in mounts]
    candidates = [Path(m) for m, kind in found if kind == "cgroup2"]
    candidates += [Path(m) for m, kind in found if kind == "cgroup" and m.endswith("/pids")]
    for root in candidates:
        if os.access(root, os.W_OK):
            return root
    return None


@pytest.fixture
def cgroup() -> object:
    root = writable_cgroup()
    if root is None:
        pytest.skip("no writable cgroup hierarchy in this container")
    child = root / f"vibesys-test-{os.getpid()}"
    try:
        child.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot create a child cgroup under {root}: {exc.strerror}")
    yield child
    # The jobs have ended; their processes left the cgroup with them.
    for _ in range(50):
        try:
            child.rmdir()
            break
        except OSError:
            import time

            time.sleep(0.1)


def contexts(cgroup: Path) -> dict[str, list[str]]:
    """How a caller gets each context: a command prefix."""
    sh = ["sh", "-c"]
    return {
        "plain": [],
        "network_namespace": ["unshare", "-n"],
        "no_new_privileges": ["setpriv", "--nnp", "--bounding-set=-all", "--inh-caps=-all"],
        "child_cgroup": ["env", f"CGROUP={cgroup}", *sh, JOIN_CGROUP, "join"],
        "limits": [*sh, 'ulimit -t 7; ulimit -c 0; ulimit -s 4096; ulimit -n 200; exec "$@"', "l"],
        "affinity": ["taskset", "-c", "0"],
        "priority": [
            "nice",
            "-n",
            "7",
            "ionice",
            "-c",
            "3",
            *sh,
            'echo 321 > /proc/self/oom_score_adj && umask 027 && exec "$@"',
            "p",
        ],
        "ignored_signals": [*sh, "trap '' INT QUIT HUP TERM USR1; exec \"$@\"", "s"],
    }


def seen(prefix: list[str], cwd: Path, *, through_vibesys: bool) -> str:
    job = ["sh", "-c", PROBE]
    argv = [*prefix, *([sys.executable, "-m", "vibesys", "run", "--"] if through_vibesys else [])]
    env = {k: v for k, v in os.environ.items() if k != "VIBESYS_FAILPOINTS"}
    done = subprocess.run(
        [*argv, *job],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (prefix, done.stderr)
    return done.stdout


def test_a_job_sees_exactly_its_callers_context_run_after_run(tmp_path: Path, cgroup: Path) -> None:
    ways = contexts(cgroup)
    direct = {name: seen(prefix, tmp_path, through_vibesys=False) for name, prefix in ways.items()}
    for name, text in direct.items():
        if name != "plain":
            assert text != direct["plain"], f"{name} gives no context of its own here"
    order = list(ways)
    for name in [*order, *reversed(order)]:
        through = seen(ways[name], tmp_path, through_vibesys=True)
        assert through == direct[name], f"{name}:\n{_diff(direct[name], through)}"


def _diff(expected: str, actual: str) -> str:
    import difflib

    return "\n".join(difflib.unified_diff(expected.splitlines(), actual.splitlines(), lineterm=""))
