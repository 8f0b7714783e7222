"""The slurm.toml texts the slurm.toml tests start from (the documented example and a minimal
file), and the one-line error a text is refused with."""

from __future__ import annotations

from pathlib import Path

import pytest

from vibesys.config.load import parse_slurm_config
from vibesys.errors import ConfigError

DATA = Path(__file__).resolve().parents[1] / "config" / "data"
EXAMPLE = (DATA / "slurm.example.toml").read_text(encoding="utf-8")

MINIMAL = """
[slurm]
name = "c"
remote_workspace_root = "/shared/v"
[slurm.transport]
kind = "local"
"""


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_slurm_config(text)
    message = str(caught.value)
    assert "\n" not in message, message
    return message
