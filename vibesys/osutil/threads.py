"""A blocking call on a thread of its own, awaited from asyncio to its very end."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["await_in_thread"]

T = TypeVar("T")


async def await_in_thread(call: Callable[[], T], on_cancel: Callable[[], None] = lambda: None) -> T:
    """`call()` on a thread of its own (none is left behind, unlike an executor's), awaited to
    its end even when the awaiting task is cancelled: a session's start and close must finish
    (or undo) what they began before the cancel goes on. `on_cancel` tells `call` to hurry."""
    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        try:
            done.set_result(call())
        except BaseException as exc:  # handed to the awaiting task, which raises it
            done.set_exception(exc)

    thread = threading.Thread(target=run, name="vibesys-session-async", daemon=True)
    thread.start()
    waiting = asyncio.wrap_future(done)
    cancelled = False
    while not done.done():
        try:
            await asyncio.shield(waiting)
        except asyncio.CancelledError:
            cancelled = True
            on_cancel()
        except BaseException:  # the call's own exception: raised below
            pass
    thread.join()
    if cancelled:
        raise asyncio.CancelledError
    return done.result()
