"""The model-serving campaign: rounds of a server's settings, each measured by a benchmark on
the site's cluster, through one candidate session.

The candidate (server.py, model.py, bench.py, settings.json, written to ./serving/candidate)
is a small HTTP model server whose weights model.py generates from a seed. Each round edits
settings.json (nothing committed: an evaluation takes the workspace as it is) and evaluates
`python3 bench.py` through `vibesys-eval`, as an agent in the session's container would; the
benchmark brings home results/metrics.json (throughput, p50/p99 latency, the largest error
against the exact model), which this side reads from the session's results directory. A
round whose answers are off (exit 3) is rejected, whatever its speed.

On a SkyPilot profile (`--profile`), the rounds share the campaign's cluster: the first
launches it, the next reuse its allocation; before round EXPIRE_BEFORE the allocation is ended
by force (`scancel` of the Slurm job that holds it: SkyPilot's Slurm infra) and the round runs
on a new one; at the end the cluster is released, unless --keep-cluster. Without a profile
the rounds run on this host (`--local`: confined by bubblewrap to a copy of the candidate).
The journal goes to ./.vibesys/journal.db (unless VIBESYS_JOURNAL says otherwise):

    python examples/model_serving/run.py [--profile NAME --clusters-config clusters.toml]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from vibesys.errors import VibesysError
from vibesys.session import Session

HERE = Path(__file__).resolve().parent
#: The candidate's files, copied from here into the workspace.
CANDIDATE_FILES = ("model.py", "server.py", "bench.py")
#: Each round's settings.json and what its benchmark should say: "ok", or "rejected" (exit 3).
ROUNDS: tuple[tuple[dict[str, Any], str], ...] = (
    ({"precision": "f64", "threaded": False, "keep_alive": False}, "ok"),
    ({"precision": "q4", "threaded": True, "keep_alive": True}, "rejected"),
    ({"precision": "q8", "threaded": True, "keep_alive": True}, "ok"),
)
#: How long waiting for a killed allocation to leave the Slurm queue may take.
EXPIRY_SECONDS = 120.0


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", help="the site's SkyPilot profile (default: this host)")
    parser.add_argument("--clusters-config", type=Path, help="the profiles' clusters.toml")
    parser.add_argument("--resources", type=Path, help="what each evaluation asks for (TOML)")
    parser.add_argument("--run-id", default="model-serving", help="the campaign (its cluster)")
    parser.add_argument("--seconds", type=float, default=2.0, help="each benchmark's length")
    parser.add_argument(
        "--expire-before",
        type=int,
        default=3,
        help="the round before which the allocation is ended by force (0: never; profiles only)",
    )
    parser.add_argument("--keep-cluster", action="store_true", help="do not release it at the end")
    parser.add_argument("--timeout", type=int, default=900, help="each evaluation's limit (s)")
    return parser.parse_args(argv)


def vibesys(*args: str) -> str:
    """A `vibesys` command of this campaign's journal; its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "vibesys", *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"vibesys {' '.join(args)}: exit {done.returncode}: {done.stderr}")
    return done.stdout


def campaign_cluster(run_id: str) -> dict[str, Any] | None:
    """The campaign's lease that holds an allocation, if any."""
    leases = json.loads(vibesys("clusters", "--json"))["clusters"]
    up = [x for x in leases if x["campaign"] == run_id and x["state"] == "up"]
    return up[-1] if up else None


