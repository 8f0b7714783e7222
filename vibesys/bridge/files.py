"""Files the bridge moves on this host: the candidate's copy for a local evaluation, a local
evaluation's declared artifacts, and the session's copy of every result.

Nothing goes back into the workspace. A local evaluation runs in a fresh copy of the
candidate's snapshot (staged by the snapshot policy and verified, as the sbatch path does on
the cluster); the session's results directory gets a copy of the result, the logs and the
verified artifacts, while the originals stay in the local attempt directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from vibesys.adapters.rundir.listing import DEFAULT_LIMITS
from vibesys.adapters.rundir.names import WORK_DIR
from vibesys.adapters.staging import copy_command, snapshot_path, stage
from vibesys.adapters.transports import CommandResult, LocalTransport
from vibesys.errors import UsageError
from vibesys.job_result import JobResult
from vibesys.journal_schema import ArtifactState, Invocation, Journal
from vibesys.osutil import artifact_walk, place
from vibesys.osutil.artifact_walk import Limits
from vibesys.osutil.layout import attempt_dir
from vibesys.snapshot import SnapshotPolicy, build_manifest, remote_program
from vibesys.states import JobState, Outcome

__all__ = [
    "collect_local_artifacts",
    "copy_result",
    "ran",
    "record_local_artifacts",
    "stage_local_candidate",
]

RESULT_FILE: Final = "result.json"


def stage_local_candidate(workspace: str, stage_root: Path, invocation_dir: Path) -> Path:
    """`invocation_dir/work`: a fresh, verified copy of the workspace's snapshot (its digest's
    directory under `stage_root` is made once and reused)."""
    manifest = build_manifest(workspace, SnapshotPolicy())
    # The "remote" side is this host: the staged snapshot is probed and the copy verified by
    # the stager's own code in this process, not by a new `python3` each (a version manager's
    # shim on PATH costs a quarter second a start; an evaluation is a handful of seconds).
    final = snapshot_path(str(stage_root), manifest.digest)
    if not os.path.lexists(final):
        probed = CommandResult(remote_program.EXIT_ABSENT, "", "", ("probe", str(final)))
    else:
        problem = _mismatch(final, manifest.digest)
        code = remote_program.EXIT_OK if problem is None else remote_program.EXIT_MISMATCH
        probed = CommandResult(code, "", problem or "", ("probe", str(final)))
    staged = stage(
        manifest,
        workspace,
        LocalTransport(),
        str(stage_root),
        python=sys.executable,
        probed=probed,
    )
    work = invocation_dir / WORK_DIR
    invocation_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    copy = copy_command(staged.snapshot_dir, str(work))
    done = subprocess.run(copy, capture_output=True, text=True, check=False, timeout=600)
    problem = done.stderr if done.returncode != 0 else _mismatch(work, manifest.digest)
    if problem is not None:
        raise UsageError(f"the candidate's copy failed: {' '.join(problem.split())}")
    return work


def _mismatch(directory: object, digest: str) -> str | None:
    """Why `directory` is not exactly the snapshot `digest` (the stager's own check), or None."""
    try:
        remote_program.verify(os.fsencode(str(directory)), digest)
    except remote_program.Mismatch as exc:
        return f"vibesys-snapshot: {directory} {exc}"
    return None


def collect_local_artifacts(
    work: Path, patterns: Sequence[str], target: Path, limits: Limits = DEFAULT_LIMITS
) -> tuple[list[tuple[str, int, str, str]], list[str], list[tuple[str, int, str]]]:
    """The files of `work` matching `patterns`, found by the listing's own walk and limits
    (`vibesys.osutil.artifact_walk`: regular files, never through a link, bounded), copied
    under `target`: (path, size, sha256, local copy) each, the patterns nothing matched, and
    what was refused: (path or pattern, size, why)."""
    copies: dict[str, str] = {}

    def take(fd: int, relative: str, budget: int) -> tuple[int, str]:
        copy = target / relative
        copy.parent.mkdir(parents=True, exist_ok=True)
        size, digest = _copy_hashing(fd, copy, budget)
        copies[relative] = str(copy)
        return size, digest

    listing = artifact_walk.collect(str(work), list(patterns), limits, take)
    found = [(f["path"], f["size"], f["sha256"], copies[f["path"]]) for f in listing["found"]]
    refused = [(r["path"], r["size"], r["why"]) for r in listing["refused"]]
    return found, listing["missing"], refused


def _copy_hashing(source: int, target: Path, budget: int) -> tuple[int, str]:
    """Copy the open file `source` to `target` (a clone sharing its blocks where the file
    system can, else its bytes) and hash the copy; TooBig past `budget` bytes."""
    partial = target.with_name(target.name + ".part")
    try:
        with open(partial, "wb") as writer:
            if not place.clone(source, writer.fileno()):
                _copy_bounded(source, writer.fileno(), budget)
            writer.flush()
            os.fsync(writer.fileno())
        with open(partial, "rb") as reader:  # our copy: the job cannot change it any more
            size, digest = artifact_walk.hash_only(reader.fileno(), str(target), budget)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, target)
    return size, digest


