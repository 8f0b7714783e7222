"""Turning a decoded request into an accepted `GpuJob`, or a refusal that says why.

Order: token (constant time), then the working directory (symlinks resolved once; the resolved
path is what the sandbox mounts and enters, so swapping a symlink after this check changes
nothing), then the operator's limits (rejected, never clamped), then the environment filter.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

import msgspec

from vibesys.broker.environment import job_environment
from vibesys.broker.jobs import GpuJob
from vibesys.broker.protocol import BrokerCall
from vibesys.config.profiler import CAPTURE_DIR
from vibesys.config.sizing import AskedSizing, check_sizing
from vibesys.config.slurm import AgentGpuConfig
from vibesys.errors import UsageError
from vibesys.osutil.sandbox import Sandbox, is_within
from vibesys.service.framing import Refusal
from vibesys.service.tokens import service_of, tokens_match

__all__ = ["OUTSIDE_WORKSPACE", "Admission", "Refusal"]

OUTSIDE_WORKSPACE = "commands must run from inside the run's workspace"


class Admission(msgspec.Struct, frozen=True):
    """Everything a check needs: fixed when the broker starts."""

    token: str
    #: the workspace, symlinks resolved
    workspace: str
    limits: AgentGpuConfig
    #: the broker's own environment: the source of the host baseline variables
    host_env: Mapping[str, str]
    #: read_only_paths as validated at start
    read_only_paths: tuple[str, ...] = ()

    def admit(self, call: BrokerCall) -> GpuJob:
        if not tokens_match(call.token, self.token):
            if service_of(call.token) not in (None, "the GPU broker"):
                raise Refusal(
                    f"bad token: that is {service_of(call.token)}'s token, not this "
                    "broker's (VIBESYS_GPU_TOKEN)"
                )
            raise Refusal("bad token: this broker serves another run (check VIBESYS_GPU_TOKEN)")
        cwd = self.resolve_cwd(call.cwd)
        minutes = call.time_minutes
        timeout = call.timeout_seconds
        if timeout is not None:
            if minutes is None:  # the job's limit is whole minutes; the broker cancels at S
                minutes = math.ceil(timeout / 60)
            elif timeout > minutes * 60:
                raise Refusal(
                    f"--timeout-seconds {timeout} is past the job's --time {minutes} (minutes): "
                    "give a longer --time, or leave it out"
                )
        try:
            checked = check_sizing(AskedSizing(gpus=call.gpus, time_minutes=minutes), self.limits)
        except UsageError as exc:
            raise Refusal(str(exc)) from None
        argv, env = call.argv, job_environment(self.host_env, call.env)
        captures: tuple[str, ...] = ()
        if call.profile is not None:
            profiler = self.limits.profilers.get(call.profile)
            if profiler is None:
                offered = ", ".join(sorted(self.limits.profilers)) or "none"
                raise Refusal(
                    f"--profile {call.profile}: this site offers no such profiler "
                    f"(offered: {offered})"
                )
            # The operator's variables win: the profiler needs them as configured.
            argv, env = profiler.argv(call.argv), env | profiler.variables()
            captures = profiler.capture_names()
        sandbox = Sandbox(
            workspace=self.workspace,
            cwd=cwd,
            read_only_paths=self.read_only_paths,
            env=env,
            capture_dir=CAPTURE_DIR if captures else None,
        )
        return GpuJob(
            argv=argv,
            sandbox=sandbox,
            gpus=checked.gpus,
            time_minutes=checked.time_minutes,
            partitions=checked.partitions,
            job_name_prefix=self.limits.job_name_prefix,
            timeout_seconds=timeout,
            profiler=call.profile,
            captures=captures,
        )

    def resolve_cwd(self, cwd: str) -> str:
        """`cwd` with every symlink resolved, if that is a directory inside the workspace."""
        lexical = os.path.normpath(cwd)
        try:
            resolved = os.path.realpath(cwd, strict=True)
        except OSError:
            # Say "does not exist" only for paths inside: never probe the host for others.
            if is_within(lexical, self.workspace):
                raise Refusal(f"working directory {cwd} does not exist") from None
            raise Refusal(OUTSIDE_WORKSPACE) from None
        if not is_within(resolved, self.workspace):
            raise Refusal(OUTSIDE_WORKSPACE)
        if not os.path.isdir(resolved):
            raise Refusal(f"working directory {cwd} is not a directory")
        return resolved
