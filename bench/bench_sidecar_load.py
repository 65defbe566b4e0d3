"""`spanjudge serve` under sustained load, with every ratio measured in the same run.

1. Sustained load: a real `spanjudge serve` process (its default backpressure unless
   ``--max-pending-age-s``), verdicts exported over OTLP to a receiver in this process, several
   client processes sending 8-session requests (sessions ended) as fast as they are accepted
   for ``--seconds`` (or until ``--sessions`` are acknowledged: the same work for every tree
   and setting), a refused request retried after 50 ms as an exporter retries. Reported:
   - ``accepted_sessions_per_s``: sessions in acknowledged requests / sending time (from the
     clients' start to the last client's end; client start-up included);
   - ``requests_refused_retryable``: answers UNAVAILABLE (or a client deadline), each retried;
   - ``evaluated_sessions_per_s``: sessions whose evaluation span reached the receiver while the
     clients sent / the same time; ``ratio_evaluated_vs_accepted`` is the two over the whole
     run, so the backlog accepted and not yet judged at the end counts against it (a bounded
     backlog weighs less the longer the run);
   - ``second_half_*``: the same two counts over the second half of the time between the first
     and last acknowledgement (acknowledgement times and first receipt of each evaluation span,
     on the host's one monotonic clock): the steady state once the backlog stopped growing,
     goal evaluated >= accepted (a backlog that keeps growing shows as below 1.0);
   - ``verdict_latency_s_p50/p99/max``: per acknowledged session, from its request's
     acknowledgement to the first evaluation span received (what backpressure must bound);
   then waits for a drain and counts, per acknowledged session, its evaluation span and its log
   records (goal: none missing, none twice).
2. CPU per span: the same requests through `spanjudge serve` (spool on, export off) and through
   a floor receiver that parses each request AND walks every attribute into Python values, each
   server in its own process; spans per CPU-second of the server process (goal: >= 0.5x), and
   how serve's CPU splits between its evaluation thread and the rest (receivers, spool).
3. Memory: resident set size per open session and per retained span (a fresh process fills a
   `SessionStore`), against the store's own budget estimate (`open_bytes`).

4. `serve.workers: 2` vs 1: the sustained load of 1. run once with each setting; sessions
   judged per second (every acknowledged session judged, from the first request to the last
   verdict) of 2 over 1 (goal: >= 1.6x on a 2-core machine). The clients share the cores.

With ``--against SRC`` (another tree's ``src/``, e.g. a checkout of main) the bench measures
instead, for this tree and for SRC alternately, ``--repeat`` times: serve's spans per CPU-second
of 2. (no floor) and the sustained load of 1. at ``--workers``; then prints each key figure of
both side by side (the best of the runs, the range beside) and the ratio this tree / SRC. This
tree is the spanjudge this interpreter imports (PYTHONPATH, else the installed one); SRC's serve
processes import from SRC first, and each tree's ``spanjudge.__file__`` is printed.

    python bench/bench_sidecar_load.py [--clients 3] [--seconds 20 | --sessions N]
        [--spans-per-session 6]
        [--workers 2] [--load-only] [--max-pending-age-s S] [--timeline]
        [--against SRC [--repeat N]]
    python bench/bench_sidecar_load.py --flood [--flood-sessions 100000] [--flood-requests 4]
        [--flood-max-open-mb 256] [--drain-s 120]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import IO, Any

import floor_receiver
import grpc
import yaml
from bench_sidecar import EXPORT, build_requests, send_retrying, session_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

# the flood's requests and configuration, and the counting verdict receiver, are the flood
# test's (`tests/support/load.py`)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.load import flood_config, flood_request, verdict_server
from tests.support.load import rss_bytes as rss_of

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def thread_cpu_seconds(native_id: int) -> float:
    """User + system CPU of one thread of this process so far (Linux /proc)."""
    fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * _PAGE


# --- which tree's spanjudge a server process runs ---


def _env(src: Path | None) -> dict[str, str]:
    """The environment of a subprocess that imports spanjudge from ``src`` (None: this tree)."""
    if src is None:
        return dict(os.environ)
    path = os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, PYTHONPATH=path)


@contextlib.contextmanager
def _first_on_path(src: Path | None) -> Iterator[None]:
    """A spawned process takes sys.path from this one when it starts: ``src`` first meanwhile
    (this process has imported spanjudge already and is not affected)."""
    saved = list(sys.path)
    if src is not None:
        sys.path.insert(0, str(src))
    try:
        yield
    finally:
        sys.path[:] = saved


def imported_from(src: Path | None) -> str:
    """``spanjudge.__file__`` in a subprocess started as serve's are."""
    out = subprocess.run(
        [sys.executable, "-c", "import spanjudge; print(spanjudge.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        env=_env(src),
    )
    return out.stdout.strip()


# --- client processes ---


def _sessions_request(first: int, count: int, spans: int) -> bytes:
    batch = [s for i in range(first, first + count) for s in session_spans(i, spans)]
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=batch)])]
    ).SerializeToString()


