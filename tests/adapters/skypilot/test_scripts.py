"""scripts/skypilot-env refuses anything but the pinned SkyPilot (checked on fake venvs; the real
install is exercised by the contract and live tests)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SKY_ENV = ROOT / "scripts" / "skypilot-env"


def fake_venv(path: Path, version: str | None) -> Path:
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "sky").write_text("#!/bin/sh\nexit 0\n")
    answer = f"echo {version}" if version else "exit 1"
    (path / "bin" / "python").write_text(f"#!/bin/sh\n{answer}\n")
    for name in ("sky", "python"):
        (path / "bin" / name).chmod(0o755)
    return path


def check(venv: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SKY_ENV), "check", str(venv)], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize(
    ("version", "message"),
    [("0.13.0", "skypilot 0.13.0, but vibesys needs exactly 0.14.1"), (None, "not installed")],
)
def test_check_refuses_another_or_no_version(
    tmp_path: Path, version: str | None, message: str
) -> None:
    done = check(fake_venv(tmp_path / "venv", version))
    assert done.returncode == 1 and message in done.stderr


def test_check_refuses_a_missing_venv(tmp_path: Path) -> None:
    done = check(tmp_path / "nowhere")
    assert done.returncode == 1 and "no SkyPilot here" in done.stderr


def test_check_accepts_the_pin(tmp_path: Path) -> None:
    done = check(fake_venv(tmp_path / "venv", "0.14.1"))
    assert done.returncode == 0 and done.stdout == "skypilot 0.14.1\n"


def test_default_location_follows_the_environment(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(SKY_ENV), "path"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "VIBESYS_SKY_VENV": "/opt/sky"},
    )
    assert done.stdout == "/opt/sky\n"
    done = subprocess.run(
        [str(SKY_ENV), "path"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.stdout == f"{tmp_path}/.local/share/vibesys/skypilot-0.14.1\n"


def test_live_script_parses() -> None:
    for script in ("skypilot-env", "skypilot-live"):
        subprocess.run(["bash", "-n", str(ROOT / "scripts" / script)], check=True, timeout=30)
