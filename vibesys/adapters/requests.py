"""The common part of every adapter's typed request.

Each adapter defines a frozen msgspec Struct derived from `AdapterRequest` holding what it
needs (resources, time, partitions, the candidate snapshot, a dependency, ...). The journal
stores it as JSON together with the adapter's name and `schema_version`, and hands it back on
every attempt; the engine reads only the fields defined here.

The site configuration the invocation runs with (the rendering of slurm.toml, or of the
SkyPilot profile) is not part of that JSON: it is recorded once in the journal by digest, and
the engine hands it back with the request (`site_record`), so no later process reads the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Self

import msgspec
from msgspec import Meta, Struct, structs

from vibesys.config.site import RecordedSite
from vibesys.errors import ConfigError, UsageError
from vibesys.osutil.artifact_walk import Limits
from vibesys.strict_decode import decode, where_and_why

__all__ = ["AdapterRequest", "ArtifactLimits", "RecordedSite", "recorded_limits"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_AT_LEAST_0 = Meta(ge=0)


class ArtifactLimits(Struct, frozen=True, forbid_unknown_fields=True):
    """What the declared artifacts may be, recorded with the request so every process that
    collects them enforces the same (`vibesys.osutil.artifact_walk.Limits`)."""

    #: bytes of one artifact, by its length
    max_file_bytes: Annotated[int, _AT_LEAST_0]
    #: bytes of all the artifacts together
    max_total_bytes: Annotated[int, _AT_LEAST_0]
    #: directory entries the walk looks at
    max_entries: Annotated[int, Meta(ge=1)]
    #: seconds the walk may take
    max_seconds: Annotated[float, _AT_LEAST_0]

    @classmethod
    def of(cls, limits: Limits) -> ArtifactLimits:
        return cls(**limits._asdict())

    def limits(self) -> Limits:
        return Limits(**structs.asdict(self))


def recorded_limits(recorded: object) -> Limits | None:
    """The limits an `ArtifactLimits` recorded as JSON holds (None: none were recorded);
    ValueError when it is not one."""
    if recorded is None:
        return None
    return decode(recorded, ArtifactLimits).limits()


class AdapterRequest(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the engine knows of any adapter's request. Checks of a value beyond its type are
    made in `__post_init__` (so a request made in code is checked as a recorded one is);
    bounds are `Meta` constraints, checked as a request is decoded (`checked`,
    `from_record`). A subclass inherits the refusal of unknown fields, and repeats
    `frozen=True, kw_only=True`."""

    #: Bumped when a model changes incompatibly; the journal's migrations convert old rows.
    schema_version: ClassVar[int] = 1

    #: Files or globs, relative to the job's working directory, brought home, verified and
    #: acknowledged after the job ends.
    artifacts: tuple[str, ...] = ()

    #: The artifacts' limits (None: the defaults, docs/bridge.md); a session records its own.
    artifact_limits: ArtifactLimits | None = None

    #: Each attempt's scheduler-visible name is <prefix>-<invocation>-<attempt> (the GPU
    #: broker's jobs use its own prefix).
    job_name_prefix: str = "vibesys"

    #: The site configuration recorded at PREPARED (kept in the journal by digest, never in
    #: the request's JSON); None for adapters that need none.
    site_record: RecordedSite | None = None

    #: Fields kept out of the request's JSON.
    never_recorded: ClassVar[tuple[str, ...]] = ("site_record",)

    #: Fields added after requests were first recorded: left out of the JSON while None, so a
    #: request that does not use them is recorded as before they existed.
    left_out_when_none: ClassVar[tuple[str, ...]] = ("artifact_limits",)

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.job_name_prefix):
            raise ValueError(
                f"job_name_prefix: {self.job_name_prefix!r} must be letters, digits, '.', '_' "
                "or '-'"
            )

    def recorded(self) -> dict[str, Any]:
        """The request as the journal records it (JSON values; no site)."""
        data: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(self))
        for name in self.never_recorded:
            del data[name]
        for name in self.left_out_when_none:
            if data.get(name, 0) is None:
                del data[name]
        return data

    @classmethod
    def checked(cls, **fields: Any) -> Self:
        """The request of these fields, every constraint checked (ValueError naming the first
        field that does not fit: `strict_decode.where_and_why`)."""
        return decode(fields, cls)

    @classmethod
    def from_record(cls, adapter: str, data: Mapping[str, Any]) -> Self:
        """The request recorded as `data`; ConfigError names the first field that does not
        fit."""
        try:
            return decode(dict(data), cls)
        except msgspec.ValidationError as exc:
            where, message = where_and_why(exc)
            raise ConfigError(
                f"the recorded {adapter} request does not fit: {where or 'request'}: {message}"
            ) from None

    def runs_after(self) -> str | None:
        """The invocation this one runs after (`--after`), if any: its job waits on that
        invocation's current attempt, whichever it is."""
        return None

    def recorded_parent_job(self) -> str | None:
        """The parent's job recorded with the request (`--after`), which a submission waits
        on when the journal knows no newer one; None: it waits on nothing."""
        return None

    def campaign(self) -> str | None:
        """The campaign whose queue this request's invocation waits in (one evaluation at a
        time per campaign), or None: it waits for nothing of ours."""
        return None

    def backend_key(self) -> str:
        """Invocations whose requests share this key (and adapter) share one adapter instance,
        and so one batched status call per round."""
        return ""

    def read_site(self) -> RecordedSite | None:
        """Read the site configuration this request names, to record it at PREPARED (once:
        later processes get the recorded one). None: the adapter needs no site."""
        return None

    def read_site_from(self, path: str, profile: str | None = None) -> RecordedSite:
        """The site configuration in `path`, as this request would record it: what an
        operator's explicit replacement records (`vibesys journal config --replace`).
        `profile` names another profile where the site is one (SkyPilot)."""
        raise UsageError("this adapter records no site configuration")

    def with_site(self, site: RecordedSite | None) -> Self:
        """This request with the site it was recorded with."""
        return self if site is None else structs.replace(self, site_record=site)
