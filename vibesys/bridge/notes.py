"""The agent's runtime notes: Markdown rendered from a session's typed capabilities (what runs
where, how to ask for evaluations and GPUs, what GPU jobs can see, the limits, where results
land). Pure: the bridge sends the text (`vibesys-eval capabilities --notes` prints it), and a
framework may call `render_notes` on the host itself.

Plain string building, no template engine: the helper's side stays stdlib-only, and each
sentence states a fact of the capabilities, nothing else.
"""

from __future__ import annotations

from vibesys.bridge.capabilities import GpuCommands, Partition, SessionCapabilities
from vibesys.config.profiler import EVALUATION_CAPTURE

__all__ = ["render_notes"]


def render_notes(capabilities: SessionCapabilities) -> str:
    """The runtime notes of a session offering `capabilities`, as Markdown."""
    sections = [
        ["# Runtime notes"],
        _where(capabilities),
        _evaluations(capabilities),
        _gpu_commands(capabilities),
        _limits(capabilities),
        _results(capabilities),
    ]
    return "\n\n".join("\n".join(lines) for lines in sections) + "\n"


def _where(caps: SessionCapabilities) -> list[str]:
    lines = [
        "## What runs where",
        "",
        f"- You work in `{caps.workspace}`, in a container with no accelerator and no "
        "credentials for any cluster.",
    ]
    fresh = "each in a fresh copy of the workspace (nothing an evaluation changes comes back)"
    if caps.backend == "local":
        if caps.local_confined:
            lines += [
                f"- Trusted evaluations run on this session's host, {fresh}. They are confined: "
                "they see their copy (writable) and the host's system directories (read-only), "
                "nothing else of the host (not the workspace itself, not a home directory).",
                "- A program an evaluation runs must be in the system directories or in the "
                "workspace.",
            ]
        else:
            lines.append(
                f"- Trusted evaluations run on this session's host, {fresh}, with the host's "
                "full view (the operator chose not to confine them)."
            )
    elif caps.backend == "slurm":
        lines.append(
            f"- Trusted evaluations run as Slurm batch jobs (sbatch) on the site "
            f"`{caps.cluster}`, one node each, {fresh}."
        )
    else:
        lines.append(
            f"- Trusted evaluations run on the campaign's SkyPilot cluster `{caps.cluster}`, "
            f"{fresh}."
        )
    lines.append(
        "- The campaign's evaluations run one at a time, in the order they were asked for."
    )
    return lines


def _evaluations(caps: SessionCapabilities) -> list[str]:
    kinds = "|".join(caps.kinds)
    allowed = ", ".join(f"`{name}`" for name in caps.env) or "none"
    return [
        "## Evaluations",
        "",
        "```",
        f"vibesys-eval --kind {kinds} [--timeout SECONDS] [--artifact GLOB]... "
        "[--env NAME]... -- COMMAND [ARGS...]",
        "```",
        "",
        '- Where `vibesys-eval` is not installed, it is `python3 "$VIBESYS_EVAL"`.',
        f"- `--timeout`: {caps.default_timeout_seconds} s unless given; at most "
        f"{caps.max_timeout_seconds} s (a longer one is refused, never shortened).",
        "- `--artifact GLOB`: a file the evaluation leaves, relative to the workspace; it is "
        "brought home with the result.",
        f"- `--env NAME`: passes a variable's value; the names allowed: {allowed}.",
        "- The output streams back; the result (a JobResult, JSON) is the last line of stdout "
        "(or `--result FILE`); the exit status is the command's own.",
        "- Interrupting `vibesys-eval` cancels the evaluation; a lost connection is retried "
        "and reattaches to the same evaluation (never a second run).",
        *_profiles(caps),
    ]


def _profiles(caps: SessionCapabilities) -> list[str]:
    if not caps.profilers:
        return ["- No profiler is offered (`--kind profile` is refused)."]
    names = ", ".join(f"`{name}`" for name in caps.profilers)
    return [
        f"- `vibesys-eval --kind profile --profiler NAME -- COMMAND` ({names}) runs the "
        "command under that profiler, with the options the operator chose. Its capture files "
        f"(`{EVALUATION_CAPTURE}` and the profiler's suffix) come home as the evaluation's "
        "artifacts: listed in the "
        "result with their size and sha256, under `artifacts/` in its results directory; "
        "`--timeout` ends it at that second.",
    ]


