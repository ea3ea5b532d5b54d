"""The extender process under a short burst of abuse (tests/scheduler/abuse.py has the
long command): it stays alive, keeps answering valid filter requests correctly, refuses
oversized bodies with 413 before reading them, malformed ones with 400, chunked ones
with 411, and cuts a slowloris client."""

from __future__ import annotations

import json

import pytest

from tests.scheduler import abuse


@pytest.fixture
def extender(tmp_path):
    ext = abuse.start_extender(tmp_path, request_timeout=2.0, max_body=2 * 2**20)
    try:
        yield ext
    finally:
        ext.stop()


def test_extender_survives_abuse_and_keeps_answering(extender):
    port = extender.port
    status, body = abuse.request(port, "POST", "/filter", json.dumps(abuse.VALID_ARGS).encode())
    assert abuse.valid_answer_ok(status, body)

    # each refusal carries an Error body kube-scheduler's extender client reports
    status, body = abuse.request(port, "POST", "/filter", b'{"Pod": ')
    assert status == 400 and "not JSON" in json.loads(body)["Error"]
    status, body = abuse.request(port, "POST", "/prioritize", json.dumps({"Nodes": {"items": [1]}}).encode())
    assert status == 400 and "metadata.name" in json.loads(body)["Error"]
    assert abuse.ten_megabytes(port, None) == 413  # 10 MB against a 2 MiB limit: refused, not read
    assert abuse.no_length(port, None) == 411
    status, body = abuse.request(port, "POST", "/nope", b"{}")
    assert status == 404

    rep = abuse.abuse(
        extender, 60, workers=4, seed=1, kinds={k: v for k, v in abuse.KINDS.items() if k != "idle_flood_200"}
    )
    print("\n".join(rep.lines()))
    assert not rep.crashed and extender.alive()
    assert rep.statuses["slowloris"] == {-1: rep.sent["slowloris"]}  # every slow client was cut
    assert set(rep.statuses["10MB_body"]) == {413}
    assert rep.valid_wrong == 0 and len(rep.valid_ms) > 0
    status, body = abuse.request(port, "POST", "/filter", json.dumps(abuse.VALID_ARGS).encode())
    assert abuse.valid_answer_ok(status, body)
    assert abuse.request(port, "GET", "/healthz")[0] == 200
