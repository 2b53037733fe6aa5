"""The reference web client's account and upload calls, scripted from its client library
(js-client-library's client.ts: the paths, query strings, bodies and headers it sends), with
a session JWT as the web client holds one, without GRAPHSVC_SDK_COMPATIBILITY: each answers
as the client expects, on both stores, validated against the OpenAPI document."""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx

from tests.conftest import Env
from tests.test_uploads import V6


def call(env: Env, jwt: str, method: str, uri: str, body: Any = None, **headers: str) -> Any:
    content = None if body is None else json.dumps(body).encode()
    sent = {"Authorization": f"Bearer {jwt}", **headers}
    response: httpx.Response = env.request(method, uri, sent, content=content)
    assert response.status_code < 300, (method, uri, response.status_code, response.text)
    return response.json() if response.content else None


def test_the_web_clients_account_and_upload_pages(env: Env) -> None:
    jwt = env.login()
    me = call(env, jwt, "GET", "/api/v2/self")["data"]
    # Account pages: tokens of the signed-in user, users, roles, permissions.
    tokens = call(env, jwt, "GET", f"/api/v2/tokens?user_id=eq:{me['id']}")["data"]["tokens"]
    assert {t["user_id"]["uuid"] for t in tokens} == {me["id"]}
    made = call(env, jwt, "POST", "/api/v2/tokens", {"user_id": me["id"], "token_name": "ui"})
    call(env, jwt, "DELETE", f"/api/v2/tokens/{made['data']['id']}")
    roles = call(env, jwt, "GET", "/api/v2/roles")["data"]["roles"]
    assert call(env, jwt, "GET", "/api/v2/permissions")["data"]["permissions"]
    users = call(env, jwt, "GET", "/api/v2/bloodhound-users")["data"]["users"]
    assert me["id"] in {u["id"] for u in users}
    read_only = next(r["id"] for r in roles if r["name"] == "Read-Only")
    created = call(
        env,
        jwt,
        "POST",
        "/api/v2/bloodhound-users",
        {
            "first_name": "Web",
            "last_name": "Client",
            "email_address": "web@example.test",
            "principal": "webuser",
            "roles": [read_only],
            "secret": "web-client-secret-1",
            "needs_password_reset": False,
        },
    )["data"]
    # The edit dialog sends the whole user back, here with one field changed.
    edit = {
        "first_name": "Web",
        "last_name": "Edited",
        "email_address": "web@example.test",
        "principal": "webuser",
        "roles": [read_only],
        "is_disabled": False,
    }
    call(env, jwt, "PATCH", f"/api/v2/bloodhound-users/{created['id']}", edit)
    edited = call(env, jwt, "GET", f"/api/v2/bloodhound-users/{created['id']}")["data"]
    assert edited["last_name"] == {"string": "Edited", "valid": True}
    call(
        env,
        jwt,
        "PUT",
        f"/api/v2/bloodhound-users/{created['id']}/secret",
        {"secret": "web-client-secret-2", "needs_password_reset": False},
    )
    # The upload page: start, one file named by X-File-Upload-Name, end, the job list as it
    # polls it, the job's file results.
    job = call(env, jwt, "POST", "/api/v2/file-upload/start")["data"]
    data = (V6 / "domains.json").read_bytes()
    sent = env.request(
        "POST",
        f"/api/v2/file-upload/{job['id']}",
        {
            "Authorization": f"Bearer {jwt}",
            "Content-Type": "application/json",
            "X-File-Upload-Name": "domains.json",
        },
        content=data,
    )
    assert sent.status_code == 202, sent.text
    call(env, jwt, "POST", f"/api/v2/file-upload/{job['id']}/end")
    listed = call(env, jwt, "GET", "/api/v2/file-upload?skip=0&limit=10&sort_by=-id")
    assert listed["data"][0]["id"] == job["id"]
    assert [f["name"] for f in listed["data"][0]["files"]] == ["domains.json"]
    assert call(env, jwt, "GET", f"/api/v2/file-upload/{job['id']}/completed-tasks")["data"] == []
    assert call(env, jwt, "GET", "/api/v2/file-upload/accepted-types")["data"]
    # What those pages did, as the audit page lists it.
    actions = [e["action"] for e in call(env, jwt, "GET", "/api/v2/audit")["data"]["logs"]]
    assert actions[:4] == ["upload.ended", "upload.file", "upload.started", "UpdateAuthSecret"]
    assert {"CreateUser", "UpdateUser", "CreateAuthToken", "DeleteAuthToken"} <= set(actions)
