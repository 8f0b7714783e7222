"""A bridge served by a process of its own (so a test can SIGSTOP it): `python -m
tests.bridge.serve_bridge ROOT HEARTBEAT_SECONDS` prints one JSON line (the helper's
environment), serves until its stdin ends, then tears down."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.bridge.helpers import make_bridge


def main() -> None:
    root, heartbeat = Path(sys.argv[1]), float(sys.argv[2])
    workspace = root / "ws"
    workspace.mkdir()
    served, stop = make_bridge(root, workspace, heartbeat=heartbeat)
    environment = {
        "VIBESYS_EVAL_SOCKET": str(served.socket_path),
        "VIBESYS_EVAL_TOKEN": served.token,
        "VIBESYS_EVAL_RUN": "campaign-1",
        "VIBESYS_EVAL_WORKSPACE": str(workspace),
    }
    print(json.dumps(environment), flush=True)
    sys.stdin.read()
    stop.set()
    served.runner.close("the test is over", 10)
    served.server.close()


if __name__ == "__main__":
    main()
