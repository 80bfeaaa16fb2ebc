"""Progress reports to Kubeflow Trainer's status server (trainer/trainjob_status.py), sent to a real
HTTPS server with its own CA and checked against the TrainJob CRD's schema of status.trainerStatus;
then the failure paths (refused, unreachable, hung, untrusted): training never waits, one warning."""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.support import procs
from tests.support.paths import CRDS_DIR
from trainer import trainjob_status

PATH = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/job/status"


def trainer_status_schema() -> dict:
    """status.trainerStatus of the TrainJob CRD the test clusters install."""
    crd = yaml.safe_load((CRDS_DIR / "trainer.kubeflow.org_trainjobs.yaml").read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"][
        "trainerStatus"]


def make_cert(directory: Path, name: str) -> tuple[Path, Path, Path]:
    """A CA of its own and a server certificate for 127.0.0.1 signed by it: (ca, cert, key)."""
    ca, key, cert = directory / f"{name}-ca.crt", directory / f"{name}.key", directory / f"{name}.crt"
    run = lambda *args: subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)  # noqa: E731
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
        "-subj", f"/CN={name}-ca", "-keyout", directory / f"{name}-ca.key", "-out", ca)
    run("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=server",
        "-keyout", key, "-out", directory / f"{name}.csr")
    ext = directory / f"{name}.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", directory / f"{name}.csr", "-CA", ca, "-CAkey", directory / f"{name}-ca.key",
        "-CAcreateserial", "-days", "1", "-extfile", ext, "-out", cert)
    return ca, cert, key


class StatusServer:
    """An HTTPS server at the status path: records each request (time, token, body); `mode` picks
    the answer: "ok" (200 and the body back, as Trainer's server), "forbidden" (403 and a Status
    object) or "hang" (no answer)."""

    def __init__(self, cert: Path, key: Path, mode: str = "ok"):
        self.mode, self.requests, self.release, self.sent = mode, [], threading.Event(), 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append((time.monotonic(), self.path, self.headers["Authorization"], json.loads(body)))
                if outer.mode == "hang":
                    outer.release.wait(30)
                    return
                if outer.mode == "huge":  # 1.5 GB announced, streamed for as long as the client reads
                    self.send_response(200)
                    self.send_header("Content-Length", str(1_500_000_000))
                    self.end_headers()
                    chunk = b" " * (1 << 20)
                    try:
                        while outer.sent < 1_500_000_000:
                            self.wfile.write(chunk)
                            outer.sent += len(chunk)
                    except OSError:
                        pass
                    return
                if outer.mode == "long-message":
                    answer = json.dumps({"kind": "Status", "code": 422, "message": "line one\nline two " * 250_000})
                    self.send_response(422)
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    try:
                        self.wfile.write(answer.encode())
                    except OSError:  # the client read what it wanted and closed
                        pass
                    return
                code, answer = (200, body) if outer.mode == "ok" else (403, json.dumps(
                    {"kind": "Status", "status": "Failure", "message": "Forbidden", "code": 403}).encode())
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}{PATH}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("certs")
    return make_cert(directory, "trusted"), make_cert(directory, "other")


@pytest.fixture
def server(certs, request):
    (_, cert, key), _ = certs
    srv = StatusServer(cert, key, getattr(request, "param", "ok"))
    yield srv
    srv.close()


@pytest.fixture
def token(tmp_path) -> Path:
    path = tmp_path / "token"
    path.write_text("token-1\n")
    return path


def reporter_to(url: str, ca: Path, token: Path, lines: list, **kw) -> trainjob_status.Reporter:
    """A reporter, not started yet (its first report comes one interval after start())."""
    return trainjob_status.Reporter(url, str(ca), str(token), lines.append, **kw)


