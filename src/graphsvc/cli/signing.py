"""Client-side helpers: `graphsvc sign` (the headers of a signed request) and `graphsvc
examples` (curl commands for the demo). Kept apart from the server's commands so that
`sign`, run once per request in the README, imports only what signing needs."""

from __future__ import annotations

import json
from typing import Any

import click

from graphsvc.cli.common import fail, read_token_key, token_key_options
from graphsvc.signatures import request_date, sign_request


def demo_uris(demo: dict[str, Any]) -> list[str]:
    """One request per operation, with identifiers from `graphsvc demo --json`."""
    computer = demo["computer_object_ids"][0]
    return [
        f"/api/v2/data-quality-stats-aggregations?schema_environment_kind_id="
        f"{demo['environment_kind_ids'][0]}&schema_extension_id={demo['extension_ids'][0]}",
        f"/api/v2/azure-tenants/{demo['tenant_ids'][0]}/data-quality-stats?limit=5",
        f"/api/v2/saml/providers/{demo['saml_provider_ids'][0]}",
        f"/api/v2/clients/{demo['client_ids'][0]}",
        f"/api/v2/computers/{computer}/dcom-rights",
    ]


@click.command()
@click.argument("demo_json", type=click.File("r"))
@click.option(
    "--base-url",
    default="http://127.0.0.1:8000",
    show_default=True,
    envvar="GRAPHSVC_URL",
    help="The server; GRAPHSVC_URL if set.",
)
def examples(demo_json: Any, base_url: str) -> None:
    """Print curl commands for every operation, from the output of `graphsvc demo --json`.

    The signed ones carry a signature valid for about two hours; run this again for fresh ones.
    """
    try:
        demo = json.load(demo_json)
        uris = demo_uris(demo)
        token_id, token_key = demo["token_id"], demo["token_key"]
        login = {
            "login_method": "secret",
            "username": demo["admin_username"],
            "secret": demo["admin_secret"],
        }
    except ValueError:
        fail(f"{demo_json.name}: not JSON; pass the output of `graphsvc demo --json`")
    except (KeyError, IndexError, TypeError):
        fail(f"{demo_json.name}: not the output of `graphsvc demo --json` (fields are missing)")
    base = base_url.rstrip("/")
    lines = ["# Signed requests (API token):"]
    for uri in uris:
        date = request_date()
        signature = sign_request(token_key, "GET", uri, date, b"")
        lines.append(
            f"curl -s -H 'Authorization: svcsignature {token_id}' -H 'RequestDate: {date}' "
            f"-H 'Signature: {signature}' '{base}{uri}'"
        )
    lines += [
        "",
        "# JWT: log in once, then send it as a Bearer token:",
        f"JWT=$(curl -s -X POST '{base}/api/v2/login' -d '{json.dumps(login)}' "
        "| python3 -c 'import json,sys; r=json.load(sys.stdin); "
        'print(r["data"]["session_token"]) if "data" in r else '
        'sys.exit("login failed: " + r["errors"][0]["message"])\')',
    ]
    lines += [f"curl -s -H \"Authorization: Bearer $JWT\" '{base}{uri}'" for uri in uris]
    click.echo("\n".join(lines))


HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


@click.command()
@click.argument("method")
@click.argument("uri")
@token_key_options
@click.option("--body", type=click.File("rb"), default=None, help="File holding the body.")
@click.option("--curl", "as_curl", is_flag=True, help="Print curl -H options.")
def sign(
    method: str,
    uri: str,
    token_id: str,
    token_key_stdin: bool,
    token_key: str | None,
    body: Any,
    as_curl: bool,
) -> None:
    """Print the three headers of a signed request for METHOD and URI (path?query)."""
    if method not in HTTP_METHODS:
        fail(f"METHOD {method!r} must be one of {', '.join(HTTP_METHODS)}, as it is sent")
    if not uri.startswith("/"):
        fail(f"URI {uri!r} must start with '/': the path (and ?query) as it is sent")
    date = request_date()
    key = read_token_key(token_key_stdin, token_key)
    signature = sign_request(key, method, uri, date, body.read() if body else b"")
    headers = {
        "Authorization": f"svcsignature {token_id}",
        "RequestDate": date,
        "Signature": signature,
    }
    if as_curl:
        click.echo(" ".join(f"-H '{k}: {v}'" for k, v in headers.items()))
    else:
        click.echo(json.dumps(headers, indent=2))
