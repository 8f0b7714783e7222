"""An invocation's request, typed once: the journal given a decoder (the engine's) decodes each
row's request as it reads it, with the site recorded under its digest; without one (what only
shows rows) it keeps the recorded JSON; the recorded JSON never changes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from msgspec import Struct

from tests.helpers.journal import NewInvocation
from vibesys.engine.adapter_access import Adapters, registry_backend
from vibesys.errors import ConfigError
from vibesys.journal_schema import Journal
from vibesys.journal_schema.sites import SiteRendering
from vibesys.states import SiteReplaced


class Decoded(Struct, frozen=True):
    adapter: str
    data: dict[str, Any]
    site: SiteRendering | None
    job_name_prefix: str = "vibesys"


class Decoder:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, adapter: str, data: dict[str, Any], site: SiteRendering | None) -> Decoded:
        self.calls += 1
        if data.get("bad"):
            raise ConfigError(f"the recorded {adapter} request does not fit: bad")
        return Decoded(adapter, data, site, str(data.get("job_name_prefix", "vibesys")))


def _site(digest: str) -> SiteRendering:
    return SiteRendering(digest, "slurm.toml", f"[slurm]\n# {digest}\n")


def test_without_a_decoder_a_row_keeps_only_the_recorded_json(
    journal: Journal, new_invocation: NewInvocation
) -> None:
    inv = new_invocation("inv-shown")
    assert inv.request is None
    assert inv.recorded_request == {"artifacts": ["out.json"]}
    assert inv.attempt_job_name(1) == "vibesys-inv-shown-1"


def test_each_row_read_decodes_its_request_once_with_its_recorded_site(
    journal: Journal, new_invocation: NewInvocation
) -> None:
    decoder = Decoder()
    journal.decode_requests(decoder)
    inv = new_invocation(
        "inv-typed", request={"job_name_prefix": "gpu", "n": 1}, site=_site("d1" * 32)
    )
    assert decoder.calls == 1
    assert inv.request == Decoded(
        "local", {"job_name_prefix": "gpu", "n": 1}, _site("d1" * 32), "gpu"
    )
    assert inv.attempt_job_name(2) == "gpu-inv-typed-2"
    assert [i.request for i in journal.invocations.active()] == [inv.request]
    assert decoder.calls == 2
    # The recorded JSON is what was recorded, byte for byte.
    stored = journal.conn.execute("SELECT request FROM invocations").fetchone()[0]
    assert stored == json.dumps({"job_name_prefix": "gpu", "n": 1}, sort_keys=True)


def test_a_replaced_site_reaches_the_typed_request_with_the_commit(
    journal: Journal, new_invocation: NewInvocation
) -> None:
    journal.decode_requests(Decoder())
    old, new = _site("a" * 64), _site("b" * 64)
    inv = new_invocation("inv-moved", site=old)
    journal.sites.record_site(new)
    event = SiteReplaced(old.digest, new.digest, "slurm.toml", "login", "me@here")
    moved, _ = journal.commit_transition(inv, event)
    assert isinstance(moved.request, Decoded) and moved.request.site == new
    assert moved.request == journal.invocations.get("inv-moved").request


def test_a_request_that_does_not_decode_fails_where_it_is_needed(
    journal: Journal, new_invocation: NewInvocation
) -> None:
    """Reading the row never fails for it: the engine meets the error for that invocation."""
    adapters = Adapters(journal, registry_backend)
    inv = new_invocation("inv-bad", request={"gpus": 1})
    assert inv.request is None and inv.recorded_request == {"gpus": 1}
    with pytest.raises(ConfigError, match="local request does not fit: gpus"):
        adapters.request_of(inv)


def test_the_engines_journal_hands_on_the_adapters_typed_request(
    journal: Journal, new_invocation: NewInvocation
) -> None:
    adapters = Adapters(journal, registry_backend)
    inv = new_invocation("inv-local", request={"artifacts": ["out.json"]})
    assert adapters.request_of(inv) is inv.request
    assert adapters.request_of(inv).artifacts == ("out.json",)
