"""`async with vibesys.Session(...)` (local site, real processes and sockets): it serves a real
`vibesys-eval`, and the end of the block, an exception in it, a cancel of the task while the
block runs, and a cancel while the session starts each leave nothing: no socket, token or
environment file, no child process, no thread."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from vibesys.session import Session

pytestmark = pytest.mark.timeout(120)

BUDGET = 60.0


def children() -> list[int]:
    """This process's children, zombies included (every thread's)."""
    found: list[int] = []
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            found += [int(pid) for pid in (task / "children").read_text().split()]
    return sorted(found)


@pytest.fixture
def baseline() -> Iterator[tuple[list[int], int]]:
    yield children(), threading.active_count()


def assert_nothing_left(state: Path, baseline: tuple[list[int], int]) -> None:
    left = [
        p
        for p in state.rglob("*")
        if p.is_socket() or p.name in ("eval-token", "gpu-token", "container.env")
    ]
    assert left == []
    assert children() == baseline[0]
    assert threading.active_count() == baseline[1], threading.enumerate()


def new_session(root: Path, **options: object) -> Session:
    (root / "ws").mkdir(exist_ok=True)
    return Session(
        "campaign-1",
        root / "ws",
        local=True,
        journal=root / ".vibesys" / "journal.db",
        state_dir=root / "state",
        teardown_seconds=30,
        log=lambda _line: None,
        **options,  # type: ignore[arg-type]
    )


def evaluate(session: Session, script: str) -> tuple[int, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("VIBESYS_")}
    done = subprocess.run(
        [sys.executable, str(session.clients["vibesys-eval"]), "--", "sh", "-c", script],
        cwd=session.document["workspace"],
        env=base | session.environment,
        capture_output=True,
        text=True,
        timeout=BUDGET,
        check=False,
    )
    return done.returncode, done.stdout


def test_async_with_serves_and_leaves_nothing(
    tmp_path: Path, baseline: tuple[list[int], int]
) -> None:
    async def framework() -> Session:
        async with new_session(tmp_path) as session:
            assert session.running and session.capabilities.backend == "local"
            status, out = await asyncio.to_thread(evaluate, session, "echo accuracy 0.93")
            assert status == 0 and out.startswith("accuracy 0.93\n")
            assert json.loads(out.splitlines()[-1])["status"] == "COMPLETED"
        assert not session.running
        return session

    session = asyncio.run(framework())
    assert session.close() == 0
    assert_nothing_left(tmp_path / "state", baseline)


def test_an_exception_in_the_async_block_closes_the_session(
    tmp_path: Path, baseline: tuple[list[int], int]
) -> None:
    session = new_session(tmp_path)

    async def framework() -> None:
        async with session:
            raise RuntimeError("the framework failed")

    with pytest.raises(RuntimeError, match="the framework failed"):
        asyncio.run(framework())
    assert session.close() == 0 and not session.running
    assert_nothing_left(tmp_path / "state", baseline)


def test_a_cancel_in_the_async_block_closes_the_session(
    tmp_path: Path, baseline: tuple[list[int], int]
) -> None:
    session = new_session(tmp_path)
    serving = asyncio.Event()

    async def framework() -> None:
        async with session:
            serving.set()
            await asyncio.sleep(600)

    async def main() -> None:
        task = asyncio.create_task(framework())
        await serving.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The teardown was awaited: nothing is left by the time the cancel arrives here.
        assert not session.running

    asyncio.run(main())
    assert session.close() == 0
    assert_nothing_left(tmp_path / "state", baseline)


def test_a_cancel_while_the_session_starts_leaves_nothing(
    tmp_path: Path, baseline: tuple[list[int], int]
) -> None:
    # The serve hangs before it listens (its experiment file is a FIFO nobody writes): the
    # cancel reaches a start that waits for the serve's document.
    os.mkfifo(tmp_path / "experiment.toml")
    session = new_session(tmp_path, resources=tmp_path / "experiment.toml")
    entered: list[bool] = []

    async def framework() -> None:
        async with session:
            entered.append(True)

    async def main() -> None:
        task = asyncio.create_task(framework())
        while not session.running:
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, BUDGET)
        assert not session.running

    asyncio.run(main())
    assert entered == []
    assert session.close() == -15 and not session.running
    assert_nothing_left(tmp_path / "state", baseline)
