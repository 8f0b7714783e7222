"""The typed request the SkyPilot adapter stores in the journal (one per invocation).

It holds the portable request and the launch selection, never the profile's content: the
effective profile is launch provenance, and a resumed run may name another compatible one.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vibesys.config.resources import PortableResources

__all__ = ["SkyPilotRequest"]

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
StrTuple = Annotated[tuple[str, ...], Field(strict=False)]


class SkyPilotRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    resources: PortableResources = Field(
        default_factory=PortableResources, description="The experiment's [resources]."
    )
    profile: str = Field(
        min_length=1, description="Operator profile chosen at launch ([profiles.NAME])."
    )
    run_id: str = Field(
        min_length=1,
        max_length=200,
        description="Campaign/run id: with the resources, it names the campaign's cluster.",
    )
    artifacts: StrTuple = Field(
        default=(), description="Declared artifacts: globs relative to the job's work directory."
    )
    workdir: str | None = Field(
        default=None,
        min_length=1,
        description="Local directory synced to the cluster before each evaluation (sky exec "
        "--workdir); the command runs in a private copy of it.",
    )

    @field_validator("run_id")
    @classmethod
    def _run_id(cls, value: str) -> str:
        if not _RUN_ID.match(value):
            raise ValueError(f"{value!r}: use letters, digits, . _ -")
        return value

    @field_validator("artifacts")
    @classmethod
    def _artifacts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            if not pattern or pattern.startswith("/") or ".." in pattern.split("/"):
                raise ValueError(f"{pattern!r}: a relative glob inside the work directory")
        return value
