"""A garbled frame from the remote helper is a lost helper (a typed error the transport maps
to TransportLost), never a foreign JSON or key error escaping the adapter edge."""

from __future__ import annotations

import struct

import pytest

from vibesys.adapters.transports.ssh_session import HelperLost, HelperSession


class SilentChannel:
    """A channel whose helper already answered (the frames are in the session's buffer)."""

    closed = False
    eof_received = True

    def sendall(self, data: bytes) -> None:
        pass

    def recv_stderr_ready(self) -> bool:
        return False

    def recv_ready(self) -> bool:
        return False


def answered(kind: bytes, payload: bytes) -> HelperSession:
    session = HelperSession(SilentChannel(), 4096, 0)
    session._buffer.extend(kind + struct.pack(">I", len(payload)) + payload)
    return session


@pytest.mark.parametrize(
    ("kind", "payload"),
    [(b"x", b"not json"), (b"x", b"[1, 2]"), (b"x", b'{"rc": "zero"}'), (b"E", b"{oops")],
)
def test_a_garbled_frame_is_a_lost_helper(kind: bytes, payload: bytes) -> None:
    session = answered(kind, payload)
    with pytest.raises(HelperLost):
        session.run(["true"], lambda _: None, input=None, timeout=5, env=None, stderr_limit=None)


def test_a_good_end_frame_still_gives_the_status() -> None:
    session = answered(b"x", b'{"rc": 3}')
    status = session.run(["x"], lambda _: None, input=None, timeout=5, env=None, stderr_limit=None)
    assert status == (3, b"")
