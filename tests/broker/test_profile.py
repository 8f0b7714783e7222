"""The profile request, short of Slurm: the operator's profilers in slurm.toml (strict, each
mistake one line), the request's `profile` and the capture replies on the wire, admission
turning a name into the profiler's command, variables and captures (or a one-line refusal),
and the client keeping a capture only when it matches the recorded digest."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers.slurm_toml import MINIMAL, error_of
from vibesys.broker import client
from vibesys.broker.admission import Admission, Refusal
from vibesys.broker.engine_runner import EngineGpuJobRunner
from vibesys.broker.exposure import check_profilers
from vibesys.broker.protocol import BrokerCall, ProtocolError, decode_call, encode_call
from vibesys.broker.replies import Capture, Captured, decode_reply, encode_reply
from vibesys.config.load import parse_slurm_config
from vibesys.config.profiler import CAPTURE_DIR, ProfilerConfig
from vibesys.config.slurm import AgentGpuConfig
from vibesys.errors import ConfigError
from vibesys.states import JobState

AGENT = """
[vibesys.agent_gpu]
partitions = ["main"]
max_gpus = 1
max_time_minutes = 10
default_time_minutes = 5
"""
NSYS = """
[vibesys.agent_gpu.profilers.nsys]
command = ["nsys", "profile", "-o", "{capture}", "--"]
captures = ["{capture}.nsys-rep"]
env = ["NSYS_NVTX_PROFILER_REGISTER_ONLY=0"]
"""


def test_the_site_maps_each_name_to_its_command_captures_and_variables() -> None:
    config = parse_slurm_config(MINIMAL + AGENT + NSYS).agent_gpu
    assert config is not None
    nsys = config.profilers["nsys"]
    assert nsys.argv(("python3", "t.py")) == (
        "nsys", "profile", "-o", f"{CAPTURE_DIR}/profile", "--", "python3", "t.py",
    )  # fmt: skip
    assert nsys.capture_names() == ("profile.nsys-rep",)
    assert nsys.variables() == {"NSYS_NVTX_PROFILER_REGISTER_ONLY": "0"}
    assert hash(config) == hash(parse_slurm_config(MINIMAL + AGENT + NSYS).agent_gpu)
    assert parse_slurm_config(MINIMAL + AGENT).agent_gpu.profilers == {}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('"--"]', '"--"]\nbogus = 1', "profilers.nsys.bogus: unknown key"),
        ('"-o", "{capture}", ', "", "no item names '{capture}'"),
        ('["{capture}.nsys-rep"]', '["../{capture}"]', "must be '{capture}' plus a file name"),
        ('["{capture}.nsys-rep"]', '["{capture}/x"]', "must be '{capture}' plus a file name"),
        ('["{capture}.nsys-rep"]', '["{capture}.a\\nb"]', "must be '{capture}' plus a file name"),
        ('["{capture}.nsys-rep"]', "[]", "captures"),
        ('env = ["NSYS', 'env = ["1NSYS', "write each variable as 'NAME=VALUE'"),
        ("profilers.nsys]", "profilers.'n s']", "is not a profiler name"),
    ],
)
def test_a_bad_profiler_is_refused_in_one_line(old: str, new: str, expected: str) -> None:
    assert old in NSYS
    assert expected in error_of(MINIMAL + AGENT + NSYS.replace(old, new, 1))


GOOD = {"version": 1, "token": "t", "cwd": "/w", "argv": ["x"], "gpus": 0, "time_minutes": None}


def test_the_profile_is_optional_on_the_wire() -> None:
    plain = decode_call(json.dumps(GOOD | {"env": {}}).encode())
    assert plain.profile is None and b"profile" not in encode_call(plain)
    asked = decode_call(json.dumps(GOOD | {"env": {}, "profile": "py-spy"}).encode())
    assert asked.profile == "py-spy"
    assert decode_call(encode_call(asked).rstrip(b"\n")) == asked
    for bad in ("", "a b", "../x", 3, "x" * 65):
        with pytest.raises(ProtocolError, match="'profile' must be null or a profiler's name"):
            decode_call(json.dumps(GOOD | {"env": {}, "profile": bad}).encode())


def test_captures_travel_as_bytes_then_their_digest() -> None:
    for reply in (Capture("profile.json", bytes(range(256))), Captured("p.json", 3, "ab")):
        assert decode_reply(encode_reply(reply).rstrip(b"\n")) == reply
    for name in ("../x", ".hidden", "a/b", ""):
        with pytest.raises(ProtocolError):
            decode_reply(encode_reply(Capture(name, b"x")).rstrip(b"\n"))


def limits(**profilers: ProfilerConfig) -> AgentGpuConfig:
    return AgentGpuConfig(
        partitions=("main",),
        max_gpus=1,
        max_time_minutes=10,
        default_time_minutes=5,
        profilers=profilers,
    )


SPY = ProfilerConfig(
    command=("py-spy", "record", "-o", "{capture}.json", "--"),
    captures=("{capture}.json",),
    env=("PYSPY_X=1", "A=operator"),
)


def ask(tmp_path: Path, profile: str | None) -> BrokerCall:
    return BrokerCall(
        "tok", str(tmp_path), ("python3", "t.py"), 0, None, {"A": "agent"}, 1, None, profile
    )


def test_admission_turns_the_name_into_the_operators_command(tmp_path: Path) -> None:
    workspace = os.path.realpath(tmp_path)
    admission = Admission("tok", workspace, limits(**{"py-spy": SPY}), {"PATH": "/usr/bin"})
    job = admission.admit(ask(tmp_path, "py-spy"))
    assert job.argv == (
        "py-spy", "record", "-o", f"{CAPTURE_DIR}/profile.json", "--", "python3", "t.py",
    )  # fmt: skip
    assert (job.profiler, job.captures) == ("py-spy", ("profile.json",))
    assert job.sandbox.capture_dir == CAPTURE_DIR
    assert job.env["A"] == "operator" and job.env["PYSPY_X"] == "1"  # the operator's win
    plain = admission.admit(ask(tmp_path, None))
    assert (plain.argv, plain.captures, plain.sandbox.capture_dir) == (
        ("python3", "t.py"),
        (),
        None,
    )


@pytest.mark.parametrize(
    ("offered", "message"),
    [
        ({"py-spy": SPY}, "--profile nsys: this site offers no such profiler (offered: py-spy)"),
        ({}, "--profile nsys: this site offers no such profiler (offered: none)"),
    ],
)
def test_a_profiler_the_site_does_not_offer_is_refused_in_one_line(
    tmp_path: Path, offered: dict[str, ProfilerConfig], message: str
) -> None:
    admission = Admission("tok", os.path.realpath(tmp_path), limits(**offered), {})
    with pytest.raises(Refusal) as caught:
        admission.admit(ask(tmp_path, "nsys"))
    assert str(caught.value) == message


def test_the_client_keeps_a_capture_only_when_it_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    data = b"samples" * 1000
    digest = hashlib.sha256(data).hexdigest()
    captures = client.Captures()
    captures.add("good.json", data[:10])
    captures.add("good.json", data[10:])
    captures.done("good.json", len(data), digest)
    captures.add("bad.json", data)
    captures.done("bad.json", len(data), "0" * 64)
    captures.add("cut.json", data)
    captures.close()  # the connection ended before its digest came
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.json"]
    assert (tmp_path / "good.json").read_bytes() == data
    err = capsys.readouterr().err
    assert f"capture good.json: {len(data)} bytes, sha256 {digest}" in err
    assert "capture bad.json: got" in err and "not kept" in err


def test_the_client_sends_the_profile() -> None:
    args = client.parse_args(["--profile", "py-spy", "--", "python3", "t.py"])
    sent = decode_call(client.call_line(args, "tok", "/w").rstrip(b"\n"))
    assert (sent.profile, sent.argv) == ("py-spy", ("python3", "t.py"))


def test_the_documented_profilers_are_valid() -> None:
    """docs/gpu-broker.md's example tables parse as a site's profilers (nsys, ncu, rocprof and
    py-spy): an operator copying one gets no error."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "gpu-broker.md").read_text()
    block = doc.split("[vibesys.agent_gpu.profilers.py-spy]", 1)[1].split("```", 1)[0]
    config = parse_slurm_config(MINIMAL + AGENT + "[vibesys.agent_gpu.profilers.py-spy]" + block)
    assert config.agent_gpu is not None
    assert sorted(config.agent_gpu.profilers) == ["ncu", "nsys", "py-spy", "rocprof"]


