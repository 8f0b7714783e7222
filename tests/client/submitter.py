"""A process that submits one evaluation through `vibesys.Client` with an idempotency key,
for the crash tests: `python -m tests.client.submitter JOURNAL KEY COUNT_FILE MODE [GO_FILE]`.

The job appends a line to COUNT_FILE each time it runs, then sleeps a moment. MODE `result`
waits for the result and prints `ID STATUS`; `hang` prints `ID` and sleeps until killed. With
GO_FILE, it waits for that file before submitting (two submitters start together)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from vibesys import Client


def command(count_file: str) -> list[str]:
    job = f"open({count_file!r}, 'a').write('ran\\n'); import time; time.sleep(0.5)"
    return [sys.executable, "-c", job]


def main(journal: str, key: str, count_file: str, mode: str, go: str | None = None) -> int:
    while go is not None and not Path(go).exists():
        time.sleep(0.005)
    with Client(journal) as client:
        handle = client.submit(command(count_file), key=key)
        if mode == "hang":
            print(handle.id, flush=True)
            time.sleep(3600)
        found = handle.result(120)
        print(handle.id, found.status, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
