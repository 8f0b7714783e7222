"""What the commands import, and how fast they start.

1. Imports (the checks): each command runs in a fresh interpreter through the real entry point
   (`vibesys.cli.main.main`), then dumps `sys.modules`. `--help` and the read-only commands
   agents call in loops (`journal show`, `journal list`, `logs`, `states`) may import no
   paramiko, SkyPilot (`sky`) or `vibesys.adapters` module but the registry's plain data
   (issues 2 and 36); the read-only commands moreover no transitions machine, no
   sqlite-utils (issue 11), no rich, no bridge client and no pydantic (issue 36). Every
   command line is parsed by the typer app (issue 36), the one declaration.
2. `journal show` against `python -c "import sqlite3, json"`, the same interpreter, run
   alternately. Target (issue 11, hard): ratio of the medians <= 3.5.
3. `vibesys run -- true` (the whole local evaluation: journal, wrapper, command) against the
   same `python -c "import sqlite3, json"`, alternately (issue 36, target <= 6), and the
   check that it imports no site configuration and no Slurm, SkyPilot, staging or snapshot
   code, and no pydantic (the JobResult is `run --json`'s). When `python3` on PATH is
   another program than this interpreter (a version manager's shim), the ratio to it is
   shown too.
4. Startup (informational, target <= 1.5x): `python -m vibesys --help` against a bare typer app
   with one command and the same app settings, written to a temporary file, run alternately.
   `python -c pass` is timed too, to show the interpreter's own share.

    .venv/bin/python benchmarks/bench_startup.py [--quick] [--dir DIR]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from _common import (
    ROOT,
    Verdicts,
    build_journal,
    clean_env,
    interleave,
    median,
    ms,
    parse_args,
    report,
)

TARGET = 1.5
SHOW_TARGET = 3.5
RUN_TARGET = 6.0
#: What `vibesys run -- true` (the local adapter) has no use for.
NOT_FOR_A_LOCAL_RUN = (
    "paramiko",
    "sky",
    # What reads a site's configuration. The type of a recorded site (`config.site`, a
    # msgspec Struct) comes with every typed request, the local one's too.
    "vibesys.config.load",
    "vibesys.config.profiles",
    "vibesys.config.sizing",
    "vibesys.config.resources",
    "vibesys.config.slurm",
    "vibesys.config.slurm_file",
    "vibesys.config.transport",
    "vibesys.adapters.slurm",
    "vibesys.adapters.skypilot",
    "vibesys.adapters.staging",
    "vibesys.snapshot",
    "vibesys.broker",
    # The terminal's status line is text of our own.
    "rich",
    # The requests are msgspec Structs, and the run's end comes from its invocation: the
    # JobResult (pydantic) is `run --json`'s alone (issue 36).
    "pydantic",
    "pydantic_core",
    "importlib.metadata",
    # A file `session client-path` names, never a module a command needs.
    "vibesys.bridge.client",
)
FORBIDDEN = ("paramiko", "sky", "vibesys.adapters")
#: What a read-only command must not load besides FORBIDDEN.
HEAVY = ("transitions", "sqlite_utils", "rich", "vibesys.bridge.client", "pydantic")
#: The adapter registry is plain data (names, options, module paths): `--help` lists it.
ALLOWED = frozenset({"vibesys.adapters", "vibesys.adapters.registry"})
#: The broker's command group is declared in the typer app; its machinery is loaded when it runs.
ALLOWED_IN_A_RUN = ALLOWED | {"vibesys.broker", "vibesys.broker.cli"}

#: Runs the real entry point with the given argv, then writes the loaded module names as JSON.
DUMP_MODULES = textwrap.dedent(
    """
    import atexit, json, sys
    out, argv = sys.argv[1], sys.argv[2:]
    sys.argv = ["vibesys", *argv]

    def dump():
        with open(out, "w") as handle:
            json.dump({"modules": sorted(sys.modules)}, handle)

    atexit.register(dump)  # typer's app ends the process with SystemExit
    from vibesys.cli.main import main
    main()
    """
)

BARE_TYPER = textwrap.dedent(
    '''
    import typer

    app = typer.Typer(
        name="bare", help="A bare typer app.", pretty_exceptions_enable=False, add_completion=False
    )


    @app.command()
    def hello(name: str = "world") -> None:
        """Say hello."""
        typer.echo(f"hello {name}")


    app()
    '''
)


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    reps = 5 if args.quick else 40
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="vibesys-bench-startup-") as scratch:
        return run(Path(scratch), reps)


def forbidden_in(
    modules: list[str], forbidden: tuple[str, ...] = FORBIDDEN, allowed: frozenset[str] = ALLOWED
) -> list[str]:
    return [
        m
        for m in modules
        if m not in allowed and any(m == f or m.startswith(f + ".") for f in forbidden)
    ]


def run(scratch: Path, reps: int) -> int:
    env = clean_env()
    journal = scratch / "journal.db"
    target_id = build_journal(journal, 3)[1]

    verdicts = Verdicts()
    at = ["--journal", str(journal)]
    for name, label, argv, read_only in (
        ("help", "vibesys --help", ["--help"], False),
        ("journal_show", "vibesys journal show", ["journal", "show", target_id, *at], True),
        ("journal_list", "vibesys journal list", ["journal", "list", *at], True),
        ("logs", "vibesys logs", ["logs", target_id, *at], True),
        ("states", "vibesys states", ["states"], True),
    ):
        out = scratch / "modules.json"
        done = subprocess.run(
            [sys.executable, "-c", DUMP_MODULES, str(out), *argv],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if not out.exists():
            verdicts.check(f"{name}_runs", False, f"{label} crashed: {done.stderr.strip()[-300:]}")
            continue
        result = json.loads(out.read_text())
        out.unlink()
        code = done.returncode
        verdicts.check(f"{name}_runs", code in (0, None), f"{label} exited {code}")
        bad = forbidden_in(result["modules"])
        vibesys_modules = [m for m in result["modules"] if m.startswith("vibesys")]
        print(f"{label}: {len(result['modules'])} modules, {len(vibesys_modules)} of vibesys")
        if not read_only:
            verdicts.check(
                f"{name}_imports_no_paramiko_sky_or_adapter",
                not bad,
                f"{label} imported: {', '.join(bad) or 'none of ' + ', '.join(FORBIDDEN)}",
            )
            continue
        heavy = forbidden_in(result["modules"], FORBIDDEN + HEAVY)
        verdicts.check(
            f"{name}_imports_only_what_it_reads",
            not heavy,
            f"{label} imported: {', '.join(sorted(heavy)[:8]) or 'none of the heavy modules'}",
        )

    # `vibesys run -- true`: the evaluation runs, loading only what its adapter uses.
    out = scratch / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", DUMP_MODULES, str(out), "run", *at, "--", "true"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    result = json.loads(out.read_text()) if out.exists() else {"modules": []}
    result["code"] = done.returncode if out.exists() else "crashed"
    print(f"vibesys run -- true: {len(result['modules'])} modules")
    verdicts.check(
        "run_true_runs", result["code"] in (0, None), f"vibesys run exited {result['code']}"
    )
    # The local adapter needs no site configuration, no Slurm, SkyPilot, staging or snapshot
    # code (issue 21).
    others = forbidden_in(result["modules"], NOT_FOR_A_LOCAL_RUN, ALLOWED_IN_A_RUN)
    verdicts.check(
        "run_imports_only_its_adapter",
        result["code"] in (0, None) and not others,
        f"vibesys run -- true imported {', '.join(sorted(others)[:6]) or 'none of them'}",
    )

    bare = scratch / "bare_typer.py"
    bare.write_text(BARE_TYPER)
    checked = subprocess.run(
        [sys.executable, str(bare), "--help"], capture_output=True, text=True, check=False
    )
    baseline_ok = checked.returncode == 0 and "Say hello" in checked.stdout
    detail = f"bare typer app --help exited {checked.returncode} {checked.stderr.strip()[-300:]}"
    if not verdicts.check("baseline_app_runs", baseline_ok, detail.rstrip()):
        return verdicts.finish()

    def run_cmd(argv: list[str]) -> float:
        start = time.perf_counter()
        subprocess.run(argv, env=env, cwd=scratch, capture_output=True, check=True)
        return time.perf_counter() - start

    vibesys_help = [sys.executable, "-m", "vibesys", "--help"]
    bare_help = [sys.executable, str(bare), "--help"]
    for _ in range(2):  # warm the bytecode caches of both
        run_cmd(vibesys_help), run_cmd(bare_help)
    ours, theirs = interleave(reps, lambda: run_cmd(vibesys_help), lambda: run_cmd(bare_help))
    few = max(3, reps // 4)
    empty = [run_cmd([sys.executable, "-c", "pass"]) for _ in range(few)]
    show = [*vibesys_help[:-1], "journal", "show", target_id, "--journal", str(journal)]
    bare_read = [sys.executable, "-c", "import sqlite3, json"]
    for _ in range(2):
        run_cmd(show), run_cmd(bare_read)
    shows, reads = interleave(reps, lambda: run_cmd(show), lambda: run_cmd(bare_read))
    show_ratio = median(shows) / median(reads)

    # `vibesys run -- true` (a whole journaled evaluation on the local adapter) against the
    # same bare interpreter (issue 36: within 6x).
    run = [*vibesys_help[:-1], "run", "--journal", str(scratch / "run.db"), "--", "true"]
    for _ in range(2):
        run_cmd(run), run_cmd(bare_read)
    runs, bares = interleave(reps, lambda: run_cmd(run), lambda: run_cmd(bare_read))
    run_ratio = median(runs) / median(bares)
    path_python = shutil.which("python3")
    on_path: list[float] = []
    if path_python and Path(path_python).resolve() != Path(sys.executable).resolve():
        # What a user typing `python3` gets here (a version manager's shim, say): shown only.
        on_path = [run_cmd([path_python, "-c", "import sqlite3, json"]) for _ in range(few)]

    ratio = median(ours) / median(theirs)
    print(f"{reps} runs each, alternating")
    report(
        [
            ("python -m vibesys --help", ms(median(ours))),
            ("bare typer app --help", ms(median(theirs))),
            ("python -c pass", ms(median(empty))),
            ("python -m vibesys journal show", ms(median(shows))),
            ('python -c "import sqlite3, json"', ms(median(reads))),
            ("python -m vibesys run -- true", ms(median(runs))),
            ('python -c "import sqlite3, json" (beside run)', ms(median(bares))),
            *(
                [(f'{path_python} -c "import sqlite3, json"', ms(median(on_path)))]
                if on_path
                else []
            ),
        ]
    )
    verdicts.ratio("journal_show_vs_bare_sqlite3_json", show_ratio, f"(target <= {SHOW_TARGET})")
    verdicts.target(
        "journal_show_startup",
        show_ratio <= SHOW_TARGET,
        f"journal show {show_ratio:.2f}x python -c 'import sqlite3, json' <= {SHOW_TARGET}",
    )
    verdicts.ratio("run_vs_bare_sqlite3_json", run_ratio, f"(target <= {RUN_TARGET})")
    verdicts.target(
        "run_true_startup",
        run_ratio <= RUN_TARGET,
        f"vibesys run -- true {run_ratio:.2f}x python -c 'import sqlite3, json' <= {RUN_TARGET}",
    )
    if on_path:
        verdicts.ratio(
            "run_vs_python3_on_path",
            median(runs) / median(on_path),
            f"({path_python}, informational)",
        )
    verdicts.ratio("help_vs_bare_typer", ratio, f"(target <= {TARGET}, informational)")
    if ratio > TARGET:
        print(f"startup ratio {ratio:.2f} is above {TARGET} (informational, not a verdict)")
    return verdicts.finish()


if __name__ == "__main__":
    raise SystemExit(main())
