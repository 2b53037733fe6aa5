"""The reference server's published Python SDK (blood-hound-python-client, a test extra),
called with its default arguments against a served graphsvc: every call answers 200 under
GRAPHSVC_SDK_COMPATIBILITY, and 400 without it (the SDK sends `Prefer: 0`)."""

from __future__ import annotations

import asyncio
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
    demo = asyncio.run(
        run_in_transaction(
            database_url,
            lambda conn: create_demo(conn, KeyBox(TEST_FERNET_KEY.encode()), "sdk-test-secret"),
        )
    )
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
