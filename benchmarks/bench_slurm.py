"""Slurm adapter costs on the project's local cluster (scripts/local-slurm up).

1. Reconcile of N active sbatch invocations (held jobs, so they stay PENDING): the scheduler
   commands one round issues, counted by shims on PATH that log and then exec the real client
   (target: at most 2), and the engine's own time per invocation, i.e. the round's wall time
   minus the time spent inside scheduler commands (target: under 1 ms).
2. Completion latency: how long after a short job's end (its marker's mtime) the journal
   records the end (the Finished transition). Target: about 2 s.
3. `vibesys run --adapter sbatch -- true` against `sbatch --wait --wrap true`, interleaved.
   Target: ratio of medians <= 1.5.
4. The same `vibesys run` over the SSH transport (the project's sshd on 127.0.0.1:2222, with
   the default settings: the host's processes share one connection) against the local
   transport, interleaved. Target (issue 11): ratio of medians <= 1.3. Informational: the
   same with `persist_seconds = 0` (each run logs in and starts its helper itself).
   Checks, in process with the commands counted at the transport: a submission over SSH is one
   remote command, and a status round of a queued job is one.

    .venv/bin/python benchmarks/bench_slurm.py [--quick] [--dir DIR]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path

from _common import (
    Verdicts,
    clean_env,
    cluster_env,
    interleave,
    median,
    parse_args,
    report,
    vibesys_argv,
)

#: This benchmark submits to the project's local Slurm cluster (tests mark it `slurm`).
NEEDS_CLUSTER = True

CLIENTS = ("squeue", "sacct", "sbatch", "scancel", "scontrol", "sinfo")
SSH_TARGET = 1.3


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    cluster_env()
    count, runs = (40, 2) if args.quick else (1000, 5)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="vibesys-bench-slurm-") as scratch:
        base = Path(scratch)
        config = write_config(base)
        verdicts = Verdicts()
        bench_reconcile(verdicts, base, config, count)
        bench_latency(verdicts, base, config, runs)
        bench_wall(verdicts, base, config, runs)
        ssh_config = write_ssh_config(base, Path(os.environ["VIBESYS_SLURM_DIR"]) / "ssh")
        bench_ssh_round_trips(verdicts, base, ssh_config)
        bench_ssh_wall(verdicts, base, config, ssh_config, runs)
    return verdicts.finish()


def write_config(base: Path) -> Path:
    path = base / "slurm.toml"
    path.write_text(
        '[slurm]\nname = "bench"\n'
        f'remote_workspace_root = "{base / "remote"}"\n'
        'poll_initial_seconds = 1.0\n\n[slurm.transport]\nkind = "local"\n\n'
        '[vibesys.agent_gpu]\npartitions = ["main"]\nmax_gpus = 2\n'
        "max_time_minutes = 30\ndefault_time_minutes = 5\n"
    )
    return path


def write_ssh_config(base: Path, ssh_dir: Path) -> Path:
    """The same site reached over SSH (the local cluster's sshd), with the default settings."""
    path = base / "slurm-ssh.toml"
    path.write_text(
        '[slurm]\nname = "bench-ssh"\n'
        f'remote_workspace_root = "{base / "remote"}"\n'
        'poll_initial_seconds = 1.0\n\n[slurm.transport]\nkind = "ssh"\n'
        'host = "127.0.0.1"\nport = 2222\nuser = "root"\n'
        f'identity_file = "{ssh_dir / "id_ed25519"}"\n'
        f'known_hosts = "{ssh_dir / "known_hosts"}"\n'
    )
    return path


def bench_ssh_round_trips(verdicts: Verdicts, base: Path, ssh_config: Path) -> None:
    """Remote commands per submission and per status round, counted at the transport."""
    from vibesys.adapters.base import JobContext, JobRef, Submission
    from vibesys.adapters.slurm.request import SbatchRequest
    from vibesys.adapters.slurm.sbatch import SbatchBackend
    from vibesys.config.load import load_slurm_config

    backend = SbatchBackend(load_slurm_config(ssh_config))
    runner = backend.runner
    commands: list[str] = []
    for method in ("run", "stream"):
        real = getattr(runner, method)

        def counted(*args: object, _real: object = real, **kwargs: object) -> object:
            commands.append(str(args[0][0]))  # type: ignore[index]
            return _real(*args, **kwargs)  # type: ignore[operator]

        setattr(runner, method, counted)
    request = SbatchRequest(site_config=str(ssh_config), time_minutes=5, partitions=("main",))
    name = "vibesys-benchrt0001-1"
    attempt_dir = base / "round-trips" / "1"
    receipt = backend.submit(
        Submission(
            "benchrt0001", 1, name, ["sleep", "30"], attempt_dir, JobContext(str(base)), request
        )
    )
    submit_commands = list(commands)
    commands.clear()
    ref = JobRef(name, receipt.job_id, attempt_dir, None, "benchrt0001", 1)
    status = backend.status([ref])[name]
    round_commands = list(commands)
    backend.cancel(ref)
    runner.close()  # type: ignore[attr-defined]
    report(
        [
            ("ssh: remote commands per submission", f"{len(submit_commands)} {submit_commands}"),
            ("ssh: remote commands per status round", f"{len(round_commands)} {round_commands}"),
        ]
    )
    verdicts.check(
        "ssh_submit_is_one_round_trip",
        len(submit_commands) == 1,
        f"{len(submit_commands)} remote command(s) for a submission",
    )
    verdicts.check(
        "ssh_status_round_is_one_round_trip",
        len(round_commands) == 1 and status.state.value in ("PENDING", "RUNNING"),
        f"{len(round_commands)} remote command(s) for a round; the job is {status.state}",
    )


def bench_ssh_wall(
    verdicts: Verdicts, base: Path, config: Path, ssh_config: Path, runs: int
) -> None:
    cwd = base / "ssh-wall"
    cwd.mkdir()

    def run_with(site: Path) -> float:
        t0 = time.perf_counter()
        subprocess.run(
            [
                *vibesys_argv(),
                "run",
                "--adapter",
                "sbatch",
                "--slurm-config",
                str(site),
                "--time",
                "5",
                "--",
                "true",
            ],
            cwd=cwd,
            capture_output=True,
            check=True,
            env=clean_env(),
        )
        return time.perf_counter() - t0

    over_ssh, local = interleave(runs, lambda: run_with(ssh_config), lambda: run_with(config))
    ratio = median(over_ssh) / median(local)
    # The same site with sharing off: what every run paid before, and what the first run of
    # a quiet host still pays (it logs in itself and starts the shared connection).
    alone_config = base / "slurm-ssh-alone.toml"
    alone_config.write_text(ssh_config.read_text() + "persist_seconds = 0\n")
    alone = [run_with(alone_config) for _ in range(max(runs // 2, 1))]
    report(
        [
            ("run --adapter sbatch -- true over SSH (median)", f"{median(over_ssh):.2f} s"),
            ("run --adapter sbatch -- true, local transport (median)", f"{median(local):.2f} s"),
            ("  over SSH, each run its own login (informational)", f"{median(alone):.2f} s"),
        ]
    )
    verdicts.ratio("sbatch_ssh_vs_local", ratio, f"(target <= {SSH_TARGET})")
    verdicts.target(
        "sbatch_ssh_vs_local", ratio <= SSH_TARGET, f"ssh/local ratio {ratio:.2f} <= {SSH_TARGET}"
    )


def shims(base: Path) -> tuple[Path, Path]:
    """A PATH directory whose scheduler clients log one line per call, then exec the real one."""
    directory, log = base / "shims", base / "calls.log"
    directory.mkdir()
    for client in CLIENTS:
        real = shutil.which(client)
        assert real, f"{client} not found: is the local Slurm cluster installed?"
        shim = directory / client
        shim.write_text(f'#!/bin/sh\necho {client} >> {log}\nexec {real} "$@"\n')
        shim.chmod(0o755)
    return directory, log


def bench_reconcile(verdicts: Verdicts, base: Path, config: Path, count: int) -> None:
    from vibesys.adapters.slurm.request import SbatchRequest
    from vibesys.adapters.slurm.sbatch import SbatchBackend
    from vibesys.engine import Engine, reconcile
    from vibesys.engine.core import registry_backend
    from vibesys.journal_schema import job_name, open_journal
    from vibesys.states import SubmitDispatched, SubmitIntended, Submitted

    journal = open_journal(base / "reconcile" / "journal.db")
    engine = Engine(journal)
    request = SbatchRequest(site_config=str(config), time_minutes=5, partitions=("main",))
    names = []
    for _ in range(count):
        inv = engine.prepare(adapter="sbatch", command=["true"], request=request)
        name = job_name(inv.id, 1)
        inv, _ = journal.commit_transition(inv, SubmitIntended(1, name))
        inv, _ = journal.commit_transition(inv, SubmitDispatched(1, name))
        names.append((inv, name))
    started = time.perf_counter()
    script = "".join(
        f"sbatch --parsable --hold --job-name={n} -o /dev/null --wrap true\n" for _, n in names
    )
    out = subprocess.run(["bash"], input=script, capture_output=True, text=True, check=True)
    submit_seconds = time.perf_counter() - started
    for (inv, _), job_id in zip(names, out.stdout.split(), strict=True):
        journal.commit_transition(inv, Submitted(job_id, "held for the benchmark"))
        journal.leases.release_lease(inv.id, engine.owner)
    shim_dir, log = shims(base)
    os.environ["PATH"] = f"{shim_dir}:{os.environ['PATH']}"
    inside = [0.0]

    def timed_factory(adapter: str, opts: object) -> SbatchBackend:
        backend = registry_backend(adapter, opts)  # type: ignore[arg-type]
        assert isinstance(backend, SbatchBackend)
        runner = backend.runner
        real_run = runner.run

        def run(*args: object, **kwargs: object) -> object:
            t0 = time.perf_counter()
            try:
                return real_run(*args, **kwargs)  # type: ignore[arg-type]
            finally:
                inside[0] += time.perf_counter() - t0

        runner.run = run  # type: ignore[method-assign]
        return backend

    try:
        rounds = []
        changed = 0
        for _ in range(3):
            log.write_text("")
            inside[0] = 0.0
            t0 = time.perf_counter()
            rows = reconcile(Engine(journal, timed_factory))  # type: ignore[arg-type]
            wall = time.perf_counter() - t0
            calls = [c for c in log.read_text().split() if c in CLIENTS]
            changed += count - sum(r.after == r.before for r in rows)
            rounds.append((wall, inside[0], calls))
    finally:
        os.environ["PATH"] = os.environ["PATH"].split(":", 1)[1]
        # By id, in chunks: scancel takes one --name only, and a command line has a limit.
        ids = out.stdout.split()
        for start in range(0, len(ids), 200):
            subprocess.run(["scancel", *ids[start : start + 200]], check=False)
    wall, scheduler_time, calls = min(rounds, key=lambda r: r[0] - r[1])
    engine_per_inv = (wall - scheduler_time) / count
    report(
        [
            ("reconcile: active sbatch invocations", str(count)),
            ("reconcile: held jobs submitted in", f"{submit_seconds:.1f} s"),
            ("reconcile: scheduler commands per round", f"{len(calls)} ({', '.join(calls)})"),
            ("reconcile: round wall time", f"{wall * 1e3:.0f} ms"),
            ("reconcile: inside scheduler commands", f"{scheduler_time * 1e3:.0f} ms"),
            ("reconcile: engine time per invocation", f"{engine_per_inv * 1e3:.3f} ms"),
        ]
    )
    verdicts.check(
        "reconcile_leaves_held_jobs_pending",
        changed == 0,
        f"{changed} of {3 * count} invocation rounds changed state or went missing",
    )
    verdicts.check(
        "scheduler_commands_per_round", len(calls) <= 2, f"{len(calls)} commands per round <= 2"
    )
    verdicts.target(
        "engine_time_per_invocation",
        engine_per_inv < 1e-3,
        f"engine time {engine_per_inv * 1e3:.3f} ms < 1 ms",
    )


def bench_latency(verdicts: Verdicts, base: Path, config: Path, runs: int) -> None:
    cwd = base / "latency"
    cwd.mkdir()
    lags = []
    wrong = []
    for _ in range(runs):
        result = subprocess.run(
            [
                *vibesys_argv(),
                "run",
                "--json",
                "--adapter",
                "sbatch",
                "--slurm-config",
                str(config),
                "--",
                "true",
            ],
            cwd=cwd,
            capture_output=True,
            text=True,
            env=clean_env(),
        )
        shown = json.loads(result.stdout)
        if (result.returncode, shown["state"], shown["exit_code"]) != (0, "DONE", 0):
            wrong.append(f"{shown['id']}: exit {result.returncode}, {shown['state']}")
        finished = next(h for h in shown["history"] if h["event"] == "Finished")
        marker = base / "remote" / shown["id"] / "1" / "exit_code"
        ended = marker.stat().st_mtime
        recorded = datetime.fromisoformat(finished["at"]).timestamp()
        lags.append(recorded - ended)
    report(
        [
            ("completion recorded after job end (median)", f"{median(lags):.2f} s"),
            ("completion recorded after job end (max)", f"{max(lags):.2f} s"),
        ]
    )
    verdicts.check("runs_complete", not wrong, f"{runs - len(wrong)} of {runs} DONE with exit 0")
    verdicts.target(
        "completion_latency",
        median(lags) <= 2.5,
        f"median completion latency {median(lags):.2f} s <= ~2 s",
    )


def bench_wall(verdicts: Verdicts, base: Path, config: Path, runs: int) -> None:
    cwd = base / "wall"
    cwd.mkdir()

    def ours() -> float:
        t0 = time.perf_counter()
        subprocess.run(
            [
                *vibesys_argv(),
                "run",
                "--adapter",
                "sbatch",
                "--slurm-config",
                str(config),
                "--",
                "true",
            ],
            cwd=cwd,
            capture_output=True,
            check=True,
            env=clean_env(),
        )
        return time.perf_counter() - t0

    def plain() -> float:
        t0 = time.perf_counter()
        subprocess.run(
            ["sbatch", "--wait", "-o", "/dev/null", "--wrap", "true"],
            cwd=cwd,
            capture_output=True,
            check=True,
        )
        return time.perf_counter() - t0

    a, b = interleave(runs, ours, plain)
    ratio = median(a) / median(b)
    report(
        [
            ("vibesys run --adapter sbatch -- true (median)", f"{median(a):.2f} s"),
            ("sbatch --wait --wrap true (median)", f"{median(b):.2f} s"),
        ]
    )
    verdicts.ratio("run_vs_sbatch_wait", ratio, "(target <= 1.5)")
    verdicts.target(
        "run_vs_sbatch_wait", ratio <= 1.5, f"run/sbatch --wait ratio {ratio:.2f} <= 1.5"
    )


if __name__ == "__main__":
    raise SystemExit(main())