def _load_client(
    target: str, index: int, seconds: float, spans: int, out: Any, sessions: int | None = None
) -> None:
    """Send 8-session requests until ``seconds`` are up (or, given ``sessions``, until that many
    are acknowledged), retrying a refused one as an OTLP exporter does; report when each
    request was acknowledged (CLOCK_MONOTONIC, which every process on the host shares) and how
    many answers were retryable refusals."""
    channel = grpc.insecure_channel(target)
    call = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
    acked: list[tuple[int, float]] = []  # (index of the request's first session, acked at)
    refused = 0
    next_index = index * 10_000_000
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline if sessions is None else 8 * len(acked) < sessions:
        refused += send_retrying(
            call,
            _sessions_request(next_index, 8, spans),
            codes=(grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED),
            timeout_s=30,
        )
        acked.append((next_index, time.monotonic()))
        next_index += 8
    out.put((acked, refused))
    channel.close()


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _start_serve(
    settings: dict[str, Any], directory: str, name: str, src: Path | None = None
) -> tuple[subprocess.Popen[bytes], dict[str, Any], IO[bytes]]:
    """Start `spanjudge serve` (from ``src``; None: this tree) with ``settings`` as its
    configuration; its process, its endpoints once ready (the ready file) and its open log."""
    config, ready = Path(directory) / f"{name}.yaml", Path(directory) / f"{name}-ready.json"
    config.write_text(yaml.safe_dump(settings))
    log_path = Path(directory) / f"{name}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed by _stop_serve
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "spanjudge.sidecar", "--config", str(config)),
            *("--ready-file", str(ready), "--log-level", "WARNING"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=_env(src),
    )
    try:
        while not ready.exists():
            if proc.poll() is not None:
                raise RuntimeError(log_path.read_text())
            time.sleep(0.05)
    except BaseException:
        _stop_serve(proc, log, 60)
        raise
    return proc, json.loads(ready.read_text()), log


def serve_settings(workers: int, spool: Path, verdict_port: int) -> dict[str, Any]:
    """serve as the benches run it: gRPC only on a free port, sessions ended by their end
    marker (no idle close within a run), the spool on, verdicts to ``verdict_port``."""
    return {
        "sessions": {"end_grace_s": 0.0, "idle_timeout_s": 600},
        "serve": {
            "grpc_endpoint": "127.0.0.1:0",
            "http_endpoint": None,
            "metrics_endpoint": None,
            "workers": workers,
            "spool": {"path": str(spool)},
            "export": {"endpoint": f"http://127.0.0.1:{verdict_port}", "insecure": True},
        },
    }


def _stop_serve(proc: subprocess.Popen[bytes], log: IO[bytes], timeout_s: float) -> None:
    proc.terminate()
    proc.wait(timeout_s)
    log.close()


