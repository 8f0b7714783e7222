"""The request of an adapter that takes no options of its own (the local one), without
pydantic: a run of such an adapter imports only what it uses, and pydantic with its models is
over a third of a run's start-up.

`PlainRequest` is `AdapterRequest` (`requests.py`) to the engine and the journal: the same
fields, checked as strictly (unknown keys, wrong types and a bad job name prefix are refused),
the same JSON, the same schema version. `tests/adapters/test_plain_request.py` holds the two
to the same answers."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

__all__ = ["PlainRequest", "RequestInvalid"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_FIELDS = frozenset({"artifacts", "job_name_prefix"})


class RequestInvalid(ValueError):
    """A recorded request that does not fit; `where` names the field."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


class PlainRequest:
    """What the engine knows of any adapter's request, and nothing more."""

    schema_version: ClassVar[int] = 1
    __slots__ = ("artifacts", "job_name_prefix")
    #: such an adapter needs no site configuration
    site_record: ClassVar[None] = None

    artifacts: tuple[str, ...]
    job_name_prefix: str

    def __init__(
        self,
        *,
        artifacts: tuple[str, ...] | list[str] = (),
        job_name_prefix: str = "vibesys",
    ) -> None:
        if not isinstance(artifacts, tuple | list) or not all(
            isinstance(a, str) for a in artifacts
        ):
            raise RequestInvalid("artifacts", "must be a list of strings")
        if not isinstance(job_name_prefix, str):
            raise RequestInvalid("job_name_prefix", "must be a string")
        if not _NAME.fullmatch(job_name_prefix):
            raise RequestInvalid(
                "job_name_prefix", f"{job_name_prefix!r} must be letters, digits, '.', '_' or '-'"
            )
        object.__setattr__(self, "artifacts", tuple(artifacts))
        object.__setattr__(self, "job_name_prefix", job_name_prefix)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    @classmethod
    def model_validate(cls, data: Mapping[str, Any]) -> PlainRequest:
        unknown = sorted(set(data) - _FIELDS)
        if unknown:
            raise RequestInvalid(unknown[0], "extra inputs are not permitted")
        return cls(**data)

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]:
        artifacts = list(self.artifacts) if mode == "json" else self.artifacts
        return {
            "artifacts": artifacts,
            "job_name_prefix": self.job_name_prefix,
        }

    def backend_key(self) -> str:
        return ""

    def runs_after(self) -> str | None:
        return None

    def campaign(self) -> str | None:
        return None

    def with_parent_job(self, job_id: str | None) -> PlainRequest:
        return self

    def read_site(self) -> None:
        return None

    def read_site_from(self, path: str, profile: str | None = None) -> None:
        from vibesys.errors import UsageError

        raise UsageError("this adapter records no site configuration")

    def with_site(self, site: object) -> PlainRequest:
        return self

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, PlainRequest)
        return self.model_dump() == other.model_dump()

    def __hash__(self) -> int:
        return hash((type(self), self.artifacts, self.job_name_prefix))

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.model_dump().items())
        return f"{type(self).__name__}({fields})"
