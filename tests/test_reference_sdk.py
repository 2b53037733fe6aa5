"""The reference server's published Python SDK (blood-hound-python-client, a test extra),
called with its default arguments against a served graphsvc: every call answers 200 under
GRAPHSVC_SDK_COMPATIBILITY, and 400 without it (the SDK sends `Prefer: 0`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graphsvc.crypto import KeyBox
from graphsvc.demo.dataset import DemoResult, create_demo
from graphsvc.store.db import run_in_transaction
from tests.conftest import TEST_FERNET_KEY, served, server_environment

sdk_auth = pytest.importorskip(
    "auth.hmac_authenticated_client", reason="the SDK is a test extra: pip install -e '.[test]'"
)
from blood_hound_api_client.api.auth import get_saml_provider  # noqa: E402
from blood_hound_api_client.api.clients import get_client  # noqa: E402
from blood_hound_api_client.api.computers import get_computer_entity_dcom_rights  # noqa: E402
from blood_hound_api_client.api.data_quality import (  # noqa: E402
    get_azure_tenant_data_quality_stats,
)


def load_demo(database_url: str) -> DemoResult:
    """The demo dataset in the test's store: its admin's token, computers, tenants..."""
    return asyncio.run(
        run_in_transaction(
            database_url,
            lambda conn: create_demo(conn, KeyBox(TEST_FERNET_KEY.encode()), "sdk-test-secret"),
        )
    )


def sdk_calls(demo: DemoResult) -> dict[str, Callable[[Any], Any]]:
    return {
        "dcom rights": lambda c: get_computer_entity_dcom_rights.sync_detailed(
            demo.computer_object_ids[0], client=c
        ),
        "tenant stats": lambda c: get_azure_tenant_data_quality_stats.sync_detailed(
            demo.tenant_ids[0], client=c
        ),
        "saml provider": lambda c: get_saml_provider.sync_detailed(
            demo.saml_provider_ids[0], client=c
        ),
        "client": lambda c: get_client.sync_detailed(demo.client_ids[0], client=c),
    }


@pytest.mark.parametrize("compatible", [True, False], ids=["compatibility on", "strict"])
def test_the_reference_sdk_with_its_defaults(
    database_url: str, tmp_path: Path, compatible: bool
) -> None:
    demo = load_demo(database_url)
    environment = server_environment(
        database_url, tmp_path, sdk_compatibility="true" if compatible else "false"
    )
    with served(environment) as (base, _):
        client = sdk_auth.HMACAuthenticatedClient(
            base_url=base, token_key=demo.token_key, token_id=demo.token_id
        )
        with client:
            statuses = {name: call(client).status_code for name, call in sdk_calls(demo).items()}
    if compatible:
        assert statuses == dict.fromkeys(statuses, 200)
    else:  # Prefer: 0 is a 400; a call with a query also fails its path-only signature (401)
        assert statuses["saml provider"] == statuses["client"] == 400
        assert set(statuses.values()) <= {400, 401}


def parsed(call: Callable[..., Any]) -> Callable[..., Any]:
    """An SDK call whose parsed answer the test reads freely: the SDK types every field as
    possibly Unset, and a 200 it could not parse would have raised already."""

    def answer(*args: Any, **kwargs: Any) -> Any:
        found = call(*args, **kwargs)
        assert found is not None, "the SDK parsed no 200 answer"
        return found

    return answer


def test_the_sdk_manages_users_roles_tokens_and_jobs(database_url: str, tmp_path: Path) -> None:
    """The SDK's account and upload calls, as its users script them: each answer parses
    into the SDK's own models (a field of the wrong shape raises there)."""
    from blood_hound_api_client import models
    from blood_hound_api_client.api.api_tokens import list_auth_tokens
    from blood_hound_api_client.api.audit import list_audit_logs
    from blood_hound_api_client.api.blood_hound_users import (
        create_or_set_user_secret,
        create_user,
        get_user,
        list_users,
        update_user,
    )
    from blood_hound_api_client.api.collection_uploads import (
        create_file_upload_job,
        end_file_upload_job,
        list_file_upload_jobs,
    )
    from blood_hound_api_client.api.permissions import list_permissions
    from blood_hound_api_client.api.roles import list_roles

    demo = load_demo(database_url)
    environment = server_environment(database_url, tmp_path, sdk_compatibility="true")
    with served(environment) as (base, _):
        client = sdk_auth.HMACAuthenticatedClient(
            base_url=base, token_key=demo.token_key, token_id=demo.token_id
        )
        with client:
            roles = {r.name: r for r in parsed(list_roles.sync)(client=client).data.roles}
            assert roles["Upload-Only"].description.startswith("Used for data collection")
            permissions = parsed(list_permissions.sync)(client=client).data.permissions
            assert ("graphdb", "Ingest") in {(p.authority, p.name) for p in permissions}
            body = models.CreateUserBody(
                principal="scripted",
                first_name="Script",
                email_address="scripted@example.test",
                roles=[roles["Read-Only"].id],
                secret="scripted-secret-1",
            )
            made = parsed(create_user.sync)(client=client, body=body).data
            assert made.first_name.string == "Script" and made.last_name.valid is False
            fetched = parsed(get_user.sync)(str(made.id), client=client).data
            assert fetched.principal_name == "scripted"
            assert fetched.roles[0].name == "Read-Only"
            users = {u.principal_name: u for u in parsed(list_users.sync)(client=client).data.users}
            me = users[demo.admin_username]
            # The web client sends its own user back whole when it edits it.
            unchanged = models.ApiRequestsUserUpdate(
                roles=[me.roles[0].id], is_disabled=False, principal=me.principal_name
            )
            assert (
                update_user.sync_detailed(str(me.id), client=client, body=unchanged).status_code
                == 200
            )
            secret = models.ApiRequestsUserSetSecret(secret="scripted-secret-2")
            assert (
                create_or_set_user_secret.sync_detailed(
                    str(made.id), client=client, body=secret
                ).status_code
                == 200
            )
            tokens = parsed(list_auth_tokens.sync)(client=client, user_id=f"eq:{me.id}").data.tokens
            assert tokens and {str(t.user_id.uuid) for t in tokens} == {str(me.id)}
            job = parsed(create_file_upload_job.sync)(client=client).data
            assert end_file_upload_job.sync_detailed(job.id, client=client).status_code == 200
            audit = parsed(list_audit_logs.sync)(client=client, sort_by="-id", limit=100)
            actions = [entry.action for entry in audit.data.logs]
            assert actions[-1] == "CreateUser" and "UpdateAuthSecret" in actions
            listed = parsed(list_file_upload_jobs.sync)(
                client=client, sort_by="-id", skip=0, limit=10
            )
            assert [(j.id, j.status) for j in listed.data] == [(job.id, 2)]


