"""Where and on what a SkyPilot attempt ran (pure): the profile's side (cluster, infra,
accelerators, the command prefix) and the attempt's own (its claim), else what was recorded."""

from __future__ import annotations

from vibesys.adapters.rundir.claim import fence_text, parse_claim
from vibesys.adapters.skypilot.provenance import provenance

from .test_task_wrapper import effective

CLAIM = (
    "kind=job\nhost=node7\nstarted_at=2026-11-30T10:00:00Z\nattempt_job_id=3@4711\n"
    "sky_job_id=3\nslurm_job_id=4711\ncluster=vibesys-c7-0123abcd\n"
)
SITE = {
    "profile": "site-a",
    "cluster": "vibesys-c7-0123abcd",
    "infra": "slurm/site-a/gpu",
    "nodes": "2",
    "accelerator_type": "GPU-X",
    "accelerators_per_node": "4",
    "command_prefix": "srun --overlap --environment=/env/x.toml",
}


def test_the_claim_says_where_the_attempt_ran() -> None:
    found = provenance(effective(), SITE["cluster"], "3@4711", parse_claim(CLAIM), 1796005500.0)
    assert found == {
        **SITE,
        "sky_job_id": "3",
        "allocation_job_id": "4711",
        "host": "node7",
        "started_at": "2026-11-30T10:00:00Z",
        "ended_at": "2026-11-30T02:25:00Z",
    }


def test_before_a_claim_the_recorded_ids_say_it() -> None:
    found = provenance(effective(), SITE["cluster"], "5@4712", None)
    assert found == {**SITE, "sky_job_id": "5", "allocation_job_id": "4712"}
    # A fence is not the attempt's account of itself.
    fence = parse_claim(fence_text("host:1:1", "2026-11-30T10:00:00Z", "ambiguous"))
    assert provenance(effective(), SITE["cluster"], "5@4712", fence) == found


def test_nothing_while_nothing_shows_the_attempt_exists() -> None:
    assert provenance(effective(), SITE["cluster"], None, None) == {}


def test_a_cpu_only_attempt_names_no_accelerator_or_prefix() -> None:
    cpu = effective(accelerators_per_node=None, accelerator_type=None, command_prefix=[])
    found = provenance(cpu, SITE["cluster"], "1@9", None)
    assert "accelerator_type" not in found and "command_prefix" not in found
    assert found["accelerators_per_node"] == "0"
