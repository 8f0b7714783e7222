"""Run one command through vibesys from Python, on the local adapter (the embedded default).

This is what `vibesys run -- CMD...` does, with the public API:

1. open (or create) the journal;
2. build an Engine (it finds adapters by name in `vibesys.adapters.registry`);
3. `prepare` records the invocation (PREPARED) and takes its lease;
4. `drive` commits each transition before the effect it authorizes, streams the job's output,
   and returns once the invocation is DONE (or UNRESOLVED).

Run it from any directory; the journal goes to ./.vibesys/journal.db unless VIBESYS_JOURNAL or
the first argument says otherwise:

    python examples/local_run.py [JOURNAL]
"""

from __future__ import annotations

import sys
from pathlib import Path

from vibesys.engine import DriveOptions, Engine, LogTail, RetryPolicy, drive
from vibesys.journal_schema import journal_path, open_journal, verify_journal
from vibesys.states.exits import exit_status

#: The "evaluation": prints a line on each stream and exits 0. Any argv works here.
COMMAND = [
    sys.executable,
    "-c",
    "import sys; print('accuracy 0.93'); print('a warning', file=sys.stderr)",
]


def main(argv: list[str]) -> int:
    journal = open_journal(journal_path(argv[0] if argv else None))
    try:
        engine = Engine(journal, retry=RetryPolicy(max_retries=2))
        invocation = engine.prepare(adapter="local", command=COMMAND, label="example")
        print(f"invocation {invocation.id} {invocation.state}", flush=True)

        tail = LogTail(sys.stdout.buffer, sys.stderr.buffer)  # live output, as `vibesys run`
        invocation = drive(engine, invocation, DriveOptions(tail=tail))

        print(f"state {invocation.state}")
        print(f"outcome {invocation.outcome}")
        print(f"exit code {invocation.exit_code}")
        for row in journal.invocations.history(invocation.id):
            print(f"  {row.seq}  {row.from_state} -> {row.to_state}  {row.event}")
        stdout_file = Path(invocation.invocation_dir) / "1" / "stdout"
        print(f"stdout kept in the local attempt directory: {stdout_file.read_text().strip()!r}")
        problems = verify_journal(journal)
        print("journal verify: " + ("ok" if not problems else str(problems[0])))
        return exit_status(invocation) if not problems else 1
    finally:
        journal.close()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