def wait_for(what, probe, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class Clock:
    """The reporter's clock: a_run advances it by one second per step."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def a_run(reporter, steps=range(10, 60, 10), clock: Clock | None = None):
    """The records and steps a run's first part gives the reporter (100 steps in all)."""
    reporter.observe({"event": "start", "step": 0, "total_steps": 100})
    for step in steps:
        if clock:
            clock.now = 1000.0 + step
        reporter.stepped(step)
        reporter.observe({"event": "step", "epoch": 1, "step": step, "loss": 2.0 / step})
        time.sleep(0.01)
    reporter.observe({"event": "epoch", "epoch": 1, "step": 50, "loss": 0.5, "test_accuracy": 0.91234,
                      "examples_per_second": 1234.5})


def test_progress_remaining_time_and_metrics_reach_the_server(server, certs, token):
    (ca, _, _), _ = certs
    lines = []
    interval, clock = 0.4, Clock()
    reporter = reporter_to(server.url, ca, token, lines, interval=interval, clock=clock)
    a_run(reporter, clock=clock)
    reporter.start()
    wait_for("a report", lambda: server.requests)
    token.write_text("token-2\n")  # the projected token rotates: the next report reads the new one
    reporter.stepped(60)
    wait_for("a report with the rotated token", lambda: server.requests[-1][2] == "Bearer token-2")
    reporter.observe({"event": "end", "step": 100})
    started = time.monotonic()
    reporter.close()
    assert time.monotonic() - started < 2  # the last report goes out at once

    times = [r[0] for r in server.requests]
    assert {r[1] for r in server.requests} == {PATH}
    assert server.requests[0][2] == "Bearer token-1"
    assert all(b - a >= interval * 0.95 for a, b in zip(times, times[1:-1])), times  # the rate (the last is at once)
    schema = trainer_status_schema()
    for *_, body in server.requests:
        assert set(body) == {"trainerStatus"}
        jsonschema.validate(body["trainerStatus"], schema)
        datetime.strptime(body["trainerStatus"]["lastUpdatedTime"], "%Y-%m-%dT%H:%M:%SZ")
    first = server.requests[0][3]["trainerStatus"]
    assert first["progressPercentage"] == 50
    assert first["estimatedRemainingSeconds"] == 50  # 40 steps in 40 s since the first chunk, 50 to go
    assert {m["name"]: m["value"] for m in first["metrics"]} == {  # the loss: the last logged step's
        "epoch": "1", "loss": "0.0400", "test_accuracy": "0.9123", "examples_per_second": "1234"}
    last = server.requests[-1][3]["trainerStatus"]
    assert (last["progressPercentage"], last["estimatedRemainingSeconds"]) == (100, 0)
    assert lines == []


def test_nothing_is_sent_while_nothing_changes(server, certs, token):
    (ca, _, _), _ = certs
    reporter = reporter_to(server.url, ca, token, [], interval=0.1)
    a_run(reporter)
    reporter.start()
    wait_for("a report", lambda: server.requests)
    time.sleep(0.5)
    assert len(server.requests) == 1
    reporter.close()
    assert len(server.requests) == 1


def test_without_the_runtimes_variables_nothing_reports(server, certs, token):
    (ca, _, _), _ = certs
    env = {trainjob_status.ENV_URL: server.url, trainjob_status.ENV_CA_CERT: str(ca),
           trainjob_status.ENV_TOKEN: str(token)}
    for missing in env:
        assert trainjob_status.from_env(print, {k: v for k, v in env.items() if k != missing}) is None
    lines = []
    reporter = trainjob_status.from_env(lines.append, env)
    assert reporter is not None and lines == [f"TrainJob status: reporting progress to {server.url} every 5 s"]
    reporter.close()


@pytest.mark.parametrize("server", ["forbidden"], indirect=True)
def test_a_refusing_server_is_one_warning_and_training_goes_on(server, certs, token):
    reporter, lines = a_running_reporter(server, certs, token)
    wait_for("three refused reports", lambda: len(server.requests) >= 3)
    reporter.stepped(70)
    reporter.observe({"event": "end", "step": 100})
    reporter.close()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"warning: TrainJob status not reported to {server.url} (HTTP 403: Forbidden)")


def a_running_reporter(server, certs, token) -> tuple[trainjob_status.Reporter, list]:
    """A started reporter of a run, reporting every 0.1 s, and the lines it logs."""
    (ca, _, _), _ = certs
    lines = []
    reporter = reporter_to(server.url, ca, token, lines, interval=0.1)
    a_run(reporter)
    reporter.start()
    return reporter, lines


