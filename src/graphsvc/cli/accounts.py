"""Accounts: users and their tokens, SAML providers, collection clients."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, BinaryIO

import click
import msgspec

from graphsvc import wire
from graphsvc.accounts import users
from graphsvc.accounts.saml import create_saml_provider, get_saml_provider
from graphsvc.accounts.tokens import (
    create_api_token,
    list_api_tokens,
    never_used,
    revoke_api_token,
)
from graphsvc.cli.common import (
    emit,
    fail,
    keys_of,
    load_settings,
    read_stdin_secret,
    read_store,
    run_command_transaction,
)
from graphsvc.crypto import hash_secret
from graphsvc.errors import ApiError
from graphsvc.graph.clients import create_client, get_client
from graphsvc.store import accounts
from graphsvc.store import db as database
from graphsvc.store.filters import Filter
from graphsvc.store.paging import SortKey


@click.group()
def user() -> None:
    """Users."""


@user.command("create")
@click.argument("name")
@click.option(
    "--role", required=True, help="Read-Only, Upload-Only, User, Power User or Administrator"
)
@click.option(
    "--secret-stdin",
    is_flag=True,
    help="Read the password for POST /api/v2/login from the first line of standard input.",
)
@click.option(
    "--secret",
    envvar="GRAPHSVC_USER_SECRET",
    default=None,
    help="The password itself (better: GRAPHSVC_USER_SECRET or --secret-stdin, which stay "
    "out of shell history and ps).",
)
@click.option("--disabled", is_flag=True)
@click.option("--json", "as_json", is_flag=True)
def user_create(
    name: str, role: str, secret_stdin: bool, secret: str | None, disabled: bool, as_json: bool
) -> None:
    """Create a user with a role."""
    if secret_stdin:
        secret = read_stdin_secret("--secret-stdin")
    user_id = run_command_transaction(
        load_settings(), lambda conn: users.create_user(conn, name, role, secret, disabled)
    )
    emit(
        as_json,
        {"id": user_id, "name": name, "role": role, "disabled": disabled},
        f"user {name} ({role}) created: {user_id}",
    )


@user.command("list")
@click.option("--json", "as_json", is_flag=True)
def user_list(as_json: bool) -> None:
    """Users, with their roles and whether they are disabled."""
    users = read_store(load_settings(), accounts.list_users)
    lines = [
        f"{u.id}  {u.name:<24} {u.role:<14} {'disabled' if u.disabled else 'enabled'}"
        for u in users
    ]
    emit(as_json, users, "\n".join(lines) or "no users")


def change_user(
    name: str, change: Callable[[database.Connection, str], Awaitable[wire.UserResponse]]
) -> None:
    """Apply a change to the user of this name, as the operator of the server."""

    async def work(conn: database.Connection) -> wire.UserResponse:
        return await change(conn, (await users.find_user_by_name(conn, name)).id)

    changed = run_command_transaction(load_settings(), work).data
    state = "disabled" if changed.is_disabled else "enabled"
    click.echo(f"user {changed.principal_name}: {changed.roles[0].name}, {state}")


@user.command("disable")
@click.argument("name")
def user_disable(name: str) -> None:
    """Refuse the user's sessions at once and its tokens within the token cache time."""
    body = wire.UserUpdate(is_disabled=True)
    change_user(name, lambda conn, user_id: users.update_user(conn, None, user_id, body))


@user.command("enable")
@click.argument("name")
def user_enable(name: str) -> None:
    """Let a disabled user in again."""
    body = wire.UserUpdate(is_disabled=False)
    change_user(name, lambda conn, user_id: users.update_user(conn, None, user_id, body))


@user.command("delete")
@click.argument("name")
def user_delete(name: str) -> None:
    """Delete a user: its sessions end and its tokens are revoked."""
    change_user(name, lambda conn, user_id: users.delete_user(conn, None, user_id))


