"""serve run in a caller's process (`spanjudge.cli.main(['serve', ...])`, `spanjudge.sidecar.main
(argv)`): once it returned, the caller's process goes on as before serve: the shutdown watchdog
(`sidecar.signals.end_by`), which bounds the stop of serve's own process, is cancelled."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

CALLER = """
import os, signal, sys, threading, time
from pathlib import Path

config, ready, entry = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]


def stopper() -> None:
    while not ready.exists():
        time.sleep(0.02)
    os.kill(os.getpid(), signal.SIGTERM)


threading.Thread(target=stopper, daemon=True).start()
argv = ["--config", str(config), "--ready-file", str(ready), "--log-level", "WARNING"]
if entry == "cli":
    from spanjudge.cli import main

    code = main(["serve", *argv])
else:
    from spanjudge.sidecar import main

    code = main(argv)
print("serve returned", code, flush=True)
time.sleep(3)  # the caller's own work after serve: longer than the budget and its second
print("caller still alive", flush=True)
sys.exit(7)
"""


def _config(tmp: Path) -> Path:
    config = tmp / "serve.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            serve:
              grpc_endpoint: 127.0.0.1:0
              http_endpoint: 127.0.0.1:0
              metrics_endpoint: null
              workers: 1
              spool: {{path: {tmp / "spool.db"}}}
              shutdown_timeout_s: 1
            """
        )
    )
    return config


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")) if p
    )
    return env


@pytest.mark.parametrize("entry", ["cli", "sidecar"])
def test_a_callers_process_goes_on_after_serve_returned(tmp_path: Path, entry: str) -> None:
    script = tmp_path / "caller.py"
    script.write_text(CALLER)
    done = subprocess.run(
        [sys.executable, str(script), str(_config(tmp_path)), str(tmp_path / "ready"), entry],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )
    assert done.stdout == "serve returned 0\ncaller still alive\n", done.stderr
    assert done.returncode == 7
    assert "shutdown: not finished" not in done.stderr


THREAD = """
import os, sys, threading

from spanjudge.sidecar import main

config = sys.argv[1]
out: list[str] = []


def serve() -> None:
    try:
        out.append(f"returned {main(['--config', config, '--log-level', 'ERROR'])}")
    except BaseException as exc:
        out.append(f"{type(exc).__name__}: {exc}")


before = len(os.listdir("/proc/self/fd"))
for _ in range(3):
    thread = threading.Thread(target=serve)
    thread.start()
    thread.join(30)
print(out[0])
print("fds left open:", len(os.listdir("/proc/self/fd")) - before)
"""


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts fds in /proc")
def test_serve_from_a_thread_says_signals_need_the_main_thread_and_leaves_no_fd_open(
    tmp_path: Path,
) -> None:
    script = tmp_path / "thread.py"
    script.write_text(THREAD)
    done = subprocess.run(
        [sys.executable, str(script), str(_config(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "ValueError: signal only works in main thread of the main interpreter\nfds left open: 0\n"
    )