def force_expiry(run_id: str) -> None:
    """End the campaign's allocation as its time limit would: scancel the Slurm job holding it,
    and wait until Slurm has let it go."""
    lease = campaign_cluster(run_id)
    if lease is None:
        print("expiry: the campaign holds no allocation")
        return
    job = str(lease["allocation_job"])
    subprocess.run(["scancel", job], check=True)
    deadline = time.monotonic() + EXPIRY_SECONDS
    while subprocess.run(
        ["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, check=False
    ).stdout.strip():
        if time.monotonic() > deadline:
            raise SystemExit(
                f"allocation {job} still in the queue {EXPIRY_SECONDS} s after scancel"
            )
        time.sleep(2)
    print(f"expiry: allocation {job} of {lease['name']} ended (scancel)")


def evaluate(session: Session, workspace: Path, number: int, seconds: float) -> dict[str, Any]:
    """One round through `vibesys-eval`, as the agent's container runs it: the JobResult, its
    exit status and its time, and the metrics brought home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIBESYS_")}
    env |= session.environment
    helper = [sys.executable, str(session.clients["vibesys-eval"])]
    helper += ["--kind", "benchmark", "--artifact", "results/metrics.json", "--"]
    began = time.monotonic()
    done = subprocess.run(
        [*helper, "python3", "-B", "bench.py", "--seconds", str(seconds)],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.monotonic() - began
    lines = done.stdout.rstrip("\n").split("\n")
    for line in lines[:-1]:
        print(f"round {number} | {line}")
    for line in done.stderr.splitlines():
        print(f"round {number} ! {line}")
    result: dict[str, Any] = json.loads(lines[-1])
    # The session copied the result and the artifacts there (read-only for the agent).
    home = Path(result["results_dir"]) / "artifacts" / "results" / "metrics.json"
    metrics = json.loads(home.read_text()) if home.exists() else None
    return {
        "exit": done.returncode,
        "seconds": round(took, 1),
        "result": result,
        "metrics": metrics,
    }


ROW = "{:<6} {:<34} {:<5} {:<8} {:<8} {:<8} {:<10} {}"


def report(rounds: list[dict[str, Any]]) -> None:
    """The campaign's table: each round's settings and what its benchmark measured."""
    print(ROW.format("round", "settings", "exit", "req/s", "p50 ms", "p99 ms", "max error", "on"))
    for r in rounds:
        s, m = r["settings"], r["metrics"] or {}
        where = r["result"].get("provenance", {}).get("allocation_job_id") or "this host"
        setting = f"{s['precision']} threaded={s['threaded']} keep_alive={s['keep_alive']}"
        error = f"{m['max_error']:.4f}" if "max_error" in m else "-"
        numbers = [m.get(k, "-") for k in ("throughput_rps", "p50_ms", "p99_ms")]
        print(ROW.format(r["round"], setting, r["exit"], *numbers, error, where))


def main(argv: list[str]) -> int:
    args = arguments(argv)
    if args.profile:
        site: dict[str, Any] = {"profile": args.profile, "clusters_config": args.clusters_config}
        site["resources"] = args.resources
        print(f"site: SkyPilot profile {args.profile}")
    else:
        site = {"local": True}
        print("site: this host (--local): no --profile given")
    # Short: the session's sockets go under it, and a socket's path has at most 107 bytes.
    root = Path("serving").absolute()
    workspace = root / "candidate"
    workspace.mkdir(parents=True, exist_ok=True)
    for name in CANDIDATE_FILES:
        shutil.copy(HERE / name, workspace / name)
    rounds: list[dict[str, Any]] = []
    options = {"state_dir": root / "session", "default_timeout": args.timeout, **site}
    with Session(args.run_id, workspace, **options) as session:
        print(f"session up: backend {session.capabilities.backend}")
        for number, (settings, expected) in enumerate(ROUNDS, start=1):
            if args.profile and number == args.expire_before:
                force_expiry(args.run_id)
            # The agent's edit: the settings, uncommitted.
            (workspace / "settings.json").write_text(json.dumps(settings) + "\n")
            evaluated = evaluate(session, workspace, number, args.seconds)
            verdict = {0: "ok", 3: "rejected"}.get(evaluated["exit"], "failed")
            rounds.append({"round": number, "settings": settings, "expected": expected,
                           "verdict": verdict, **evaluated})  # fmt: skip
            print(
                f"round {number}: {verdict} ({evaluated['result']['status']}, exit "
                f"{evaluated['exit']}) in {evaluated['seconds']} s"
            )
    status = session.close()  # idempotent: the `with` block closed it already
    print(f"session closed: exit status {status}")
    report(rounds)
    if args.profile and not args.keep_cluster:
        lease = campaign_cluster(args.run_id)
        if lease is not None:
            vibesys("clusters", "release", lease["name"])
            print(f"released {lease['name']}")
    (root / "rounds.json").write_text(json.dumps(rounds, indent=1) + "\n")
    as_expected = all(r["verdict"] == r["expected"] and r["metrics"] for r in rounds)
    print(f"every round as expected: {as_expected}")
    return 0 if status == 0 and as_expected else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except VibesysError as exc:  # one line, as vibesys itself says it
        sys.exit(f"run.py: {exc}")