@pytest.mark.parametrize(
    ("state", "kept"),
    [(JobState.DONE, False), (JobState.UNRESOLVED, True), (JobState.RUNNING, True)],
)
def test_a_capture_in_the_jobs_directory_goes_only_once_the_job_is_proven_gone(
    tmp_path: Path, state: JobState, kept: bool
) -> None:
    """The job's copy is the runtime's: removed at DONE; an UNRESOLVED (or still running) job
    may write it yet, so it stays, with every other file of the job."""
    work = tmp_path / "inv-1" / "1" / "work"
    work.mkdir(parents=True)
    (work / "profile.json").write_text("{}")
    (work / "stdout-of-the-program").write_text("kept")
    inv = SimpleNamespace(id="inv-1", attempt=1, state=state)
    runner = SimpleNamespace(remote_root=tmp_path)
    EngineGpuJobRunner._release_captures(runner, inv, ("profile.json",))  # type: ignore[arg-type]
    assert (work / "profile.json").exists() is kept
    assert (work / "stdout-of-the-program").exists()


def test_a_profiler_a_confined_job_could_not_run_stops_the_broker_from_starting(
    tmp_path: Path,
) -> None:
    tools, hidden = tmp_path / "tools", tmp_path / "hidden"
    for directory in (tools, hidden):
        directory.mkdir()
        (directory / "spy").write_text("")
    check_profilers({"a": str(tools / "spy"), "b": "nsys", "c": "/usr/bin/env"}, [str(tools)])
    with pytest.raises(ConfigError) as caught:
        check_profilers({"py-spy": str(hidden / "spy")}, [str(tools)])
    assert str(caught.value) == (
        f"vibesys.agent_gpu.profilers.py-spy.command: {hidden / 'spy'} is not visible to a "
        "confined job; add its directory to read_only_paths"
    )
    with pytest.raises(ConfigError, match="does not exist"):
        check_profilers({"py-spy": str(tools / "nope")}, [str(tools)])