@pytest.mark.parametrize("server", ["huge"], indirect=True)
def test_a_huge_reply_is_not_read_whole(server, certs, token):
    reporter, lines = a_running_reporter(server, certs, token)
    wait_for("a report", lambda: server.requests, timeout=30)
    reporter.stepped(70)
    wait_for("the next report, once the first reply was done with", lambda: len(server.requests) >= 2, timeout=30)
    reporter.close()
    assert lines == [] and server.sent < 64 << 20, (lines, server.sent)  # a bounded part, then the connection closed


@pytest.mark.parametrize("server", ["long-message"], indirect=True)
def test_a_servers_long_message_is_one_short_line(server, certs, token):
    reporter, lines = a_running_reporter(server, certs, token)
    wait_for("a refused report", lambda: lines)
    reporter.close()
    assert len(lines) == 1 and "\n" not in lines[0] and len(lines[0]) < 600, lines[0][:1000]
    assert '(HTTP 422: {"kind": "Status", "code": 422, "message": "line one\\nline two' in lines[0], lines[0][:300]


@pytest.mark.parametrize("server", ["hang"], indirect=True)
def test_a_hung_server_never_stalls_the_step_loop(server, certs, token):
    (ca, _, _), _ = certs
    lines = []
    reporter = reporter_to(server.url, ca, token, lines, interval=0.1, timeout=3)
    a_run(reporter)
    reporter.start()
    wait_for("a report in flight", lambda: server.requests)
    started = time.monotonic()
    for step in range(51, 100):
        reporter.stepped(step)
        reporter.observe({"event": "step", "epoch": 1, "step": step, "loss": 0.1})
    assert time.monotonic() - started < 1.5  # 49 steps while a report hangs 3 s: no waiting
    wait_for("the timeout's warning", lambda: lines, timeout=15)
    reporter.observe({"event": "end", "step": 100})
    started = time.monotonic()
    reporter.close()
    assert time.monotonic() - started < 1.5  # a failing server: close() does not wait out its 3 s
    assert len(lines) == 1 and "timed out" in lines[0], lines


def test_an_unreachable_or_untrusted_server_is_one_warning(server, certs, token):
    (_, _, _), (other_ca, _, _) = certs
    closed = f"https://127.0.0.1:{procs.free_port()}{PATH}"
    for url, ca, reason in [(closed, certs[0][0], "Connection refused"),
                            (server.url, other_ca, "CERTIFICATE_VERIFY_FAILED")]:
        lines = []
        reporter = reporter_to(url, ca, token, lines, interval=0.1)
        a_run(reporter)
        reporter.start()
        wait_for("the warning", lambda: lines)
        time.sleep(0.3)  # more failed reports, no more lines
        reporter.close()
        assert len(lines) == 1 and reason in lines[0], lines
    assert server.requests == []  # an untrusted server is sent nothing


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_training_process_0_reports_its_run(server, certs, tmp_path, token):
    """A real run with the runtime's three variables: process 0 reports, and its last report says
    the run is complete, with the final epoch's figures."""
    (ca, _, _), _ = certs
    env = {trainjob_status.ENV_URL: server.url, trainjob_status.ENV_CA_CERT: str(ca),
           trainjob_status.ENV_TOKEN: str(token)}
    # No metrics endpoint: the default port is this host's, which another run may hold (a warning line)
    proc = procs.start(procs.trainer_argv(*procs.small_train_args(tmp_path, "--metrics-port", "0")),
                       tmp_path / "train.log", env)
    try:
        assert proc.popen.wait(200) == 0, proc.output
    finally:
        procs.kill(proc)
    assert f"TrainJob status: reporting progress to {server.url}" in proc.output
    assert "warning" not in proc.output, proc.output
    last = server.requests[-1][3]["trainerStatus"]
    jsonschema.validate(last, trainer_status_schema())
    assert (last["progressPercentage"], last["estimatedRemainingSeconds"]) == (100, 0)
    metrics = {m["name"]: m["value"] for m in last["metrics"]}
    accuracy = json.loads((procs.outputs_of(tmp_path) / "summary.json").read_text())["test_accuracy"]
    assert metrics["test_accuracy"] == f"{accuracy:.4f}" and metrics["epoch"] == "1"
