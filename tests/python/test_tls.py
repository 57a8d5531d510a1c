"""rediss:// against a real redis-server with --tls-port and certificates this
test makes with openssl: a single node, mutual TLS, a TLS Cluster, the
redis-py spelling of the parameters in Python, the CLI and Ruby; a wrong CA
and a plain-text port each give a clear error that names the URL without its
password, and on_error applies to them at run time."""

import os
import shutil
import subprocess
import time

import pytest

from conftest import ROOT, free_port, port_is_free, start_redis, stop_process, unique_prefix
from ratekeeper import ConfigurationError, Limiter, StorageError

PASSWORD = "tls-s3cret"


def openssl(*args: str, cwd) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(directory, name: str) -> None:
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=directory)


def make_cert(directory, name: str, ca: str) -> None:
    """A certificate for 127.0.0.1 and localhost, signed by `ca`."""
    (directory / f"{name}.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", cwd=directory)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
            "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=directory)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.fail("openssl is not installed: run scripts/setup-debian")
    directory = tmp_path_factory.mktemp("certs")
    make_ca(directory, "ca")
    make_ca(directory, "other-ca")
    make_cert(directory, "server", "ca")
    make_cert(directory, "client", "ca")
    return directory


def tls_args(certs, port: int, auth_clients: str) -> list:
    return ["--port", "0", "--tls-port", str(port), "--tls-cert-file", str(certs / "server.pem"),
            "--tls-key-file", str(certs / "server.key"), "--tls-ca-cert-file", str(certs / "ca.pem"),
            "--tls-auth-clients", auth_clients]


@pytest.fixture(scope="module")
def tls_redis(certs, tmp_path_factory):
    """(TLS port, plain-text port) of a password-protected Redis serving both."""
    tls_port, plain_port = free_port(), free_port()
    args = tls_args(certs, tls_port, "no")
    args[1] = str(plain_port)
    pid = start_redis(tmp_path_factory.mktemp("tls-redis"), *args, "--requirepass", PASSWORD)
    yield tls_port, plain_port
    stop_process(pid)


@pytest.fixture(scope="module")
def mtls_redis(certs, tmp_path_factory):
    """The TLS port of a Redis that asks every client for a certificate."""
    port = free_port()
    pid = start_redis(tmp_path_factory.mktemp("mtls-redis"), *tls_args(certs, port, "yes"))
    yield port
    stop_process(pid)


def url(port: int, certs, ca: str = "ca", password: bool = True, extra: str = "") -> str:
    auth = f":{PASSWORD}@" if password else ""
    return f"rediss://{auth}127.0.0.1:{port}/0?ssl_ca_certs={certs / (ca + '.pem')}{extra}"


def assert_exact(store_url: str) -> None:
    """Blocking and awaited checks over TLS, each limiting exactly."""
    import asyncio

    limiter = Limiter("3/minute", store_url, prefix=unique_prefix(), on_error="raise")
    outcomes = [limiter.check("k") for _ in range(5)]
    assert [d.allowed for d in outcomes] == [True, True, True, False, False]
    assert not any(d.degraded for d in outcomes)

    async def awaited() -> list:
        return [await limiter.acheck("a") for _ in range(5)]

    outcomes = asyncio.run(awaited())
    assert [d.allowed for d in outcomes] == [True, True, True, False, False]
    assert not any(d.degraded for d in outcomes)


def test_a_tls_redis_with_its_ca(tls_redis, certs):
    assert_exact(url(tls_redis[0], certs))


def test_certificates_unchecked_only_when_asked(tls_redis, certs):
    insecure = f"rediss://:{PASSWORD}@127.0.0.1:{tls_redis[0]}/0?ssl_cert_reqs=none"
    assert_exact(insecure)
    # the system's roots do not include the test CA: checked by default
    checked = Limiter("3/minute", f"rediss://:{PASSWORD}@127.0.0.1:{tls_redis[0]}/0", on_error="raise")
    with pytest.raises(StorageError, match="certificate"):
        checked.check("k")


def test_a_wrong_ca_names_the_url_without_its_password(tls_redis, certs):
    wrong = url(tls_redis[0], certs, ca="other-ca")
    with pytest.raises(StorageError) as raised:
        Limiter("3/minute", wrong, on_error="raise").check("k")
    message = str(raised.value)
    assert f"rediss://:***@127.0.0.1:{tls_redis[0]}/0" in message, message
    assert "ssl_ca_certs" in message and PASSWORD not in message, message
    assert PASSWORD not in repr(Limiter("3/minute", wrong))
    # on_error applies at run time
    allowed = Limiter("3/minute", wrong, on_error="allow").check("k")
    assert allowed.allowed and allowed.degraded
    denied = Limiter("3/minute", wrong, on_error="deny").check("k")
    assert not denied.allowed and denied.degraded


