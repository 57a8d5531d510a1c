"""ratekeeper-server as Envoy's rate limit service, asked by a gRPC client
that grpcio generates from the same vendored protos (server/proto):
descriptors, hits_addend, OVER_LIMIT, statuses, headers, listed addresses,
malformed requests. The quota is the one the apps and the HTTP door share."""

import time

import pytest

from conftest import unique_prefix
from edge import EdgeServer, request, rls_modules
from ratekeeper import Admin, Limiter

POLICY = """
[store]
prefix = "{prefix}"
[[throttle]]
scope = "api"
rules = "5/minute"
key = "header:X-Api-Key"
envoy = {{ domain = "edge", key = "api_key", match = {{ generic_key = "api" }} }}
[[throttle]]
scope = "per-ip"
rules = "2/second; 3/10s"
envoy = {{ domain = "edge", key = "remote_address" }}
"""


@pytest.fixture(scope="module")
def rls(tmp_path_factory):
    """The generated modules: (rls_pb2, rls_pb2_grpc, ratelimit_pb2)."""
    return rls_modules(tmp_path_factory.mktemp("rls"))


@pytest.fixture
def served(tmp_path, redis_url):
    prefix = unique_prefix()
    server = EdgeServer(tmp_path, POLICY.format(prefix=prefix), store=redis_url, grpc=True)
    yield server, prefix
    assert server.stop() == 0, server.log()


def descriptor(ratelimit_pb2, *entries, hits=None):
    d = ratelimit_pb2.RateLimitDescriptor(entries=[ratelimit_pb2.RateLimitDescriptor.Entry(key=k, value=v)
                                                   for k, v in entries])
    if hits is not None:
        d.hits_addend.value = hits
    return d


def test_descriptors_select_throttles_and_count_hits(rls, served, redis_url):
    import grpc

    rls_pb2, rls_grpc, ratelimit_pb2 = rls
    server, prefix = served
    code = rls_pb2.RateLimitResponse.Code
    unit = rls_pb2.RateLimitResponse.RateLimit.Unit
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = rls_grpc.RateLimitServiceStub(channel)
        api = descriptor(ratelimit_pb2, ("generic_key", "api"), ("api_key", "key-1"))
        unmatched = descriptor(ratelimit_pb2, ("generic_key", "other"), ("api_key", "key-1"))
        first = stub.ShouldRateLimit(rls_pb2.RateLimitRequest(domain="edge", descriptors=[api, unmatched],
                                                              hits_addend=2))
        assert first.overall_code == code.OK
        assert len(first.statuses) == 2
        s = first.statuses[0]
        assert (s.code, s.current_limit.requests_per_unit, s.current_limit.unit, s.limit_remaining) == \
            (code.OK, 5, unit.MINUTE, 3), "hits_addend 2 is the cost"
        assert s.current_limit.name == "api 5/1m" and 59 <= s.duration_until_reset.seconds <= 60
        assert first.statuses[1].code == code.OK and not first.statuses[1].HasField("current_limit"), \
            "a descriptor no throttle selects is OK, unlimited"
        headers = {h.key: h.value for h in first.response_headers_to_add}
        assert headers["X-RateLimit-Remaining"] == "3" and headers["RateLimit-Policy"] == '"1m";q=5;w=60'
        # the quota is the one a Limiter of scope "api" shares (the apps' door)
        shared = Limiter("5/minute", redis_url, prefix=prefix, scope="api")
        assert shared.check("key-1").remaining == 2
        # a descriptor's own hits_addend wins over the request's: 3 do not fit in 2
        over = stub.ShouldRateLimit(rls_pb2.RateLimitRequest(
            domain="edge", descriptors=[descriptor(ratelimit_pb2, ("generic_key", "api"), ("api_key", "key-1"),
                                                   hits=3)], hits_addend=1))
        assert over.overall_code == code.OVER_LIMIT and over.statuses[0].code == code.OVER_LIMIT
        assert over.statuses[0].limit_remaining == 2
        headers = {h.key: h.value for h in over.response_headers_to_add}
        assert int(headers["Retry-After"]) >= 1
        assert over.raw_body == f'{{"error":"rate_limited","retry_after":{headers["Retry-After"]}}}'.encode()
        one = stub.ShouldRateLimit(rls_pb2.RateLimitRequest(domain="edge", descriptors=[api]))
        assert one.overall_code == code.OK and one.statuses[0].limit_remaining == 1, "hits_addend unset is 1"
        # an unknown domain selects nothing
        other = stub.ShouldRateLimit(rls_pb2.RateLimitRequest(domain="nope", descriptors=[api]))
        assert other.overall_code == code.OK


