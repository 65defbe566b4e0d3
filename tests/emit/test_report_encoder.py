"""The JSON report's session encoder writes what ``json.dumps(..., ensure_ascii=False,
default=str)`` writes (the report's bytes are a contract)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from spanjudge.emit import report


class _Opaque:
    def __str__(self) -> str:
        return "opaque \u00e9"


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.just(_Opaque())
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _values, max_size=6))
def test_session_encoder_writes_what_json_dumps_writes(value: dict[str, Any]) -> None:
    assert report._dumps_session(value) == _dumps(value)


def test_the_fallback_encoder_writes_the_same() -> None:
    value = {"a": [1.5, 1e16, 1e-7, None, True, '\u00e9\n"\x00', 10**20], "b": {"c": ()}}
    value["d"] = _Opaque()
    plain = json.JSONEncoder(ensure_ascii=False, default=str, check_circular=False).encode
    assert plain(value) == report._dumps_session(value) == _dumps(value)


def test_session_lines_are_one_document(tmp_path: Any) -> None:
    import io

    from spanjudge.engine import Engine
    from spanjudge.offline import run_offline

    buf = io.StringIO()
    run_offline(["fixtures/claude_code/claude_code.jsonl"], Engine(), report.JsonReportWriter(buf))
    document = json.loads(buf.getvalue())
    assert len(document["sessions"]) == 13
    assert document["sessions"][0]["verdicts"]
