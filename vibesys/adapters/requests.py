"""The common part of every adapter's typed request.

Each adapter defines a frozen pydantic model derived from `AdapterRequest` holding what it
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

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
)

from vibesys.config.site import RecordedSite
from vibesys.errors import ConfigError, UsageError
from vibesys.osutil.artifact_walk import Limits

__all__ = ["AdapterRequest", "ArtifactLimits", "RecordedSite", "recorded_limits"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class ArtifactLimits(BaseModel):
    """What the declared artifacts may be, recorded with the request so every process that
    collects them enforces the same (`vibesys.osutil.artifact_walk.Limits`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    max_file_bytes: int = Field(ge=0, description="Bytes of one artifact, by its length.")
    max_total_bytes: int = Field(ge=0, description="Bytes of all the artifacts together.")
    max_entries: int = Field(ge=1, description="Directory entries the walk looks at.")
    max_seconds: float = Field(ge=0, description="Seconds the walk may take.")

    @classmethod
    def of(cls, limits: Limits) -> ArtifactLimits:
        return cls(**limits._asdict())

    def limits(self) -> Limits:
        return Limits(**self.model_dump())


def recorded_limits(recorded: object) -> Limits | None:
    """The limits an `ArtifactLimits` recorded as JSON holds (None: none were recorded)."""
    if recorded is None:
        return None
    return ArtifactLimits.model_validate(recorded).limits()


class AdapterRequest(BaseModel):
    """What the engine knows of any adapter's request."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)

    #: Bumped when a model changes incompatibly; the journal's migrations convert old rows.
    schema_version: ClassVar[int] = 1

    artifacts: Annotated[tuple[str, ...], Field(strict=False)] = Field(
        default=(),
        description="Files or globs, relative to the job's working directory, brought home, "
        "verified and acknowledged after the job ends.",
    )

    artifact_limits: ArtifactLimits | None = Field(
        default=None,
        description="The artifacts' limits (None: the defaults, docs/bridge.md); a session "
        "records its own.",
    )

    job_name_prefix: str = Field(
        default="vibesys",
        description="Each attempt's scheduler-visible name is <prefix>-<invocation>-<attempt> "
        "(the GPU broker's jobs use its own prefix).",
    )

    site_record: RecordedSite | None = Field(
        default=None,
        exclude=True,
        description="The site configuration recorded at PREPARED (kept in the journal by "
        "digest, never in the request's JSON); None for adapters that need none.",
    )

    #: Fields added after requests were first recorded: left out of the JSON while None, so a
    #: request that does not use them is recorded as before they existed.
    left_out_when_none: ClassVar[tuple[str, ...]] = ("artifact_limits",)

    @model_serializer(mode="wrap")
    def _as_recorded(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name in self.left_out_when_none:
                if data.get(name, 0) is None:
                    del data[name]
        return data

    @classmethod
    def from_record(cls, adapter: str, data: Mapping[str, Any]) -> Self:
        """The request recorded as `data`; ConfigError names the first field that does not
        fit."""
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "request"
            message = first["msg"].removeprefix("Value error, ")
            raise ConfigError(
                f"the recorded {adapter} request does not fit: {where}: {message}"
            ) from None

    @field_validator("job_name_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(f"{value!r} must be letters, digits, '.', '_' or '-'")
        return value

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
        return self if site is None else self.model_copy(update={"site_record": site})