def sustained(
    args: argparse.Namespace, directory: str, workers: int, src: Path | None = None
) -> dict[str, Any]:
    server, port, received = verdict_server()
    directory = tempfile.mkdtemp(dir=directory)  # a fresh spool and ready file for each load
    settings = serve_settings(workers, Path(directory) / f"load-{workers}.db", port)
    if args.max_pending_age_s is not None:
        settings["serve"]["max_pending_age_s"] = args.max_pending_age_s
    proc, endpoints, log = _start_serve(settings, directory, f"load-{workers}", src)
    try:
        target = endpoints["grpc"]
        pids = [proc.pid, *endpoints.get("workers", [])]
        context = multiprocessing.get_context("spawn")
        queue: Any = context.Queue()
        each = -(-args.sessions // args.clients) if args.sessions else None
        clients = [
            context.Process(
                target=_load_client,
                args=(target, i, args.seconds, args.spans_per_session, queue, each),
            )
            for i in range(args.clients)
        ]
        cpu_before = [cpu_seconds(pid) for pid in pids]
        started = time.monotonic()
        for client in clients:
            client.start()
        outcomes = [queue.get(timeout=args.seconds + 120 + args.drain_s) for _ in clients]
        for client in clients:
            client.join()
        stopped = time.monotonic()
        sent_s = stopped - started
        acked_at = {
            f"bench-{i:06d}": at
            for requests, _ in outcomes
            for first, at in requests
            for i in range(first, first + 8)
        }
        acked = set(acked_at)
        with received.lock:
            evaluated_while_sending = len(received.spans)
        drain_started = time.monotonic()
        while time.monotonic() - drain_started < args.drain_s:
            with received.lock:
                if all(sid in received.spans for sid in acked):
                    break
            time.sleep(0.2)
        drain_s = time.monotonic() - drain_started
        time.sleep(1.0)  # log records follow their spans within a flush
        cpu_each = [cpu_seconds(pid) - before for pid, before in zip(pids, cpu_before, strict=True)]
        cpu = sum(cpu_each)
    finally:
        _stop_serve(proc, log, 60)
        server.stop(0)
    with received.lock:
        no_span = [sid for sid in acked if sid not in received.spans]
        no_logs = [sid for sid in acked if received.logs.get(sid, 0) == 0]
        doubled = [sid for sid, n in received.spans.items() if n > 1]
        first_seen = dict(received.first_seen)
    accepted_per_s = len(acked) / sent_s
    evaluated_per_s = evaluated_while_sending / sent_s
    # The second half of the sending time: by then a bounded backlog has built up, and in a
    # steady state as many sessions are judged as are accepted (a growing backlog shows here
    # as evaluated < accepted). Both counted over the same window.
    first_ack, last_ack = min(acked_at.values()), max(acked_at.values())
    window = ((first_ack + last_ack) / 2, last_ack)
    accepted_late = sum(1 for at in acked_at.values() if window[0] <= at < window[1])
    evaluated_late = sum(1 for at in first_seen.values() if window[0] <= at < window[1])
    # from the acknowledgement to the first evaluation span received, per session
    latency = [first_seen[sid] - at for sid, at in acked_at.items() if sid in first_seen]
    if args.timeline:  # sessions acknowledged and first evaluated in each second
        acks = collections.Counter(int(at - started) for at in acked_at.values())
        seen = collections.Counter(int(at - started) for at in first_seen.values())
        steps = range(int(sent_s + drain_s) + 2)
        print(f"workers {workers}:", [(acks[t], seen[t]) for t in steps], file=sys.stderr)
    return {
        "workers": workers,
        "clients": args.clients,
        "seconds": round(sent_s, 1),
        "sessions_acknowledged": len(acked),
        "requests_refused_retryable": sum(r for _, r in outcomes),
        "accepted_sessions_per_s": round(accepted_per_s, 1),
        "evaluated_sessions_per_s": round(evaluated_per_s, 1),
        "ratio_evaluated_vs_accepted": round(evaluated_per_s / accepted_per_s, 3),
        "second_half_accepted_sessions_per_s": round(accepted_late / (window[1] - window[0]), 1),
        "second_half_evaluated_sessions_per_s": round(evaluated_late / (window[1] - window[0]), 1),
        "second_half_ratio_evaluated_vs_accepted": round(evaluated_late / max(accepted_late, 1), 3),
        "goal_ratio": ">= 1.0",
        "verdict_latency_s_p50": _round(_percentile(latency, 0.50)),
        "verdict_latency_s_p99": _round(_percentile(latency, 0.99)),
        "verdict_latency_s_max": _round(max(latency, default=None)),
        "drain_s": round(drain_s, 1),
        "acknowledged_without_evaluation_span": len(no_span),
        "acknowledged_without_log_records": len(no_logs),
        "sessions_emitted_twice": len(doubled),
        # every acknowledged session judged, over the time from the first request to the
        # last verdict: what evaluation sustains whatever the clients managed to send
        "judged_sessions_per_s": round(len(acked) / (sent_s + drain_s), 1),
        "sidecar_cpu_s": round(cpu, 1),  # the serve process and its evaluation processes
        "sidecar_cpu_ms_per_session": round(1000 * cpu / max(len(acked), 1), 2),
        # of which the serve process (receivers, spool, routing, metrics), then each evaluation
        # process: with workers > 1 the busiest one bounds what a host's cores can sustain
        "cpu_ms_per_session_by_process": [
            round(1000 * c / max(len(acked), 1), 2) for c in cpu_each
        ],
    }


# --- CPU per span: the sidecar against a floor receiver, each in its own process ---


def _floor_server(conn: Any) -> None:
    """`floor_receiver`, with the gRPC thread pool and size limit of serve's receiver at its
    defaults: parse each request and turn every attribute of every span into Python values.
    Sends its port, then answers each request with its count of spans, until stop."""
    from spanjudge.sidecar.config import ServeConfig
    from spanjudge.sidecar.grpc_receiver import RECEIVE_ROOM_BYTES

    serve = ServeConfig()
    server, port, spans = floor_receiver.start(
        serve.grpc_workers, serve.input.max_request_bytes + RECEIVE_ROOM_BYTES
    )
    conn.send(port)
    _report(conn, lambda request: spans())
    server.stop(0)


def _sidecar_server(conn: Any, spool: str) -> None:
    from spanjudge.config import parse_config
    from spanjudge.sidecar.config import parse_serve
    from spanjudge.sidecar.server import Sidecar

    problems: list[str] = []
    serve = parse_serve(
        {
            "grpc_endpoint": "127.0.0.1:0",
            "http_endpoint": None,
            "metrics_endpoint": None,
            "export": {"enabled": False},
            "spool": {"path": spool},
            # one process: this part counts the serve process's CPU per span (with the default,
            # the cores, evaluation would run in child processes this figure does not see)
            "workers": 1,
        },
        "serve",
        problems,
    )
    sidecar = Sidecar(parse_config({"sessions": {"end_grace_s": 0.0}}), serve)
    sidecar.start()
    assert sidecar.grpc is not None
    conn.send(sidecar.grpc.port)

    def answer(request: str) -> Any:
        if request == "where":  # which tree's spanjudge this process runs
            return sys.modules["spanjudge"].__file__
        if request == "worker_cpu":  # the evaluation thread's CPU (the rest: receivers, spool)
            thread = getattr(sidecar.worker, "_thread", None)
            return thread_cpu_seconds(thread.native_id) if thread is not None else None
        return sidecar.worker.evaluated_sessions

    _report(conn, answer)
    sidecar.stop()


def _report(conn: Any, count: Any) -> None:
    """Answer `count(request)` each time the parent asks, until it says stop."""
    while (request := conn.recv()) != "stop":
        conn.send(count(request))


def cpu_per_span(
    args: argparse.Namespace, directory: str, src: Path | None = None, floor: bool = True
) -> dict[str, Any]:
    """Spans per CPU-second of the floor receiver and of serve (from ``src``: None, this tree)."""
    sessions = args.cpu_sessions
    requests = build_requests(sessions, args.spans_per_session)
    spans = sessions * args.spans_per_session
    context = multiprocessing.get_context("spawn")
    out: dict[str, Any] = {"spans": spans}
    spool = str(Path(tempfile.mkdtemp(dir=directory)) / "cpu.db")  # a fresh one each time
    servers = [("floor", _floor_server, (), spans)] if floor else []
    servers.append(("sidecar", _sidecar_server, (spool,), sessions))
    for name, target, extra, done_at in servers:
        parent, child = context.Pipe()
        proc = context.Process(target=target, args=(child, *extra))
        with _first_on_path(src if name == "sidecar" else None):
            proc.start()
        port = parent.recv()
        if name == "sidecar":
            parent.send("where")
            out["sidecar_spanjudge"] = parent.recv()
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        call = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
        call(ExportTraceServiceRequest().SerializeToString(), timeout=60)  # warm
        assert proc.pid is not None
        before = cpu_seconds(proc.pid)
        parent.send("worker_cpu")
        worker_before = parent.recv()
        with futures.ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(send_retrying, [call] * len(requests), requests))
        while True:
            parent.send("count")
            if parent.recv() >= done_at:
                break
            time.sleep(0.05)
        cpu = cpu_seconds(proc.pid) - before
        parent.send("worker_cpu")
        worker_after = parent.recv()
        if name == "sidecar" and worker_before is not None and worker_after is not None:
            # where serve's CPU goes: the evaluation thread vs receivers, spool and the rest
            out["sidecar_worker_thread_cpu_s"] = round(worker_after - worker_before, 2)
            out["sidecar_other_threads_cpu_s"] = round(cpu - (worker_after - worker_before), 2)
        parent.send("stop")
        proc.join(60)
        channel.close()
        out[f"{name}_cpu_s"] = round(cpu, 2)
        out[f"{name}_spans_per_cpu_s"] = round(spans / cpu)
    if floor:
        out["ratio_sidecar_vs_floor_per_cpu_s"] = round(
            out["sidecar_spans_per_cpu_s"] / out["floor_spans_per_cpu_s"], 3
        )
        out["goal_ratio"] = ">= 0.5"
    return out


