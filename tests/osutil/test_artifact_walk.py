"""The artifact walk, here and as the listing program the node runs: links are never followed
(a loop of directory links is walked once, in no time), `**` is any number of directories, the
walk stops at its entry and time bounds (and says so), sizes are judged by length before a
byte is read, and the node's program finds exactly what the in-process walk finds."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from vibesys.adapters.rundir.listing import LIST_SCRIPT, list_argv, parse_listing
from vibesys.osutil.artifact_walk import Limits, TooBig, collect, hash_only

SMALL = Limits(max_file_bytes=1 << 20, max_total_bytes=3 << 20)


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A job's directory as a hostile job leaves it: two links to itself, a link out to a
    host directory holding a matching file, a link to a file, a sparse file far over the limit."""
    work = tmp_path / "work"
    (work / "deep" / "x").mkdir(parents=True)
    (work / ".hidden").mkdir()
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "result.json").write_text("host secret")
    (work / "result.json").write_text('{"ok": 1}')
    (work / "deep" / "x" / "result.json").write_text('{"n": 2}')
    (work / ".hidden" / "result.json").write_text("hidden")
    os.symlink(".", work / "a")
    os.symlink(".", work / "b")
    os.symlink(tmp_path / "host", work / "out")
    os.symlink(tmp_path / "host" / "result.json", work / "deep" / "result.json")
    with open(work / "big.bin", "wb") as handle:
        handle.truncate(300 << 20)  # sparse: no block written
    return work


def paths(listing: dict[str, list[Any]], key: str = "found") -> list[str]:
    return sorted(str(entry["path"]) for entry in listing[key])


def test_links_are_never_followed_and_a_loop_costs_nothing(job: Path) -> None:
    started = time.monotonic()
    listing = collect(str(job), ["**/result.json", "out/*", "nothing/*"], SMALL)
    assert time.monotonic() - started < 2
    assert paths(listing) == ["deep/x/result.json", "result.json"]
    assert listing["missing"] == ["out/*", "nothing/*"]
    assert listing["refused"] == []
    found = {f["path"]: f for f in listing["found"]}
    assert found["result.json"]["sha256"] == hashlib.sha256(b'{"ok": 1}').hexdigest()


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("result.json", ["result.json"]),
        ("*/result.json", []),
        ("*/*/result.json", ["deep/x/result.json"]),
        ("deep/**", ["deep/x/result.json"]),
        ("**", ["deep/x/result.json", "result.json"]),
        ("./deep//x/*.json", ["deep/x/result.json"]),
        (".hidden/*", [".hidden/result.json"]),
        ("**/**/x/result.json", ["deep/x/result.json"]),
    ],
)
def test_globs_match_a_component_at_a_time(job: Path, pattern: str, expected: list[str]) -> None:
    assert paths(collect(str(job), [pattern], SMALL)) == expected


def test_a_file_over_a_limit_is_refused_by_its_length_unread(job: Path) -> None:
    read: list[str] = []

    def take(fd: int, relative: str, budget: int) -> tuple[int, str]:
        read.append(relative)
        return hash_only(fd, relative, budget)

    (job / "m1.bin").write_bytes(b"1" * (1 << 20))
    (job / "m2.bin").write_bytes(b"2" * (1 << 20))
    (job / "m3.bin").write_bytes(b"3" * (1 << 20))
    listing = collect(str(job), ["*.bin"], SMALL._replace(max_total_bytes=(2 << 20) + 5), take)
    assert read == ["m1.bin", "m2.bin"]  # big.bin and m3.bin never read
    assert paths(listing) == ["m1.bin", "m2.bin"]
    refused = {r["path"]: r for r in listing["refused"]}
    assert refused["big.bin"]["size"] == 300 << 20
    assert "over the limit of 1048576 bytes per artifact" in refused["big.bin"]["why"]
    assert "would take the evaluation's artifacts over 2097157 bytes" in refused["m3.bin"]["why"]


def test_a_file_growing_past_its_budget_as_it_is_read_is_refused(job: Path) -> None:
    def growing(fd: int, relative: str, budget: int) -> tuple[int, str]:
        raise TooBig(relative)

    listing = collect(str(job), ["result.json"], SMALL, growing)
    assert listing["found"] == [] and "grew past" in listing["refused"][0]["why"]


def test_the_walk_stops_at_its_entry_bound_and_names_every_pattern(tmp_path: Path) -> None:
    for n in range(50):
        (tmp_path / f"f{n:02}.json").write_text("{}")
    listing = collect(str(tmp_path), ["*.json", "z/*"], SMALL._replace(max_entries=10))
    assert paths(listing) == [f"f{n:02}.json" for n in range(10)]
    assert listing["missing"] == []
    assert [(r["path"], r["why"]) for r in listing["refused"]] == [
        (p, "the walk stopped at its limit of 10 entries: files beyond it were not collected")
        for p in ("*.json", "z/*")
    ]


def test_the_walk_stops_at_its_time_bound_but_reading_files_is_not_walking(
    tmp_path: Path,
) -> None:
    for n in range(4):
        (tmp_path / f"r{n}").write_text("r")
    listing = collect(str(tmp_path), ["*"], SMALL._replace(max_seconds=0.0))
    assert listing["found"] == [] and "limit of 0 seconds" in listing["refused"][0]["why"]

    def slow(fd: int, relative: str, budget: int) -> tuple[int, str]:
        time.sleep(0.1)
        return hash_only(fd, relative, budget)

    listing = collect(str(tmp_path), ["r*"], SMALL._replace(max_seconds=0.2), slow)
    assert paths(listing) == ["r0", "r1", "r2", "r3"] and listing["refused"] == []


def test_a_directory_that_is_not_there_matches_nothing(tmp_path: Path) -> None:
    listing = collect(str(tmp_path / "gone"), ["a", "**/b"], SMALL)
    assert listing == {"found": [], "refused": [], "missing": ["a", "**/b"]}


def test_the_nodes_listing_program_is_self_contained_and_lists_the_same(
    job: Path, tmp_path: Path
) -> None:
    patterns = ["**/result.json", "*.bin", "nothing/*"]
    # -I: no site, no vibesys on the path, as on a node where vibesys is not installed.
    done = subprocess.run(
        [sys.executable, "-I", "-c", LIST_SCRIPT, *list_argv(str(job), patterns, SMALL)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == collect(str(job), patterns, SMALL)
    infos, missing = parse_listing(done.stdout)
    assert missing == ["nothing/*"]
    by_path = {info.path: info for info in infos}
    assert by_path["big.bin"].refused and by_path["big.bin"].sha256 == ""
    assert by_path["result.json"].refused == ""
