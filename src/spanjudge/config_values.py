"""Collector-style configuration values, shared by every section that takes them.

Users who write OpenTelemetry Collector configuration expect the same spellings here:

- durations as Go duration strings (`15m`, `30s`, `500ms`, `1h30m`) beside the `_s` numbers: a
  `<name>_s` setting takes seconds or a duration string, and `<name>` takes a duration string;
- `tls:` blocks with the Collector's keys: `ca_file`, `cert_file`, `key_file` and, for a client,
  `insecure` (`configtls` in the Collector).

`load_yaml` reads every configuration and expectations file, with YAML aliases bounded.

Each helper turns those spellings into this project's settings and appends every problem, with
its path, to ``problems`` (the configuration reports them all at once).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import yaml

from spanjudge.errors import ConfigError, did_you_mean
from spanjudge.spans.text import valid_yaml_strings

if TYPE_CHECKING:
    from yaml.nodes import Node

_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
DURATION_HINT = "a number of seconds or a duration such as 500ms, 30s, 15m, 1h30m"


def parse_duration_s(text: str) -> float | None:
    """Seconds in a Go duration string (`1h30m`, `500ms`, `0`), or None if it is not one."""
    text = text.strip()
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        pos = match.end()
    return total if pos == len(text) and pos > 0 else None


def setting_hint(key: str, names: Iterable[str]) -> str:
    """`did_you_mean` among a section's settings, each `<name>_s` also under its duration
    spelling `<name>` (`idle_timeout: 15m`, the form the examples use): `idle_timout` is
    nearer `idle_timeout` than `idle_timeout_s`, and that is the key to suggest."""
    spellings = [
        n for name in names for n in ((name[:-2], name) if name.endswith("_s") else (name,))
    ]
    # `max_age: 5` is itself a spelling, refused for its number: the one to offer is `max_age_s`
    return did_you_mean(key, [n for n in spellings if n != key])


def durations(
    raw: Mapping[str, Any], keys_s: Iterable[str], path: str, problems: list[str]
) -> dict[str, Any]:
    """``raw`` with each `<name>_s` in ``keys_s`` in seconds; `<name>: 15m` is read as
    `<name>_s`. Other keys pass through untouched, for the section's own checks."""
    out = dict(raw)
    for key_s in keys_s:
        short = key_s[: -len("_s")]
        if short in out and key_s in out:
            problems.append(f"{path}.{short}: set either {short} or {key_s}, not both")
            out.pop(short)
            continue
        given = key_s if key_s in out else short if short in out else None
        if given is None or (given == short and not isinstance(out[short], str)):
            # `max_age: 5` stays unknown (seconds? the Collector reads integers as ns): the
            # section suggests max_age_s.
            continue
        value = out.pop(given)
        if isinstance(value, str):
            seconds = parse_duration_s(value)
            if seconds is None:
                problems.append(f"{path}.{given}: expected {DURATION_HINT}, got {value!r}")
                continue
            value = seconds
        out[key_s] = value  # numbers (and wrong types) are checked by the section itself
    return out


# The Collector's `configtls` keys -> this project's, per side of the connection.
_SERVER_TLS = {"ca_file": "client_ca_file"}
_CLIENT_TLS = {
    "ca_file": "certificate_file",
    "cert_file": "client_certificate_file",
    "key_file": "client_key_file",
    "insecure": "insecure",
}


def server_tls(raw: Any, path: str, problems: list[str]) -> Any:
    """A receiver's `tls:` block: the Collector's `ca_file` (which verifies client certificates,
    i.e. mutual TLS) is accepted as `client_ca_file`."""
    if not isinstance(raw, Mapping):
        return raw
    out = dict(raw)
    for theirs, ours in _SERVER_TLS.items():
        if theirs in out:
            value = out.pop(theirs)
            if ours in out and out[ours] != value:
                problems.append(f"{path}.{theirs}: set either {theirs} or {ours}, not both")
                continue
            out[ours] = value
    return out


def client_tls(raw: Any, path: str, problems: list[str]) -> dict[str, Any]:
    """An exporter's `tls:` block (`insecure`, `ca_file`, `cert_file`, `key_file`) as this
    project's export settings."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected a mapping ({', '.join(_CLIENT_TLS)})")
        return {}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        ours = _CLIENT_TLS.get(str(key))
        if ours is None:
            problems.append(f"{path}.{key}: unknown setting (allowed: {', '.join(_CLIENT_TLS)})")
            continue
        out[ours] = value
    return out


# Nodes a configuration document may hold once its aliases are expanded. An alias costs nothing
# to parse, yet nine levels of nine aliases are nine to the ninth nodes for whatever walks the
# result; a real configuration holds a few thousand at most.
MAX_YAML_NODES = 100_000


class _Loader(yaml.SafeLoader):
    """`yaml.SafeLoader` that also reads a number with an exponent and no dot (``1e-06``,
    ``2E5``) as a number, as JSON and YAML 1.2 do: YAML 1.1 reads it as text, so a JSON
    configuration (what `json.dumps` writes for 0.000001) would be refused."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def load_yaml(text: str, source: str) -> Any:
    """`yaml.safe_load` of ``text`` (numbers as JSON writes them too: `_Loader`; lone surrogates
    replaced, `spans.text`), refused as a `ConfigError` naming ``source`` when its aliases
    expand past `MAX_YAML_NODES` nodes (`yaml.YAMLError` when it is not YAML)."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_nodes(node, {}) > MAX_YAML_NODES:
            raise ConfigError(
                f"YAML aliases expand to more than {MAX_YAML_NODES:,} nodes "
                "(write the repeated parts out, or alias fewer levels deep)",
                source=source,
            )
        doc = loader.construct_document(node)
    finally:
        loader.dispose()
    return valid_yaml_strings(doc, text)


def _expanded_nodes(node: Node, sizes: dict[int, int]) -> int:
    """How many nodes ``node`` stands for with every alias expanded, counted once per distinct
    node (``sizes``) and stopped past the limit, so that counting a bomb is itself cheap."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    sizes[id(node)] = MAX_YAML_NODES + 1  # an alias inside its own anchor expands for ever
    total = 1
    value = node.value
    if isinstance(value, list):
        for item in value:
            for child in item if isinstance(item, tuple) else (item,):
                total += _expanded_nodes(child, sizes)
                if total > MAX_YAML_NODES:
                    return total
    sizes[id(node)] = total
    return total
