"""Helpers of the edge tests: ratekeeper-server, the apps behind it (Django
under gunicorn, Rack under puma) and the proxies in front (nginx, Caddy),
each started on free loopback ports with the configuration README gives,
and stopped by its pid."""

import http.client
import importlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

import pytest

import documentation
from conftest import ROOT, free_port, wait_for_http

SERVER_BIN = os.environ.get("RATEKEEPER_SERVER", os.path.join(ROOT, "target", "release", "ratekeeper-server"))
SERVERS = os.path.join(ROOT, "tests", "python", "servers")
# the addresses README's recipes use, replaced by each test's own ports
README_SERVER, README_APP, README_PROXY = "127.0.0.1:8070", "127.0.0.1:8000", "8080"


def need(program: str) -> str:
    """The path of `program`; fails (CI) or skips the test when it is not installed."""
    found = program if os.path.isabs(program) and os.path.exists(program) else shutil.which(program)
    if found is None:
        why = f"{program} is not installed or built: run scripts/setup-debian and scripts/test"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return found


PROTOS = ["envoy/service/ratelimit/v3/rls.proto", "envoy/extensions/common/ratelimit/v3/ratelimit.proto",
          "envoy/config/core/v3/base.proto"]
_RLS: List[object] = []


def rls_modules(directory) -> Tuple[object, object, object]:
    """Envoy's rate limit service as grpcio generates it from the vendored
    protos (server/proto) into `directory`, once per run: (rls_pb2,
    rls_pb2_grpc, ratelimit_pb2). Fails (CI) or skips without grpcio-tools."""
    if not _RLS:
        try:
            import grpc_tools  # noqa: F401
        except ImportError:
            why = "grpcio-tools is not installed: run scripts/setup-debian"
            if os.environ.get("CI"):
                pytest.fail(why)
            pytest.skip(why)
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", os.path.join(ROOT, "server", "proto"),
                        f"--python_out={directory}", f"--grpc_python_out={directory}", *PROTOS], check=True)
        sys.path.insert(0, str(directory))
        try:
            _RLS.extend([importlib.import_module("envoy.service.ratelimit.v3.rls_pb2"),
                         importlib.import_module("envoy.service.ratelimit.v3.rls_pb2_grpc"),
                         importlib.import_module("envoy.extensions.common.ratelimit.v3.ratelimit_pb2")])
        finally:
            sys.path.remove(str(directory))
    return _RLS[0], _RLS[1], _RLS[2]


