"""`vibesys broker ...`: start the GPU broker of one candidate session.

The declaration only: the broker's start (`startup`) is imported when the command runs, so
that `vibesys --help` stays light.
"""

# Annotations are values here, not strings: typer reads these signatures at every start, and
# a string would be compiled and evaluated again each time.

from pathlib import Path
from typing import Annotated

import typer

from vibesys.errors import boundary

broker_app = typer.Typer(
    help="The GPU broker: runs an agent's `vibesys-gpu` commands as confined Slurm jobs.",
    no_args_is_help=True,
)


@broker_app.command()
def serve(
    workspace: Annotated[
        Path,
        typer.Option(
            help="The candidate's worktree: commands run only inside it.", show_default=False
        ),
    ],
    slurm_config: Annotated[
        Path | None,
        typer.Option(
            help="slurm.toml with a [vibesys.agent_gpu] table (or a deprecated [slurm_gpu] "
            "one) \\[default: ~/.config/vibesys/slurm.toml, else slurm-gpu.toml beside it]",
            show_default=False,
        ),
    ] = None,
    state_dir: Annotated[
        Path | None,
        typer.Option(
            help="Private directory for the socket (in socket/) and the token file "
            "\\[default: a new one under the temporary directory]",
            show_default=False,
        ),
    ] = None,
    journal: Annotated[
        Path | None,
        typer.Option(
            envvar="VIBESYS_JOURNAL",
            help="Journal of the GPU jobs \\[default: .vibesys/journal.db]",
            show_default=False,
        ),
    ] = None,
    allow_uid: Annotated[
        list[int] | None,
        typer.Option(help="A uid that may connect (repeatable) \\[default: the broker's own]"),
    ] = None,
    run_id: Annotated[
        str,
        typer.Option(
            envvar="VIBESYS_RUN_ID",
            help="The run this session belongs to: max_concurrent_jobs holds across every "
            "broker started with the same run id on the same journal \\[default: the "
            "journal's brokers without one]",
            show_default=False,
        ),
    ] = "",
) -> None:
    """Serve one session's GPU commands until interrupted. Prints the socket path, the token
    file (readable only by its owner) and the client to give the container."""
    with boundary():
        # The broker's start loads the engine: not before the command runs (`vibesys --help`).
        from vibesys.broker.startup import serve_broker

        serve_broker(workspace, slurm_config, state_dir, journal, allow_uid, run_id, typer.echo)


@broker_app.command("client-path")
def client_path() -> None:
    """Print the path of the stdlib-only client file, to mount into a container."""
    typer.echo(Path(__file__).with_name("client.py").resolve())
