"""Reading `clusters.toml` (operator profiles) and an experiment's `[resources]` table: every
failure becomes one `ConfigError` line that names the file and the key path."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

import msgspec
from pydantic import BaseModel, ValidationError

from vibesys.config.load import format_error
from vibesys.config.resources import ClustersFile, PortableResources, SkyPilotProfile
from vibesys.config.site import CLUSTERS_KIND, RecordedSite
from vibesys.errors import ConfigError
from vibesys.strict_decode import decode, where_and_why

__all__ = [
    "DEFAULT_CLUSTERS_CONFIG",
    "default_clusters_config_path",
    "load_clusters_config",
    "load_resources_table",
    "parse_clusters_config",
    "parse_resources",
    "select_profile",
]

#: Where the operator's profiles live unless a path is given (expanded at use).
DEFAULT_CLUSTERS_CONFIG: Final = "~/.config/vibesys/clusters.toml"

_Model = TypeVar("_Model", bound=BaseModel)


def default_clusters_config_path() -> Path:
    return Path(DEFAULT_CLUSTERS_CONFIG).expanduser()


def load_clusters_config(path: str | os.PathLike[str] | None = None) -> ClustersFile:
    """Read and validate clusters.toml (default `~/.config/vibesys/clusters.toml`)."""
    file = Path(path) if path is not None else default_clusters_config_path()
    return parse_clusters_config(_read_text(file), source=str(file))


def load_resources_table(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The `[resources]` table of an experiment file, not yet validated (the file's other
    tables are the experiment's own business)."""
    source = str(path)
    try:
        raw = tomllib.loads(_read_text(Path(path)))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML: {' '.join(str(exc).split())}") from None
    table = raw.get("resources")
    if table is None:
        raise ConfigError(f"{source}: no [resources] table")
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: resources must be a table ([resources])")
    return dict(table)


def _read_text(file: Path) -> str:
    source = str(file)
    try:
        return file.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{source}: no such file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror or exc}") from None


def parse_clusters_config(text: str, *, source: str = "clusters.toml") -> ClustersFile:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML: {' '.join(str(exc).split())}") from None
    return _validate(ClustersFile, raw, source)


def parse_resources(table: Mapping[str, Any], *, source: str = "[resources]") -> PortableResources:
    """An experiment's `[resources]` table, strictly."""
    try:
        return decode(dict(table), PortableResources)
    except msgspec.ValidationError as exc:
        where, why = where_and_why(exc)
        if why == "Extra inputs are not permitted":  # as a configuration file's is named
            why = f"unknown key (allowed: {', '.join(PortableResources.__struct_fields__)})"
        raise ConfigError(f"{source}: {where or 'resources'}: {why}") from None


def select_profile(
    config: ClustersFile, name: str, *, source: str = "clusters.toml"
) -> SkyPilotProfile:
    """The profile called `name`, or one line naming the profiles there are."""
    try:
        return config.profiles[name]
    except KeyError:
        known = ", ".join(sorted(config.profiles)) or "none"
        raise ConfigError(f"{source}: no profile {name!r} (profiles: {known})") from None


def _validate(model: type[_Model], raw: Any, source: str) -> _Model:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        message = f"{source}: {format_error(errors[0], model)}"
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more)"
        raise ConfigError(message) from None


def recorded_profile(site: RecordedSite) -> tuple[str, SkyPilotProfile]:
    """A recorded profile's name and content."""
    if site.kind != CLUSTERS_KIND:
        raise ConfigError(f"{site.label}: not a clusters.toml rendering")
    profiles = parse_clusters_config(site.text, source=site.label).profiles
    if len(profiles) != 1:
        raise ConfigError(f"{site.label}: holds {len(profiles)} profiles, not one")
    [(name, profile)] = profiles.items()
    return name, profile
