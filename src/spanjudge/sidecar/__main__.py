"""`python -m spanjudge.sidecar` runs `spanjudge serve`."""

from __future__ import annotations

import sys

from spanjudge.sidecar import main

sys.exit(main())
