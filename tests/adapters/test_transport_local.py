"""The local transport: argv arrives intact through `shell_command`; failures become typed
errors."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.hang_guard import hang_guard, process_is_gone, wait_until
from vibesys.adapters.transports import (
    CommandResult,
    LocalTransport,
    check_argv,
    map_transport_errors,
    shell_join,
)
from vibesys.adapters.transports.configured import runner_from_config
from vibesys.config.transport import LocalTransportConfig
from vibesys.errors import BackendMisconfigured, BackendUnavailable, UsageError

#: Arguments as a person might type them: any text except NUL (no command line carries it)
#: and lone surrogates (not encodable as a file-system argument).
ARG = st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=30)

PRINT_ARGS = ["printf", "%s\\0"]


def printed(result: CommandResult) -> list[str]:
    assert result.returncode == 0, result.evidence()
    return result.stdout.split("\0")[:-1]


def test_runs_a_command_and_captures_both_streams() -> None:
    result = LocalTransport().run(["bash", "-c", "echo out; echo err >&2; exit 3"])
    assert result == CommandResult(
        3, "out\n", "err\n", ("bash", "-c", "echo out; echo err >&2; exit 3")
    )
    assert not result.ok


def test_input_reaches_stdin() -> None:
    assert LocalTransport().run(["cat"], input=b"some\nbytes").stdout == "some\nbytes"


def test_stdin_is_empty_without_input() -> None:
    result = LocalTransport().run(["cat"], timeout=5)
    assert (result.returncode, result.stdout) == (0, "")


@settings(deadline=None, max_examples=60)
@given(args=st.lists(ARG, min_size=1, max_size=6))  # printf needs one
def test_argv_arrives_intact(args: list[str]) -> None:
    assert printed(LocalTransport().run([*PRINT_ARGS, *args], timeout=10)) == args


@pytest.mark.parametrize(
    "args",
    [
        ["it's", '"double"', "$(touch /nonexistent/x)", "`id`", "a b", "a\nb", ";", "|", "&&", "*"],
        ["$HOME", "${PATH}", "~", "-c", "--", "#comment", "\\", "!", "'", ""],
    ],
)
def test_shell_syntax_in_arguments_is_not_interpreted(args: list[str]) -> None:
    assert printed(LocalTransport().run([*PRINT_ARGS, *args])) == args


@pytest.mark.parametrize("program", ["if", "time", "A=1", "while"])
def test_a_program_named_like_shell_syntax_is_run_as_a_program(program: str) -> None:
    # Unquoted, `if` is a syntax error (2) and `A=1` an assignment (0); as a program: not found.
    result = LocalTransport().run([program, "x"])
    assert result.returncode == 127, result.evidence()
    assert shell_join([program, "x"]) == f"'{program}' x"


def test_shell_join_is_plain_shlex_for_ordinary_programs() -> None:
    assert shell_join(["sbatch", "--parsable", "a b"]) == "sbatch --parsable 'a b'"


def test_shell_command_prefix_runs_the_command() -> None:
    transport = LocalTransport(["env", "VIBESYS_TRANSPORT_TEST=through-wrapper", "bash", "-c"])
    result = transport.run(["printenv", "VIBESYS_TRANSPORT_TEST"])
    assert result.stdout == "through-wrapper\n"
    assert transport.command_line(["a b"]) == [
        "env",
        "VIBESYS_TRANSPORT_TEST=through-wrapper",
        "bash",
        "-c",
        "'a b'",
    ]


def test_a_missing_shell_is_a_misconfiguration_and_proves_nothing_ran() -> None:
    transport = LocalTransport(["/nonexistent/vibesys-shell", "-c"])
    with pytest.raises(BackendMisconfigured) as caught:
        transport.run(["sbatch", "x"], maybe_effect=True)
    assert caught.value.maybe_submitted is False
    assert caught.value.retryable is False
    assert "cannot execute /nonexistent/vibesys-shell" in str(caught.value)
    assert "install the program" in caught.value.fix


def test_a_non_executable_shell_is_a_misconfiguration(tmp_path: os.PathLike[str]) -> None:
    shell = os.path.join(tmp_path, "shell")
    with open(shell, "w", encoding="utf-8") as handle:
        handle.write("#!/bin/sh\n")
    with pytest.raises(BackendMisconfigured) as caught:
        LocalTransport([shell, "-c"]).run(["true"], maybe_effect=True)
    assert caught.value.maybe_submitted is False and caught.value.retryable is False


def test_an_argument_list_too_long_is_a_misconfiguration() -> None:
    """E2BIG from exec: nothing ran, and the same command fails the same way again."""
    huge = "x" * (8 * 1024 * 1024)
    with pytest.raises(BackendMisconfigured) as caught:
        LocalTransport().run(["echo", huge], maybe_effect=True)
    assert caught.value.maybe_submitted is False
    assert "too long" in caught.value.fix


@pytest.mark.parametrize("maybe_effect", [True, False])
def test_a_timeout_kills_the_whole_group_and_says_whether_it_may_have_acted(
    maybe_effect: bool, tmp_path: Path
) -> None:
    # The background sleep holds stdout open: killing only the shell would leave it running
    # and hang the call until it ended.
    pid_file = tmp_path / "sleep.pid"
    with (
        hang_guard(60, "a run whose group survived its timeout"),
        pytest.raises(BackendUnavailable) as caught,
    ):
        LocalTransport().run(
            ["bash", "-c", f"sleep 600 & echo $! > {pid_file}; echo started; wait"],
            timeout=0.5,
            maybe_effect=maybe_effect,
        )
    wait_until(lambda: process_is_gone(int(pid_file.read_text())), 30, "the background sleep's end")
    assert caught.value.maybe_submitted is maybe_effect
    assert "no answer within 0.5 s" in str(caught.value)


def test_popen_streams_in_its_own_session() -> None:
    process = LocalTransport().popen(
        ["bash", "-c", "echo first; read -t 5 line || echo no-stdin; exit 4"],
        stdout=subprocess.PIPE,
    )
    try:
        assert os.getsid(process.pid) == process.pid
        assert process.stdout is not None
        assert process.stdout.readline() == b"first\n"
        assert process.wait(timeout=10) == 4
        assert process.stdout.read() == b"no-stdin\n"
    finally:
        if process.stdout is not None:
            process.stdout.close()


def test_popen_of_a_missing_shell_is_a_misconfiguration() -> None:
    with pytest.raises(BackendMisconfigured):
        LocalTransport(["/nonexistent/vibesys-shell"]).popen(["srun", "true"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "empty command"),
        ("sbatch job.sh", "not one string"),
        (["printf", "a\0b"], "NUL byte"),
    ],
)
def test_impossible_argv_is_a_usage_error(argv: list[str] | str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        check_argv(argv)
    with pytest.raises(UsageError, match=message):
        LocalTransport().run(argv)


@pytest.mark.parametrize("shell_command", [[], "bash -c"])
def test_shell_command_must_be_a_list(shell_command: list[str] | str) -> None:
    with pytest.raises(UsageError):
        LocalTransport(shell_command)


def test_map_transport_errors_translates_os_errors() -> None:
    with (
        pytest.raises(BackendUnavailable) as caught,
        map_transport_errors("squeue", maybe_effect=True),
    ):
        raise BrokenPipeError(32, "Broken pipe")
    assert caught.value.maybe_submitted is True and caught.value.retryable is True
    assert str(caught.value) == "squeue: Broken pipe"
    with (
        pytest.raises(BackendMisconfigured) as refused,
        map_transport_errors("squeue", maybe_effect=True),
    ):
        raise PermissionError(13, "Permission denied")
    assert refused.value.maybe_submitted is False and refused.value.retryable is False
    with pytest.raises(ValueError), map_transport_errors("squeue"):
        raise ValueError("not ours to translate")


def test_evidence_is_one_line() -> None:
    result = CommandResult(
        1, "", "sbatch: error: bad\nBatch job submission failed\n", ("sbatch", "a b")
    )
    assert result.evidence() == (
        "sbatch 'a b' -> rc=1 stderr: sbatch: error: bad Batch job submission failed"
    )


def test_runner_from_config() -> None:
    runner = runner_from_config(LocalTransportConfig(kind="local", shell_command=("sh", "-c")))
    assert isinstance(runner, LocalTransport)
    assert runner.shell_command == ("sh", "-c")
    assert runner.run(["echo", "ok"]).stdout == "ok\n"


def test_stream_timeout_is_a_backend_error_not_a_crash() -> None:
    import io

    from vibesys.errors import BackendUnavailable

    sink = io.BytesIO()
    with pytest.raises(BackendUnavailable, match="no answer"):
        LocalTransport().stream(["sh", "-c", "echo early; exec 1>&-; sleep 30"], sink, timeout=0.3)
    assert sink.getvalue() == b"early\n"
