"""The common part of every adapter's typed request.

Each adapter defines a frozen pydantic model derived from `AdapterRequest` holding what it
needs (resources, time, partitions, the candidate snapshot, a dependency, ...). The journal
stores it as JSON together with the adapter's name and `schema_version`, and hands it back on
every attempt; the engine reads only the fields defined here.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AdapterRequest"]


class AdapterRequest(BaseModel):
    """What the engine knows of any adapter's request."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    #: Bumped when a model changes incompatibly; the journal's migrations convert old rows.
    schema_version: ClassVar[int] = 1

    artifacts: Annotated[tuple[str, ...], Field(strict=False)] = Field(
        default=(),
        description="Files or globs, relative to the job's working directory, brought home, "
        "verified and acknowledged after the job ends.",
    )

    def backend_key(self) -> str:
        """Invocations whose requests share this key (and adapter) share one adapter instance,
        and so one batched status call per round."""
        return ""
