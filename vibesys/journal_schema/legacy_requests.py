"""The typed request of an invocation recorded before m003, from the options it recorded then
(used by that migration only)."""

from __future__ import annotations

from typing import Any

__all__ = ["request_from_options"]


def request_from_options(
    adapter: str, options: dict[str, Any], digest: str | None
) -> dict[str, Any]:
    """The typed request (schema version 1) of an invocation recorded before m003."""
    request: dict[str, Any] = {}
    if options.get("artifacts"):
        request["artifacts"] = list(options["artifacts"])
    if adapter in ("sbatch", "srun"):
        request["site_config"] = str(options.get("site_config", ""))
        request["gpus"] = int(options.get("gpus", 0))
        request["time_minutes"] = int(options.get("time_minutes", 1))
        request["partitions"] = list(options.get("partitions", []))
        if options.get("candidate"):
            request["candidate"] = {
                "path": str(options["candidate"]),
                "exclude": list(options.get("snapshot_exclude", [])),
                "digest": str(digest or options.get("snapshot_digest", "")),
            }
        if adapter == "sbatch" and options.get("dependency"):
            request["after"] = {
                "job_id": str(options["dependency"]),
                "invocation": str(options.get("after", "")),
            }
    return request
