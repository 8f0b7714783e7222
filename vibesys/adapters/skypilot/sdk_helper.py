"""Calls SkyPilot's Python SDK and prints one JSON object. Run by the interpreter of SkyPilot's
own virtual environment (`<venv>/bin/python sdk_helper.py COMMAND ...`), never imported by
vibesys: it imports `sky`, which vibesys itself never does.

    validate TASK_FILE    parse a task with SkyPilot's own parser (sky.Task.from_yaml)
    user-hash             the user hash SkyPilot appends to cluster names on the cloud
    name-on-cloud NAME    SkyPilot's name for cluster NAME on Slurm (the allocation's job name)

Prints {"ok": true, ...} and exits 0, or {"ok": false, "error": TYPE, "message": TEXT} and exits 1.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

# Slurm's limit for names on the cloud in SkyPilot (clouds/slurm.py).
_SLURM_NAME_LIMIT = 120


def _validate(path: str) -> dict[str, Any]:
    import sky  # type: ignore[import-not-found]

    task = sky.Task.from_yaml(path)
    return {
        "name": task.name,
        "num_nodes": task.num_nodes,
        "resources": [
            {
                "text": str(r),
                "cloud": str(r.cloud) if r.cloud is not None else None,
                "region": r.region,
                "zone": r.zone,
                "cpus": r.cpus,
                "accelerators": r.accelerators,
                "config": r.cluster_config_overrides,
            }
            for r in task.resources
        ],
        "has_run": task.run is not None,
        "run": task.run if isinstance(task.run, str) else None,
        "workdir": task.workdir,
        "envs": sorted(task.envs),
    }


def _user_hash() -> dict[str, Any]:
    from sky.utils import common_utils  # type: ignore[import-not-found]

    return {"user_hash": common_utils.get_user_hash()}


def _name_on_cloud(name: str) -> dict[str, Any]:
    from sky.utils import common_utils

    return {"name_on_cloud": common_utils.make_cluster_name_on_cloud(name, _SLURM_NAME_LIMIT)}


def main(argv: list[str]) -> int:
    commands: dict[str, tuple[Callable[..., dict[str, Any]], int]] = {
        "validate": (_validate, 1),
        "user-hash": (_user_hash, 0),
        "name-on-cloud": (_name_on_cloud, 1),
    }
    if len(argv) < 2 or argv[1] not in commands or len(argv) - 2 != commands[argv[1]][1]:
        print(json.dumps({"ok": False, "error": "usage", "message": __doc__}))
        return 2
    function, _ = commands[argv[1]]
    try:
        result = function(*argv[2:])
    except Exception as exc:  # every failure is reported as data, on stdout
        print(json.dumps({"ok": False, "error": type(exc).__name__, "message": str(exc)}))
        return 1
    print(json.dumps({"ok": True, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
