"""The Slurm site's poll schedule: the floor follows the RPC rate limit `scontrol show config`
reports (rl_* in SlurmctldParameters, Slurm 23.02+), the rest comes from slurm.toml."""

from __future__ import annotations

import pytest

from vibesys.adapters.slurm.backend import SlurmBackend
from vibesys.adapters.slurm.site_parse import RateLimit, parse_config, parse_rate_limit
from vibesys.adapters.transports import LocalTransport
from vibesys.config.load import parse_slurm_config

CONFIG = """
[slurm]
name = "c"
remote_workspace_root = "/shared/vibesys"

[slurm.transport]
kind = "local"
"""

SHOW_CONFIG = """Configuration data as of 2026-11-30T15:00:00
AccountingStorageBackupHost = (null)
MinJobAge               = 300 sec
SlurmctldParameters     = enable_configless,rl_enable,rl_refill_rate=4,rl_refill_period=60
SlurmctldPort           = 6817
"""


def scheduler(extra: str = "") -> SlurmBackend:
    config = parse_slurm_config(CONFIG.replace("[slurm.transport]", extra + "\n[slurm.transport]"))
    return SlurmBackend(config, LocalTransport())


def test_show_config_lines_are_read() -> None:
    config = parse_config(SHOW_CONFIG)
    assert config["MinJobAge"] == "300 sec"
    assert config["SlurmctldParameters"].startswith("enable_configless,rl_enable")


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        ("(null)", None),
        ("enable_configless", None),
        ("rl_refill_rate=4", None),  # values without rl_enable: not enabled
        ("rl_enable", RateLimit(30, 2, 1)),  # slurmctld's defaults
        ("rl_enable,rl_bucket_size=40,rl_refill_rate=4,rl_refill_period=60", RateLimit(40, 4, 60)),
        ("rl_enable,rl_refill_rate=0,rl_refill_period=x", RateLimit(30, 2, 1)),  # invalid: default
    ],
)
def test_rate_limits(parameters: str, expected: RateLimit | None) -> None:
    assert parse_rate_limit(parameters) == expected


def test_without_a_rate_limit_the_floor_is_the_configured_one() -> None:
    schedule = scheduler().poll_schedule({"SlurmctldParameters": "(null)"})
    assert (schedule.floor, schedule.initial, schedule.maximum) == (1.0, 2.0, 30.0)
    assert schedule.probe == 0.25
    assert [schedule.interval(age) for age in (0, 1, 4, 10, 1000)] == [2.0, 2.0, 8.0, 20.0, 30.0]


def test_a_rate_limit_raises_the_floor_to_half_its_refill_rate() -> None:
    facts = {"SlurmctldParameters": parse_config(SHOW_CONFIG)["SlurmctldParameters"]}
    schedule = scheduler().poll_schedule(facts)
    # 4 tokens a minute: our rounds take at most half of them, one every 30 s.
    assert schedule.floor == 30.0
    assert schedule.interval(0) == 30.0 and schedule.maximum == 30.0
    assert "rl_refill_rate=4" in schedule.why


def test_a_generous_rate_limit_leaves_the_configured_floor() -> None:
    facts = {"SlurmctldParameters": "rl_enable,rl_refill_rate=50,rl_refill_period=1"}
    assert scheduler("poll_floor_seconds = 0.5").poll_schedule(facts).floor == 0.5


def test_the_site_key_names_cluster_transport_and_workspace() -> None:
    assert scheduler().poll_site() == "slurm:c:local:/shared/vibesys"
