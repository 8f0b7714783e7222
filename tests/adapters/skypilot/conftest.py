from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.skyfake import FakeSky, make_fake_sky


@pytest.fixture
def fake_sky(tmp_path: Path) -> Iterator[FakeSky]:
    fake = make_fake_sky(tmp_path)
    yield fake
    fake.stop_jobs()