def _copy_bounded(source: int, target: int, budget: int) -> None:
    copied = 0
    while chunk := os.read(source, 1 << 20):
        copied += len(chunk)
        if copied > budget:
            raise artifact_walk.TooBig(str(budget))
        os.write(target, chunk)


def copy_result(found: JobResult, results_root: Path) -> Path:
    """`<results_root>/<invocation>/`: result.json, stdout, stderr and artifacts/<path>, made
    beside it and renamed into place (done again, it replaces the last copy whole)."""
    final = results_root / found.invocation_id
    building = results_root / f".{found.invocation_id}.{os.getpid()}.tmp"
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True, mode=0o700)
    for name, source in (("stdout", found.stdout_path), ("stderr", found.stderr_path)):
        if source and os.path.isfile(source):
            # A spool may still grow (an evaluation torn down while collecting): a copy.
            place.copy(source, building / name)
    for art in found.artifacts:
        if art.local_path and os.path.isfile(art.local_path):
            copy = building / "artifacts" / art.path
            copy.parent.mkdir(parents=True, exist_ok=True)
            # Verified and never written again (a new download is a new file): shared.
            place.link(art.local_path, copy)
    text = found.model_copy(update={"results_dir": str(final)}).model_dump_json(indent=2)
    (building / RESULT_FILE).write_text(text + "\n", encoding="utf-8")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(building, final)
    return final


def read_result(path: Path) -> dict[str, object]:
    """A copied result.json (tests and tools)."""
    loaded: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def ran(inv: Invocation) -> bool:
    """Whether its command ran to an exit of its own (its artifacts are worth collecting)."""
    return inv.state is JobState.DONE and inv.outcome in (
        Outcome.COMPLETED,
        Outcome.APPLICATION_FAILED,
    )


def record_local_artifacts(
    journal: Journal, inv: Invocation, patterns: list[str], limits: Limits
) -> None:
    """A local evaluation's declared artifacts, from its copy of the candidate to the local
    attempt directory, recorded as verified artifacts (once: a redo finds them recorded)."""
    if journal.progress.artifacts(inv.id, inv.attempt) or inv.cwd is None:
        return
    target = attempt_dir(inv.invocation_dir, inv.attempt) / "artifacts"
    found, missing, refused = collect_local_artifacts(Path(inv.cwd), patterns, target, limits)
    for path, size, digest, copy in found:
        state = ArtifactState.ACKNOWLEDGED
        journal.progress.record_artifact(
            inv.id, inv.attempt, path, state, size=size, sha256=digest, local_path=copy
        )
    for pattern in missing:
        journal.progress.record_artifact(
            inv.id,
            inv.attempt,
            pattern,
            ArtifactState.MISSING,
            detail=f"nothing matched {pattern!r} in the evaluation's directory",
        )
    for what, size, why in refused:
        state = ArtifactState.REFUSED
        journal.progress.record_artifact(inv.id, inv.attempt, what, state, size=size, detail=why)
