"""A scripted fake `sky` (0.14.1) for fast tests. Stdlib only; run as a program.

Its outputs copy the real formats captured in tests/data/sky/ (ANSI codes, notices before the
JSON, rc values). Jobs really run: `exec` starts the task's `run:` with bash, detached, with the
environment SkyPilot gives a job (SKYPILOT_INTERNAL_JOB_ID, SLURM_JOB_ID of the allocation) in
a copy of the workdir, so the wrapper's claim and markers land on the local file system.

State is one JSON file ($FAKE_SKY_STATE); every invocation is appended to $FAKE_SKY_STATE.calls.
Test controls (not sky commands): `fake-lose NAME [--as STATE]` ends the allocation under the
cluster (its jobs die, the next refresh drops it, sacct records STATE); `fake-inflight N`
pretends N exec requests are active;
`fake-fail-exec N` makes the next N execs fail as an API server error does (rc 1, nothing
submitted, nothing in the output proves it); `fake-api-down N` makes the next N sky commands of
any kind fail so (the API server unreachable mid-job), while the jobs run on;
`fake-ssh-refused N` makes the next N sky commands fail as SkyPilot does when the login node
refuses its ssh (an expired certificate), while the jobs run on;
`fake-stall-down SECONDS` makes the next `down` hang that long before it answers (a frozen
control plane: the caller's timeout ends the wait, the cluster is not torn down);
`fake-stall-launch SECONDS` makes the next `launch` take that long before it brings the cluster
up (a slow allocation).
`fake-sinfo TEXT` and `fake-maxtime MINUTES`: the login node's partitions (fake_sky_slurm.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fake_sky_env import inherited, passed_variables
from fake_sky_jobs import children, ended_at, job_status, kill
from fake_sky_slurm import USER_HASH, launch_refused, sacct, sinfo, squeue

STATE = Path(os.environ["FAKE_SKY_STATE"])
ROOT = STATE.parent
VERSION = os.environ.get("FAKE_SKY_VERSION", "0.14.1")
DIM, RESET, GREEN = "\x1b[2m", "\x1b[0m", "\x1b[32m"
YELLOW, RED, CYAN = "\x1b[33m", "\x1b[31m", "\x1b[36m"


def load() -> dict[str, Any]:
    if STATE.exists():
        data: dict[str, Any] = json.loads(STATE.read_text())
        return data
    return {"clusters": {}, "next_allocation": 200, "inflight": 0}


def save(state: dict[str, Any]) -> None:
    STATE.write_text(json.dumps(state, indent=1))


def out(text: str) -> None:
    sys.stdout.write(text)


def not_exist(name: str) -> int:
    message = f"{YELLOW}Cluster '{name}' does not exist.{RESET}"
    sys.stderr.write(f"sky.exceptions.ClusterDoesNotExist: {message}\n")
    return 1


def task_resources(task: dict[str, Any]) -> dict[str, Any]:
    resources = task.get("resources") or {}
    return {
        "nodes": task.get("num_nodes", 1),
        "cpus": str(resources.get("cpus", 2)),
        "accelerators": resources.get("accelerators"),
        "region": ([*resources.get("infra", "slurm/localslurm").split("/"), "?"])[1],
    }


def cluster_json(name: str, cluster: dict[str, Any]) -> dict[str, Any]:
    accelerators = cluster["accelerators"]
    if accelerators:
        kind, count = accelerators.split(":")
        accelerators = {kind: int(count)}
    return {
        "name": name,
        "launched_at": cluster["launched_at"],
        "status": cluster["status"],
        "cloud": "Slurm",
        "region": cluster["region"],
        "nodes": cluster["nodes"],
        "cpus": cluster["cpus"],
        "accelerators": accelerators,
        "resources_str": f"{cluster['nodes']}x(cpus={cluster['cpus']}, mem=0, ...)",
        "cluster_name_on_cloud": None,
        # Like 0.14.1: a refresh clears the node names (and with them the allocation id).
        "node_names": None if cluster.get("refreshed") else f"job{cluster['allocation']}-node1",
        "user_hash": USER_HASH,
    }


def cmd_status(state: dict[str, Any], args: list[str]) -> int:
    refresh = "--refresh" in args
    names = [a for a in args if not a.startswith("-") and a != "json"]
    clusters = state["clusters"]
    if refresh:
        for name in [n for n in clusters if clusters[n].get("lost") and (not names or n in names)]:
            del clusters[name]
            out(f"\n{YELLOW}Cluster terminated on the cloud: {name}{RESET}\n")
    shown = [n for n in clusters if not names or n in names]
    if refresh:
        for name in shown:
            clusters[name]["refreshed"] = True
    missing = [n for n in names if n not in clusters]
    if missing:
        out(f"Cluster(s) not found: \x1b[1m{', '.join(missing)}{RESET}.\n")
    out(json.dumps([cluster_json(n, clusters[n]) for n in shown], indent=2) + "\n")
    return 0


def cmd_launch(state: dict[str, Any], args: list[str]) -> int:
    name = args[args.index("-c") + 1]
    stall = state.pop("stall_launch", 0)
    if stall:
        save(state)
        time.sleep(stall)
        state.clear()
        state.update(load())  # what other commands wrote meanwhile
    task = json.loads(Path(args[-1]).read_text())
    wanted = task_resources(task)
    clusters = state["clusters"]
    current = clusters.get(name)
    if current is not None and not current.get("lost"):
        have = {k: current[k] for k in wanted}
        if have != wanted:
            sys.stderr.write(
                "sky.exceptions.ResourcesMismatchError: Requested resources do not match "
                "the existing cluster.\n"
                f"  Requested:\t{wanted}\n  Existing:\t{have}\n"
            )
            return 1
        out(f"Running on cluster: {name}\n{GREEN}✓ Cluster launched: {name}.{RESET}\n")
        return 0
    if launch_refused(state, task):
        return 1  # SkyPilot tore down what it made: no cluster
    allocation = state["next_allocation"]
    state["next_allocation"] += 1
    clusters[name] = {
        **wanted,
        "status": "UP",
        "allocation": allocation,
        "launched_at": int(time.time()),
        "jobs": [],
        "next_job": 1,
    }
    out(
        f"YAML to run: {args[-1]}\nConsidered resources ({wanted['nodes']} node):\n"
        f"{RESET}⚙︎ Launching on Slurm {wanted['region']}{RESET} (main).\n"
        f"{DIM}└── {RESET}{DIM}Instance is up.{RESET}\n"
        f"{RESET}{GREEN}✓ Cluster launched: {name}.{RESET}{RESET}\n"
    )
    return 0


def cmd_exec(state: dict[str, Any], args: list[str]) -> int:
    passed, args = passed_variables(args)
    files = [a for a in args if a.endswith(".json")]
    name = next(a for a in args if not a.startswith("-") and a not in files)
    out(f"YAML to run: {files[0]}\nSubmitting job to cluster: {name}\n")
    cluster = state["clusters"].get(name)
    if cluster is None:
        return not_exist(name)
    if cluster.get("lost"):
        out(f"srun: error: Slurm job {cluster['allocation']} has expired\n")
        sys.stderr.write("sky.exceptions.CommandError: Command source ... failed (code 1).\n")
        sys.stderr.write(f"{RED}Failed to fetch job id.{RESET}\n")
        return 1
    if state.get("fail_exec", 0) > 0:
        state["fail_exec"] -= 1
        sys.stderr.write("sky.exceptions.ApiServerConnectionError: Could not connect to the API\n")
        return 1
    task = json.loads(Path(files[0]).read_text())
    job_id = cluster["next_job"]
    cluster["next_job"] += 1
    base = ROOT / f"jobs-{name}-{cluster['allocation']}-{job_id}"
    workdir = base / "sky_workdir"
    if task.get("workdir"):
        shutil.copytree(task["workdir"], workdir)
    else:
        workdir.mkdir(parents=True)
    env = {
        **inherited(),
        **(task.get("envs") or {}),
        **passed,
        "SKYPILOT_INTERNAL_JOB_ID": str(job_id),
        "SLURM_JOB_ID": str(cluster["allocation"]),
    }
    rc_file, log = base / "rc", base / "run.log"
    runner = 'bash -c "$1" >> "$2" 2>&1; echo $? > "$3"'
    with open(os.devnull, "rb") as null:
        process = subprocess.Popen(
            ["sh", "-c", runner, "fake-sky-job", task["run"], str(log), str(rc_file)],
            cwd=workdir,
            env=env,
            stdin=null,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    cluster["jobs"].insert(
        0,
        {
            "job_id": job_id,
            "job_name": task.get("name", "sky-cmd"),
            "pid": process.pid,
            "rc_file": str(rc_file),
            "log": str(log),
            "submitted_at": time.time(),
        },
    )
    out(f"{RESET}⚙︎ Job submitted, ID: {job_id}\n")
    return 0


def cmd_queue(state: dict[str, Any], args: list[str]) -> int:
    name = args[0]
    out(f"Fetching job queue for: {name}\n")
    cluster = state["clusters"].get(name)
    if cluster is None or cluster.get("lost"):
        out(f"Failed to get the job queue for cluster '{name}'.\n")
        out(f"  sky.exceptions.ClusterDoesNotExist: Cluster '{name}' does not exist.\n{{}}\n")
        return 0
    jobs = [
        {
            "job_id": j["job_id"],
            "job_name": j["job_name"],
            "username": "root",
            "user_hash": USER_HASH,
            "submitted_at": j["submitted_at"],
            "start_at": j["submitted_at"],
            "end_at": ended_at(j),
            "resources": "1x[CPU:1+]",
            "status": job_status(j),
            "log_path": "~/sky_logs/x",
            "metadata": {},
            "links": {},
        }
        for j in cluster["jobs"]
    ]
    out(json.dumps({name: jobs}, indent=2) + "\n")
    return 0


def cmd_cancel(state: dict[str, Any], args: list[str]) -> int:
    rest = [a for a in args if a != "-y"]
    name, ids = rest[0], [int(a) for a in rest[1:]]
    cluster = state["clusters"].get(name)
    if cluster is None:
        sys.stderr.write("Usage: sky cancel [OPTIONS] CLUSTER [JOBS]...\n\n")
        sys.stderr.write(f"Error: Cluster '{name}' does not exist.\n")
        return 2
    out(f"{YELLOW}Cancelling jobs ({', '.join(map(str, ids))}) on cluster '{name}'...{RESET}\n")
    for job in cluster["jobs"]:
        if job["job_id"] in ids and job_status(job) == "RUNNING":
            kill(job)
            job["cancelled"] = True
    out(f"Cancelled job ID(s): {', '.join(map(str, ids))}\n")
    return 0


def cmd_down(state: dict[str, Any], args: list[str]) -> int:
    name = next(a for a in args if a != "-y")
    stall = state.pop("stall_down", 0)
    if stall:
        save(state)
        time.sleep(stall)
    cluster = state["clusters"].pop(name, None)
    if cluster is None:
        out(f"Cluster(s) not found: \x1b[1m{name}{RESET}.\n")
        out("Cluster(s) not found (tip: see `sky status`).\n")
        return 0
    for job in cluster["jobs"]:
        kill(job)
    if not cluster.get("lost"):  # a live `sky down` is recorded COMPLETED
        state.setdefault("ended", {})[str(cluster["allocation"])] = "COMPLETED"
    out(f"\n\n\nTerminating cluster {name}...done.\n")
    return 0


def cmd_logs(state: dict[str, Any], args: list[str]) -> int:
    name, job_id = args[0], int(args[1])
    cluster = state["clusters"].get(name)
    if cluster is None:
        return not_exist(name)
    for job in cluster["jobs"]:
        if job["job_id"] == job_id:
            out(f"{YELLOW}Tailing logs of job {job_id} on cluster '{name}'...{RESET}\n")
            log = Path(job["log"])
            for line in log.read_text().splitlines() if log.exists() else []:
                out(f"{CYAN}({job['job_name']}, pid={job['pid']}){RESET} {line}\n")
            out(f"{RESET}{GREEN}✓ Job finished (status: {job_status(job)}).{RESET}{RESET}\n")
            return 0
    return 102


def cmd_api(state: dict[str, Any], args: list[str]) -> int:
    rows = [
        {"request_id": f"req-{i}", "name": "sky.exec", "status": "RUNNING", "cluster_name": None}
        for i in range(state.get("inflight", 0))
    ]
    out(json.dumps(rows, indent=2) + "\n")
    return 0


def cmd_lose(state: dict[str, Any], args: list[str]) -> int:
    """`fake-lose NAME [--signal-command] [--as STATE]`: the allocation ends. Its jobs die with
    it, or with --signal-command only the commands are signalled (SIGTERM) and the wrappers
    live on to record 128+15, as a real scancel's signal to the job step lets them. Slurm
    records the end as STATE (default `CANCELLED by 0`, a scancel; NONE: no record)."""
    cluster = state["clusters"][args[0]]
    cluster["lost"] = True
    how = args[args.index("--as") + 1] if "--as" in args else "CANCELLED by 0"
    if how != "NONE":
        state.setdefault("ended", {})[str(cluster["allocation"])] = how
    for job in cluster["jobs"]:
        if "--signal-command" in args[1:]:
            # The job's leader runs the task's `run:` (the wrapper), whose child is the command.
            for command in (g for wrapper in children(job["pid"]) for g in children(wrapper)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(command, signal.SIGTERM)
        else:
            kill(job)
    return 0


def helper(argv: list[str]) -> int:
    """`python sdk_helper.py COMMAND ...` of the fake venv."""
    if argv[1:2] == ["name-on-cloud"]:
        out(json.dumps({"ok": True, "name_on_cloud": f"{argv[2]}-{USER_HASH}"}) + "\n")
        return 0
    out(json.dumps({"ok": False, "error": "fake", "message": f"unsupported {argv}"}) + "\n")
    return 1


def main(argv: list[str]) -> int:
    with open(f"{STATE}.calls", "a") as calls:
        calls.write(json.dumps(argv) + "\n")
    if argv[:1] == ["--helper"]:
        return helper(argv[1:])
    if argv[:1] == ["--squeue"]:
        return squeue(load(), argv[1:])
    if argv[:1] == ["--sacct"]:
        return sacct(load(), argv[1:])
    if argv[:1] == ["--sinfo"]:
        return sinfo(load())
    if argv == ["--version"]:
        out(f"skypilot, version {VERSION}\n")
        return 0
    state = load()
    commands = {
        "status": cmd_status,
        "launch": cmd_launch,
        "exec": cmd_exec,
        "queue": cmd_queue,
        "cancel": cmd_cancel,
        "down": cmd_down,
        "logs": cmd_logs,
        "api": cmd_api,
        "fake-lose": cmd_lose,
    }
    if argv[:1] == ["fake-sinfo"]:
        state["sinfo"] = argv[1]
        save(state)
        return 0
    controls = ("fake-inflight", "fake-fail-exec", "fake-api-down", "fake-stall-down")
    controls += ("fake-stall-launch",)
    if argv and argv[0] in (*controls, "fake-ssh-refused", "fake-maxtime"):
        state[argv[0].removeprefix("fake-").replace("-", "_")] = int(argv[1])
        save(state)
        return 0
    if not argv or argv[0] not in commands:
        sys.stderr.write(f"fake sky: unsupported {argv}\n")
        return 2
    if state.get("api_down", 0) > 0 and not argv[0].startswith("fake-"):
        state["api_down"] -= 1
        save(state)
        sys.stderr.write("sky.exceptions.ApiServerConnectionError: Could not connect to the API\n")
        return 1
    if state.get("ssh_refused", 0) > 0:
        state["ssh_refused"] -= 1
        save(state)
        sys.stderr.write("root@127.0.0.1: Permission denied (publickey).\n")
        sys.stderr.write("sky.exceptions.CommandError: Command squeue failed (code 255).\n")
        return 1
    code = commands[argv[0]](state, argv[1:])
    save(state)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
