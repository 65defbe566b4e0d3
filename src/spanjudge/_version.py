"""The package version, in one place: the JSON report, `--version`, the sidecar's `Server`
header and `spanjudge.__version__` read it. A plain constant, so reading it costs no
`importlib.metadata` scan at start-up; a test keeps it equal to `pyproject.toml`."""

from __future__ import annotations

__version__ = "0.1.0"
