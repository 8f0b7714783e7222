"""read_only_paths checked at start, with real directories and symlinks: the venv whose
bin/python leads into an unlisted Python install, broken links, loops, and the fixes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from vibesys.broker.exposure import check_read_only_paths, link_problem, links_to_check
from vibesys.errors import ConfigError
from vibesys.osutil.sandbox import Sandbox, confined_command

HEADER = (
    "vibesys.agent_gpu.read_only_paths lists paths holding symlinks that a confined job could "
    "not follow, so the job would fail with 'No such file':\n"
)


@pytest.fixture
def uv_like(tmp_path: Path) -> dict[str, Path]:
    """A uv-managed CPython (a versioned install plus an alias directory linking to it) and a
    venv whose bin/python leads there, as `uv venv` lays them out."""
    pythons = tmp_path / "home" / ".local" / "share" / "uv" / "python"
    real = pythons / "cpython-3.12.7-linux-x86_64-gnu"
    (real / "bin").mkdir(parents=True)
    (real / "bin" / "python3.12").symlink_to("/usr/bin/python3")  # system: visible
    alias = pythons / "cpython-3.12-linux-x86_64-gnu"
    alias.symlink_to(real.name)
    venv = tmp_path / "home" / "venvs" / "torch"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(alias / "bin" / "python3.12")
    (venv / "bin" / "python3").symlink_to("python")
    (venv / "bin" / "activate").write_text("# not a link\n")
    return {"real": real, "alias": alias, "venv": venv, "tmp": tmp_path}


def test_a_venv_linking_to_an_unlisted_python_refuses_to_start(uv_like: dict[str, Path]) -> None:
    venv, alias = uv_like["venv"], uv_like["alias"]
    target = alias / "bin" / "python3.12"
    with pytest.raises(ConfigError) as caught:
        check_read_only_paths([str(venv)])
    assert str(caught.value) == HEADER + "\n".join(
        [
            f"  {venv}: {venv}/bin/python -> {target} reaches {target}, which the job cannot "
            f"see; add {target} (or the directory that holds it) to read_only_paths",
            f"  {venv}: {venv}/bin/python3 -> python reaches {target}, which the job cannot "
            f"see; add {target} (or the directory that holds it) to read_only_paths",
        ]
    )


def test_listing_the_python_alias_fixes_it(uv_like: dict[str, Path]) -> None:
    # On Linux the alias directory (itself a symlink) is mounted as what it points to, so
    # listing the alias is enough.
    check_read_only_paths([str(uv_like["venv"]), str(uv_like["alias"])])


def test_listing_only_the_real_install_is_not_enough(uv_like: dict[str, Path]) -> None:
    # The link goes through the alias path, which the kernel resolves inside the sandbox:
    # with only the real install mounted, the alias itself does not exist there.
    with pytest.raises(ConfigError, match=f"add {uv_like['alias']}/bin/python3.12 "):
        check_read_only_paths([str(uv_like["venv"]), str(uv_like["real"])])


def test_a_real_venv_on_the_system_python_passes(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    assert (venv / "bin" / "python").is_symlink()
    check_read_only_paths([str(venv)])
    assert str(venv / "bin" / "python") in links_to_check(str(venv))


def test_a_venv_of_an_unlisted_interpreter_is_caught_with_a_real_venv(tmp_path: Path) -> None:
    base = tmp_path / "pyinstall"
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python3").symlink_to("/usr/bin/python3")
    venv = tmp_path / "venv"
    subprocess.run(
        [str(base / "bin" / "python3"), "-m", "venv", "--without-pip", str(venv)], check=True
    )
    with pytest.raises(ConfigError, match=f"add {base}/bin/python3 "):
        check_read_only_paths([str(venv)])
    check_read_only_paths([str(venv), str(base)])


def test_broken_links_and_loops_are_named(tmp_path: Path) -> None:
    listed = tmp_path / "tool"
    (listed / "bin").mkdir(parents=True)
    (listed / "bin" / "gone").symlink_to(listed / "missing")
    (listed / "bin" / "ping").symlink_to("pong")
    (listed / "bin" / "pong").symlink_to("ping")
    (listed / "bin" / "ok").symlink_to("/usr/bin/env")
    with pytest.raises(ConfigError) as caught:
        check_read_only_paths([str(listed)])
    assert str(caught.value).splitlines()[1:] == [
        f"  {listed}: {listed}/bin/gone -> {listed}/missing is broken: {listed}/missing does "
        "not exist",
        f"  {listed}: {listed}/bin/ping -> pong loops (more than 40 links)",
        f"  {listed}: {listed}/bin/pong -> ping loops (more than 40 links)",
    ]


def test_dotdot_is_applied_after_resolving_like_the_kernel(tmp_path: Path) -> None:
    # bin/tool -> ../lib/real/../tool where lib/real is a symlink to a hidden directory: the
    # kernel resolves lib/real first, so `..` leaves the listed path.
    listed, hidden = tmp_path / "listed", tmp_path / "hidden"
    (listed / "bin").mkdir(parents=True)
    (listed / "lib").mkdir()
    (hidden / "deep").mkdir(parents=True)
    (hidden / "tool").write_text("x")
    (listed / "lib" / "real").symlink_to(hidden / "deep")
    (listed / "bin" / "tool").symlink_to("../lib/real/../tool")
    problem = link_problem(str(listed / "bin" / "tool"), [str(listed)])
    assert problem is not None and f"reaches {hidden}/tool," in problem


def test_links_outside_bin_and_sbin_are_not_checked(tmp_path: Path) -> None:
    listed = tmp_path / "listed"
    (listed / "lib").mkdir(parents=True)
    (listed / "lib" / "dangling").symlink_to(tmp_path / "nowhere")
    check_read_only_paths([str(listed)])


def test_a_directory_of_venvs_is_checked_one_level_down(uv_like: dict[str, Path]) -> None:
    venvs = uv_like["venv"].parent
    with pytest.raises(ConfigError, match="bin/python "):
        check_read_only_paths([str(venvs)])


def test_the_workspace_counts_as_visible(tmp_path: Path) -> None:
    listed, workspace = tmp_path / "listed", tmp_path / "ws"
    (listed / "bin").mkdir(parents=True)
    workspace.mkdir()
    (workspace / "tool").write_text("x")
    (listed / "bin" / "tool").symlink_to(workspace / "tool")
    with pytest.raises(ConfigError):
        check_read_only_paths([str(listed)])
    check_read_only_paths([str(listed)], also_visible=[str(workspace)])


def test_a_missing_path_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"read_only_paths: {tmp_path}/nope does not exist"):
        check_read_only_paths([str(tmp_path / "nope")])


@pytest.mark.parametrize(("listed", "runs"), [("alias", True), ("real", False)])
def test_the_check_agrees_with_a_real_sandbox(
    uv_like: dict[str, Path], listed: str, runs: bool
) -> None:
    venv, workspace = uv_like["venv"], uv_like["tmp"] / "ws"
    workspace.mkdir()
    paths = (str(venv), str(uv_like[listed]))
    sandbox = Sandbox(str(workspace), str(workspace), paths, {"PATH": "/usr/bin:/bin"})
    done = subprocess.run(
        confined_command(sandbox, [str(venv / "bin" / "python"), "-c", "print('ran')"]),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode == 0 and done.stdout == "ran\n") is runs, done.stderr
    try:
        check_read_only_paths(paths)
        passed = True
    except ConfigError:
        passed = False
    assert passed is runs
