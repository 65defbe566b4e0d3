"""A newcomer's `pip install .`: no extras, not editable, in a fresh virtual environment. What the
README promises must run from there: `spanjudge serve` with no configuration at all, the demo,
`eval` on a shipped example. One venv (it costs a minute), reused by every check here."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT, unavailable

pytestmark = pytest.mark.slow

DEFAULT_PORTS = (4327, 4328, 9464)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("install")
    source = base / "source"
    # What a clone holds, minus tests and fixtures (not part of the package), and no build debris.
    shutil.copytree(
        ROOT / "src",
        source / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, source / name)
    env_dir = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=300)
    done = subprocess.run(
        [str(env_dir / "bin" / "pip"), "install", "-q", str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    offline = (
        "NewConnectionError",
        "Temporary failure in name resolution",
        "Network is unreachable",
    )
    if done.returncode != 0 and any(word in done.stderr for word in offline):
        unavailable("pypi", f"no package index reachable for pip install .: {done.stderr[-300:]}")
    assert done.returncode == 0, f"pip install . failed:\n{done.stdout}\n{done.stderr}"
    return env_dir


def _clean_env() -> dict[str, str]:
    drop = ("PYTHONPATH", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("OTEL_")}
    return env


def _free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.status, answer.read().decode()


def test_serve_with_no_configuration_starts_answers_and_stops(venv: Path, tmp_path: Path) -> None:
    busy = [port for port in DEFAULT_PORTS if not _free(port)]
    if busy:
        pytest.skip(f"default port(s) {busy} in use on this machine; serve needs them free")
    proc = subprocess.Popen(
        [str(venv / "bin" / "spanjudge"), "serve"],
        cwd=tmp_path,
        env=_clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # blocks until serve logs its start-up line
        assert "listening: OTLP/gRPC 127.0.0.1:4327" in first, first
        assert "http://127.0.0.1:4328/v1/traces" in first
        assert "metrics http://127.0.0.1:9464/metrics" in first
        assert f"spool {tmp_path / 'spanjudge-spool.db'}" in first
        assert " WARNING " in first and "verdict export is OFF" in first
        assert _get("http://127.0.0.1:4328/healthz")[0] == 200
        status, metrics = _get("http://127.0.0.1:9464/metrics")
        assert status == 200 and "# TYPE" in metrics
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, rest
    assert "Traceback" not in rest
    # One line at start, then only the shutdown.
    assert [line for line in rest.splitlines() if "listening" in line] == []


def test_failed_start_leaves_the_directory_as_it_was(venv: Path, tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        (tmp_path / "busy.yaml").write_text(
            "serve:\n  grpc_endpoint: 127.0.0.1:0\n  http_endpoint: 127.0.0.1:0\n"
            f"  metrics_endpoint: 127.0.0.1:{port}\n"
        )
        done = subprocess.run(
            [str(venv / "bin" / "spanjudge"), "serve", "--config", "busy.yaml"],
            cwd=tmp_path,
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "address already in use" in done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["busy.yaml"]


def test_demo_and_eval_run_from_the_plain_install(venv: Path, tmp_path: Path) -> None:
    exe = str(venv / "bin" / "spanjudge")
    demo = subprocess.run(
        [exe, "demo"], cwd=tmp_path, env=_clean_env(), capture_output=True, text=True, timeout=120
    )
    assert demo.returncode == 0, demo.stderr
    assert "required skill 'incident-triage' was never loaded" in demo.stdout
    traces = ROOT / "fixtures" / "adk" / "adk.jsonl"
    done = subprocess.run(
        [exe, "eval", str(traces), "--format", "json", "-o", "report.json"],
        cwd=tmp_path,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, 1), done.stderr
    assert "wrote json report to report.json" in done.stderr
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("spanjudge 0.")


def test_the_shipped_serve_configuration_starts_as_shipped(venv: Path, tmp_path: Path) -> None:
    busy = [port for port in DEFAULT_PORTS if not _free(port)]
    if busy:
        pytest.skip(f"port(s) {busy} of the shipped configuration in use on this machine")
    shipped = ROOT / "collector-config" / "spanjudge-serve.yaml"
    proc = subprocess.Popen(
        [str(venv / "bin" / "spanjudge"), "serve", "--config", str(shipped)],
        cwd=tmp_path,
        env=_clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert " INFO " in first and "verdicts to OTLP grpc http://127.0.0.1:14317" in first, first
        assert f"spool {tmp_path / 'spanjudge-spool.db'}" in first
        assert _get("http://127.0.0.1:4328/healthz")[0] == 200
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, rest


def test_every_package_data_entry_names_files_that_exist() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for package, patterns in project["tool"]["setuptools"]["package-data"].items():
        base = ROOT / "src" / package.replace(".", "/")
        for pattern in patterns:
            assert list(base.glob(pattern)), f"package-data {package}: {pattern} matches nothing"


def test_the_installed_package_carries_its_data(venv: Path) -> None:
    found = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.resources as r; p = r.files('spanjudge');"
            " print((p / 'py.typed').is_file(), (p / 'schemas' / 'report.schema.json').is_file())",
        ],
        capture_output=True,
        text=True,
        env=_clean_env(),
        timeout=60,
    )
    assert found.stdout.split() == ["True", "True"], found.stderr
