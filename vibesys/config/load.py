"""Reading slurm.toml: every failure becomes one `ConfigError` line that names the key path."""

from __future__ import annotations

import functools
import os
import tomllib
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from vibesys.config.site import SLURM_KIND, RecordedSite
from vibesys.config.slurm import SlurmSiteConfig
from vibesys.errors import ConfigError

__all__ = [
    "DEFAULT_SLURM_CONFIG",
    "default_slurm_config_path",
    "load_slurm_config",
    "parse_slurm_config",
    "read_config_text",
]

#: Where `--slurm-config` points when it is not given (expanded at use).
DEFAULT_SLURM_CONFIG: Final = "~/.config/vibesys/slurm.toml"

#: Keys people carry over from older files; the hint says where the setting lives now.
_MOVED_KEYS: Final = {
    "gate_gpus": "trusted evaluation is sized by [slurm] sbatch_arguments",
    "gate_time_minutes": "trusted evaluation is sized by [slurm] sbatch_arguments",
    "srun_command": "Slurm commands run through [slurm.transport] shell_command",
    "scancel_command": "Slurm commands run through [slurm.transport] shell_command",
}


def default_slurm_config_path() -> Path:
    return Path(DEFAULT_SLURM_CONFIG).expanduser()


def load_slurm_config(path: str | os.PathLike[str] | None = None) -> SlurmSiteConfig:
    """Read and validate slurm.toml (default `~/.config/vibesys/slurm.toml`)."""
    file = Path(path) if path is not None else default_slurm_config_path()
    return parse_slurm_config(read_config_text(file), source=str(file))


def read_config_text(file: Path) -> str:
    """A configuration file's text; ConfigError names the file when it cannot be read."""
    source = str(file)
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{source}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text (byte {exc.start})") from None


@functools.lru_cache(maxsize=8)
def parse_slurm_config(text: str, *, source: str = "slurm.toml") -> SlurmSiteConfig:
    """Validate slurm.toml content; `source` prefixes every error message. The models are
    frozen, so one parse serves every reader of the same text (a run reads it three times:
    the request, the adapter, the poll site)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML: {_one_line(str(exc))}") from None
    try:
        return SlurmSiteConfig.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        message = f"{source}: {format_error(errors[0], SlurmSiteConfig)}"
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more)"
        raise ConfigError(message) from None


def format_error(error: ErrorDetails, root: type[BaseModel]) -> str:
    """`key.path: message` for one pydantic error, with union tags removed from the path."""
    path, model = _resolve(root, error["loc"])
    message = _one_line(error["msg"])
    kind = error["type"]
    if kind == "value_error":
        message = message.removeprefix("Value error, ")
    elif kind == "extra_forbidden":
        key = path.rsplit(".", 1)[-1]
        if key in _MOVED_KEYS:
            message = f"unknown key ({_MOVED_KEYS[key]})"
        else:
            allowed = ", ".join(model.model_fields) if model is not None else ""
            message = f"unknown key (allowed: {allowed})" if allowed else "unknown key"
    elif kind in ("union_tag_not_found", "union_tag_invalid"):
        context = error.get("ctx", {})
        expected = context.get("expected_tags", "'local', 'ssh'")
        path = f"{path}.kind" if path else "kind"
        if kind == "union_tag_invalid":
            message = f"{context.get('tag')!r} is not one of {expected}"
        else:
            message = f"missing (one of {expected})"
    return f"{path}: {message}" if path else message


def _resolve(root: type[BaseModel], loc: Sequence[int | str]) -> tuple[str, type[BaseModel] | None]:
    """The dotted key path of `loc`, and the model that holds its last key (for the list
    of allowed keys). Discriminated unions put the tag into `loc`; it is not a key."""
    parts: list[str] = []
    model: type[BaseModel] | None = root
    owner: type[BaseModel] | None = root
    index = 0
    while index < len(loc):
        item = loc[index]
        index += 1
        if isinstance(item, int):
            parts[-1:] = [f"{parts[-1]}[{item}]"] if parts else [f"[{item}]"]
            continue
        parts.append(item)
        owner = model
        field = model.model_fields.get(item) if model is not None else None
        if field is None:
            model = None
            continue
        variants = _model_variants(field.annotation)
        if len(variants) > 1 and index < len(loc) and isinstance(loc[index], str):
            model = variants.get(str(loc[index]))
            if model is not None:
                index += 1  # skip the tag
        else:
            model = next(iter(variants.values()), None)
    return ".".join(parts), owner


def _model_variants(annotation: Any) -> dict[str, type[BaseModel]]:
    """Models reachable from a field's annotation, keyed by their `kind` tag (or name)."""
    found: dict[str, type[BaseModel]] = {}
    stack = [annotation]
    while stack:
        current = stack.pop()
        if isinstance(current, type) and issubclass(current, BaseModel):
            kind = current.model_fields.get("kind")
            tags = typing.get_args(kind.annotation) if kind is not None else ()
            found[str(tags[0]) if tags else current.__name__] = current
        elif typing.get_origin(current) in (typing.Union, types.UnionType, typing.Annotated):
            stack.extend(typing.get_args(current))
    return found


def _one_line(text: str) -> str:
    return " ".join(text.split())


def recorded_slurm(site: RecordedSite) -> SlurmSiteConfig:
    """A recorded slurm.toml, parsed (a rendering this code cannot read names itself)."""
    if site.kind != SLURM_KIND:
        raise ConfigError(f"{site.label}: not a slurm.toml rendering")
    return parse_slurm_config(site.text, source=site.label)
