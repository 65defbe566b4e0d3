"""Relative paths in a configuration file are relative to that file's directory, for every key
that names a file, whatever the current directory: a config kept in `conf/` and started from
anywhere finds its skills, its spool and its certificates beside it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from spanjudge.config import load_config
from spanjudge.errors import ConfigError
from spanjudge.sidecar import serve_config
from tests.conftest import FIXTURES

SERVE = """\
serve:
  spool: {path: data/spool.db}
  tls: {cert_file: certs/server.pem, key_file: certs/server.key}
  export: {endpoint: "https://127.0.0.1:14317", tls: {ca_file: certs/ca.pem}}
"""


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`<tmp>/conf/` holds the configuration; the run starts in `<tmp>/elsewhere/`."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return tmp_path / "conf"


def test_skills_paths_are_relative_to_the_config_file(conf: Path) -> None:
    shutil.copytree(FIXTURES / "skills" / "csv-report", conf / "skills" / "csv-report")
    (conf / "spanjudge.yaml").write_text("skills: {paths: [skills]}\n")
    library = load_config(str(conf / "spanjudge.yaml")).sections["skills"]
    assert "csv-report" in library.skills


def test_expectations_files_still_are_relative_to_the_config_file(conf: Path) -> None:
    (conf / "expectations.yaml").write_text("sessions:\n  s1: {skills: [csv-report]}\n")
    (conf / "spanjudge.yaml").write_text("expectations_files: [expectations.yaml]\n")
    config = load_config(str(conf / "spanjudge.yaml"))
    assert [e.pattern for e in config.entries] == ["s1"]


def test_serve_spool_and_tls_files_are_relative_to_the_config_file(conf: Path) -> None:
    (conf / "certs").mkdir()
    for name in ("server.pem", "server.key", "ca.pem"):
        (conf / "certs" / name).write_text("placeholder\n")  # only their existence is checked
    (conf / "serve.yaml").write_text(SERVE)
    serve = serve_config(load_config(str(conf / "serve.yaml")))
    assert Path(serve.spool.path) == conf / "data" / "spool.db"
    assert Path(serve.tls.cert_file or "") == conf / "certs" / "server.pem"
    assert Path(serve.tls.key_file or "") == conf / "certs" / "server.key"
    assert Path(serve.export.certificate_file or "") == conf / "certs" / "ca.pem"


def test_a_missing_file_is_named_where_it_was_looked_for(conf: Path) -> None:
    (conf / "serve.yaml").write_text(SERVE)
    with pytest.raises(ConfigError) as info:
        serve_config(load_config(str(conf / "serve.yaml")))
    assert f"serve.tls.cert_file: no such file {str(conf / 'certs' / 'server.pem')!r}" in str(
        info.value
    )


def test_the_default_spool_and_absolute_paths_are_left_alone(conf: Path, tmp_path: Path) -> None:
    (conf / "serve.yaml").write_text("serve: {grpc_endpoint: 127.0.0.1:0}\n")
    assert serve_config(load_config(str(conf / "serve.yaml"))).spool.path == "spanjudge-spool.db"
    absolute = tmp_path / "var" / "spool.db"
    (conf / "serve.yaml").write_text(f"serve: {{spool: {{path: {absolute}}}}}\n")
    assert serve_config(load_config(str(conf / "serve.yaml"))).spool.path == str(absolute)


def test_serve_started_elsewhere_spools_beside_its_config(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    conf, elsewhere = tmp_path / "conf", tmp_path / "elsewhere"
    conf.mkdir()
    elsewhere.mkdir()
    endpoints = {f"{n}_endpoint": "127.0.0.1:0" for n in ("grpc", "http", "metrics")}
    (conf / "serve.yaml").write_text(
        "serve: {"
        + ", ".join(f"{k}: '{v}'" for k, v in endpoints.items())
        + ", spool: {path: spool.db}, shutdown_timeout_s: 5}\n"
    )
    ready = tmp_path / "ready.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    argv = ["serve", "--config", "../conf/serve.yaml", "--ready-file", str(ready)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "spanjudge.cli", *argv],
        cwd=elsewhere,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready.exists(), "serve did not start"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert f"spool {conf / 'spool.db'}" in err, err
    assert (conf / "spool.db").exists() and not (elsewhere / "spool.db").exists()


def test_a_tilde_is_the_home_directory_in_every_key_naming_a_file(
    conf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "skills" / "csv-report", home / "skills" / "csv-report")
    (home / "expectations.yaml").write_text("sessions:\n  s1: {skills: [csv-report]}\n")
    monkeypatch.setenv("HOME", str(home))
    (conf / "spanjudge.yaml").write_text(
        "expectations_files: [~/expectations.yaml]\n"
        "skills: {paths: [~/skills]}\n"
        "serve: {spool: {path: ~/spool.db}}\n"
    )
    config = load_config(str(conf / "spanjudge.yaml"))
    assert [e.pattern for e in config.entries] == ["s1"]
    assert "csv-report" in config.sections["skills"].skills
    assert Path(serve_config(config).spool.path) == home / "spool.db"


def test_a_tilde_is_expanded_in_a_configuration_built_without_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spanjudge.config import parse_config

    monkeypatch.setenv("HOME", str(tmp_path))
    config = parse_config({"serve": {"spool": {"path": "~/spool.db"}}})
    assert serve_config(config).spool.path == str(tmp_path / "spool.db")


def test_a_symlinked_config_resolves_beside_the_name_given(conf: Path, tmp_path: Path) -> None:
    # As the README says: the directory of the name given (a ConfigMap mount's links work).
    real = tmp_path / "real"
    real.mkdir()
    (real / "serve.yaml").write_text("serve: {spool: {path: spool.db}}\n")
    (conf / "serve.yaml").symlink_to(real / "serve.yaml")
    assert serve_config(load_config(str(conf / "serve.yaml"))).spool.path == str(conf / "spool.db")
    relative = serve_config(load_config("../conf/serve.yaml")).spool.path  # cwd: elsewhere/
    assert os.path.abspath(relative) == str(conf / "spool.db")