def _gpu_commands(caps: SessionCapabilities) -> list[str]:
    limits = caps.gpu_limits
    if not caps.gpu_commands or limits is None:
        return [
            "## GPU commands",
            "",
            "- None in this session (no `vibesys-gpu`): this container has no accelerator, and "
            "commands that need one go through `vibesys-eval`.",
        ]
    cap = limits.max_concurrent_jobs
    lines = [
        "## GPU commands",
        "",
        "```",
        "vibesys-gpu --gpus N --time MINUTES -- COMMAND [ARGS...]",
        "```",
        "",
        '- Where `vibesys-gpu` is not installed, it is `python3 "$VIBESYS_GPU"`.',
        f"- At most {limits.max_gpus} GPUs and {limits.max_time_minutes} minutes per command "
        f"({limits.default_time_minutes} minutes without `--time`); a larger request is "
        "refused, never shrunk.",
        f"- Partitions, in preference order: {_partitions(limits.partitions)}.",
        "- "
        + (
            f"At most {cap} of the campaign's GPU jobs are submitted at once; the others wait."
            if cap is not None
            else "No cap on the campaign's GPU jobs at once (the scheduler queues them)."
        ),
        "- Each runs as a Slurm job on a compute node, confined, in the host's environment, "
        "not this container's. It sees the workspace (writable), the host's system "
        "directories, and, read-only:",
        *_read_only(limits),
        "- Nothing else: an interpreter or package anywhere else is invisible to it.",
        *_profiling(caps),
        "- A GPU command is not an evaluation: it produces no evidence; what it measures is for "
        "your own iteration.",
    ]
    return lines


def _profiling(caps: SessionCapabilities) -> list[str]:
    if not caps.profilers:
        return ["- No profiler is offered (`--profile` is refused)."]
    names = ", ".join(f"`{name}`" for name in caps.profilers)
    return [
        f"- `vibesys-gpu --profile NAME ... -- COMMAND` runs it under a profiler ({names}); "
        "the operator chose its options. Once the job ended its capture files are written "
        "into your current directory, each checked against the size and sha256 recorded "
        "when it came home; `--timeout-seconds S` ends it at S seconds, exit 124.",
    ]


def _read_only(limits: GpuCommands) -> list[str]:
    if not limits.read_only_paths:
        return ["  - no other path (the operator listed none)"]
    return [f"  - `{path}`" for path in limits.read_only_paths]


def _partitions(partitions: tuple[Partition, ...]) -> str:
    return ", ".join(
        f"`{p.name}`"
        + (f" (time limit {p.time_limit_minutes} minutes)" if p.time_limit_minutes else "")
        for p in partitions
    )


def _limits(caps: SessionCapabilities) -> list[str]:
    accelerators = "none"
    if caps.accelerators_per_node:
        accelerators = f"{caps.accelerators_per_node}"
        if caps.accelerator_type is not None:
            accelerators += f" x {caps.accelerator_type}"
        if caps.accelerator_backend is not None:
            accelerators += f" ({caps.accelerator_backend})"
    rows = [
        ("nodes per evaluation", str(caps.nodes)),
        ("accelerators per node", accelerators),
        ("CPUs per node", "unknown" if caps.cpus_per_node is None else str(caps.cpus_per_node)),
        (
            "evaluation timeout",
            f"{caps.default_timeout_seconds} s, at most {caps.max_timeout_seconds} s",
        ),
    ]
    if caps.allocation_time is not None:
        rows.append(("the cluster's allocation", f"{caps.allocation_time} of wall time"))
    if caps.partitions:
        rows.append(("partitions", _partitions(caps.partitions)))
    profilers = ", ".join(f"`{name}`" for name in caps.profilers) or "none offered"
    rows.append(("profilers", profilers))
    return ["## Limits", "", "| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)]


def _results(caps: SessionCapabilities) -> list[str]:
    where = (
        f"`{caps.results_dir}/<invocation>/`"
        if caps.results_dir is not None
        else "the session's results directory"
    )
    return [
        "## Results",
        "",
        f"- Each evaluation's `result.json`, `stdout`, `stderr` and `artifacts/` land in "
        f"{where}, at the same path here as on the session's host.",
    ]
