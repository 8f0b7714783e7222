"""Every filter's pages and counts against the invocations filtered by hand, whichever plan a
filtered page takes: the walk of the id index that ends at its page, or (when the walk finds
too few in PROBE_ROWS) the ids from the filter's index or a scan."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.ui.journal_data import T0, build
from vibesys.journal_schema import Invocation, open_journal
from vibesys.states import JobState
from vibesys.ui import queries
from vibesys.ui.queries import ListFilter, campaign_of, list_page

NOW = T0 + timedelta(days=1)
FILTERS = [
    "",
    "adapter=skypilot",
    "adapter=local",
    "label=bench",
    "label=b",
    "campaign=campaign-7",
    "state=DONE",
    "state=RUNNING,PREPARED",
    "state=DONE&adapter=skypilot",
    f"since={(T0 + timedelta(seconds=1)).isoformat()}",
    f"until={(T0 + timedelta(seconds=1)).isoformat()}",
    "adapter=nowhere",
]


def matches(inv: Invocation, flt: ListFilter) -> bool:
    return (
        (not flt.states or inv.state in flt.states)
        and (not flt.adapter or inv.adapter == flt.adapter)
        and (not flt.label or flt.label in (inv.label or ""))
        and (not flt.campaign or campaign_of(inv) == flt.campaign)
        and (not flt.since_at or inv.created_at.isoformat() >= flt.since_at)
        and (not flt.until_at or inv.created_at.isoformat() < flt.until_at)
    )


@pytest.mark.parametrize("probe", [1, 2, 2000])
@pytest.mark.parametrize("query", FILTERS)
def test_every_page_and_count_of_a_filter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, query: str, probe: int
) -> None:
    monkeypatch.setattr(queries, "PROBE_ROWS", probe)
    path = tmp_path / "journal.db"
    build(path)
    journal = open_journal(path)
    try:
        everything = sorted(
            journal.invocations.list_invocations(), key=lambda i: i.id, reverse=True
        )
        pairs = [tuple(p.split("=", 1)) for p in query.split("&") if p]
        flt = ListFilter.parse([(k, v) for k, v in pairs], NOW)
        expected = [i.id for i in everything if matches(i, flt)]
        counted = {str(s): 0 for s in JobState}
        for inv in everything:
            if matches(inv, ListFilter.parse([p for p in pairs if p[0] != "state"], NOW)):
                counted[str(inv.state)] += 1
        whole = list_page(journal, flt)
        assert [r.inv.id for r in whole.rows] == expected
        assert whole.counts == counted and whole.total == sum(counted.values())
        assert whole.older is None and whole.newer is None
        if expected:  # a page exactly as long as the matches: nothing older to link to
            limit = ("limit", str(len(expected)))
            exact = list_page(journal, ListFilter.parse([*pairs, limit], NOW))
            assert [r.inv.id for r in exact.rows] == expected and exact.older is None
        # One row a page, older then newer: every match once, in order, both ways.
        shown, before = [], ""
        while True:
            page = list_page(
                journal, ListFilter.parse([*pairs, ("limit", "1"), ("before", before)], NOW)
            )
            shown += [r.inv.id for r in page.rows]
            if page.older is None:
                break
            before = page.older
        assert shown == expected
        if expected:
            back, after = [], expected[-1]
            while True:
                page = list_page(
                    journal, ListFilter.parse([*pairs, ("limit", "1"), ("after", after)], NOW)
                )
                back += [r.inv.id for r in page.rows]
                if page.newer is None:
                    break
                after = page.newer
            assert back == list(reversed(expected[:-1]))
    finally:
        journal.close()
