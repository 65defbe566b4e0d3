"""How a recorded tool name is compared with a name from elsewhere (a SKILL.md step, a config
rule, an effect override, a known loader): the one rule every such comparison uses.

Frameworks put tools under a namespace: `ops-get_exchange_rate` (a plugin), `plugin.function`,
`mcp__server__tool` (MCP clients), `server/tool`, `server:tool`. A SKILL.md or a config written
for the tool says `get_exchange_rate`. The exact name is tried first, then each base name after a
namespace separator, longest first (`a.b-c` -> `b-c`, then `c`). Reports keep the recorded name.
"""

from __future__ import annotations

import re
from functools import lru_cache

# `mcp__server__tool` splits on the double underscore only: a single `_` joins the words of a
# name (`get_exchange_rate`) and is never a namespace separator.
SEPARATORS: tuple[str, ...] = ("__", "-", ".", "/", ":")
_SEPARATOR = re.compile("|".join(map(re.escape, SEPARATORS)))


# Tool names repeat on every call of every session: a short one's candidates are found once
# and remembered. A long one's are found each time, since a cache would keep it after its
# session.
_REMEMBERED_CHARS = 256


def candidates(recorded: str) -> tuple[str, ...]:
    """The recorded name, then the base names after each namespace separator, longest first."""
    if len(recorded) > _REMEMBERED_CHARS:
        return _candidates(recorded)
    return _remembered_candidates(recorded)


def _candidates(recorded: str) -> tuple[str, ...]:
    out = [recorded]
    for match in _SEPARATOR.finditer(recorded):
        base = recorded[match.end() :]
        if base and base not in out:
            out.append(base)
    return tuple(out)


_remembered_candidates = lru_cache(maxsize=4096)(_candidates)


def same_tool(recorded: str, named: str) -> bool:
    """`recorded` (a trace's tool name) is the tool `named` names."""
    return recorded == named or named in candidates(recorded)[1:]