def request(port: int, path: str, headers: Optional[Dict[str, str]] = None, method: str = "GET",
            timeout: float = 10.0) -> Tuple[int, Dict[str, str], bytes]:
    """(status, headers by lower-case name, body) of one request to loopback `port`."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


class Process:
    """A process of a test's own, its output in a log file, stopped by its pid."""

    def __init__(self, args: List[str], log_path: str, env: Optional[Dict[str, str]] = None,
                 cwd: Optional[str] = None) -> None:
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen(args, env={**os.environ, **(env or {})}, cwd=cwd, stdout=self._log,
                                     stderr=subprocess.STDOUT)

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        with open(self.log_path) as f:
            return f.read()

    def wait(self, url: str, seconds: float = 20.0) -> None:
        """Waits until it answers at `url`; stops it (and fails, with its log) when it does not."""
        try:
            wait_for_http(url, seconds=seconds, process=self.proc)
        except BaseException:
            self.stop()
            pytest.fail(f"{self.proc.args[0]} did not come up: {self.log()[-2000:]}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> Optional[int]:
        """Stops it by its pid; its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


class EdgeServer(Process):
    """ratekeeper-server on a free port with `policy` (TOML) in `directory`."""

    def __init__(self, directory, policy: str, store: Optional[str] = None, grpc: bool = False,
                 env: Optional[Dict[str, str]] = None) -> None:
        self.port = free_port()
        self.grpc_port = free_port() if grpc else None
        self.policy_path = os.path.join(str(directory), f"policy-{self.port}.toml")
        self.write(policy)
        args = [need(SERVER_BIN), "--config", self.policy_path, "--listen", f"127.0.0.1:{self.port}"]
        if store:
            args += ["--store", store]
        if grpc:
            args += ["--grpc", f"127.0.0.1:{self.grpc_port}"]
        # the store is --store's or the file's, never the test run's $RATEKEEPER_STORE
        env = {**(env or {}), "RATEKEEPER_STORE": ""}
        super().__init__(args, os.path.join(str(directory), f"server-{self.port}.log"), env)
        self.wait(f"http://127.0.0.1:{self.port}/healthz")

    def write(self, policy: str) -> None:
        with open(self.policy_path, "w") as f:
            f.write(policy)

    def hangup(self) -> None:
        """SIGHUP: read the policy file again."""
        self.proc.send_signal(signal.SIGHUP)

    def metrics(self) -> Dict[str, float]:
        """/metrics as {"name{labels}": value}."""
        status, _, body = request(self.port, "/metrics")
        assert status == 200
        out = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def asked(self) -> float:
        """Forward-auth requests the server answered, through any door."""
        return sum(v for k, v in self.metrics().items() if k.startswith("ratekeeper_server_requests_total"))


def gunicorn_django(directory, door: str, store: str, prefix: str, rules: str = "5/minute",
                    policy: str = "", probe: str = "/warm") -> Tuple[Process, int]:
    """The edge Django app (servers/edge_django.py) under gunicorn, 2
    workers, up once `probe` answers."""
    port = free_port()
    env = {"EDGE_DOOR": door, "EDGE_RULES": rules, "RATEKEEPER_STORE": store, "RATEKEEPER_PREFIX": prefix,
           "EDGE_POLICY": policy}
    app = Process([sys.executable, "-m", "gunicorn", "-w", "2", "-b", f"127.0.0.1:{port}", "--chdir", SERVERS,
                   "--log-level", "warning", "edge_django:app"],
                  os.path.join(str(directory), f"django-{door}-{port}.log"), env)
    app.wait(f"http://127.0.0.1:{port}{probe}")
    return app, port


def puma_rack(directory, door: str, store: str, prefix: str, rules: str = "5/minute",
              policy: str = "", probe: str = "/warm", workers: int = 2,
              app: str = os.path.join(SERVERS, "edge_rack.ru")) -> Tuple[Process, int]:
    """The edge Rack app (servers/edge_rack.ru, or `app`) under puma,
    `workers` workers (0: puma's single mode), up once `probe` answers."""
    port = free_port()
    env = {"EDGE_DOOR": door, "EDGE_RULES": rules, "RATEKEEPER_STORE": store, "RATEKEEPER_PREFIX": prefix,
           "EDGE_POLICY": policy}
    process = Process([need("puma"), "-w", str(workers), "-b", f"tcp://127.0.0.1:{port}", "--quiet", app],
                      os.path.join(str(directory), f"rack-{door}-{port}.log"), env, cwd=SERVERS)
    process.wait(f"http://127.0.0.1:{port}{probe}", seconds=40)
    return process, port


def readme_block(name: str) -> str:
    """The code block the documentation marks with <!-- edge-NAME -->."""
    text = documentation.text()
    found = re.search(rf"<!-- edge-{name} -->\s*```[a-z]*\n(.*?)```", text, re.S)
    assert found, f"the documentation has no <!-- edge-{name} --> block"
    return found.group(1)


def with_ports(text: str, server: int, app: int, proxy: int) -> str:
    """README's recipe with a test's ports in place of README's."""
    assert README_SERVER in text and README_APP in text and README_PROXY in text
    return (text.replace(README_SERVER, f"127.0.0.1:{server}").replace(README_APP, f"127.0.0.1:{app}")
            .replace(f":{README_PROXY}", f":{proxy}").replace(f"listen {README_PROXY}", f"listen 127.0.0.1:{proxy}"))


def nginx(directory, server: int, app: Optional[int], behind_proxy: bool = False) -> Tuple[Process, int]:
    """nginx in front of `app`, asking ratekeeper-server on `server`, with
    README's server block as it is; `app` None: nginx answers "ok" as the
    app itself. `behind_proxy`: the client's X-Forwarded-For is passed on
    with the peer appended ($proxy_add_x_forwarded_for), and X-Plan as it
    came, as an nginx behind a load balancer that sets both passes them."""
    binary = need("nginx")
    proxy = free_port()
    root = os.path.join(str(directory), f"nginx-{proxy}")
    os.makedirs(os.path.join(root, "logs"), exist_ok=True)
    user = "user root;\n" if os.geteuid() == 0 else ""
    app_port = app or free_port()
    block = with_ports(readme_block("nginx"), server, app_port, proxy)
    if app is None:
        block += f'server {{\n listen 127.0.0.1:{app_port};\n location / {{ return 200 "ok"; }}\n}}\n'
    if behind_proxy:  # the load balancer in front is trusted: it names the client and sets the tier
        assert "X-Forwarded-For $remote_addr;" in block and 'X-Plan "";' in block
        block = block.replace("X-Forwarded-For $remote_addr;", "X-Forwarded-For $proxy_add_x_forwarded_for;")
        block = block.replace('X-Plan "";', "X-Plan $http_x_plan;")
    conf = (f"{user}worker_processes 1;\nerror_log {root}/logs/error.log warn;\npid {root}/nginx.pid;\n"
            "events { worker_connections 256; }\n"
            f"http {{\n access_log off;\n client_body_temp_path {root}/body;\n proxy_temp_path {root}/proxy;\n"
            f" fastcgi_temp_path {root}/fastcgi;\n uwsgi_temp_path {root}/uwsgi;\n scgi_temp_path {root}/scgi;\n"
            + block + "}\n")
    path = os.path.join(root, "nginx.conf")
    with open(path, "w") as f:
        f.write(conf)
    process = Process([binary, "-p", root, "-c", path, "-g", "daemon off;"], os.path.join(root, "out.log"))
    process.wait(f"http://127.0.0.1:{proxy}/health")
    return process, proxy


def caddy(directory, server: int, app: int) -> Tuple[Process, int]:
    """Caddy in front of `app`, asking ratekeeper-server on `server`, with
    README's Caddyfile as it is (admin endpoint off)."""
    binary = need("caddy")
    proxy = free_port()
    root = os.path.join(str(directory), f"caddy-{proxy}")
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, "Caddyfile")
    with open(path, "w") as f:
        f.write("{\n\tadmin off\n}\n" + with_ports(readme_block("caddy"), server, app, proxy))
    env = {"HOME": root, "XDG_DATA_HOME": root, "XDG_CONFIG_HOME": root}
    process = Process([binary, "run", "--config", path, "--adapter", "caddyfile"], os.path.join(root, "out.log"), env)
    process.wait(f"http://127.0.0.1:{proxy}/health")
    return process, proxy


def stop_all(*processes: Process) -> None:
    for process in processes:
        process.stop()


def wait_until(predicate, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False
