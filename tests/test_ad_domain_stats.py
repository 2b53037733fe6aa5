"""GET /api/v2/ad-domains/{domain_id}/data-quality-stats: one record per run and domain, each
count checked against one worked out here from the raw collector files (tests/test_sharphound's
Expected, which reads the files without graphsvc's code), on both stores."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from graphsvc.store.graph import ACL_KINDS
from tests.conftest import Env, ingest
from tests.test_sharphound import SAMPLES, TESTLAB, Expected, analysed_edges, low, raw_documents

STATS = "/api/v2/ad-domains/{}/data-quality-stats"
NODE_FIELDS = {
    "User": "users",
    "Group": "groups",
    "Computer": "computers",
    "OU": "ous",
    "Container": "containers",
    "GPO": "gpos",
    "AIACA": "aiacas",
    "RootCA": "rootcas",
    "EnterpriseCA": "enterprisecas",
    "NTAuthStore": "ntauthstores",
    "CertTemplate": "certtemplates",
    "IssuancePolicy": "issuancepolicies",
}
FOURTEEN_DAYS = 14 * 24 * 3600


def raw_records(path: Path) -> dict[str, dict[str, Any]]:
    """Object id -> its record, lower-cased keys, for the users and computers of the files."""
    found = {}
    for document in raw_documents(path):
        if document["meta"]["type"] in ("users", "computers"):
            for record in document["data"]:
                record = low(record)
                found[record["objectidentifier"].upper()] = record
    return found


def completeness(
    expected: Expected,
    records: dict[str, dict[str, Any]],
    domain: str,
    label: str,
    kinds: set[str],
) -> float:
    """Of the domain's enabled users (Windows computers) with a logon time, those within 14
    days of the latest: the share with an inbound edge of these kinds."""
    logons = {}
    for oid, (node_label, node_domain) in expected.nodes.items():
        properties = records.get(oid, {}).get("properties", {})
        windows = "windows" in str(properties.get("operatingsystem", "")).lower()
        if node_label != label or node_domain != domain or properties.get("enabled") is not True:
            continue
        if label == "Computer" and not windows:
            continue
        logon = properties.get("lastlogontimestamp")
        logons[oid] = logon if isinstance(logon, int | float) else None
    timed = {oid: t for oid, t in logons.items() if t is not None}
    if not timed:
        return 0.0
    latest = max(timed.values())
    kept = {oid for oid, t in timed.items() if t >= latest - FOURTEEN_DAYS}
    reached = {e for (_, k, e) in expected.edges if k in kinds and e in kept}
    return len(reached) / len(kept)


def expected_record(env: Env, path: Path, domain: str) -> dict[str, Any]:
    expected = Expected(raw_documents(path), analysed_edges(env))
    records = raw_records(path)
    values: dict[str, Any] = dict.fromkeys(NODE_FIELDS.values(), 0)
    for label, node_domain in expected.nodes.values():
        if node_domain == domain and label in NODE_FIELDS:
            values[NODE_FIELDS[label]] += 1
    in_domain = [t for t in expected.edges if expected.domain_of_edge(t) == domain]
    values["acls"] = sum(1 for t in in_domain if t[1] in ACL_KINDS)
    values["sessions"] = sum(1 for t in in_domain if t[1] == "HasSession")
    values["relationships"] = len(in_domain)
    values["session_completeness"] = completeness(expected, records, domain, "User", {"HasSession"})
    values["local_group_completeness"] = completeness(
        expected,
        records,
        domain,
        "Computer",
        {"AdminTo", "CanRDP", "CanPSRemote", "ExecuteDCOM", "CanBackup"},
    )
    return values


def served_record(env: Env, domain: str) -> dict[str, Any]:
    body = env.get(STATS.format(domain)).json()
    assert body["count"] == 1 and len(body["data"]) == 1, body
    record: dict[str, Any] = body["data"][0]
    return record


def test_testlab_record_equals_the_raw_counts(env: Env) -> None:
    path = SAMPLES["v6 folder"]
    result = ingest(env, path)
    record = served_record(env, TESTLAB)
    expected = expected_record(env, path, TESTLAB)
    assert {k: record[k] for k in expected} == pytest.approx(expected)
    assert record["domain_sid"] == TESTLAB and record["run_id"] == result.run_id
    # The fixture's own figures, as a check on the check: 17 users, ACEs on every object.
    assert record["users"] == 17 and record["computers"] == 4 and record["acls"] > 400
    assert record["sessions"] == 5


def test_sample_zip_gives_a_record_for_each_domain(env: Env) -> None:
    path = SAMPLES["sample zip (3 domains, 3 collections)"]
    ingest(env, path)
    domains = {
        r["objectidentifier"].upper()
        for d in raw_documents(path)
        if d["meta"]["type"] == "domains"
        for r in map(low, d["data"])
    }
    assert len(domains) == 3
    ratios = []
    for domain in sorted(domains):
        record = served_record(env, domain)
        expected = expected_record(env, path, domain)
        assert {k: record[k] for k in expected} == pytest.approx(expected), domain
        ratios += [record["session_completeness"], record["local_group_completeness"]]
    assert any(0 < r < 1 for r in ratios), "the sample has domains only partly covered"


def test_each_run_adds_a_record_newest_first_and_domain_ids_match_in_any_case(
    env: Env,
) -> None:
    path = SAMPLES["v6 folder"]
    first, second = ingest(env, path), ingest(env, path)
    body = env.get(STATS.format(TESTLAB.lower())).json()
    assert [r["run_id"] for r in body["data"]] == [second.run_id, first.run_id]
    oldest = env.get(STATS.format(TESTLAB) + "?sort_by=created_at&limit=1").json()
    assert oldest["count"] == 2 and [r["run_id"] for r in oldest["data"]] == [first.run_id]
    assert env.get(STATS.format(TESTLAB) + "?skip=1").json()["data"][0]["run_id"] == (first.run_id)


def test_unknown_domain_is_404_and_known_domain_outside_the_window_is_empty(env: Env) -> None:
    unknown = env.get(STATS.format("S-1-5-21-1-2-3"))
    assert unknown.status_code == 404
    error = unknown.json()["errors"][0]
    assert error["context"] == "domain_id" and "S-1-5-21-1-2-3" in error["message"]
    ingest(env, SAMPLES["v6 folder"])
    body = env.get(STATS.format(TESTLAB) + "?end=2020-01-01T00:00:00Z").json()
    assert body["count"] == 0 and body["data"] == []
    assert body["start"].startswith("2019-12-02")  # end alone moves the 30-day window


def test_a_trusted_domain_no_file_collected_is_known_but_has_no_record(env: Env) -> None:
    """TESTLAB trusts EXTERNAL.LOCAL: its Domain node exists (named by the trust), so the
    route answers 200 with no record rather than 404."""
    ingest(env, SAMPLES["v6 folder"])
    body = env.get(STATS.format("S-1-5-21-3084884204-958224920-2707782874")).json()
    assert body["count"] == 0 and body["data"] == []


@pytest.mark.parametrize(
    ("query", "context"),
    [
        ("sort_by=name", "sort_by"),
        ("start=yesterday", "start"),
        ("limit=-1", "limit"),
        ("skip=x", "skip"),
    ],
)
def test_bad_parameters_are_400_naming_them(env: Env, query: str, context: str) -> None:
    ingest(env, SAMPLES["v6 folder"])
    response = env.get(STATS.format(TESTLAB) + f"?{query}")
    assert response.status_code == 400
    assert response.json()["errors"][0]["context"] == context


def test_window_bounds_are_inclusive(env: Env) -> None:
    ingest(env, SAMPLES["v6 folder"])
    created = served_record(env, TESTLAB)["created_at"]
    window = urlencode({"start": created, "end": created})
    assert env.get(STATS.format(TESTLAB) + f"?{window}").json()["count"] == 1
    after = (datetime.fromisoformat(created) + timedelta(milliseconds=1)).isoformat()
    query = urlencode({"start": after})
    assert env.get(STATS.format(TESTLAB) + f"?{query}").json()["count"] == 0
