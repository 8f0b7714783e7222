"""Open a candidate session from Python and evaluate through it, as the agent's container would.

A framework that runs one agent per candidate opens a `vibesys.Session` per candidate, gives
the container what the session lists (the mounts, the environment, the helpers), and closes
it when the candidate is done; leaving the `with` block in any way (an exception, an asyncio
cancel, SIGTERM turned into SystemExit) tears it down: every evaluation still running is
cancelled, the sockets and tokens go. Here the "container" is a plain subprocess.

The site is this host (`local=True`): each evaluation runs confined by bubblewrap to a copy of
the candidate. Run it from any directory; the journal goes to ./.vibesys/journal.db:

    python examples/session_local.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from vibesys.session import Session


def main() -> int:
    candidate = Path("candidate").absolute()
    candidate.mkdir(exist_ok=True)
    (candidate / "eval.py").write_text("print('accuracy 0.93')\n")
    with Session("example-campaign", candidate, local=True, state_dir="session-state") as session:
        print(f"backend {session.capabilities.backend}")
        # What `docker run` would get: `-v VOLUME` for each mount, `--env-file ENV_FILE`.
        for mount in session.mounts:
            print(f"mount {mount.target.name} {'read-only' if mount.read_only else 'writable'}")
        print(f"notes start with {session.notes().splitlines()[0]!r}")
        # The container's environment: the session's block, nothing of this host's vibesys.
        env = {k: v for k, v in os.environ.items() if not k.startswith("VIBESYS_")}
        env |= session.environment
        helper = [sys.executable, env["VIBESYS_EVAL"], "--kind", "accuracy", "--"]
        done = subprocess.run(
            [*helper, "python3", "eval.py"],
            cwd=candidate,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        print(done.stdout.splitlines()[0])
        result = json.loads(done.stdout.splitlines()[-1])
        print(f"status {result['status']}, vibesys-eval exit {done.returncode}")
    status = session.close()  # idempotent: the `with` block closed it already
    sockets = [p for p in Path("session-state").rglob("*") if p.is_socket()]
    print(f"closed: exit status {status}, {len(sockets)} sockets left")
    return 0 if status == 0 and done.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
