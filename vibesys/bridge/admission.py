"""Turning a decoded request into an accepted `Evaluation`, or a refusal that names the field.

Order: the token (constant time; the GPU broker's token is recognized and named), then the
campaign (run id), the workspace, the variables (only names the operator allows), the timeout
(refused above the session's limit, never clamped), a profile's profiler (only one the session
offers). What the request may not name at all (a
host, an account, a partition, ...) was refused by the protocol already.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import msgspec

from vibesys.bridge.protocol import BridgeCall, Resume
from vibesys.service.framing import Refusal
from vibesys.service.tokens import service_of, tokens_match

__all__ = ["Evaluation", "Refusal", "SessionPolicy"]


class Evaluation(msgspec.Struct, frozen=True):
    """An accepted evaluate (or cancel) request: checked against the session."""

    request_id: str
    run_id: str
    workspace: str
    kind: str
    argv: tuple[str, ...]
    #: the request's own value (None: the session's default), part of its identity
    timeout_requested: int | None
    #: what applies: the request's, else the session's default
    timeout_seconds: int
    env: Mapping[str, str] = msgspec.field(default_factory=lambda: MappingProxyType({}))
    artifacts: tuple[str, ...] = ()
    uid: int = -1
    resume: Resume = msgspec.field(default_factory=Resume)
    #: a profile's profiler, by the operator's name for it (None: not a profile)
    profiler: str | None = None

    def __repr__(self) -> str:  # never print the variables' values
        return f"Evaluation({self.request_id!r}, argv={self.argv!r}, env=<{sorted(self.env)}>)"

    def body(self) -> dict[str, Any]:
        """The request's identity as the journal keeps it (no values of variables), with the
        timeout that applies, so a restarted session keeps the same deadline."""
        profiler = {} if self.profiler is None else {"profiler": self.profiler}
        return profiler | {
            "run": self.run_id,
            "workspace": self.workspace,
            "kind": self.kind,
            "argv": list(self.argv),
            "timeout_seconds": self.timeout_requested,
            "env": sorted(self.env),
            "artifacts": list(self.artifacts),
            "effective_timeout_seconds": self.timeout_seconds,
        }


class SessionPolicy(msgspec.Struct, frozen=True):
    """Everything a check needs: fixed when the session starts."""

    token: str
    run_id: str
    #: the workspace as the operator named it (absolute) and with symlinks resolved
    workspace: str
    workspace_real: str
    allowed_env: frozenset[str] = frozenset()
    default_timeout: int = 3600
    max_timeout: int = 86400
    #: the profilers a profile may name (the site's)
    profilers: frozenset[str] = frozenset()

    def check_token(self, token: str) -> None:
        if tokens_match(token, self.token):
            return
        service = service_of(token)
        if service is not None and service != "the evaluation bridge":
            raise Refusal(
                f"bad token: that is {service}'s token (VIBESYS_GPU_TOKEN), not this bridge's "
                "(VIBESYS_EVAL_TOKEN)",
                "token",
            )
        raise Refusal(
            "bad token: this bridge serves another session (check VIBESYS_EVAL_TOKEN)", "token"
        )

    def admit(self, call: BridgeCall, uid: int) -> Evaluation:
        self.check_token(call.token)
        if call.run != self.run_id:
            raise Refusal(f"run {call.run!r} is not this session's campaign", "run")
        if os.path.normpath(call.workspace) not in (self.workspace, self.workspace_real):
            raise Refusal(
                f"workspace {call.workspace} is not this session's workspace: a session "
                "evaluates only its own candidate",
                "workspace",
            )
        unlisted = sorted(set(call.env) - self.allowed_env)
        if unlisted:
            allowed = ", ".join(sorted(self.allowed_env)) or "none"
            raise Refusal(
                f"variable {unlisted[0]} is not one the operator lets evaluations receive "
                f"(allowed: {allowed})",
                "env",
            )
        timeout = call.timeout_seconds
        if timeout is not None and timeout > self.max_timeout:
            raise Refusal(
                f"timeout_seconds {timeout} exceeds this session's limit ({self.max_timeout})",
                "timeout_seconds",
            )
        if call.profiler is not None and call.profiler not in self.profilers:
            offered = ", ".join(sorted(self.profilers)) or "none"
            raise Refusal(
                f"--profiler {call.profiler}: this session offers no such profiler "
                f"(offered: {offered})",
                "profiler",
            )
        return Evaluation(
            request_id=call.request_id,
            run_id=call.run,
            workspace=self.workspace,
            kind=call.kind,
            argv=call.argv,
            timeout_requested=timeout,
            timeout_seconds=self.default_timeout if timeout is None else timeout,
            env=dict(call.env),
            artifacts=call.artifacts,
            uid=uid,
            resume=call.resume,
            profiler=call.profiler,
        )
