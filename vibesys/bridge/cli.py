"""`vibesys session ...`: one candidate session's host side (the evaluation bridge, and the GPU
broker when the site offers GPU commands). The declaration only: the session is imported when
the command runs, so that `vibesys --help` stays light."""

# Annotations are values here, not strings: typer reads these signatures at every start, and
# a string would be compiled and evaluated again each time.

from pathlib import Path
from typing import Annotated

import typer

from vibesys.errors import boundary

session_app = typer.Typer(
    help="A candidate session's host side: the evaluation bridge (vibesys-eval) and, when the "
    "site has [vibesys.agent_gpu], the GPU broker (vibesys-gpu).",
    no_args_is_help=True,
)


@session_app.command()
def serve(
    run_id: Annotated[
        str, typer.Option(help="The campaign: its evaluations share one journal and cluster.")
    ],
    workspace: Annotated[
        Path, typer.Option(help="The candidate's worktree: the only one it evaluates.")
    ],
    slurm_config: Annotated[
        Path | None, typer.Option(help="A Slurm site (slurm.toml): the sbatch path.")
    ] = None,
    profile: Annotated[
        str | None, typer.Option(help="A SkyPilot profile (\\[profiles.NAME] of clusters.toml).")
    ] = None,
    clusters_config: Annotated[
        Path | None,
        typer.Option(help="Operator profiles \\[default: ~/.config/vibesys/clusters.toml]."),
    ] = None,
    local: Annotated[
        bool,
        typer.Option(
            "--local",
            help="Evaluate on this host, each evaluation confined by bubblewrap to its copy of "
            "the candidate and the system directories.",
        ),
    ] = False,
    unconfined: Annotated[
        bool,
        typer.Option(
            "--unconfined",
            help="With --local: run evaluations with this host's full view (home, files, "
            "the session's tokens), not confined.",
        ),
    ] = False,
    resources: Annotated[
        Path | None,
        typer.Option(help="An experiment file whose \\[resources] table sizes the evaluations."),
    ] = None,
    journal: Annotated[
        Path | None,
        typer.Option(
            envvar="VIBESYS_JOURNAL", help="The campaign's journal \\[default: .vibesys/journal.db]"
        ),
    ] = None,
    state_dir: Annotated[
        Path | None,
        typer.Option(help="Private directory for sockets and tokens \\[default: a new one]"),
    ] = None,
    results_dir: Annotated[
        Path | None,
        typer.Option(help="Where each result is copied \\[default: STATE_DIR/results]"),
    ] = None,
    allow_env: Annotated[
        list[str] | None,
        typer.Option(help="A variable an evaluation may receive from the helper (repeatable)."),
    ] = None,
    allow_uid: Annotated[
        list[int] | None, typer.Option(help="A uid that may connect \\[default: this one]")
    ] = None,
    default_timeout: Annotated[
        int, typer.Option(help="Seconds, for a request that names none.", min=1)
    ] = 3600,
    max_timeout: Annotated[int, typer.Option(help="The most a request may ask.", min=1)] = 86400,
    max_retries: Annotated[
        int, typer.Option(help="Infrastructure retries per evaluation.", min=0)
    ] = 2,
    teardown_seconds: Annotated[
        float, typer.Option(help="How long teardown waits for cancels to settle.", min=0)
    ] = 120.0,
    artifact_max: Annotated[
        int | None,
        typer.Option(
            help="Bytes: the largest artifact collected, by its length \\[default: 1 GiB]", min=0
        ),
    ] = None,
    artifact_sum_max: Annotated[
        int | None,
        typer.Option(help="Bytes: an evaluation's artifacts together \\[default: 4 GiB]", min=0),
    ] = None,
    parent_pid: Annotated[
        int | None, typer.Option(help="Stop when this process ends \\[default: the parent]")
    ] = None,
    down: Annotated[
        bool, typer.Option("--down", help="Release the campaign's cluster at the end.")
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check/--no-check",
            help="Run `vibesys check` on the site first and refuse to start on a failure.",
        ),
    ] = True,
) -> None:
    """Serve one candidate session until SIGTERM, SIGINT or the parent's death. Prints one JSON
    document: the sockets, token files and clients, and the environment to give the
    container. Exit 0 after a clean teardown, 4 when an evaluation was left UNRESOLVED."""
    with boundary(journal):
        if max_timeout < default_timeout:
            raise typer.BadParameter(f"--max-timeout {max_timeout} is below --default-timeout")
        # The session loads the engine: not before the command runs (`vibesys --help`).
        from vibesys.bridge.session import serve_session, session_options

        options = session_options(
            run_id=run_id,
            workspace=workspace,
            slurm_config=slurm_config,
            profile=profile,
            clusters_config=clusters_config,
            local=local,
            unconfined=unconfined,
            resources=resources,
            journal=journal,
            state_dir=state_dir,
            results_dir=results_dir,
            allow_env=allow_env,
            allow_uid=allow_uid,
            default_timeout=default_timeout,
            max_timeout=max_timeout,
            max_retries=max_retries,
            teardown_seconds=teardown_seconds,
            artifact_max=artifact_max,
            artifact_sum_max=artifact_sum_max,
            parent_pid=parent_pid,
            down=down,
            check=check,
        )
        status = serve_session(options, typer.echo)
    raise typer.Exit(status)


@session_app.command("client-path")
def client_path() -> None:
    """Print the path of the stdlib-only `vibesys-eval` file, to mount into a container."""
    # By path: the client is a file to mount, not a module this command needs.
    typer.echo(Path(__file__).resolve().with_name("client.py"))
