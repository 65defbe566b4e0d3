"""Differential: on random OTLP-shaped documents, usual and odd field spellings alike, the fast
road (orjson + the strict decoder) either declines or gives exactly the general road's spans."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanjudge.spans import jsonfast
from spanjudge.spans.limits import DEFAULT_LIMITS, Limits
from spanjudge.spans.otlp_json import decode_json_document
from spanjudge.spans.sizes import estimate_size

_HEX = st.text("0123456789abcdef", min_size=1, max_size=2).map(lambda s: (s * 32)[:32])


def _id(size: int) -> st.SearchStrategy[Any]:
    hex_id = st.binary(min_size=size, max_size=size).map(bytes.hex)
    return st.one_of(
        hex_id,
        hex_id,
        hex_id.map(str.upper),
        st.binary(min_size=size, max_size=size).map(lambda b: base64.b64encode(b).decode()),
        st.sampled_from(["", "0" * 2 * size, "xyz", "AAAAAAAAAAA=", "g" * 2 * size]),
        hex_id.map(lambda h: " " + h[1:]),
        st.none(),
        st.integers(),
    )


_INT = st.one_of(
    st.integers(min_value=0, max_value=2**63).map(str),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from(["soon", " 12 ", "1_000", "", True, None, 1.5, "1e3"]),
)
_SCALAR = st.one_of(
    st.fixed_dictionaries({"stringValue": st.text(max_size=12)}),
    st.fixed_dictionaries({"stringValue": st.text(max_size=12)}),
    st.fixed_dictionaries({"intValue": _INT}),
    st.fixed_dictionaries(
        {"doubleValue": st.one_of(st.floats(), st.integers(), st.sampled_from(["NaN", "x"]))}
    ),
    st.fixed_dictionaries({"boolValue": st.one_of(st.booleans(), st.integers(), st.text())}),
    st.fixed_dictionaries({"stringValue": st.one_of(st.none(), st.integers())}),
    st.fixed_dictionaries({"bytesValue": st.sampled_from(["aGk=", "!!"])}),
    st.just({}),
)
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.fixed_dictionaries(
            {"arrayValue": st.one_of(st.fixed_dictionaries({"values": st.lists(inner)}), st.none())}
        ),
        st.fixed_dictionaries(
            {
                "kvlistValue": st.fixed_dictionaries(
                    {"values": st.lists(st.fixed_dictionaries({"key": st.text(), "value": inner}))}
                )
            }
        ),
        st.lists(inner, max_size=1),
    ),
    max_leaves=6,
)
_KEY = st.one_of(st.sampled_from(["a", "b", "c", "session.id"]), st.integers(), st.none())
_ATTR = st.one_of(
    st.fixed_dictionaries({"key": _KEY, "value": _VALUE}),
    st.fixed_dictionaries({"key": st.sampled_from(["a", "b"]), "value": _SCALAR}),
    st.fixed_dictionaries({"key": st.just("a")}),
    st.just("kv"),
)
_ATTRS = st.one_of(st.lists(_ATTR, max_size=4), st.none(), st.just({"a": 1}))
_EVENT = st.one_of(
    st.fixed_dictionaries(
        {"name": st.one_of(st.text(max_size=4), st.none()), "timeUnixNano": _INT},
        optional={"attributes": _ATTRS},
    ),
    st.just([]),
)
_LINK = st.fixed_dictionaries({"traceId": _id(16), "spanId": _id(8)})
# Odd spellings of each span field, one of which may replace the usual one.
_ODD_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "traceId": _id(16),
    "spanId": _id(8),
    "parentSpanId": _id(8),
    "name": st.one_of(st.none(), st.integers()),
    "kind": st.one_of(st.integers(-1, 7), st.sampled_from(["SPAN_KIND_CLIENT", "x", 1.0, None])),
    "startTimeUnixNano": _INT,
    "endTimeUnixNano": _INT,
    "status": st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "code": st.one_of(st.integers(-1, 3), st.sampled_from(["STATUS_CODE_OK", 2.0])),
                "message": st.one_of(st.text(max_size=4), st.integers(), st.none()),
            },
        ),
        st.just([1]),
        st.none(),
    ),
    "attributes": st.one_of(st.lists(_ATTR, max_size=4), st.none(), st.just({"a": 1})),
    "events": st.one_of(st.lists(_EVENT, max_size=3), st.just({"e": 1})),
    "links": st.lists(_LINK, max_size=2),
}
_USUAL_VALUE = st.one_of(
    st.fixed_dictionaries({"stringValue": st.text(max_size=6)}),
    st.fixed_dictionaries({"intValue": st.integers(0, 2**62).map(str)}),
    st.fixed_dictionaries({"intValue": st.integers(-(2**62), 2**62)}),
    st.fixed_dictionaries({"doubleValue": st.floats(allow_nan=False, allow_infinity=False)}),
    st.fixed_dictionaries({"boolValue": st.one_of(st.booleans(), st.integers(0, 1), st.text())}),
    st.fixed_dictionaries(
        {
            "arrayValue": st.fixed_dictionaries(
                {"values": st.lists(st.fixed_dictionaries({"stringValue": st.text(max_size=3)}))}
            )
        }
    ),
)
_USUAL_ATTRS = st.lists(
    st.fixed_dictionaries({"key": st.sampled_from(["a", "b", "c", "d"]), "value": _USUAL_VALUE}),
    max_size=4,
)
_USUAL_EVENT = st.fixed_dictionaries(
    {"name": st.text(max_size=4), "timeUnixNano": st.integers(0, 2**62).map(str)},
    optional={"attributes": st.one_of(_USUAL_ATTRS, _USUAL_ATTRS, st.lists(_ATTR, max_size=2))},
)
_USUAL_SPAN = st.builds(
    lambda trace, span, parent, start, length, kind, code, fields: {
        "traceId": trace,
        "spanId": span,
        "parentSpanId": span if parent == "same" else parent,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + length),
        "kind": kind,
        "status": {"code": code},
        **fields,
    },
    st.binary(min_size=16, max_size=16).filter(any).map(bytes.hex),
    st.binary(min_size=8, max_size=8).filter(any).map(bytes.hex),
    st.one_of(
        st.binary(min_size=8, max_size=8).filter(any).map(bytes.hex), st.sampled_from(["", "same"])
    ),
    st.integers(0, 2**62),
    st.integers(0, 10**9),
    st.integers(0, 5),
    st.integers(0, 2),
    st.fixed_dictionaries(
        {"name": st.text(max_size=6), "attributes": _USUAL_ATTRS},
        optional={"events": st.lists(_USUAL_EVENT, max_size=3)},
    ),
)
_SPAN = st.one_of(
    _USUAL_SPAN,
    _USUAL_SPAN,
    _USUAL_SPAN,
    _USUAL_SPAN,
    st.builds(
        lambda usual, odd: {**usual, **odd},
        _USUAL_SPAN,
        st.one_of(*(st.fixed_dictionaries({k: v}) for k, v in _ODD_FIELDS.items())),
    ),
    st.just("span"),
)
_SCOPE = st.one_of(
    st.fixed_dictionaries({"name": st.text(max_size=4)}, optional={"version": st.text(max_size=2)}),
    st.fixed_dictionaries({"name": st.text(max_size=4)}, optional={"version": st.text(max_size=2)}),
    st.fixed_dictionaries(
        {}, optional={"name": st.one_of(st.text(max_size=4), st.none(), st.integers())}
    ),
    st.none(),
    st.just([1]),
)


def _documents(
    spans: st.SearchStrategy[Any], attrs: st.SearchStrategy[Any], scope: st.SearchStrategy[Any]
) -> st.SearchStrategy[Any]:
    scope_spans = st.fixed_dictionaries(
        {"spans": st.lists(spans, min_size=1, max_size=3)}, optional={"scope": scope}
    )
    resource_spans = st.fixed_dictionaries(
        {"scopeSpans": st.lists(scope_spans, min_size=1, max_size=2)},
        optional={"resource": st.fixed_dictionaries({"attributes": attrs})},
    )
    return st.fixed_dictionaries({"resourceSpans": st.lists(resource_spans, max_size=2)})


_DOC = st.one_of(
    _documents(_USUAL_SPAN, _USUAL_ATTRS, _SCOPE.filter(lambda s: isinstance(s, dict))),
    _documents(_SPAN, st.one_of(_USUAL_ATTRS, _ATTRS), _SCOPE),
)
_LIMITS = st.sampled_from(
    [
        DEFAULT_LIMITS,
        DEFAULT_LIMITS,
        Limits(max_attr_chars=3),
        Limits(max_attrs_per_span=2),
        Limits(max_events_per_span=1),
        Limits(max_array_len=1),
    ]
)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(doc=_DOC, limits=_LIMITS, escaped=st.booleans(), as_bytes=st.booleans())
def test_fast_road_answers_only_what_the_general_road_answers(
    json_road: str, doc: Any, limits: Limits, escaped: bool, as_bytes: bool
) -> None:
    line = json.dumps(doc, ensure_ascii=escaped)
    records, problems = decode_json_document(json.loads(line), limits)
    parsed_sizes: list[int] = []
    parsed = jsonfast.decode_parsed(json.loads(line), limits, parsed_sizes)
    if parsed is not None:  # the strict decoder on json's document: the general road's spans
        assert problems == []
        assert repr(parsed) == repr(records)
        assert parsed_sizes == [estimate_size(record) for record in records]
    if json_road == "stdlib":
        pytest.skip("without orjson there is no fast road")
    sizes: list[int] = []
    fast = jsonfast.decode_fast(line.encode() if as_bytes else line, limits, sizes)
    if fast is None:
        assert sizes == []
        return
    assert problems == []
    assert repr(fast) == repr(records)  # repr: NaN attribute values compare unequal
    # the memory-budget figure the decoder worked out is the store's own estimate
    assert sizes == [estimate_size(record) for record in records]
