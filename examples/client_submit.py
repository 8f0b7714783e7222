"""Run evaluations from Python with `vibesys.Client`: submit returns a handle at once, each
handle is driven in the background, and an idempotency key makes a submission exactly once.

1. `Client()` opens (or creates) the journal: ./.vibesys/journal.db unless VIBESYS_JOURNAL or
   the first argument says otherwise;
2. `submit` records each invocation (PREPARED) before anything runs, and returns its handle;
3. the same key again returns the same invocation (after a crash, from another process too);
4. `result()` waits for the JobResult; `logs()` gives the job's bytes unchanged.

    python examples/client_submit.py [JOURNAL]
"""

from __future__ import annotations

import sys

from vibesys import Client

#: Three "evaluations": each prints its score and exits with its seed.
SCRIPT = (
    "import sys; seed = int(sys.argv[1]); print(f'seed {seed} score {seed / 10}'); sys.exit(seed)"
)


def main(argv: list[str]) -> int:
    with Client(argv[0] if argv else None) as client:
        handles = [
            client.submit([sys.executable, "-c", SCRIPT, str(seed)], key=f"example-seed-{seed}")
            for seed in (0, 1, 2)
        ]
        again = client.submit([sys.executable, "-c", SCRIPT, "0"], key="example-seed-0")
        print(f"same key, same invocation: {again.id == handles[0].id}")
        for handle in handles:
            found = handle.result(timeout=120)
            output = b"".join(handle.logs()).decode().strip()
            print(f"{found.status} exit {found.exit_code}: {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