# --- memory: RSS against the budget's estimate ---


def _fill(conn: Any, sessions: int, spans: int) -> None:
    from spanjudge.config import parse_config
    from spanjudge.sessions.store import SessionStore
    from spanjudge.spans.otlp_proto import decode_request

    bodies = build_requests(sessions, spans)
    store = SessionStore(parse_config({}).policy)
    before = rss_bytes()
    for body in bodies:
        records, _ = decode_request(ExportTraceServiceRequest.FromString(body))
        store.add_all(records)
    del bodies
    conn.send((rss_bytes() - before, store.open_bytes, len(store.open)))


def memory(args: argparse.Namespace) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    measured = {}
    sessions = args.memory_sessions
    for spans in (3, 3 + 4 * args.spans_per_session):
        parent, child = context.Pipe()
        proc = context.Process(target=_fill, args=(child, sessions, spans))
        proc.start()
        measured[spans] = parent.recv()
        proc.join()
    (small, (rss_s, est_s, _)), (large, (rss_l, est_l, _)) = sorted(measured.items())
    per_span = (rss_l - rss_s) / (sessions * (large - small))
    est_per_span = (est_l - est_s) / (sessions * (large - small))
    return {
        "rss_bytes_per_retained_span": round(per_span),
        "estimate_bytes_per_retained_span": round(est_per_span),
        "ratio_rss_vs_estimate_per_span": round(per_span / est_per_span, 2),
        # a whole open session of `small` spans (RSS grows in arenas: the per-session
        # intercept of a two-point fit is noise, the total is not)
        f"rss_bytes_per_open_session_of_{small}_spans": round(rss_s / sessions),
        f"estimate_bytes_per_open_session_of_{small}_spans": round(est_s / sessions),
        "ratio_rss_vs_estimate_per_session": round(rss_s / est_s, 2),
    }


