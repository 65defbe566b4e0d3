"""How a recorded tool name is compared with a name from elsewhere (a SKILL.md step, a config
rule, an effect override, a known loader): the one rule every such comparison uses.

Frameworks put tools under a namespace: `ops-get_exchange_rate` (a plugin), `plugin.function`,
`mcp__server__tool` (MCP clients), `server/tool`, `server:tool`. A SKILL.md or a config written
for the tool says `get_exchange_rate`. The exact name is tried first, then each base name after a
namespace separator, longest first (`a.b-c` -> `b-c`, then `c`). Reports keep the recorded name.
"""

from __future__ import annotations

import re

from spanjudge.remembered import remembered_when_short

# `mcp__server__tool` splits on the double underscore only: a single `_` joins the words of a
# name (`get_exchange_rate`) and is never a namespace separator.
SEPARATORS: tuple[str, ...] = ("__", "-", ".", "/", ":")
_SEPARATOR = re.compile("|".join(map(re.escape, SEPARATORS)))


@remembered_when_short(maxsize=4096)  # tool names repeat on every call of every session
def candidates(recorded: str) -> tuple[str, ...]:
    """The recorded name, then the base names after each namespace separator, longest first."""
    out = [recorded]
    for match in _SEPARATOR.finditer(recorded):
        base = recorded[match.end() :]
        if base and base not in out:
            out.append(base)
    return tuple(out)


def same_tool(recorded: str, named: str) -> bool:
    """`recorded` (a trace's tool name) is the tool `named` names."""
    return recorded == named or named in candidates(recorded)[1:]
