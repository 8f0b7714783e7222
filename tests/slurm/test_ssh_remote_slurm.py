"""sbatch over the SSH transport, end to end, against the real sshd and the real cluster:
snapshot, log spool and artifacts; a dropped connection; crashes while logs stream and while
artifacts come home; hostile strings."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.slurm import LOCAL_SLURM, cli, run_args, show
from vibesys.adapters.base import JobContext, JobRef, RemoteState, Submission
from vibesys.adapters.slurm.backend import SlurmRunDirs
from vibesys.adapters.slurm.request import SbatchRequest
from vibesys.adapters.slurm.sbatch import SbatchBackend
from vibesys.config.load import load_slurm_config
from vibesys.engine import DriveOptions, Engine, drive
from vibesys.journal_schema import ArtifactState, open_journal
from vibesys.states import Outcome

pytestmark = pytest.mark.slurm


@pytest.fixture
def ssh_toml(tmp_path: Path, slurm_cluster: dict[str, str]) -> Path:
    ssh_dir = Path(slurm_cluster["VIBESYS_SLURM_DIR"]) / "ssh"
    path = tmp_path / "ssh.toml"
    path.write_text(
        "[slurm]\n"
        'name = "over-ssh"\n'
        f"remote_workspace_root = {json.dumps(str(tmp_path / 'remote'))}\n"
        "poll_initial_seconds = 0.2\npoll_max_seconds = 1\n\n"
        "[slurm.transport]\n"
        'kind = "ssh"\nhost = "127.0.0.1"\nport = 2222\nuser = "root"\n'
        f"identity_file = {json.dumps(str(ssh_dir / 'id_ed25519'))}\n"
        f"known_hosts = {json.dumps(str(ssh_dir / 'known_hosts'))}\n"
        "reconnect_attempts = 8\nreconnect_backoff_seconds = 0.5\n"
    )
    return path


def ssh_args(config: Path, *options: str) -> list[str]:
    """`vibesys run --adapter sbatch` over SSH (no agent_gpu table there: --time is required)."""
    return run_args("sbatch", config, "--time", "5", *options)


def our_sshd(cluster: dict[str, str]) -> int:
    """The pid of the project's sshd listener (never another sshd on this machine)."""
    for line in (Path(cluster["VIBESYS_SLURM_DIR"]) / "pids").read_text().splitlines():
        name, pid, _start = line.split()
        if name == "sshd":
            return int(pid)
    raise AssertionError("scripts/local-slurm recorded no sshd")


