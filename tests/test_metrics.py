"""GET /metrics: off by default, open, or behind a token; after a known mix of requests the
counts are there, and the text parses with prometheus_client's own parser."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import cast

import pytest
from prometheus_client.parser import text_string_to_metric_families

from graphsvc.accounts import tokens
from graphsvc.api.answers import AnswerCache
from graphsvc.api.metrics import Metrics
from graphsvc.store.db import Database
from tests.conftest import Env

AGG = "/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_metrics_are_off_by_default(env: Env) -> None:
    response = env.request("GET", "/metrics")
    assert response.status_code == 404 and "GRAPHSVC_METRICS" in response.text


def test_metrics_count_a_known_mix_of_requests(make_env: Callable[..., Env]) -> None:
    env = make_env(metrics="open", rate_limit_per_second=1, rate_limit_burst=2)
    env.create_admin()
    statuses = [env.get(AGG).status_code for _ in range(2)]
    unknown = tokens.CreatedToken(str(uuid.uuid4()), "k" * 40, None)
    statuses.append(env.get(AGG, token=unknown).status_code)
    statuses += [env.get(AGG).status_code for _ in range(3)]
    assert statuses[:3] == [200, 200, 401] and 429 in statuses
    response = env.request("GET", "/metrics")
    assert response.status_code == 200
    found = samples(response.text)
    operation = ("operation", "ListDataQualityAggregations")
    ok = found[("graphsvc_requests_total", (operation, ("status", "200")))]
    assert ok == statuses.count(200)
    assert found[("graphsvc_rate_limited_total", ())] == statuses.count(429)
    refused = found[("graphsvc_auth_failures_total", (("reason", "signature_or_unknown_token"),))]
    assert refused == 1
    # The rate limit answers before routing: its refusals are not counted as the operation.
    count = found[("graphsvc_request_duration_seconds_count", (operation,))]
    assert count == statuses.count(200) + statuses.count(401)
    limited = found[("graphsvc_requests_total", (("operation", "unknown"), ("status", "429")))]
    assert limited == statuses.count(429)
    assert ("graphsvc_db_connections_in_use", ()) in found
    assert found[("graphsvc_redis_fallback", ())] == 0


def test_metrics_behind_a_token(make_env: Callable[..., Env]) -> None:
    env = make_env(metrics="token", metrics_token="scrape-token-0123456789")
    assert env.request("GET", "/metrics").status_code == 401
    wrong = env.request("GET", "/metrics", {"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    right = env.request("GET", "/metrics", {"Authorization": "Bearer scrape-token-0123456789"})
    assert right.status_code == 200 and "graphsvc_requests_total" in right.text


def test_metrics_show_the_ingest_runs_of_the_store(make_env: Callable[..., Env]) -> None:
    from tests.conftest import FIXTURES, ingest

    env = make_env(metrics="open")
    result = ingest(env, FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "ingest")
    found = samples(env.request("GET", "/metrics").text)
    assert found[("graphsvc_ingest_runs", ())] == 1
    assert found[("graphsvc_last_ingest_objects", (("type", "nodes"),))] == result.nodes
    assert found[("graphsvc_last_ingest_objects", (("type", "edges"),))] == result.edges
    assert found[("graphsvc_last_ingest_duration_seconds", ())] > 0
    assert found[("graphsvc_last_ingest_timestamp_seconds", ())] == result.created_at.timestamp()


def test_a_metrics_token_of_any_bytes_is_refused_as_wrong(make_env: Callable[..., Env]) -> None:
    """Compared byte for byte: a header that is not ASCII is a wrong token (401), as the
    API's own credentials are, and the token itself may be any text."""
    env = make_env(metrics="token", metrics_token="scrape-token-0123456789-é")
    for sent in ("Bearer scrape-token-0123456789-ü".encode(), b"Bearer \xff\xfe"):
        refused = env.request("GET", "/metrics", {"Authorization": sent})
        assert refused.status_code == 401, refused.text
        assert refused.json()["errors"][0]["context"] == "auth"
    right = env.request(
        "GET", "/metrics", {"Authorization": "Bearer scrape-token-0123456789-é".encode()}
    )
    assert right.status_code == 200


class IdleStore:
    """What Metrics reads of a store: its connections in use."""

    def connections_in_use(self) -> int:
        return 0


@pytest.mark.parametrize("counting", [True, False])
def test_requests_are_counted_only_when_the_metrics_can_be_read(counting: bool) -> None:
    """With GRAPHSVC_METRICS=off nothing reads the counts, so answering does not count (the
    counter and histogram locks were 2% of an answer from memory)."""
    metrics = Metrics(cast(Database, IdleStore()), None, AnswerCache(1024), counting)
    metrics.observe("GetSAMLProvider", 200, 0.002, None)
    metrics.observe("GetSAMLProvider", 401, 0.001, "signature_or_unknown_token")
    metrics.count_answer_lookup(hit=True)
    found = samples(metrics.exposition().decode())
    names = (
        "graphsvc_requests_total",
        "graphsvc_auth_failures_total",
        "graphsvc_answer_cache_lookups_total",
    )
    counted = {name: sum(v for (n, _), v in found.items() if n == name) for name in names}
    expected = {
        "graphsvc_requests_total": 2.0,
        "graphsvc_auth_failures_total": 1.0,
        "graphsvc_answer_cache_lookups_total": 1.0,
    }
    assert counted == (expected if counting else dict.fromkeys(names, 0.0))
