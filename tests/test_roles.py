"""GET /api/v2/roles and /api/v2/permissions as the reference has them (auth/ManageSelf,
its filters and sort columns), and the roles' permissions after schema 0012: uploads
under graphdb/Ingest. Both stores, answers validated against the OpenAPI document."""

from __future__ import annotations

from typing import Any

from tests.conftest import Env

ROLES, PERMISSIONS = "/api/v2/roles", "/api/v2/permissions"


def authorities(role: dict[str, Any]) -> set[str]:
    return {f"{p['authority']}/{p['name']}" for p in role["permissions"]}


def test_roles_with_their_permissions(env: Env) -> None:
    reader = env.user_with_token("reader", "Read-Only")
    response = env.get(ROLES, token=reader)  # auth/ManageSelf is enough
    assert response.status_code == 200, response.text
    roles = {r["name"]: r for r in response.json()["data"]["roles"]}
    assert list(roles) == ["Read-Only", "Upload-Only", "User", "Power User", "Administrator"]
    assert roles["Upload-Only"]["description"].startswith("Used for data collection clients")
    assert authorities(roles["Upload-Only"]) == {"clients/Tasking", "graphdb/Ingest"}
    assert "graphdb/Ingest" in authorities(roles["Power User"])
    assert "graphdb/Write" in authorities(roles["Power User"])
    assert "graphdb/Ingest" not in authorities(roles["Read-Only"])
    permissions = env.get(PERMISSIONS, token=reader).json()["data"]["permissions"]
    every = {f"{p['authority']}/{p['name']}" for p in permissions}
    assert authorities(roles["Administrator"]) == every and "graphdb/Ingest" in every
    by_id = {p["id"]: p for p in permissions}
    for role in roles.values():
        for p in role["permissions"]:
            assert by_id[p["id"]] == p
    # The caller's own role, as /self shows it, is the same object.
    me = env.get("/api/v2/self", token=reader).json()["data"]["roles"]
    assert me == [roles["Read-Only"]]


def test_role_and_permission_filters(env: Env) -> None:
    (user,) = env.get(f"{ROLES}?name=eq:User").json()["data"]["roles"]
    assert user["name"] == "User"
    others = env.get(f"{ROLES}?name=neq:User&sort_by=-name").json()["data"]["roles"]
    assert [r["name"] for r in others] == sorted(
        ["Read-Only", "Upload-Only", "Power User", "Administrator"], reverse=True
    )
    assert [r["id"] for r in env.get(f"{ROLES}?id=lte:2").json()["data"]["roles"]] == [1, 2]
    graph = env.get(f"{PERMISSIONS}?authority=eq:graphdb&sort_by=name").json()["data"]
    assert [p["name"] for p in graph["permissions"]] == ["Ingest", "Mutate", "Read", "Write"]
    refused = env.get(f"{ROLES}?description=eq:x")
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["message"] == (
        "the column 'description' cannot be filtered; filterable: id, name"
    )


def test_an_upload_only_user_may_not_list_roles(env: Env) -> None:
    uploader = env.user_with_token("uploader", "Upload-Only")
    for uri in (ROLES, PERMISSIONS):
        response = env.get(uri, token=uploader)
        assert response.status_code == 403
        assert response.json()["errors"][0]["message"] == "permission auth/ManageSelf is required"
