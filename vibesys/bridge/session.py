"""`vibesys session serve`: one candidate session's host side. It starts the evaluation bridge,
and the GPU broker too when the Slurm site has `[vibesys.agent_gpu]`, prints one JSON document
(sockets, token files, clients, the environment block for the container), serves until
SIGTERM, SIGINT or its parent's death, and tears everything down.

Teardown is one idempotent sequence, the same after success, failure, cancellation and a
partial start: stop listening (the sockets go), cancel every evaluation that has not ended and
tell its helper why, stop the GPU broker (which cancels its jobs), wait for all of it to settle
within the budget (what does not is reported UNRESOLVED), remove the tokens. The campaign's
cluster is kept (it belongs to the campaign) unless `--down` asks to release it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import msgspec

from vibesys.adapters.skypilot.request import SkyPilotRequest
from vibesys.bridge import client
from vibesys.bridge.admission import SessionPolicy
from vibesys.bridge.capabilities import SessionCapabilities, session_capabilities
from vibesys.bridge.notes import render_notes
from vibesys.bridge.options import SessionOptions, artifact_limits, session_options
from vibesys.bridge.runner import EvaluationRunner
from vibesys.bridge.server import BridgeServer
from vibesys.bridge.setup import (
    check_confinement,
    check_options,
    checked_workspace,
    claim_socket,
    private_dir,
    session_token,
    start_broker,
    subdir,
)
from vibesys.bridge.site import Site
from vibesys.broker.server import BrokerServer
from vibesys.engine import Engine
from vibesys.engine.clusters import release_cluster
from vibesys.engine.drive import StopFlag
from vibesys.errors import UsageError
from vibesys.journal_schema import open_journal
from vibesys.osutil.proc import is_alive, start_time
from vibesys.service.tokens import BRIDGE_PREFIX, write_private
from vibesys.sitecheck import SlurmSite, load_skypilot_site
from vibesys.sitecheck import run_site_checks as check_site

__all__ = [
    "SessionOptions",
    "artifact_limits",
    "run_site_checks",
    "serve_session",
    "session_options",
]

EVAL_SOCKET: Final = "eval.sock"


def run_site_checks(site: Site) -> list[str]:
    """The site's checks (`vibesys check`) before a session starts: the failures, one line
    naming the first and its fix. A local site has nothing to reach."""
    if site.backend == "local":
        return []
    if site.backend == "slurm":
        assert site.slurm_file is not None  # the file as the session read it
        report = check_site(SlurmSite(site.slurm_file.config, str(site.slurm_file.path)))
    else:
        request = site.sky_request
        assert isinstance(request, SkyPilotRequest)
        report = check_site(load_skypilot_site(request.profile, request.clusters_config))
    return [report.failure_summary()] if report.failed else []


class _Session(msgspec.Struct):
    """What a session started, so that teardown stops exactly that, once."""

    options: SessionOptions
    state: Path
    log: Callable[[str], None]
    #: set from signal handlers too: a lock-free flag (see StopFlag)
    stop: StopFlag = msgspec.field(default_factory=StopFlag)
    reason: str = "stopped"
    bridge: BridgeServer | None = None
    runner: EvaluationRunner | None = None
    broker: BrokerServer | None = None
    broker_stop: threading.Event = msgspec.field(default_factory=threading.Event)
    threads: list[threading.Thread] = msgspec.field(default_factory=list)
    secrets: list[Path] = msgspec.field(default_factory=list)
    closed: bool = False
    unsettled: int = 0

    def close(self) -> int:
        """Tear down what was started (idempotent); 0, or 4 when an evaluation is left
        UNRESOLVED."""
        if self.closed:
            return 4 if self.unsettled else 0
        self.closed = True
        self.log(f"tearing down: {self.reason}")
        if self.bridge is not None:
            self.bridge.stop_listening()
        self.broker_stop.set()  # the broker cancels its GPU jobs meanwhile
        if self.runner is not None:
            late = self.runner.close(self.reason, self.options.teardown_seconds)
            self.unsettled = len(late)
        for thread in self.threads:
            thread.join(self.options.teardown_seconds)
        if self.bridge is not None:
            self.bridge.close()
        if self.options.down and not self.unsettled:
            self._release()
        for path in self.secrets:
            path.unlink(missing_ok=True)
        left = f"; {self.unsettled} evaluation(s) left UNRESOLVED" if self.unsettled else ""
        self.log(f"torn down{left}")
        return 4 if self.unsettled else 0

    def _release(self) -> None:
        """`--down`: the campaign's cluster goes with the session."""
        site = self.options.site
        if site.backend != "skypilot" or site.cluster is None:
            return
        journal = open_journal(self.options.journal)
        try:
            lease = journal.clusters.live_lease(site.cluster)
            if lease is not None:
                release_cluster(Engine(journal), lease.id, "session serve --down")
                self.log(f"released cluster {site.cluster}")
        except Exception as exc:  # the session's own end stands; reconcile finishes it
            self.log(f"--down: {site.cluster} was not released ({exc})")
        finally:
            journal.close()


