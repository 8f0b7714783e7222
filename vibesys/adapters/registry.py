"""The one adapter registry: each adapter's name, summary, `vibesys run` options, and the
module that holds its typed request model and its factory.

Adding an adapter is one package (or module) under `adapters/` plus one entry here. The entry
is plain data, so listing adapters and building `vibesys run --help` import no adapter; the
module is imported only when an invocation needs it. It must provide:

    Request                                  # a frozen AdapterRequest subclass
    make_request(adapter, values) -> Request # check `vibesys run`'s options (UsageError else)
    build(request) -> Backend                # the adapter, for invocations with this request
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from msgspec import Struct

from vibesys.errors import UsageError

if TYPE_CHECKING:
    from vibesys.adapters.base import Backend
    from vibesys.adapters.requests import AdapterRequest

__all__ = ["ADAPTERS", "AdapterEntry", "Option", "entry", "given_options", "names", "register"]


class Option(Struct, frozen=True):
    """One `vibesys run` option an adapter takes."""

    flag: str
    dest: str
    help: str
    kind: type = str
    multiple: bool = False
    #: "invocation": the CLI resolves the value (an invocation id) to that invocation's
    #: current job before the adapter sees it, as {"invocation": ..., "job_id": ...}
    resolve: str | None = None
    #: the value when the option is not given (vibesys run's common options)
    default: Any = None
    metavar: str | None = None
    #: the environment variable read when the option is not given
    envvar: str | None = None
    #: a flag that also has its --no- form
    negatable: bool = False


class AdapterModule(Protocol):
    Request: type[AdapterRequest]

    def make_request(self, adapter: str, values: Mapping[str, Any]) -> AdapterRequest: ...

    def build(self, request: Any) -> Backend: ...


class AdapterEntry(Struct, frozen=True):
    name: str
    summary: str
    module: str
    options: tuple[Option, ...] = ()

    def load(self) -> AdapterModule:
        loaded: Any = importlib.import_module(self.module)
        return loaded  # type: ignore[no-any-return]

    def parse_request(self, data: Mapping[str, Any]) -> AdapterRequest:
        """The typed request recorded as `data`; ConfigError names what does not fit."""
        return self.load().Request.from_record(self.name, data)


_ARTIFACT = Option(
    "--artifact",
    "artifact",
    "A file or glob the job leaves, to bring home (repeatable).",
    str,
    True,
)
_SLURM_OPTIONS = (
    Option(
        "--slurm-config",
        "slurm_config",
        "Site configuration \\[default: ~/.config/vibesys/slurm.toml].",
        Path,
    ),
    Option("--gpus", "gpus", "GPUs for the job.", int),
    Option("--time", "time_minutes", "Time limit in minutes.", int),
    Option("--partition", "partition", "One partition (default: the site's preference list)."),
    Option("--candidate", "candidate", "Directory to snapshot and run in.", Path),
    Option("--exclude", "exclude", "Extra snapshot exclusion pattern (repeatable).", str, True),
    _ARTIFACT,
)
_SKYPILOT_OPTIONS = (
    Option("--profile", "profile", "Operator profile: a \\[profiles.NAME] of clusters.toml."),
    Option(
        "--run-id",
        "run_id",
        "Campaign/run id: evaluations with the same id and resources share one cluster.",
    ),
    Option(
        "--clusters-config",
        "clusters_config",
        "Operator profiles \\[default: ~/.config/vibesys/clusters.toml].",
        Path,
    ),
    Option(
        "--resources",
        "resources_file",
        "An experiment file (TOML) whose \\[resources] table is the portable request; "
        "the three flags below override its keys.",
        Path,
    ),
    Option("--nodes", "nodes", "Nodes per evaluation (\\[resources] nodes, default 1).", int),
    Option(
        "--accelerators-per-node",
        "accelerators_per_node",
        "Accelerators on each node (default: the profile's; 0 for none).",
        int,
    ),
    Option(
        "--accelerator-backend",
        "accelerator_backend",
        "The software stack the evaluation needs (e.g. rocm, cuda).",
    ),
    Option(
        "--candidate",
        "candidate",
        "Directory to snapshot and run in: staged once per digest on the cluster's shared "
        "file system (credentials, .env, keys, VCS metadata, caches and large files left "
        "out, as for sbatch), verified where it runs; the command runs in a private copy.",
        Path,
    ),
    Option("--workdir", "workdir", "The old name of --candidate.", Path),
    Option("--exclude", "exclude", "Extra snapshot exclusion pattern (repeatable).", str, True),
    Option(
        "--down",
        "down",
        "Release the campaign's cluster (sky down) once this evaluation is DONE and no other "
        "evaluation runs on it, as `sky launch --down` does; reconcile finishes it after a crash.",
        bool,
    ),
    _ARTIFACT,
)

ADAPTERS: dict[str, AdapterEntry] = {
    entry.name: entry
    for entry in (
        AdapterEntry(
            "local", "a process on this host (the embedded default)", "vibesys.adapters.local"
        ),
        AdapterEntry(
            "sbatch",
            "a Slurm batch job (local or SSH transport)",
            "vibesys.adapters.slurm.sbatch",
            (
                *_SLURM_OPTIONS,
                Option(
                    "--after",
                    "after",
                    "Start once this sbatch invocation succeeds (afterok on its current "
                    "attempt; submitted again after its next one when it is retried).",
                    resolve="invocation",
                ),
            ),
        ),
        AdapterEntry(
            "srun",
            "a foreground srun job on this submit node",
            "vibesys.adapters.slurm.srun",
            _SLURM_OPTIONS,
        ),
        AdapterEntry(
            "skypilot",
            "an evaluation on a campaign's SkyPilot cluster (one allocation, reused)",
            "vibesys.adapters.skypilot",
            _SKYPILOT_OPTIONS,
        ),
    )
}


def register(new: AdapterEntry) -> None:
    """Add an adapter (tests and plugins): one line."""
    ADAPTERS[new.name] = new


def names() -> tuple[str, ...]:
    return tuple(ADAPTERS)


def entry(name: str) -> AdapterEntry:
    try:
        return ADAPTERS[name]
    except KeyError:
        raise UsageError(f"unknown adapter {name!r} (choose from {', '.join(ADAPTERS)})") from None


def given_options(
    adapter: AdapterEntry,
    values: Mapping[str, Any],
    spell: Callable[[Option], str] = lambda option: option.flag,
    hint: str = "",
) -> dict[str, Any]:
    """The adapter options among `values` (by destination name) that were given, repeatable
    ones as tuples: what `make_request` takes (`vibesys run` and `vibesys.Client` both build
    their request this way). An option `adapter` does not take is one UsageError line."""
    own = {o.dest for o in adapter.options}
    given: dict[str, Any] = {}
    for dest, value in values.items():
        if value is None or value == [] or value == ():
            continue
        if dest not in own:
            options = [o for e in ADAPTERS.values() for o in e.options if o.dest == dest]
            if not options:
                raise UsageError(f"{dest!r} is not an option of any adapter")
            others = " and ".join(
                e.name for e in ADAPTERS.values() if any(o.dest == dest for o in e.options)
            )
            raise UsageError(
                f"{spell(options[0])} is not an option of the {adapter.name} adapter (only "
                f"{others} take it){hint}"
            )
        given[dest] = tuple(value) if isinstance(value, list) else value
    return given
