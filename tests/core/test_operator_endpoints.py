"""The operator's endpoints against real Daphnes: /metrics and what /readyz found are served with
the scrape token or straight from an allowed address, never through a proxy's headers; everyone
else gets /readyz's status alone (no error text) and no metrics. Tests connect from 127.0.0.1
and, as a second machine would, from 127.0.0.2 (Linux routes all of 127/8 to loopback)."""

import httpx
from axes.models import AccessAttempt

from ops.servers import free_port
from tests.conftest import LiveServer

ELSEWHERE = "127.0.0.2"
TOKEN = "scrape-4f9c2d7e1b8a6053c9e2f1d4a7b0c3e6"


def client(server, address: str | None = None, **kwargs) -> httpx.Client:
    transport = httpx.HTTPTransport(local_address=address) if address else None
    return httpx.Client(base_url=server.url, timeout=20, transport=transport, **kwargs)


def assert_metrics(response) -> None:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    assert "parley_sockets_open" in response.text and "process_resident_memory" in response.text


def test_metrics_and_readiness_details_from_an_allowed_address_only(make_server, people):
    server = make_server(PARLEY_METRICS_ALLOW=ELSEWHERE)
    with client(server) as outsider:
        refused = outsider.get("/metrics")
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "forbidden"
        assert "parley_" not in refused.text
        ready = outsider.get("/readyz")
        assert ready.status_code == 200 and ready.json() == {"status": "ready"}
        assert "no-cache" in ready.headers["cache-control"]
        assert outsider.get("/healthz").json() == {"status": "ok"}
        # A login to Parley is no key to the operator's endpoints.
        assert outsider.get("/metrics", headers=people.alice.headers).status_code == 403
    with client(server, ELSEWHERE) as operator:
        assert_metrics(operator.get("/metrics"))
        assert operator.get("/readyz").json() == {
            "status": "ready",
            "checks": {"database": "ok", "channel_layer": "ok"},
        }


def test_loopback_is_allowed_by_default_but_not_through_a_proxy(server):
    with client(server) as local, client(server, ELSEWHERE) as also_local:
        assert_metrics(local.get("/metrics"))
        assert_metrics(also_local.get("/metrics"))
        for header in ("X-Forwarded-For", "X-Real-IP", "Forwarded", "X-Forwarded-Proto"):
            value = "https" if header == "X-Forwarded-Proto" else "127.0.0.1"
            forwarded = local.get("/metrics", headers={header: value})
            assert forwarded.status_code == 403, header
            assert local.get("/readyz", headers={header: value}).json() == {"status": "ready"}


def test_daphnes_proxy_headers_cannot_pass_for_an_allowed_address(make_server, people):
    """With --proxy-headers, Daphne takes the client's address from X-Forwarded-For, which a
    client can write: the request still came through a proxy, so it is not the operator's. The
    login locks count the forwarded address, as they should behind a proxy."""
    server = make_server(PARLEY_METRICS_ALLOW="127.0.0.1", daphne_args=("--proxy-headers",))
    with client(server, ELSEWHERE) as outsider:
        posing = outsider.get("/metrics", headers={"X-Forwarded-For": "127.0.0.1"})
        assert posing.status_code == 403
        assert outsider.get("/readyz", headers={"X-Forwarded-For": "127.0.0.1"}).json() == {
            "status": "ready"
        }
        wrong = outsider.get(
            "/api/workspaces/",
            headers={"Authorization": "Token nope", "X-Forwarded-For": "203.0.113.7"},
        )
        assert wrong.status_code == 401
    assert list(AccessAttempt.objects.values_list("ip_address", flat=True)) == ["203.0.113.7"]


def test_the_scrape_token_opens_the_details_and_wrong_ones_lock_the_address(make_server):
    server = make_server(
        PARLEY_METRICS_TOKEN=TOKEN, PARLEY_METRICS_ALLOW="", PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT="3"
    )
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    with client(server) as local:
        # Token only: not even loopback is enough.
        missing = local.get("/metrics")
        assert missing.status_code == 401
        assert missing.headers["WWW-Authenticate"] == 'Bearer realm="metrics"'
        assert missing.json()["error"]["code"] == "not_authenticated"
        assert local.get("/readyz").json() == {"status": "ready"}
        assert_metrics(local.get("/metrics", headers=bearer))
        assert local.get("/readyz", headers=bearer).json()["checks"] == {
            "database": "ok",
            "channel_layer": "ok",
        }
    with client(server, ELSEWHERE) as guesser:
        wrong = {"Authorization": "Bearer scrape-guess"}
        assert guesser.get("/metrics", headers=wrong).status_code == 401
        assert guesser.get("/readyz", headers=wrong).json() == {"status": "ready"}
        locked = guesser.get("/metrics", headers=wrong)
        assert locked.status_code == 429 and locked.json()["error"]["code"] == "locked_out"
        assert int(locked.headers["Retry-After"]) > 0
        # Locked: the right token from that address is refused too, unchecked.
        assert guesser.get("/metrics", headers=bearer).status_code == 429
        assert guesser.get("/readyz", headers=bearer).json() == {"status": "ready"}
    with client(server) as local:
        assert_metrics(local.get("/metrics", headers=bearer))


def test_readiness_tells_what_failed_to_the_operator_only(transactional_db, tmp_path):
    # Not through make_server: with its Redis away the server rightly logs errors.
    live = LiveServer(
        tmp_path / "daphne.log",
        {"REDIS_URL": f"redis://127.0.0.1:{free_port()}/0", "PARLEY_METRICS_ALLOW": ELSEWHERE},
    )
    try:
        with client(live) as outsider:
            hidden = outsider.get("/readyz")
        with client(live, ELSEWHERE) as operator:
            told = operator.get("/readyz")
    finally:
        live.stop()
    assert hidden.status_code == 503 and hidden.json() == {"status": "unavailable"}
    assert told.status_code == 503
    assert told.json()["checks"]["channel_layer"].startswith("ConnectionError: "), told.text