def serve_session(options: SessionOptions, out: Callable[[str], None]) -> int:
    """Start, print the document, serve until stopped, tear down; the exit status."""
    own_parent = os.getppid()
    watched, started = _parent(options.parent_pid)
    failures = run_site_checks(options.site) if options.check_site else []
    if failures:
        raise UsageError(f"the site is not ready: {failures[0]}")
    workspace = checked_workspace(options)
    check_options(options)
    check_confinement(options)
    state = private_dir(options.state_dir)
    session = _Session(options, state, _log)
    previous = {s: signal.signal(s, _stopper(session, s)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            document = _start(session, workspace)
        except BaseException as exc:
            session.reason = f"the start failed: {exc}"
            session.close()
            if isinstance(exc, OSError):
                raise UsageError(f"the session could not start: {exc.strerror or exc}") from None
            raise
        out(json.dumps(document, indent=2))
        _watch_parent(session, watched, started, own_parent)
        while not session.stop.wait(1.0):
            pass
        return session.close()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _stopper(session: _Session, signum: int) -> Callable[[int, object], None]:
    def handler(_signum: int, _frame: object) -> None:
        session.reason = f"{signal.Signals(signum).name} received"
        session.stop.set()

    return handler


def _start(session: _Session, workspace: tuple[str, str]) -> dict[str, Any]:
    options, state = session.options, session.state
    given, real = workspace
    journal = options.journal.absolute()
    open_journal(journal).close()  # refuse now (NFS, newer schema), not at the first request
    results = (options.results_dir or state / "results").absolute()
    results.mkdir(parents=True, exist_ok=True, mode=0o700)
    uids = frozenset(options.allow_uids or (os.getuid(),))
    socket_dir = subdir(state, "eval")
    claim_socket(socket_dir / EVAL_SOCKET)
    token_file = state / "eval-token"
    token = session_token(token_file, BRIDGE_PREFIX, session.secrets)
    policy = SessionPolicy(
        token,
        options.run_id,
        given,
        real,
        frozenset(options.allow_env),
        options.default_timeout,
        options.max_timeout,
        frozenset(options.site.profilers()),
    )
    session.runner = EvaluationRunner(
        journal,
        options.site,
        results,
        dict(os.environ),
        max_retries=options.max_retries,
        artifact_limits=options.artifact_limits,
    )
    # A restart carries on what the last session of this state directory left unfinished,
    # helper or not: deadlines, the queue and results never wait for a helper to come back.
    resumed = session.runner.resume(options.run_id)
    if resumed:
        ids = ", ".join(handle.invocation_id for handle in resumed)
        session.log(f"carrying on {len(resumed)} unfinished evaluation(s): {ids}")
    capabilities = _capabilities(options, policy, results)
    bridge = BridgeServer(
        policy,
        session.runner,
        socket_dir / EVAL_SOCKET,
        uids,
        capabilities.model_dump(mode="json"),
        notes=render_notes(capabilities),
    )
    bridge.listen()
    session.bridge = bridge
    _thread(session, bridge.serve, session.stop, "vibesys-eval-accept")
    eval_client = str(Path(client.__file__).resolve())
    environment = {
        "VIBESYS_EVAL_SOCKET": str(socket_dir / EVAL_SOCKET),
        "VIBESYS_EVAL_TOKEN": token,
        "VIBESYS_EVAL_RUN": options.run_id,
        "VIBESYS_EVAL_WORKSPACE": given,
        "VIBESYS_EVAL_RESULTS": str(results),
        "VIBESYS_EVAL": eval_client,
    }
    document: dict[str, Any] = {
        "version": 1,
        "run_id": options.run_id,
        "workspace": given,
        "backend": options.site.backend,
        "cluster": options.site.cluster,
        "journal": str(journal),
        "state_dir": str(state),
        "results_dir": str(results),
        "pid": os.getpid(),
        "bridge": {
            "socket": str(socket_dir / EVAL_SOCKET),
            "token_file": str(token_file),
            "client": eval_client,
        },
        "gpu": None,
    }
    if options.site.agent_gpu:
        assert options.site.slurm_file is not None
        session.broker, gpu = start_broker(
            state, options.site.slurm_file, real, journal, uids, session.secrets, options.run_id
        )
        _thread(session, session.broker.serve_forever, session.broker_stop, "vibesys-gpu-accept")
        document["gpu"] = gpu
        environment |= {
            "VIBESYS_GPU_SOCKET": gpu["socket"],
            "VIBESYS_GPU_TOKEN": gpu.pop("token"),
            "VIBESYS_GPU": gpu["client"],
            "CUDA_VISIBLE_DEVICES": "",
        }
    env_file = state / "container.env"
    session.secrets.append(env_file)
    write_private(env_file, "".join(f"{k}={v}\n" for k, v in environment.items()))
    document["environment"] = environment
    document["env_file"] = str(env_file)
    return document


def _thread(session: _Session, target: Callable[[Any], None], stop: Any, name: str) -> None:
    thread = threading.Thread(target=target, args=(stop,), name=name, daemon=True)
    session.threads.append(thread)
    thread.start()


def _capabilities(
    options: SessionOptions, policy: SessionPolicy, results: Path
) -> SessionCapabilities:
    return session_capabilities(
        options.site,
        run=options.run_id,
        workspace=policy.workspace,
        default_timeout=policy.default_timeout,
        max_timeout=policy.max_timeout,
        env=tuple(policy.allowed_env),
        results_dir=results,
    )


def _parent(parent: int | None) -> tuple[int, str | None]:
    """The process whose end stops the session (--parent-pid, else the parent now) and its
    start time, so that a recycled pid is not taken for it."""
    watched = parent if parent is not None else os.getppid()
    return watched, start_time(watched)


def _watch_parent(session: _Session, watched: int, started: str | None, own: int) -> None:
    """The parent's death stops the session: a watcher polls the pid (with its start time) twice
    a second. Not PR_SET_PDEATHSIG: it fires when the parent *thread* that started us ends,
    and a framework that starts sessions from a worker thread would lose them all."""
    gone = os.getppid() != own  # it died while the session started

    def watch() -> None:
        while not session.stop.wait(0.5):
            if gone or started is None or not is_alive(watched, started):
                session.reason = f"the parent process {watched} is gone"
                session.stop.set()

    threading.Thread(target=watch, name="vibesys-session-parent", daemon=True).start()


def _log(line: str) -> None:
    print(f"vibesys session: {line}", file=sys.stderr, flush=True)
