"""A skill name the catalogue does not offer: the closest offered name is difflib's, for each
catalogue on its own (the answer is remembered per name and catalogue)."""

from __future__ import annotations

import difflib

from hypothesis import given, settings
from hypothesis import strategies as st

from spanjudge.judges.text import closest_name

_names = st.text(alphabet="abcdefr-_s", min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(_names, st.lists(_names, max_size=5, unique=True))
def test_closest_name_is_difflibs(chosen: str, offered: list[str]) -> None:
    close = difflib.get_close_matches(chosen, offered, n=1, cutoff=0.6)
    assert closest_name(chosen, tuple(offered)) == (close[0] if close else None)


def test_the_same_name_against_two_catalogues() -> None:
    assert closest_name("csv-reports", ("csv-report", "incident-triage")) == "csv-report"
    assert closest_name("csv-reports", ("incident-triage", "release-notes")) is None
    assert closest_name("csv-reports", ("csv-reporter",)) == "csv-reporter"
