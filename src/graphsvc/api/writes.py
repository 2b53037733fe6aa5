"""The path of a write (an operation in a write transaction) and of an upload, whose body is
received, and its signature checked, before the transaction opens, however long it takes to
arrive. Each write's audit events are stored in its transaction."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from collections.abc import AsyncIterator, Awaitable
from http import HTTPStatus
from typing import Any

import msgspec

from graphsvc.accounts.audit_log import store_audit_events
from graphsvc.api.admission import Admission, parse_prefer
from graphsvc.api.auth import Authenticator, Identity, LastAccess
from graphsvc.api.context import Context
from graphsvc.api.ratelimit import client_address
from graphsvc.api.routes import Operation
from graphsvc.api.upload_body import accepted_content_type, receive_upload
from graphsvc.api.web import (
    CLOSE,
    REQUEST_ID_KEY,
    Endpoint,
    Request,
    Response,
    declared_length,
    decode_json,
    json_response,
)
from graphsvc.errors import ApiError
from graphsvc.logs import recording_audit
from graphsvc.settings import Settings
from graphsvc.store.db import Connection, Database, database_errors
from graphsvc.uploads import UPLOAD_LIMIT_HEADER

log = logging.getLogger("graphsvc")
# A write answered with no content, as the reference's: a deletion (204), a request it
# accepts (202, as `PUT /api/v2/analysis`).
NO_CONTENT = (HTTPStatus.NO_CONTENT, HTTPStatus.ACCEPTED)


class Stopping:
    """The server's stop, as the uploads see it: told when the shutdown grace begins
    (`begin`), it cuts off, a moment before the grace ends, every upload whose body is still
    arriving (`before_cutoff`), so that each gets the JSON 503 and its job a reason, where
    the end of the grace cancelled them into a plain-text 500 and left the job running."""

    def __init__(self) -> None:
        self.cutoff = asyncio.Event()

    def begin(self, grace_seconds: float) -> None:
        """The grace has begun (on the event loop): cut off before it ends."""
        margin = min(2.0, grace_seconds / 4)  # to answer, and fail the job, in time
        asyncio.get_running_loop().call_later(max(0.0, grace_seconds - margin), self.cutoff.set)

    async def before_cutoff(self, work: Awaitable[None]) -> None:
        """`work` (a body arriving), or a 503 if the cutoff comes first (the work cancelled)."""
        doing = asyncio.ensure_future(work)
        cut = asyncio.ensure_future(self.cutoff.wait())
        try:
            await asyncio.wait({doing, cut}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (doing, cut):
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        if doing.cancelled():
            raise ApiError(
                503,
                "the server is stopping, and the file had not all arrived: its upload job "
                "failed; start a new one (on another replica, or once this one is back)",
                "shutdown",
                CLOSE,
                code="stopping",
            )
        doing.result()


class Writes:
    def __init__(
        self,
        settings: Settings,
        db: Database,
        auth: Authenticator,
        admission: Admission,
        context: Context,
        last_access: LastAccess,
        stopping: Stopping,
    ) -> None:
        self.settings = settings
        self.db = db
        self.auth = auth
        self.admission = admission
        self.context = context
        self.last_access = last_access
        self.stopping = stopping

    def endpoint(self, op: Operation) -> Endpoint:
        """Authenticate, authorize, decode the body and parse the parameters, then run the
        handler in a write transaction under the request's timeout."""
        decoder = msgspec.json.Decoder(op.request_body) if op.request_body else None
        write = self.receive_upload if op.upload else self.write

        async def endpoint(request: Request) -> Response:
            self.admission.refuse_other_edition(op, request)
            body, identity = await write(op, request, decoder)
            self.last_access.note(identity)
            headers = self.admission.preference_applied(request)
            if op.tells_upload_limit:
                headers[UPLOAD_LIMIT_HEADER] = str(self.settings.max_upload_bytes)
            if op.response is None and op.status in NO_CONTENT:
                return Response(op.status, b"", headers)
            return json_response(body, op.status, headers)

        return endpoint

    async def write(
        self, op: Operation, request: Request, decoder: msgspec.json.Decoder[Any] | None
    ) -> tuple[msgspec.Struct, Identity]:
        # The whole body first: a client slow to send it must not hold a connection of the
        # pool meanwhile.
        await request.body()
        prepared = await self.prepare(op, request, decoder)
        async with self.db.transaction(op.changes_answers) as conn:
            identity = await self.auth.authenticate(conn, request)
            arguments = {**self.admission.admit(op, request, identity), **prepared}
            return await self.run_audited(op, conn, request, arguments, decoder), identity

    async def receive_upload(
        self, op: Operation, request: Request, decoder: msgspec.json.Decoder[Any] | None
    ) -> tuple[msgspec.Struct, Identity]:
        # What the headers alone refuse is refused before one byte of the body is stored:
        # the content type, Prefer, the caller, its permission and its right to the target
        # (`op.admit`). Only the signature waits for the body.
        content_type = accepted_content_type(request.headers.get("content-type"))
        parse_prefer(request.headers.get("prefer"), self.settings)
        async with self.db.reading() as conn:
            found = await self.auth.authenticate_headers(conn, request)
            identity = found if isinstance(found, Identity) else found.claimed_identity()
            arguments = self.admission.admit(op, request, identity)
            if op.admit is not None:
                declared = declared_length(request.scope)
                await op.admit(conn, declared_bytes=declared, **arguments)
        with tempfile.TemporaryFile(prefix="graphsvc-upload-") as spool:
            try:
                async with self.noting_arrival(op, arguments):
                    await self.stopping.before_cutoff(
                        receive_upload(request, spool, content_type, found)
                    )
            except ApiError as exc:
                if exc.code == "stopping" and op.cut_off is not None:
                    async with self.db.transaction() as conn:
                        await op.cut_off(conn, **arguments)
                raise
            async with self.db.transaction(op.changes_answers) as conn:
                return await self.run_audited(op, conn, request, arguments, decoder), identity

    async def prepare(
        self, op: Operation, request: Request, decoder: msgspec.json.Decoder[Any] | None
    ) -> dict[str, Any]:
        """The `prepared` argument of a write that has `op.prepare`, made before its
        transaction for the caller as a read authenticates it (the transaction then
        authenticates the request again); no argument for any other write."""
        if op.prepare is None:
            return {}
        async with self.db.reading() as conn:
            identity = await self.auth.authenticate(conn, request)
        arguments = self.admission.admit(op, request, identity)
        if decoder is not None:
            arguments["body"] = decode_json(decoder, await request.body(), "body")
        return {"prepared": await op.prepare(self.context, request, **arguments)}

    @contextlib.asynccontextmanager
    async def noting_arrival(self, op: Operation, arguments: dict[str, Any]) -> AsyncIterator[None]:
        """Run `op.receiving` every so often while the block (an upload's body arriving)
        runs: a slow client's job stays alive for as long as its file keeps coming."""
        receiving = op.receiving
        if receiving is None:
            yield
            return
        every = min(60.0, self.settings.upload_job_timeout_seconds / 4)

        async def note() -> None:
            while True:  # at once (a file beginning to arrive is a sign of life), then again
                try:
                    async with self.db.transaction(changes_answers=False) as conn:
                        await receiving(conn, **arguments)
                except database_errors() as exc:  # the next one may land; the timeout is long
                    log.debug("arrival of an upload not noted: %s", exc)
                await asyncio.sleep(every)

        noting = asyncio.create_task(note())
        try:
            yield
        finally:
            noting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await noting

    async def run_audited(
        self,
        op: Operation,
        conn: Connection,
        request: Request,
        arguments: dict[str, Any],
        decoder: msgspec.json.Decoder[Any] | None,
    ) -> msgspec.Struct:
        """The handler's answer, its audit events stored in its transaction."""
        with recording_audit() as events:
            answer = await self.admission.run(op, conn, request, arguments, decoder)
        await store_audit_events(
            conn,
            events,
            request.caller,
            request.scope.get(REQUEST_ID_KEY, ""),
            client_address(request.scope, self.settings.trusted_proxies),
            self.settings.audit_retention_days,
        )
        return answer