def test_a_plain_text_port_is_named(tls_redis, certs):
    plain = url(tls_redis[1], certs)
    started = time.monotonic()
    with pytest.raises(StorageError) as raised:
        Limiter("3/minute", plain, on_error="raise").check("k")
    message = str(raised.value)
    assert f"127.0.0.1:{tls_redis[1]}" in message and PASSWORD not in message, message
    assert "plain-text" in message or "TLS" in message, message
    assert time.monotonic() - started < 2


def test_mutual_tls(mtls_redis, certs):
    without = url(mtls_redis, certs, password=False)
    with pytest.raises(StorageError):
        Limiter("3/minute", without, on_error="raise").check("k")
    client = f"&ssl_certfile={certs / 'client.pem'}&ssl_keyfile={certs / 'client.key'}"
    assert_exact(url(mtls_redis, certs, password=False, extra=client))


def test_bad_tls_parameters_are_configuration_errors(certs):
    for bad, says in [
        (f"redis://:{PASSWORD}@127.0.0.1:1/0?ssl_ca_certs={certs / 'ca.pem'}", "rediss://"),
        (f"rediss://:{PASSWORD}@127.0.0.1:1/0?ssl_ca_certs=/no/such.pem", "cannot read ssl_ca_certs"),
        (f"rediss://:{PASSWORD}@127.0.0.1:1/0?ssl_certfile={certs / 'client.pem'}", "ssl_keyfile"),
    ]:
        with pytest.raises(ConfigurationError) as raised:
            Limiter("1/s", bad)
        assert says in str(raised.value) and PASSWORD not in str(raised.value), str(raised.value)


def test_the_cli_and_ruby_take_the_same_url(tls_redis, certs):
    store = url(tls_redis[0], certs)
    prefix = unique_prefix()
    cli = subprocess.run(["ratekeeper", "block", "user:7", "--reason", "tls", "--store", store, "--prefix", prefix],
                         capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    assert Limiter("3/minute", store, prefix=prefix, on_error="raise").check("user:7").blocked
    ruby = subprocess.run(
        ["ruby", "-e", "require 'ratekeeper'; l = Ratekeeper::Limiter.new('3/minute', store: ARGV[0], prefix: ARGV[1], "
                       "on_error: :raise); d = l.check('user:7'); puts d.blocked?; puts l.inspect",
         store, prefix],
        capture_output=True, text=True,
    )
    assert ruby.returncode == 0, ruby.stderr
    assert ruby.stdout.splitlines()[0] == "true"
    assert PASSWORD not in ruby.stdout


@pytest.fixture(scope="module")
def tls_cluster(certs, tmp_path_factory):
    """Three TLS-only Cluster masters (--tls-cluster yes)."""
    ports, pids = [], []
    while len(ports) < 3:
        port = free_port()
        if port_is_free(port + 10000):  # the cluster bus listens on port + 10000
            ports.append(port)
    try:
        for port in ports:
            pids.append(start_redis(tmp_path_factory.mktemp(f"tls-cluster-{port}"), *tls_args(certs, port, "no"),
                                    "--tls-cluster", "yes", "--cluster-enabled", "yes",
                                    "--cluster-config-file", f"nodes-{port}.conf", "--cluster-node-timeout", "2000"))
        subprocess.run(["redis-cli", "--tls", "--cacert", str(certs / "ca.pem"), "--cluster", "create",
                        *[f"127.0.0.1:{p}" for p in ports], "--cluster-yes"], check=True, capture_output=True)
        def ready(port: int) -> bool:
            info = subprocess.run(["redis-cli", "--tls", "--cacert", str(certs / "ca.pem"), "-p", str(port),
                                   "cluster", "info"], capture_output=True, text=True).stdout
            return "cluster_state:ok" in info and "cluster_known_nodes:3" in info

        for _ in range(150):
            if all(ready(port) for port in ports):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the TLS cluster did not become ready")
        yield ports
    finally:
        for pid in pids:
            stop_process(pid)


def test_a_tls_cluster(tls_cluster, certs):
    store = f"rediss+cluster://127.0.0.1:{tls_cluster[0]},127.0.0.1:{tls_cluster[1]}?ssl_ca_certs={certs / 'ca.pem'}"
    limiter = Limiter("2/minute", store, prefix=unique_prefix(), on_error="raise")
    # keys spread over every node's slots
    for key in [f"user:{i}" for i in range(20)]:
        assert [limiter.check(key).allowed for _ in range(3)] == [True, True, False], key

    async def awaited(key: str) -> list:
        return [(await limiter.acheck(key)).allowed for _ in range(3)]

    import asyncio

    for key in [f"async:{i}" for i in range(20)]:
        assert asyncio.run(awaited(key)) == [True, True, False], key
    wrong = store.replace("ca.pem", "other-ca.pem")
    with pytest.raises(StorageError):
        Limiter("2/minute", wrong, on_error="raise").check("k")