def test_the_sdk_marks_an_object_owned_and_lists_the_owned(
    database_url: str, tmp_path: Path
) -> None:
    """The SDK's older asset-group calls, as pentest tools mark what they compromised: each
    answer parses into the SDK's own models."""
    from blood_hound_api_client import models
    from blood_hound_api_client.api.asset_isolation import (
        get_asset_group_custom_member_count,
        list_asset_group_member_count_by_kind,
        list_asset_group_members,
        list_asset_groups,
        update_asset_group_selectors,
        update_asset_group_selectors_deprecated,
    )

    demo = load_demo(database_url)
    first, second = demo.computer_object_ids[:2]
    environment = server_environment(database_url, tmp_path, sdk_compatibility="true")
    with served(environment) as (base, _):
        client = sdk_auth.HMACAuthenticatedClient(
            base_url=base, token_key=demo.token_key, token_id=demo.token_id
        )
        with client:
            groups = parsed(list_asset_groups.sync)(client=client, tag="eq:owned").data
            (owned,) = groups.asset_groups
            assert (owned.name, owned.system_group) == ("Owned", True)

            def spec(object_id: str, action: str) -> Any:
                return models.ModelAssetGroupSelectorSpec(
                    selector_name=object_id,
                    sid=object_id,
                    action=models.ModelAssetGroupSelectorSpecAction(action),
                )

            added = parsed(update_asset_group_selectors.sync)(
                owned.id, client=client, body=[spec(first, "add")]
            ).data
            assert [s.selector for s in added.added_selectors] == [first]
            older = update_asset_group_selectors_deprecated.sync_detailed(
                owned.id, client=client, body=[spec(second, "add")]
            )
            assert older.status_code == 201, older.content
            members = parsed(list_asset_group_members.sync)(owned.id, client=client).data.members
            assert {(m.object_id, m.custom_member) for m in members} == {
                (first, True),
                (second, True),
            }
            counts = parsed(list_asset_group_member_count_by_kind.sync)(owned.id, client=client)
            assert (counts.data.total_count, counts.data.counts["Computer"]) == (2, 2)
            # The SDK's model of this answer lacks the `data` around it that the reference
            # server writes (WriteBasicResponse, its resources test reads Data): read as sent.
            custom = get_asset_group_custom_member_count.sync_detailed(owned.id, client=client)
            assert json.loads(custom.content) == {"data": {"custom_member_count": 2}}
            removed = parsed(update_asset_group_selectors.sync)(
                owned.id, client=client, body=[spec(second, "remove")]
            ).data
            assert [s.selector for s in removed.removed_selectors] == [second]
            members = parsed(list_asset_group_members.sync)(owned.id, client=client).data.members
            assert [m.object_id for m in members] == [first]
