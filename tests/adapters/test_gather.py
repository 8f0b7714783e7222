"""A collection in one command (vibesys/adapters/rundir/gather.py), run by a real shell: both logs
from their offsets byte for byte, the marker, the listing; a stream that is cut short or
garbled is refused, never half-trusted."""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
from pathlib import Path

import pytest

from vibesys.adapters.base import Sink
from vibesys.adapters.rundir.gather import gather
from vibesys.adapters.rundir.listing import DEFAULT_LIMITS
from vibesys.adapters.transports import LocalTransport
from vibesys.adapters.transports.base import CommandResult
from vibesys.errors import BackendUnavailable


def job_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "work" / "out").mkdir(parents=True)
    (run / "stdout").write_bytes(b"line one\n\xff raw\nvibesys-part stdout 3\n" * 1000)
    (run / "stderr").write_bytes(b"warn\n")
    (run / "exit_code").write_text("3\n")
    (run / "work" / "out" / "r.json").write_text(json.dumps({"accuracy": 0.9}))
    return run


def sinks() -> dict[str, io.BytesIO]:
    return {"stdout": io.BytesIO(), "stderr": io.BytesIO()}


@pytest.mark.parametrize(("out_offset", "err_offset"), [(0, 0), (7, 5), (30_000, 2), (10**9, 0)])
def test_the_logs_rest_the_marker_and_the_listing_arrive(
    tmp_path: Path, out_offset: int, err_offset: int
) -> None:
    run = job_dir(tmp_path)
    got_sinks = sinks()
    offsets = {"stdout": out_offset, "stderr": err_offset}
    got = gather(
        LocalTransport(),
        str(run),
        str(run / "work"),
        offsets,
        ["out/*.json", "missing/*"],
        dict[str, Sink](got_sinks),
    )
    for stream in ("stdout", "stderr"):
        expected = (run / stream).read_bytes()[offsets[stream] :]
        assert got_sinks[stream].getvalue() == expected
        assert got.log_bytes[stream] == len(expected)
    assert got.marker == "3\n"
    assert got.listing is not None
    found, missing = got.listing
    content = (run / "work" / "out" / "r.json").read_bytes()
    assert [(f.path, f.size, f.sha256) for f in found] == [
        ("out/r.json", len(content), hashlib.sha256(content).hexdigest())
    ]
    assert missing == ["missing/*"]


def test_a_job_that_left_nothing_gathers_empty(tmp_path: Path) -> None:
    empty = tmp_path / "nothing"
    got = gather(LocalTransport(), str(empty), str(empty / "work"), {}, [], dict(sinks()))
    assert (got.log_bytes, got.marker, got.listing) == ({"stdout": 0, "stderr": 0}, None, None)


class Canned:
    """A runner that streams fixed bytes, in small pieces, whatever it is asked."""

    def __init__(self, data: bytes, returncode: int = 0) -> None:
        self.data, self.returncode = data, returncode

    def stream(self, argv: list[str], sink: Sink, *, timeout: float | None = None) -> object:
        for start in range(0, len(self.data), 3):
            sink.write(self.data[start : start + 3])
        return CommandResult(self.returncode, "", "", tuple(argv))


@pytest.mark.parametrize(
    "data",
    [
        b"vibesys-part stdout 5\nabc",  # cut short inside a part
        b"vibesys-part stdout 0\nvibesys-part stderr 0\n",  # no end line
        b"vibesys-part stdout x\nvibesys-end\n",
        b"garbage\n",
        b"vibesys-part stdout 0\nvibesys-end\nmore\n",
        b"x" * 500,
    ],
)
def test_a_garbled_or_short_stream_is_refused(data: bytes) -> None:
    with pytest.raises(BackendUnavailable):
        gather(Canned(data), "/r", "/r/work", {}, [], dict(sinks()))  # type: ignore[arg-type]


def test_a_failed_listing_says_so() -> None:
    with pytest.raises(BackendUnavailable, match="listing the artifacts failed"):
        gather(Canned(b"", returncode=4), "/r", "/r/work", {}, ["*"], dict(sinks()))  # type: ignore[arg-type]


def test_a_frozen_listing_ends_the_gathering_at_its_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing that stalls (here: its python3 stops itself with SIGSTOP, as on a frozen file
    system) is cut at the limit every other command has: the gathering fails, to be tried
    again, instead of holding the collection for good."""
    run = job_dir(tmp_path)
    shims = tmp_path / "shims"
    shims.mkdir()
    frozen = shims / "python3"
    frozen.write_text("#!/bin/sh\nkill -STOP $$\n")
    frozen.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}:{os.environ['PATH']}")
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match="listing the artifacts failed"):
        gather(
            LocalTransport(),
            str(run),
            str(run / "work"),
            {},
            ["out/*.json"],
            dict(sinks()),
            list_limit=1,
        )
    assert time.monotonic() - started < 20


def test_the_nodes_listing_never_follows_links_and_refuses_by_length(tmp_path: Path) -> None:
    run = job_dir(tmp_path)
    work = run / "work"
    os.symlink(".", work / "a")
    os.symlink(".", work / "b")
    os.symlink(run, work / "out" / "up")
    with open(work / "huge.bin", "wb") as handle:
        handle.truncate(DEFAULT_LIMITS.max_file_bytes + 1)  # sparse: costs no disk
    started = time.monotonic()
    got = gather(LocalTransport(), str(run), str(work), {}, ["**/*.json", "*.bin"], dict(sinks()))
    assert time.monotonic() - started < 10
    assert got.listing is not None
    found, missing = got.listing
    assert missing == []
    assert [(f.path, f.refused == "") for f in found] == [("out/r.json", True), ("huge.bin", False)]
    assert "bytes per artifact" in found[1].refused and found[1].sha256 == ""
