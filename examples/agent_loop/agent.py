"""A scripted agent: the loop a coding agent runs, without the model.

It runs inside the sandbox host.py makes (bubblewrap standing in for the agent's container):
no network, no credentials, only its workspace (writable), the session's sockets, the session's
results directory and the `vibesys-eval` helper (both read-only). Standard library only, as an
agent image's python3 would be.

The loop: write a candidate (`solve.py`, a parameter in it) into the workspace, uncommitted;
evaluate it through `vibesys-eval` (the trusted command runs where the operator's site says,
on a copy of the workspace); read the JobResult and the artifact from the results directory;
write a better candidate; evaluate again; then, where the session offers a profiler
(`vibesys-eval capabilities`), profile the better candidate once (`--kind profile`) and read
the capture back from the results directory, checked against the size and sha256 its result
records. It first reports what the sandbox lets it reach, so that the example shows the
container holds nothing worth stealing.

    python3 agent.py --token-file PATH   # PATH: the session's token file, which it must not read

Its last line of output is one JSON object (the rounds, the profile and the probes) for
host.py; it exits 0 when both evaluations completed, the second scored better, and the
profile, if one was offered, came back as recorded.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: The candidate the agent writes: fit y = 3x + 1 by gradient descent, score the fit. The
#: command measures its own run time, so the host can tell the evaluation's overhead from it.
CANDIDATE = """\
import json, os, time

START = time.perf_counter()
LEARNING_RATE = {learning_rate!r}
STEPS = 400

xs = [i / 50 for i in range(50)]
ys = [3 * x + 1 for x in xs]
w = b = 0.0
for _ in range(STEPS):
    dw = sum(2 * (w * x + b - y) * x for x, y in zip(xs, ys)) / len(xs)
    db = sum(2 * (w * x + b - y) for x, y in zip(xs, ys)) / len(xs)
    w, b = w - LEARNING_RATE * dw, b - LEARNING_RATE * db
loss = sum((w * x + b - y) ** 2 for x, y in zip(xs, ys)) / len(xs)
score = round(1 / (1 + loss), 4)
os.makedirs("results", exist_ok=True)
with open("results/score.json", "w") as out:
    seconds = time.perf_counter() - START
    json.dump({{"learning_rate": LEARNING_RATE, "loss": loss, "score": score,
               "seconds": seconds}}, out)