@user.command("set-role")
@click.argument("name")
@click.argument("role")
def user_set_role(name: str, role: str) -> None:
    """Give a user another role (by name: Read-Only, User, Administrator, ...)."""

    async def change(conn: database.Connection, user_id: str) -> wire.UserResponse:
        role_id = await accounts.find_role_id(conn, role)
        if role_id is None:
            roles = ", ".join(await accounts.list_role_names(conn))
            fail(f"unknown role {role!r}; roles: {roles}")
        assert role_id is not None
        return await users.update_user(conn, None, user_id, wire.UserUpdate(roles=[role_id]))

    change_user(name, change)


@user.command("set-secret")
@click.argument("name")
@click.option(
    "--secret",
    envvar="GRAPHSVC_USER_SECRET",
    default=None,
    help="The new secret; without it (and without GRAPHSVC_USER_SECRET), standard input's "
    "first line.",
)
def user_set_secret(name: str, secret: str | None) -> None:
    """Set a user's login secret (its sessions end)."""
    body = wire.UserSecret(secret or read_stdin_secret("set-secret"))
    try:
        users.validate_secret(body.secret)
    except ApiError as exc:
        fail(f"{exc.context}: {exc.message}")
    # Hashed before the transaction, as the server does: its 0.2 s of CPU would hold
    # SQLite's one write lock.
    prepared = users.NewSecret(hash_secret(body.secret))
    change_user(
        name, lambda conn, user_id: users.set_user_secret(conn, None, user_id, body, prepared)
    )


@click.group()
def token() -> None:
    """API tokens for signed requests."""


LIFETIME = re.compile(r"([0-9]{1,6})([smhd])")
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_lifetime(text: str) -> int:
    match = LIFETIME.fullmatch(text.strip())
    if match is None:
        fail(f"--expires-in {text!r}: give a number and a unit, as 90d, 12h, 30m or 600s")
    assert match is not None
    return int(match.group(1)) * SECONDS[match.group(2)]


@token.command("create")
@click.option("--user", "user_name", required=True)
@click.option("--name", default=None, help="A label for the token.")
@click.option("--expires-in", default=None, help="A lifetime, as 90d, 12h or 30m.")
@click.option("--json", "as_json", is_flag=True)
@click.option(
    "--save",
    "save_to",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the token, key included, as JSON to this new file, readable by you alone.",
)
def token_create(
    user_name: str, name: str | None, expires_in: str | None, as_json: bool, save_to: Path | None
) -> None:
    """Create an API token; its key is printed once (or saved) and stored only encrypted."""
    settings = load_settings()
    lifetime = None if expires_in is None else parse_lifetime(expires_in)
    saved = None if save_to is None else open_private_file(save_to)

    async def work(conn: database.Connection) -> wire.AuthToken:
        user = await users.find_user_by_name(conn, user_name)
        request = wire.CreateTokenRequest(name or "", uuid.UUID(user.id), lifetime_seconds=lifetime)
        return (await create_api_token(conn, keys_of(settings), None, request)).data

    try:
        created = run_command_transaction(settings, work)
    except BaseException:
        if save_to is not None:
            save_to.unlink(missing_ok=True)  # made for this token, which was not created
        raise
    expires = created.expires_at.time.isoformat() if created.expires_at.valid else "never"
    if saved is not None:
        with saved:
            saved.write(msgspec.json.encode(created) + b"\n")
        click.echo(
            f"token id:  {created.id}\ntoken key: in {save_to} (mode 0600)\nexpires:   {expires}"
        )
        return
    emit(
        as_json,
        created,
        f"token id:  {created.id}\ntoken key: {created.key}   (shown once; keep it)\n"
        f"expires:   {expires}",
    )


