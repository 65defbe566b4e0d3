"""Every decoding test here runs on both JSON roads: orjson with the strict fast decoder (what a
plain install takes), and the standard library alone (what runs where orjson cannot be
installed). Bad input must be named the same way on both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from spanjudge.spans import jsonfast


@pytest.fixture(autouse=True, params=["orjson", "stdlib"])
def json_road(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "orjson":
        if not jsonfast.available():
            pytest.skip("orjson is not installed here (it is a core dependency)")
    else:
        monkeypatch.setattr(jsonfast, "_orjson_loads", None)
    yield request.param