def kill_sshd_tree(root: int) -> None:
    """SIGKILL the sshd listener `root` and every sshd process below it: every connection
    drops. The shells and commands they ran are left to end on their own (a SIGKILLed login
    shell can leave its profile's lock files behind for every later login)."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            names[int(proc.name)] = stat[stat.index("(") + 1 : stat.rindex(")")]
            parents[int(proc.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    doomed, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        doomed.update(children)
        frontier.extend(children)
    for pid in doomed:
        if names.get(pid) == "sshd":
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def shown_id(stdout: str) -> str:
    return str(json.loads(stdout)["id"])


def remote_file(tmp_path: Path, inv: dict[str, Any], name: str, attempt: int = 1) -> bytes:
    return (tmp_path / "remote" / inv["id"] / str(attempt) / name).read_bytes()


def spooled(inv: dict[str, Any], name: str, attempt: int = 1) -> bytes:
    return (Path(inv["invocation_dir"]) / str(attempt) / name).read_bytes()


def test_end_to_end_snapshot_logs_artifacts(tmp_path: Path, ssh_toml: Path) -> None:
    cand = tmp_path / "cand"
    (cand / "src").mkdir(parents=True)
    (cand / "src" / "eval.py").write_text(
        "import json, os, sys\n"
        "os.makedirs('out', exist_ok=True)\n"
        "json.dump({'accuracy': 0.93}, open('out/result.json', 'w'))\n"
        "sys.stdout.buffer.write(b'score 0.93\\n\\xff raw byte\\n')\n"
        "print('to stderr', file=sys.stderr)\n"
    )
    args = ssh_args(ssh_toml, "--json", "--candidate", str(cand), "--artifact", "out/*.json")
    env = {k: v for k, v in os.environ.items() if k != "VIBESYS_FAILPOINTS"}
    result = subprocess.run(
        [sys.executable, "-m", "vibesys", *args, "python3", "src/eval.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    # --json: the job's stdout goes to our stderr, byte for byte; the record alone to stdout.
    assert b"score 0.93\n\xff raw byte\n" in result.stderr, result.stderr
    inv = show(tmp_path, shown_id(result.stdout.decode()))
    assert (inv["state"], inv["outcome"]) == ("DONE", "COMPLETED")
    assert inv["snapshot_digest"]
    for stream in ("stdout", "stderr"):
        assert spooled(inv, stream) == remote_file(tmp_path, inv, stream)
    assert spooled(inv, "stdout") == b"score 0.93\n\xff raw byte\n"
    [artifact] = inv["artifacts"]
    assert (artifact["path"], artifact["state"]) == ("out/result.json", "acknowledged")
    local = Path(artifact["local_path"]).read_bytes()
    assert json.loads(local) == {"accuracy": 0.93}
    assert artifact["sha256"] == hashlib.sha256(local).hexdigest()


def test_connection_dropped_while_the_job_writes(
    tmp_path: Path, ssh_toml: Path, slurm_cluster: dict[str, str]
) -> None:
    script = "for i in $(seq 1 60); do echo line $i; sleep 0.1; done; echo end"
    argv = [
        sys.executable,
        "-m",
        "vibesys",
        *ssh_args(ssh_toml, "--json"),
        "sh",
        "-c",
        script,
    ]
    env = {k: v for k, v in os.environ.items() if k != "VIBESYS_FAILPOINTS"}
    with subprocess.Popen(
        argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as proc:
        time.sleep(3)
        # Restart our sshd: its listener and every session die, so our connection drops.
        kill_sshd_tree(our_sshd(slurm_cluster))
        time.sleep(1)
        subprocess.run([str(LOCAL_SLURM), "up"], check=True, capture_output=True, timeout=120)
        out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    inv = show(tmp_path, shown_id(out))
    expected = "".join(f"line {i}\n" for i in range(1, 61)) + "end\n"
    assert remote_file(tmp_path, inv, "stdout").decode() == expected
    assert spooled(inv, "stdout") == remote_file(tmp_path, inv, "stdout")
    assert len(inv["attempts"]) == 1, "a dropped connection must never resubmit"


def finish(tmp_path: Path, inv_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        reconciled = cli("reconcile", cwd=tmp_path)
        if reconciled.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    waited = cli("wait", inv_id, cwd=tmp_path)
    assert "Traceback" not in waited.stderr
    assert cli("journal", "verify", cwd=tmp_path).returncode == 0
    return show(tmp_path, inv_id)


def test_crash_while_logs_stream_then_reconcile(tmp_path: Path, ssh_toml: Path) -> None:
    script = "for i in $(seq 1 30); do echo line $i; sleep 0.1; done"
    crashed = cli(
        *ssh_args(ssh_toml),
        "sh",
        "-c",
        script,
        cwd=tmp_path,
        env={"VIBESYS_FAILPOINTS": "after_spool_append"},
    )
    assert crashed.returncode == 137
    [listed] = json.loads(cli("journal", "list", "--json", cwd=tmp_path).stdout)["invocations"]
    inv = finish(tmp_path, listed["id"])
    assert (inv["state"], inv["exit_code"]) == ("DONE", 0)
    assert spooled(inv, "stdout") == remote_file(tmp_path, inv, "stdout")
    assert spooled(inv, "stdout").count(b"line 1\n") == 1


def test_crash_while_artifacts_come_home_then_reconcile(tmp_path: Path, ssh_toml: Path) -> None:
    script = "mkdir -p out; for i in 1 2 3; do head -c 100000 /dev/urandom > out/part$i.bin; done"
    crashed = cli(
        *ssh_args(ssh_toml, "--artifact", "out/*.bin"),
        "sh",
        "-c",
        script,
        cwd=tmp_path,
        env={"VIBESYS_FAILPOINTS": "after_artifact_download"},
    )
    assert crashed.returncode == 137
    [listed] = json.loads(cli("journal", "list", "--json", cwd=tmp_path).stdout)["invocations"]
    inv = finish(tmp_path, listed["id"])
    assert (inv["state"], inv["outcome"]) == ("DONE", "COMPLETED")
    assert [a["state"] for a in inv["artifacts"]] == ["acknowledged"] * 3
    for artifact in inv["artifacts"]:
        remote = tmp_path / "remote" / inv["id"] / "1" / "work" / artifact["path"]
        assert Path(artifact["local_path"]).read_bytes() == remote.read_bytes()


def test_tampered_artifact_download_is_detected(
    tmp_path: Path, ssh_toml: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fetch = SlurmRunDirs.fetch_artifact

    def corrupted(self: SlurmRunDirs, job: Any, path: str, sink: Any) -> None:
        real_fetch(self, job, path, sink)
        sink.write(b"!")  # a byte more than the remote side listed

    monkeypatch.setattr(SlurmRunDirs, "fetch_artifact", corrupted)
    journal = open_journal(tmp_path / "j.db")
    engine = Engine(journal)
    request = SbatchRequest(
        site_config=str(ssh_toml), time_minutes=5, partitions=("main",), artifacts=("result.txt",)
    )
    inv = engine.prepare(
        adapter="sbatch", command=["sh", "-c", "echo 42 > result.txt"], request=request
    )
    final = drive(engine, inv, DriveOptions())
    assert final.outcome is Outcome.COMPLETED
    [row] = journal.progress.artifacts(inv.id)
    assert row.state is ArtifactState.MISMATCH and "sha256" in str(row.detail)


def test_hostile_strings_reach_the_remote_command_intact(tmp_path: Path, ssh_toml: Path) -> None:
    hostile = [
        "it's",
        '"quoted"',
        "$(touch PWNED)",
        "`touch PWNED2`",
        "two words",
        "new\nline",
        "*",
        "a;b|c&d",
        "$HOME",
        "back\\slash",
    ]
    printer = "import json, sys; print(json.dumps(sys.argv[1:]))"
    result = cli(
        *ssh_args(ssh_toml, "--json", "--artifact", "dir with space/*.txt"),
        "sh",
        "-c",
        'mkdir -p "dir with space"; echo ok > "dir with space/f.txt"; exec python3 -c "$0" "$@"',
        printer,
        *hostile,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    inv = show(tmp_path, shown_id(result.stdout))
    assert json.loads(spooled(inv, "stdout")) == hostile
    assert not list(tmp_path.rglob("PWNED*"))
    assert [a["path"] for a in inv["artifacts"]] == ["dir with space/f.txt"]


def test_a_round_that_sees_jobs_end_is_one_remote_command(tmp_path: Path, ssh_toml: Path) -> None:
    """Over SSH a status round is one round trip, also when jobs have ended (their markers
    come back with squeue's answer), and what it finds equals what the local transport finds
    on the same cluster."""
    config = load_slurm_config(ssh_toml)
    backend = SbatchBackend(config)
    runner = backend.runner
    commands: list[list[str]] = []
    real_run = runner.run

    def counted(argv: list[str], **kwargs: Any) -> Any:
        commands.append(list(argv))
        return real_run(argv, **kwargs)

    runner.run = counted  # type: ignore[method-assign]
    request = SbatchRequest(site_config=str(ssh_toml), time_minutes=5, partitions=("main",))
    refs = []
    for index, command in enumerate((["true"], ["sh", "-c", "exit 3"], ["sleep", "60"])):
        invocation = f"sshround{index:04d}"
        name, attempt_dir = f"vibesys-{invocation}-1", tmp_path / "local" / invocation / "1"
        receipt = backend.submit(
            Submission(
                invocation, 1, name, command, attempt_dir, JobContext(str(tmp_path)), request
            )
        )
        refs.append(JobRef(name, receipt.job_id, attempt_dir, None, invocation, 1))
    deadline = time.monotonic() + 60
    while len(backend.probe(refs[:2])) < 2:
        assert time.monotonic() < deadline, "the two short jobs never wrote their markers"
        time.sleep(0.3)
    # A marker is written just before the job step ends; squeue may show the job running a
    # moment longer, and then the round rightly says RUNNING. Every round is one command.
    while True:
        commands.clear()
        found = backend.status(refs)
        assert len(commands) == 1, commands
        if all(
            found[r.job_name].state not in (RemoteState.PENDING, RemoteState.RUNNING)
            for r in refs[:2]
        ):
            break
        assert time.monotonic() < deadline, found
        time.sleep(0.3)
    assert [found[r.job_name].state for r in refs[:2]] == [
        RemoteState.COMPLETED,
        RemoteState.FAILED,
    ]
    assert found[refs[2].job_name].state in (RemoteState.PENDING, RemoteState.RUNNING)
    assert [found[r.job_name].exit_code for r in refs[:2]] == [0, 3]
    backend.cancel(refs[2])
    runner.close()  # type: ignore[attr-defined]


def test_a_collection_over_ssh_is_one_command_plus_the_downloads(
    tmp_path: Path, ssh_toml: Path
) -> None:
    """`vibesys run` over SSH with two artifacts: the collection (the logs' rest, the marker,
    the listing) is one remote command, then one download per artifact; the logs arrive whole
    and the artifacts verified."""
    log = tmp_path / "commands.json"
    wrapper = tmp_path / "counted_vibesys.py"
    wrapper.write_text(
        "import atexit, json, sys\n"
        "from vibesys.adapters.transports.ssh import SshTransport\n"
        "seen = []\n"
        "for name in ('run', 'stream'):\n"
        "    def counted(self, argv, *a, _real=getattr(SshTransport, name), **k):\n"
        "        seen.append(list(argv)[:6])\n"
        "        return _real(self, argv, *a, **k)\n"
        "    setattr(SshTransport, name, counted)\n"
        f"atexit.register(lambda: open({str(log)!r}, 'w').write(json.dumps(seen)))\n"
        "sys.argv[0] = 'vibesys'\n"
        "from vibesys.cli.main import main\n"
        "main()\n"
    )
    program = "printf 'out %s\\n' 1 2 3; echo err >&2; echo A > a.txt; echo B > b.txt"
    args = ssh_args(ssh_toml, "--artifact", "a.txt", "--artifact", "b.txt")
    done = subprocess.run(
        [sys.executable, str(wrapper), *args, "sh", "-c", program],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr.splitlines()[0]) == ("out 1\nout 2\nout 3\n", "err")
    commands = json.loads(log.read_text())
    gathered = [i for i, argv in enumerate(commands) if "vibesys-gather" in argv]
    assert len(gathered) == 1, commands
    assert [argv[0] for argv in commands[gathered[0] + 1 :]] == ["cat", "cat"], commands
    [inv] = json.loads(cli("journal", "list", "--json", cwd=tmp_path).stdout)["invocations"]
    artifacts = show(tmp_path, inv["id"])["artifacts"]
    assert sorted((a["path"], a["state"]) for a in artifacts) == [
        ("a.txt", "acknowledged"),
        ("b.txt", "acknowledged"),
    ]