# --- this tree against another's ---

# (figure, True when higher is better): the first from 2., the others from 1.
_FIGURES = [
    ("sidecar_spans_per_cpu_s", True),
    ("accepted_sessions_per_s", True),
    ("evaluated_sessions_per_s", True),
    ("second_half_evaluated_sessions_per_s", True),
    ("judged_sessions_per_s", True),
    ("sidecar_cpu_ms_per_session", False),
]


def against(args: argparse.Namespace, directory: str) -> None:
    """Serve's CPU per span and the sustained load, this tree and ``args.against`` alternately
    (the order swapped each round); the key figures side by side with the ratio this / it."""
    trees: dict[str, Path | None] = {"this": None, "against": args.against}
    for name, src in trees.items():
        print(f"{name}: spanjudge serve imports {imported_from(src)}")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for round_ in range(max(1, args.repeat)):
        order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
        cpu = {name: cpu_per_span(args, directory, trees[name], floor=False) for name in order}
        load = {name: sustained(args, directory, args.workers, trees[name]) for name in order}
        for name in order:
            run = {"round": round_ + 1, "tree": name, **cpu[name], **load[name]}
            runs[name].append(run)
            print(json.dumps({key: run[key] for key in _run_keys(run)}), flush=True)
    n = len(runs["this"])
    print(f"\nbest of {n} alternated run(s) [range]; this = {imported_from(None)}")
    print(f"{'':38} {'this tree':>22} {'against':>22}   this/against")
    for figure, higher in _FIGURES:
        pick = max if higher else min
        best = {name: pick(run[figure] for run in runs[name]) for name in trees}
        cells = [f"{_num(best[name])} {_spread(runs[name], figure)}" for name in trees]
        better = "higher" if higher else "lower"
        print(
            f"{figure:38} {cells[0]:>22} {cells[1]:>22}   {best['this'] / best['against']:.3f}"
            f"  ({better} is better)"
        )