def open_private_file(path: Path) -> BinaryIO:
    """A new file only its owner may read, or a one-line failure (it exists, no folder)."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        fail(f"--save {path}: the file exists; choose a new name (it would hold a token key)")
        raise
    except OSError as exc:
        fail(f"--save {path}: {exc.strerror}")
        raise
    return os.fdopen(descriptor, "wb")


@token.command("list")
@click.option("--user", "user_name", default=None, help="Only this user's tokens.")
@click.option("--json", "as_json", is_flag=True)
def token_list(user_name: str | None, as_json: bool) -> None:
    """API tokens of every user (or one), never their keys."""

    async def work(conn: database.Connection) -> list[tuple[wire.AuthToken, str]]:
        filters = []
        if user_name is not None:
            user_id = (await users.find_user_by_name(conn, user_name)).id
            filters.append(Filter("user_id", "eq", user_id))
        listed = await list_api_tokens(conn, None, filters, [SortKey("created_at", False)])
        names = {u.id: u.name for u in await accounts.list_users(conn)}
        return [(t, names.get(t.user_id.uuid, "")) for t in listed.data.tokens]

    tokens = read_store(load_settings(), work)
    lines = [describe_token(t, owner) for t, owner in tokens]
    emit(as_json, [t for t, _ in tokens], "\n".join(lines) or "no tokens")


def describe_token(token: wire.AuthToken, owner: str) -> str:
    expires = f", expires {token.expires_at.time:%Y-%m-%d %H:%M}" if token.expires_at.valid else ""
    used = "never" if never_used(token) else f"{token.last_access:%Y-%m-%d %H:%M}"
    return f"{token.id}  {owner:<20} {token.name.string or '-':<20} last used {used}{expires}"


@token.command("revoke")
@click.argument("token_id")
@click.option("--json", "as_json", is_flag=True)
def token_revoke(token_id: str, as_json: bool) -> None:
    """Revoke an API token: refused by every replica within GRAPHSVC_TOKEN_CACHE_SECONDS."""

    async def work(conn: database.Connection) -> wire.AuthToken:
        return (await revoke_api_token(conn, None, token_id.lower())).data

    revoked = run_command_transaction(load_settings(), work)
    emit(as_json, revoked, f"token {revoked.id} revoked")


@click.group()
def saml() -> None:
    """SAML providers."""


@saml.command("create")
@click.option("--name", required=True)
@click.option("--display-name", required=True)
@click.option("--idp-issuer-uri", required=True)
@click.option("--idp-sso-uri", required=True)
@click.option("--principal-attribute-mapping", "mappings", multiple=True)
@click.option("--json", "as_json", is_flag=True)
def saml_create(
    name: str,
    display_name: str,
    idp_issuer_uri: str,
    idp_sso_uri: str,
    mappings: tuple[str, ...],
    as_json: bool,
) -> None:
    """Register a SAML identity provider."""
    settings = load_settings()
    # The sp_* URIs the server would answer with: its public URL, else the one the client
    # commands are pointed at.
    base = settings.public_url or os.environ.get("GRAPHSVC_URL", "http://127.0.0.1:8000")

    async def work(conn: database.Connection) -> Any:
        provider_id = await create_saml_provider(
            conn, name, display_name, idp_issuer_uri, idp_sso_uri, mappings
        )
        return (await get_saml_provider(conn, provider_id, base)).data

    provider = run_command_transaction(settings, work)
    emit(as_json, provider, f"SAML provider {name} created: id {provider.id}")


@click.group()
def client() -> None:
    """Collection clients (Enterprise edition)."""


@client.command("create")
@click.option("--name", required=True)
@click.option("--ip-address", default="")
@click.option("--hostname", default="")
@click.option("--json", "as_json", is_flag=True)
def client_create(name: str, ip_address: str, hostname: str, as_json: bool) -> None:
    """Register a collection client with its token (the token key is printed once)."""
    settings = load_settings()
    if settings.edition != "enterprise":
        fail("collection clients are an Enterprise edition feature (GRAPHSVC_EDITION=enterprise)")

    async def work(conn: database.Connection) -> Any:
        client_id, created = await create_client(
            conn, keys_of(settings), name, ip_address, hostname
        )
        return (await get_client(conn, client_id)).data, created

    found, created = run_command_transaction(settings, work)
    data = {**msgspec.to_builtins(found), "token_key": created.key}
    emit(
        as_json,
        data,
        f"client {name} created: {found.id}\n"
        f"token id:  {created.id}\ntoken key: {created.key}   (shown once; keep it)",
    )
