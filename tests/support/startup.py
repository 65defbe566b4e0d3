"""What a `spanjudge` command imports: the modules loaded after running it in a fresh interpreter
(tests/recognition/test_deferred.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path


def modules_after(*argv: str, cwd: Path, flags: tuple[str, ...] = ()) -> set[str]:
    """The names in `sys.modules` after `spanjudge.cli.main(argv)` in a new interpreter."""
    script = textwrap.dedent(
        f"""
        import json, sys
        from spanjudge.cli import main
        code = main({list(argv)!r})
        print(json.dumps(sorted(sys.modules)), file=sys.__stderr__)
        """
    )
    done = subprocess.run(
        [sys.executable, *flags, "-c", script],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr
    loaded: set[str] = set(json.loads(done.stderr.strip().splitlines()[-1]))
    return loaded