def _run_keys(run: dict[str, Any]) -> list[str]:
    keys = ["round", "tree", *(figure for figure, _ in _FIGURES), "sessions_acknowledged"]
    keys.append("requests_refused_retryable")
    return [*keys, "drain_s", "acknowledged_without_evaluation_span", "sidecar_spanjudge"]


def _num(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"


def _spread(results: list[dict[str, Any]], figure: str) -> str:
    values = sorted(r[figure] for r in results)
    return f"[{_num(values[0])}-{_num(values[-1])}]"


# --- flood: many one-span ended sessions in a few requests ---


def flood(args: argparse.Namespace, directory: str) -> dict[str, Any]:
    """``--flood-sessions`` one-span sessions in ``--flood-requests`` requests to a real serve,
    configured as the flood test does (`tests.support.load.flood_config`: idle 3 s, end grace
    0.2 s, tick 0.05 s): peak RSS of each process against the configured budgets, time to
    drain, evaluated/accepted, and whether a request right after the drain is taken.
    Goal: RSS within budget, everything evaluated, no refusal after the drain."""
    server, port, received = verdict_server()
    directory = tempfile.mkdtemp(dir=directory)
    max_open_bytes = args.flood_max_open_mb * 1024 * 1024
    settings = flood_config(
        Path(directory) / "flood.db",
        f"http://127.0.0.1:{port}",
        max_open_bytes=max_open_bytes,
        workers=args.workers,
    )
    proc, endpoints, log = _start_serve(settings, directory, "flood")
    try:
        pids = [proc.pid, *endpoints.get("workers", [])]
        baseline = {pid: rss_of(pid) for pid in pids}
        peak = dict(baseline)

        def measure() -> None:
            for pid in pids:
                peak[pid] = max(peak[pid], rss_of(pid))

        channel = grpc.insecure_channel(endpoints["grpc"])
        call = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
        per = args.flood_sessions // args.flood_requests
        refused = 0
        started = time.monotonic()
        for n in range(args.flood_requests):
            refused += send_retrying(call, flood_request(n * per, per), pause_s=0.5, before=measure)
        accepted = per * args.flood_requests
        sent_s = time.monotonic() - started
        while time.monotonic() - started < args.drain_s + sent_s:
            measure()
            if received.evaluated() >= accepted:
                break
            time.sleep(0.1)
        drain_s = time.monotonic() - started
        after = "accepted"
        for attempt in range(20):
            try:
                call(flood_request(10 * accepted + attempt, 1), timeout=30)
                after = "accepted" if attempt == 0 else f"accepted after {attempt} refusal(s)"
                break
            except grpc.RpcError as exc:
                after = f"{exc.code().name}: {exc.details()}"
                time.sleep(0.5)
        channel.close()
    finally:
        _stop_serve(proc, log, 120)
        server.stop(0)
    evaluated = received.evaluated()
    workers = max(1, len(pids) - 1)
    return {
        "sessions": accepted,
        "requests": args.flood_requests,
        "refused_retryable": refused,
        "seconds_to_send": round(sent_s, 1),
        "seconds_to_drain": round(drain_s, 1),
        "evaluated_vs_accepted": f"{evaluated}/{accepted}",
        "request_after_drain": after,
        "sessions_max_open_bytes": max_open_bytes,
        "peak_rss_mb_by_process": [round(peak[pid] / 2**20, 1) for pid in pids],
        "rss_growth_mb_by_process": [round((peak[pid] - baseline[pid]) / 2**20, 1) for pid in pids],
        "budget_share_mb_per_evaluation_process": round(max_open_bytes / workers / 2**20, 1),
        "goal": "growth within the share, everything evaluated, accepted after the drain",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--drain-s", type=float, default=120.0)
    parser.add_argument(
        "--sessions",
        type=int,
        default=None,
        help="the sustained loads send this many sessions (the same work for every tree and"
        " setting) instead of sending for --seconds",
    )
    parser.add_argument("--spans-per-session", type=int, default=6)
    parser.add_argument("--cpu-sessions", type=int, default=3000)
    parser.add_argument("--memory-sessions", type=int, default=4000)
    parser.add_argument("--workers", type=int, default=2, help="compared against 1")
    parser.add_argument(
        "--max-pending-age-s",
        type=float,
        default=None,
        help="serve.max_pending_age_s for the sustained loads (default: serve's own)",
    )
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="print (acknowledged, evaluated) sessions per second of each load on stderr",
    )
    parser.add_argument(
        "--load-only", action="store_true", help="only the sustained loads (1 and --workers)"
    )
    parser.add_argument(
        "--against",
        metavar="SRC",
        type=Path,
        help="another tree's src/: its serve alternates with this tree's (CPU per span, load)",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="with --against: rounds of both, alternating"
    )
    parser.add_argument("--flood", action="store_true", help="only the flood phase (see `flood`)")
    parser.add_argument("--flood-sessions", type=int, default=100_000)
    parser.add_argument("--flood-requests", type=int, default=4)
    parser.add_argument(
        "--flood-max-open-mb", type=int, default=256, help="sessions.max_open_bytes, in MiB"
    )
    args = parser.parse_args(argv)
    if args.flood:
        with tempfile.TemporaryDirectory() as directory:
            print(json.dumps({"flood": flood(args, directory)}, indent=2))
        return 0
    if args.against:
        with tempfile.TemporaryDirectory() as directory:
            against(args, directory)
        return 0
    with tempfile.TemporaryDirectory() as directory:
        results: dict[str, Any] = {}
        if not args.load_only:
            results["memory"] = memory(args)
            results["cpu_per_span"] = cpu_per_span(args, directory)
        one = sustained(args, directory, 1)
        several = sustained(args, directory, args.workers)
        results["sustained_load"] = several
        results["sustained_load_one_worker"] = one
        results[f"workers_{args.workers}_vs_1"] = {
            "judged_sessions_per_s_ratio": round(
                several["judged_sessions_per_s"] / max(one["judged_sessions_per_s"], 1e-9), 2
            ),
            "cpu_ms_per_session": [
                one["sidecar_cpu_ms_per_session"],
                several["sidecar_cpu_ms_per_session"],
            ],
            "evaluated_vs_accepted": [
                one["ratio_evaluated_vs_accepted"],
                several["ratio_evaluated_vs_accepted"],
            ],
            "goal": ">= 1.6x on a 2-core machine",
        }
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
