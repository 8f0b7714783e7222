"""Stable names: the campaign's cluster, from its run id and the shape it is launched with.

The same run id and shape always give the same name, so a restarted vibesys finds its cluster
again; another shape gives another name, so a resumed run on a different profile never reuses
(or tears down) an allocation that cannot serve it.
"""

from __future__ import annotations

import hashlib
import json
import re

from vibesys.config.resources import EffectiveResources

__all__ = ["cluster_name", "fingerprint", "name_on_cloud"]

_PREFIX = "vibesys"
# SkyPilot's cluster-name rule is [a-zA-Z]([-_.a-zA-Z0-9]*[a-zA-Z0-9])?; Slurm job names (the
# name on the cloud: name + "-" + 8-hex user hash) stay short and lower-case.
_UNSAFE = re.compile(r"[^a-z0-9-]+")
_RUN_ID_CHARS = 32


def fingerprint(effective: EffectiveResources) -> str:
    """8 hex digits identifying the launch shape (infra, nodes, CPUs, accelerators,
    exclusivity); profile name, wall time, prefix and paths do not count."""
    canonical = json.dumps(effective.launch_shape(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:8]


def cluster_name(run_id: str, effective: EffectiveResources) -> str:
    """`vibesys-<run id, sanitized and cut>-<fingerprint>`; a cut run id is disambiguated by
    its own hash so two long ids that share a beginning never share a cluster."""
    if not run_id:
        raise ValueError("empty run id")
    slug = _UNSAFE.sub("-", run_id.lower()).strip("-") or "run"
    if len(slug) > _RUN_ID_CHARS or slug != run_id:
        digest = hashlib.sha256(run_id.encode()).hexdigest()[:6]
        slug = f"{slug[: _RUN_ID_CHARS - 7].rstrip('-')}-{digest}"
    return f"{_PREFIX}-{slug}-{fingerprint(effective)}"


def name_on_cloud(name: str, user_hash: str) -> str:
    """SkyPilot's name for the cluster on Slurm (the allocation's job name; short names only,
    which `cluster_name` guarantees)."""
    return f"{re.sub(r'[._]', '-', name).lower()}-{user_hash}"
