"""The common part of every adapter's typed request.

Each adapter defines a frozen pydantic model derived from `AdapterRequest` holding what it
needs (resources, time, partitions, the candidate snapshot, a dependency, ...). The journal
stores it as JSON together with the adapter's name and `schema_version`, and hands it back on
every attempt; the engine reads only the fields defined here.
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["AdapterRequest"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


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

    job_name_prefix: str = Field(
        default="vibesys",
        description="Each attempt's scheduler-visible name is <prefix>-<invocation>-<attempt> "
        "(the GPU broker's jobs use its own prefix).",
    )

    @field_validator("job_name_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} must be letters, digits, '.', '_' or '-'")
        return value

    def runs_after(self) -> str | None:
        """The invocation this one runs after (`--after`), if any: its job waits on that
        invocation's current attempt, whichever it is."""
        return None

    def with_parent_job(self, job_id: str | None) -> Self:
        """This request depending on the parent's job `job_id` (None: on nothing, the parent
        has completed), for one submission."""
        return self

    def backend_key(self) -> str:
        """Invocations whose requests share this key (and adapter) share one adapter instance,
        and so one batched status call per round."""
        return ""