def test_remote_address_limits_and_listings(rls, served, redis_url):
    import grpc

    rls_pb2, rls_grpc, ratelimit_pb2 = rls
    server, prefix = served
    code = rls_pb2.RateLimitResponse.Code
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = rls_grpc.RateLimitServiceStub(channel)
        ip = rls_pb2.RateLimitRequest(domain="edge", descriptors=[
            descriptor(ratelimit_pb2, ("remote_address", "198.51.100.7"))])
        codes = [stub.ShouldRateLimit(ip).overall_code for _ in range(3)]
        assert codes == [code.OK, code.OK, code.OVER_LIMIT]
        limits = stub.ShouldRateLimit(ip).statuses[0]
        assert limits.current_limit.unit == rls_pb2.RateLimitResponse.RateLimit.Unit.SECOND
        Admin(redis_url, prefix=prefix).block("198.51.100.8", ttl=60, reason="test")
        blocked_ip = rls_pb2.RateLimitRequest(domain="edge", descriptors=[
            descriptor(ratelimit_pb2, ("remote_address", "198.51.100.8")),
            descriptor(ratelimit_pb2, ("generic_key", "api"), ("api_key", "k"), ("remote_address", "198.51.100.8"))])
        for _ in range(100):  # the server reads the address lists again within 2 s
            answer = stub.ShouldRateLimit(blocked_ip)
            if answer.raw_body == b'{"error":"blocked"}':
                break
            time.sleep(0.1)
        assert [s.code for s in answer.statuses] == [code.OVER_LIMIT] * 2
        assert answer.raw_body == b'{"error":"blocked"}'


def test_malformed_requests_get_clear_errors_and_the_server_stays_up(rls, served):
    import grpc

    rls_pb2, rls_grpc, ratelimit_pb2 = rls
    server, _ = served
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = rls_grpc.RateLimitServiceStub(channel)
        for req, words in [
            (rls_pb2.RateLimitRequest(domain="", descriptors=[descriptor(ratelimit_pb2, ("a", "b"))]), "domain"),
            (rls_pb2.RateLimitRequest(domain="edge"), "descriptors"),
            (rls_pb2.RateLimitRequest(domain="edge", descriptors=[descriptor(ratelimit_pb2)]), "descriptor 0"),
            (rls_pb2.RateLimitRequest(domain="edge", descriptors=[descriptor(ratelimit_pb2, ("", "v"))]),
             "empty key"),
        ]:
            with pytest.raises(grpc.RpcError) as error:
                stub.ShouldRateLimit(req)
            assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT and words in error.value.details()
        garbage = channel.unary_unary("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
        with pytest.raises(grpc.RpcError) as error:
            garbage(b"\xff\xff\xff\x0f not a message")
        assert error.value.code() == grpc.StatusCode.INTERNAL and "decode" in error.value.details()
        unknown = channel.unary_unary("/envoy.service.ratelimit.v3.RateLimitService/Nope")
        with pytest.raises(grpc.RpcError) as error:
            unknown(b"")
        assert error.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert request(server.port, "/healthz")[0] == 200
    assert server.metrics()['ratekeeper_server_requests_total{door="envoy",answer="bad_request"}'] == 4
