"""The Slurm site file a run starts from: a slurm.toml, or a file holding the deprecated
`[slurm_gpu]` table, which is translated once (`slurm_gpu_alias`) with one warning.

Read once, when the run (a `vibesys run`, a broker) starts: what it read is recorded as a
rendering (`config.site`), and nothing later opens the file again.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import Final

from msgspec import Struct

from vibesys.config.load import default_slurm_config_path, parse_slurm_config, read_config_text
from vibesys.config.slurm import SlurmSiteConfig
from vibesys.config.slurm_gpu_alias import GateSizing, translate_slurm_gpu
from vibesys.errors import ConfigError

__all__ = [
    "DEFAULT_ALIAS_CONFIG",
    "SlurmSiteFile",
    "load_site_file",
    "site_file_path",
    "warn_once",
]

#: The old default of `--run-environment slurm-gpu`, used when slurm.toml does not exist.
DEFAULT_ALIAS_CONFIG: Final = "~/.config/vibesys/slurm-gpu.toml"
_WARNED: set[str] = set()


class SlurmSiteFile(Struct, frozen=True):
    """What a site file says: the settings, and for a `[slurm_gpu]` file the trusted
    evaluation's sizing and the deprecation warning to give once."""

    path: Path
    config: SlurmSiteConfig
    gate: GateSizing | None = None
    warning: str | None = None


def site_file_path(given: str | os.PathLike[str] | None) -> Path:
    """`--slurm-config` as an absolute path; without one, `~/.config/vibesys/slurm.toml`, or
    the old `slurm-gpu.toml` beside it when only that exists."""
    if given is not None:
        return Path(given).expanduser().resolve()
    default = default_slurm_config_path()
    old = Path(DEFAULT_ALIAS_CONFIG).expanduser()
    if not default.exists() and old.exists():
        return old.resolve()
    return default.resolve()


def load_site_file(path: Path) -> SlurmSiteFile:
    """Read and validate the site file at `path`; ConfigError names the file and the key."""
    source = str(path)
    text = read_config_text(path)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return SlurmSiteFile(path, parse_slurm_config(text, source=source))  # names the error
    if "slurm_gpu" not in raw:
        return SlurmSiteFile(path, parse_slurm_config(text, source=source))
    others = sorted(set(raw) - {"slurm_gpu"})
    if others:
        tables = ", ".join(f"[{name}]" for name in others)
        raise ConfigError(
            f"{source}: the deprecated [slurm_gpu] table cannot be combined with {tables}; keep one"
        )
    table = raw["slurm_gpu"]
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: slurm_gpu must be a table ([slurm_gpu])")
    try:
        translated = translate_slurm_gpu(table, home=str(Path.home()))
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return SlurmSiteFile(path, translated.site, translated.gate, translated.warning)


def warn_once(text: str | None) -> None:
    """Print a warning on stderr, once per process whatever the number of readers."""
    if text is None or text in _WARNED:
        return
    _WARNED.add(text)
    print(f"vibesys: warning: {text}", file=sys.stderr, flush=True)