print(f"learning rate {{LEARNING_RATE}}: loss {{loss:.4f}}, score {{score}}")
"""


def say(line: str) -> None:
    print(line, flush=True)


def probe_network() -> dict[str, Any]:
    """What network the sandbox has: its interfaces, and whether an outside address answers."""
    found: dict[str, Any] = {"interfaces": [name for _, name in socket.if_nameindex()]}
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=3).close()
        found["outside"] = "reachable"
    except OSError as exc:
        found["outside"] = f"unreachable ({exc.strerror or exc})"
    return found


def probe_file(path: str) -> str:
    """Whether the agent can read `path` (the session's token file: it must not)."""
    try:
        Path(path).read_bytes()
    except OSError as exc:
        return f"not readable ({exc.strerror or exc})"
    return "READABLE"


def probe_write(directory: Path) -> str:
    try:
        (directory / "agent-was-here").write_text("x")
    except OSError as exc:
        return f"not writable ({exc.strerror or exc})"
    return "WRITABLE"


def evaluate(round_no: int, learning_rate: float) -> dict[str, Any]:
    """Write the candidate, evaluate it through the bridge, read what came back."""
    Path("solve.py").write_text(CANDIDATE.format(learning_rate=learning_rate))
    say(f"round {round_no}: solve.py with LEARNING_RATE = {learning_rate}; evaluating")
    helper = [sys.executable, os.environ["VIBESYS_EVAL"], "--kind", "benchmark"]
    helper += ["--timeout", "120", "--artifact", "results/*.json", "--"]
    began = time.monotonic()
    done = subprocess.run(
        [*helper, "python3", "solve.py"], capture_output=True, text=True, check=False
    )
    seconds = time.monotonic() - began
    for line in done.stderr.splitlines():  # the helper's own lines ([vibesys-eval] ...)
        say(f"  {line}")
    lines = done.stdout.splitlines()
    for line in lines[:-1]:  # the command's own output, streamed back
        say(f"  | {line}")
    result = json.loads(lines[-1]) if lines else {}
    say(f"  vibesys-eval exit {done.returncode}: {result.get('status')} in {seconds:.2f} s")
    if result.get("status") != "COMPLETED":
        return {"round": round_no, "status": result.get("status"), "seconds": seconds}
    # The session copied the result and the artifacts here; the agent reads, never writes.
    results = Path(result["results_dir"])
    recorded = json.loads((results / "result.json").read_text())
    artifact = json.loads((results / "artifacts" / "results" / "score.json").read_text())
    say(f"  read {results.name}/result.json ({recorded['status']}) and the artifact:")
    say(f"  {json.dumps(artifact, sort_keys=True)}")
    writable = probe_write(results)
    say(f"  results directory: {writable}")
    return {
        "round": round_no,
        "status": recorded["status"],
        "learning_rate": learning_rate,
        "score": artifact["score"],
        "loss": artifact["loss"],
        "seconds": seconds,
        "command_seconds": artifact["seconds"],
        "job": recorded["remote_job_id"],
        "results_writable": writable,
    }


def offered_profiler() -> str | None:
    """The first profiler the session offers (its capabilities), or None."""
    helper = [sys.executable, os.environ["VIBESYS_EVAL"], "capabilities"]
    done = subprocess.run(helper, capture_output=True, text=True, check=False)
    profilers = json.loads(done.stdout).get("profilers", []) if done.returncode == 0 else []
    return str(profilers[0]) if profilers else None


def profile(profiler: str) -> dict[str, Any]:
    """Profile the candidate as it stands; read its capture back from the results directory."""
    say(f"profile: solve.py under the session's profiler {profiler}")
    helper = [sys.executable, os.environ["VIBESYS_EVAL"], "--kind", "profile"]
    helper += ["--profiler", profiler, "--timeout", "120", "--"]
    began = time.monotonic()
    done = subprocess.run(
        [*helper, "python3", "solve.py"], capture_output=True, text=True, check=False
    )
    seconds = time.monotonic() - began
    lines = done.stdout.splitlines()
    result = json.loads(lines[-1]) if lines else {}
    say(f"  profile exit {done.returncode}: {result.get('status')} in {seconds:.2f} s")
    captures = [a for a in result.get("artifacts", []) if a["path"].startswith("vibesys-profile")]
    checked = []
    for capture in captures:
        path = Path(result["results_dir"]) / "artifacts" / capture["path"]
        data = path.read_bytes()
        same = (
            len(data) == capture["size"] and hashlib.sha256(data).hexdigest() == capture["sha256"]
        )
        checked.append(same)
        say(f"  read {capture['path']}: {len(data)} bytes, {'as' if same else 'NOT as'} recorded")
        if path.suffix == ".json":  # py-spy's speedscope format
            say(f"  {busiest(json.loads(data))}")
    ok = result.get("status") == "COMPLETED" and bool(checked) and all(checked)
    return {"profiler": profiler, "status": result.get("status"), "captures_ok": ok}


def busiest(speedscope: dict[str, Any]) -> str:
    """The frame most samples of a speedscope capture were in (innermost), and their count."""
    counts: dict[int, int] = {}
    for profile in speedscope["profiles"]:
        for stack in profile["samples"]:
            if stack:
                counts[stack[-1]] = counts.get(stack[-1], 0) + 1
    if not counts:
        return "no samples (the run was shorter than the sampling period)"
    frame, count = max(counts.items(), key=lambda item: item[1])
    name = speedscope["shared"]["frames"][frame]["name"]
    return f"most samples in: {name} ({count} of {sum(counts.values())})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--token-file", required=True, help="the session's token file to probe")
    args = parser.parse_args()

    network = probe_network()
    token = probe_file(args.token_file)
    say(f"network: interfaces {network['interfaces']}, 1.1.1.1:53 {network['outside']}")
    say(f"session token file: {token}")

    # A plan a model would make: start cautious, then act on what the evaluation reported.
    first = evaluate(1, 0.01)
    rounds = [first]
    if first["status"] == "COMPLETED":
        # The loss came back high with a tiny step: take a much larger one.
        better = 0.5 if first["loss"] > 0.01 else first["learning_rate"]
        rounds.append(evaluate(2, better))
    completed = [r for r in rounds if r["status"] == "COMPLETED"]
    improved = len(completed) == 2 and completed[1]["score"] > completed[0]["score"]
    for r in completed:
        say(f"score {r['round']}: {r['score']} (learning rate {r['learning_rate']})")
    say(f"second score better: {improved}")
    profiler = offered_profiler()
    profiled = None
    if profiler is None:
        say("profile: no profiler offered in this session (`--kind profile` is refused)")
    elif improved:
        profiled = profile(profiler)
    summary = {"rounds": rounds, "profile": profiled, "network": network, "token_file": token}
    print(json.dumps(summary), flush=True)
    return 0 if improved and (profiled is None or profiled["captures_ok"]) else 1


if __name__ == "__main__":
    sys.exit(main())
