"""The ASGI application: the router built from the operations table, the request path of a
read (rate limit, auth, Prefer, timeout) and the one place failures become the spec's error
body."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import tempfile
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from functools import partial
from typing import Any

import msgspec

from graphsvc.accounts.audit_log import store_audit_events
from graphsvc.accounts.permissions import Caller
from graphsvc.api.answers import (
    CACHE_CONTROL,
    Answer,
    AnswerCache,
    AnswerKey,
    content_etag,
    etag_salt,
    make_key,
    matches_none,
    names_any,
    version_etag,
)
from graphsvc.api.auth import Authenticator, Identity, TokenRefused
from graphsvc.api.context import Context
from graphsvc.api.login import PASSWORD_CHECKS_AT_ONCE
from graphsvc.api.metrics import Metrics
from graphsvc.api.openapi import build_openapi
from graphsvc.api.params import (
    BaseUrl,
    Filters,
    TheCaller,
    query_names_of,
    refuse_nul_in_query,
    refuse_undeclared_query,
)
from graphsvc.api.ratelimit import (
    RateLimiter,
    client_address,
    login_failure_windows,
    request_windows,
    too_many_requests,
)
from graphsvc.api.routes import OPERATIONS, Operation
from graphsvc.api.upload_body import accepted_content_type, receive_upload
from graphsvc.api.web import (
    REQUEST_ID_KEY,
    Endpoint,
    Receive,
    Request,
    Response,
    Scope,
    Send,
    body_too_large,
    declared_length,
    decode_json,
    encode,
    error_response,
    index_routes,
    json_response,
    match_request,
    new_request_id,
    response_headers,
    route,
    send_response,
)
from graphsvc.console.assets import load_console_files
from graphsvc.crypto import KeyBox
from graphsvc.errors import ApiError, bad_request, forbidden, not_found
from graphsvc.graph.paths import PathIndex
from graphsvc.logs import REQUESTS, audit, log_request_line, recording_audit, token_hash
from graphsvc.settings import Settings
from graphsvc.store import accounts
from graphsvc.store.db import (
    DATABASE_ERRORS,
    Connection,
    Database,
    NoFreeConnection,
    create_database,
    is_store_busy,
    redact_url,
)
from graphsvc.uploads import UPLOAD_LIMIT_HEADER
from graphsvc.uploads.ingester import JobIngester, start_ingester

log = logging.getLogger("graphsvc")
PREFER = re.compile(r"wait=(-1|[0-9]{1,18})")  # bounded: int() of thousands of digits fails
BARE_NUMBER = re.compile(r"-?[0-9]{1,18}")


class App:
    """The ASGI app for one set of settings; the database opens at startup (lifespan)."""

    def __init__(self, settings: Settings, database: Database | None = None) -> None:
        self.settings = settings
        self.db = database or create_database(
            settings.resolved_database_url(),
            settings.db_pool_size,
            settings.db_acquire_timeout_seconds,
        )
        self.auth = Authenticator(
            settings,
            settings.resolved_jwt_secret(),
            KeyBox(settings.resolved_token_encryption_key()),
        )
        self.limiter = (
            RateLimiter(
                request_windows(settings.rate_limit_per_second, settings.rate_limit_burst),
                settings.redis_url,
            )
            if settings.rate_limit_per_second > 0
            else None
        )
        self.answers = AnswerCache(settings.answer_cache_bytes)
        self.etag_salt = etag_salt(settings.edition)
        self.metrics = Metrics(self.db, self.limiter, self.answers, settings.metrics != "off")
        self.ingester: JobIngester | None = None  # started with the app, when configured
        self.touches: dict[str, datetime] = {}  # token id -> last access not yet written
        self.touching: asyncio.Task[None] | None = None  # the writer of `touches`
        self.context = Context(
            settings,
            self.db,
            self.auth,
            self.metrics,
            encode(build_openapi(OPERATIONS)),
            RateLimiter(
                login_failure_windows(settings.login_failures_per_minute), settings.redis_url
            ),
            asyncio.Semaphore(PASSWORD_CHECKS_AT_ONCE),
            PathIndex(self.db, settings.resolved_path_index_folder()),
            load_console_files() if settings.console == "on" else None,
        )
        # The query parameters of each operation without list filters (those name their own
        # unknown parameters, with the columns they filter).
        self.query_names = {
            op.operation_id: query_names_of(op.parameters)
            for op in OPERATIONS
            if not any(isinstance(p, Filters) for p in op.parameters)
        }
        # The operations whose answer is the caller's own, or depends on who may see it: the
        # user is part of its key. Those that show the URL the service was reached at, when
        # no public URL is set: that URL is (a request's Host must not decide another's).
        self.per_caller = {
            op.operation_id
            for op in OPERATIONS
            if any(isinstance(p, TheCaller) for p in op.parameters)
        }
        self.per_base_url = {
            op.operation_id
            for op in OPERATIONS
            if not settings.public_url and any(isinstance(p, BaseUrl) for p in op.parameters)
        }
        # The reads `answer_at_once` may answer.
        self.from_memory = {
            op.operation_id: op
            for op in OPERATIONS
            if op.method == "GET"
            and op.cached
            and op.authentication == "any"
            and op.operation_id not in self.per_caller
            and (settings.edition == "enterprise" or not op.enterprise_only)
        }
        by_path: dict[str, list[Operation]] = {}
        for op in OPERATIONS:
            by_path.setdefault(op.path, []).append(op)
        self.routes = index_routes(
            [
                route(
                    path,
                    {op.method: self.endpoint(op) for op in ops},
                    max(body_limit(op, settings) for op in ops),
                    {op.method: op.operation_id for op in ops},
                )
                for path, ops in by_path.items()
            ]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        request_id = incoming_request_id(scope) or new_request_id()
        scope[REQUEST_ID_KEY] = request_id
        error: ApiError | None = None
        try:
            response = await self.respond(scope, receive)
        except ApiError as exc:
            error = exc
        except Exception as exc:
            error = self.classify_failure(exc, request_id)
        if error is not None:
            response = error_response(
                request_id, error.status, error.message, error.context, error.headers
            )
        await send_response(send, response, request_id, head=scope["method"] == "HEAD")
        self.log_request(scope, request_id, response.status, started, error)

    def answer_whole(self, scope: Scope) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
        """`answer_at_once` as the server writes it (its status, headers and body), the
        request logged as `__call__` logs it; None: the request takes the ASGI path."""
        started = time.perf_counter()
        response = self.answer_at_once(scope)
        if response is None:
            return None
        request_id = incoming_request_id(scope) or new_request_id()
        scope[REQUEST_ID_KEY] = request_id
        self.log_request(scope, request_id, response.status, started, None)
        body = b"" if scope["method"] == "HEAD" else response.body
        return response.status, response_headers(response, request_id), body

    def classify_failure(self, exc: Exception, request_id: str) -> ApiError:
        """An unexpected failure as the error it is answered with; logged, unless the
        store was only busy."""
        if is_store_busy(exc):
            # SQLite has one writer: a write that waited out the busy timeout behind an
            # ingest is worth retrying, not a server fault.
            return ApiError(
                503,
                "the store is busy with another write (an ingest); try again shortly",
                "database",
                {"Retry-After": str(BUSY_RETRY_SECONDS)},
                code="store_busy",
            )
        if isinstance(exc, NoFreeConnection):
            return ApiError(
                503,
                f"every database connection stayed in use for "
                f"{self.settings.db_acquire_timeout_seconds:g} s; try again shortly",
                "database",
                {"Retry-After": str(NO_CONNECTION_RETRY_SECONDS)},
                code="no_free_connection",
            )
        log.exception("unhandled error in request %s", request_id)
        if isinstance(exc, DATABASE_ERRORS):
            return ApiError(500, "database error", "database", code="database_error")
        return ApiError(500, "internal server error", "server")

    def log_request(
        self, scope: Scope, request_id: str, status: int, started: float, error: ApiError | None
    ) -> None:
        """One line per request; a refused one is an audit event too."""
        operation = scope.get(OPERATION, "unknown")
        seconds = time.perf_counter() - started
        self.metrics.observe(operation, status, seconds, None if error is None else error.code)
        level = logging.WARNING if status >= 500 else logging.INFO
        # A refused login is audited by the login itself, with the user name tried.
        login = scope["path"] == LOGIN_PATH and status != 429
        audited = error is not None and status in AUDITED and not login
        if not audited and not REQUESTS.isEnabledFor(level):
            return
        caller = scope.get(CALLER, {})
        fields = {
            "request_id": request_id,
            "method": scope["method"],
            # never the query: it can carry what a client should not log
            "path": logged_path(scope["path"]),
            "status": status,
            "duration_ms": round(seconds * 1000, 2),
            "operation": operation,
            "client": client_address(scope, self.settings.trusted_proxies),
            **caller,
        }
        if error is not None:
            fields["error_context"], fields["error"] = error.context, error.message
            fields["error_code"] = error.code
        log_request_line(level, fields)
        if audited:
            assert error is not None
            event, what = AUDITED[status]
            if isinstance(error, TokenRefused):  # why, which the caller is not told
                fields.update(error.audit_fields)
            audit(event, f"{what}: {error.message}", reason=error.message, **fields)

    async def respond(self, scope: Scope, receive: Receive) -> Response:
        path = scope["path"]
        # Counted before anything else runs, so refused requests cost as little as possible.
        if self.limiter is not None and path not in UNLIMITED:
            verdict = await self.limiter.record_hit(
                client_address(scope, self.settings.trusted_proxies)
            )
            if not verdict.admitted:
                raise too_many_requests(verdict)
        found = match_request(self.routes, scope)
        if found is None:
            raise ApiError(404, f"no route {path}", "route")
        matched, path_params = found
        method = scope["method"]
        endpoint = matched.methods.get("GET" if method == "HEAD" else method)
        if endpoint is None:
            raise ApiError(
                405,
                f"method {method} is not allowed on {path}",
                "method",
                {"Allow": ", ".join(matched.methods)},
            )
        length = declared_length(scope)
        if length is not None and length > matched.max_body:
            raise body_too_large(matched.max_body)
        scope[OPERATION] = matched.operation_ids["GET" if method == "HEAD" else method]
        request = Request(
            scope,
            receive,
            path_params,
            matched.max_body,
            self.settings.body_timeout_seconds,
            self.settings.body_min_bytes_per_second,
        )
        return await endpoint(request)

    async def lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.db.open()
                    await self.db.follow_data_version()
                    async with self.db.reading() as conn:
                        await self.auth.load(conn)
                    await self.warn_if_redis_is_silent()
                    if self.settings.ingester:
                        self.ingester = start_ingester(self.settings)
                except Exception as exc:
                    log.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.ingester is not None:
                    await asyncio.to_thread(self.ingester.stop)
                if self.touching is not None:
                    await self.touching
                await self.context.paths.stop()
                await self.db.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def warn_if_redis_is_silent(self) -> None:
        problem = await self.context.login_failures.find_redis_problem()
        if problem is not None:
            answered, reason = problem
            # Said once here: the limiters count in memory from the start, and say nothing
            # more until Redis answers again.
            for limiter in (self.limiter, self.context.login_failures):
                if limiter is not None:
                    limiter.note_redis_unreachable()
            log.warning(
                "Redis at %s %s (%s): rate limits and the login throttle count per process "
                "until it answers",
                redact_url(self.settings.redis_url or ""),
                "refuses graphsvc's requests" if answered else "does not answer",
                reason,
            )

    # --- the request path of an operation ----------------------------------------------------

    def endpoint(self, op: Operation) -> Endpoint:
        if op.authentication != "any":
            return partial(op.handler, self.context)
        return self.served_endpoint(op)

    def served_endpoint(self, op: Operation) -> Endpoint:
        """Authenticate, authorize, decode the body and parse the parameters, then run the
        handler under the request's timeout. An upload's body is received (and its signature
        checked) before the transaction opens, however long it takes to arrive."""
        decoder = msgspec.json.Decoder(op.request_body) if op.request_body else None

        async def endpoint(request: Request) -> Response:
            if op.enterprise_only and self.settings.edition != "enterprise":
                raise not_found(
                    f"{request.method} {request.path}: this operation is available "
                    "in the Enterprise edition only",
                    "edition",
                )
            if op.upload:
                # What the headers alone refuse is refused before one byte of the body is
                # stored: the content type, Prefer, the caller, its permission and its right
                # to the target (`op.admit`). Only the signature waits for the body.
                content_type = accepted_content_type(request.headers.get("content-type"))
                parse_prefer(request.headers.get("prefer"), self.settings)
                async with self.db.reading() as conn:
                    found = await self.auth.authenticate_headers(conn, request)
                    identity = found if isinstance(found, Identity) else found.claimed_identity()
                    arguments = self.admit_caller(op, request, identity)
                    if op.admit is not None:
                        declared = declared_length(request.scope)
                        await op.admit(conn, declared_bytes=declared, **arguments)
                with tempfile.TemporaryFile(prefix="graphsvc-upload-") as spool:
                    async with self.noting_arrival(op, arguments):
                        await receive_upload(request, spool, content_type, found)
                    async with self.db.transaction(op.changes_answers) as conn:
                        body = await self.run_audited(op, conn, request, arguments, decoder)
            elif op.writes:
                # The whole body first: a client slow to send it must not hold a connection
                # of the pool meanwhile.
                await request.body()
                prepared = await self.prepare_write(op, request, decoder)
                async with self.db.transaction(op.changes_answers) as conn:
                    identity = await self.auth.authenticate(conn, request)
                    arguments = {**self.admit_caller(op, request, identity), **prepared}
                    body = await self.run_audited(op, conn, request, arguments, decoder)
            else:
                await request.body()
                # A connection is taken only when a statement needs one: an answer from
                # memory to a token whose record is cached needs none.
                async with self.db.reading_on_demand() as conn:
                    identity = await self.auth.authenticate(conn, request)
                    arguments = self.admit_caller(op, request, identity)
                    response = await self.answer_read(op, conn, request, arguments)
                self.touch_token(identity)
                return response
            self.touch_token(identity)
            headers = self.preference_applied(request)
            if op.tells_upload_limit:
                headers[UPLOAD_LIMIT_HEADER] = str(self.settings.max_upload_bytes)
            return json_response(body, op.status, headers)

        return endpoint

    async def prepare_write(
        self, op: Operation, request: Request, decoder: msgspec.json.Decoder[Any] | None
    ) -> dict[str, Any]:
        """The `prepared` argument of a write that has `op.prepare`, made before its
        transaction for the caller as a read authenticates it (the transaction then
        authenticates the request again); no argument for any other write."""
        if op.prepare is None:
            return {}
        async with self.db.reading() as conn:
            identity = await self.auth.authenticate(conn, request)
        arguments = self.admit_caller(op, request, identity)
        if decoder is not None:
            arguments["body"] = decode_json(decoder, await request.body(), "body")
        return {"prepared": await op.prepare(self.context, request, **arguments)}

    async def answer_read(
        self, op: Operation, conn: Connection, request: Request, arguments: dict[str, Any]
    ) -> Response:
        """A read's answer, from memory while the store's data version has not moved since
        it was made; 304 when the client's `If-None-Match` names it. Only after the caller
        was authenticated, counted and authorized: a 304 tells as much as the answer."""
        headers = self.preference_applied(request)
        headers["Cache-Control"] = CACHE_CONTROL
        if_none_match = request.headers.get("if-none-match")
        version = self.db.data_version() if op.cached and not request.shows_now else None
        if version is None:
            body = encode(await self.run_operation(op, conn, request, arguments, None))
            headers["ETag"] = etag = content_etag(body)
            if matches_none(if_none_match, etag):
                return Response(304, b"", headers)
            return Response(op.status, body, headers)
        key = make_key(
            op.operation_id, request.path_params, request.query, self.key_context(op, request)
        )
        found = self.find_answer(
            op, version, key, self.answers.get(version, key), if_none_match, headers
        )
        if found is not None:
            self.count_found(op, found)
            return found
        self.metrics.count_answer_lookup(hit=False)
        headers["ETag"] = etag = version_etag(version, key, self.etag_salt)
        body = encode(await self.run_operation(op, conn, request, arguments, None))
        self.answers.put(version, key, Answer(etag, body))
        if names_any(if_none_match):
            return Response(304, b"", headers)
        return Response(op.status, body, headers)

    def find_answer(
        self,
        op: Operation,
        version: int,
        key: AnswerKey,
        kept: Answer | None,
        if_none_match: str | None,
        headers: dict[str, str],
    ) -> Response | None:
        """The answer to `key` at `version` without running `op`: `kept`, the one memory
        holds, or a 304 when `If-None-Match` names it, kept here or not (a tag of this
        version names an answer that was made, here or by another replica). None: `op` must
        run. `*` names any answer, so only one kept here (the operation may fail)."""
        if kept is not None:
            headers["ETag"] = kept.etag
            if matches_none(if_none_match, kept.etag):
                return Response(304, b"", headers)
            return Response(op.status, kept.body, headers)
        if if_none_match is None or names_any(if_none_match):
            return None
        etag = version_etag(version, key, self.etag_salt)
        if not matches_none(if_none_match, etag):
            return None
        headers["ETag"] = etag
        return Response(304, b"", headers)

    def count_found(self, op: Operation, found: Response) -> None:
        if found.status == op.status:  # an answer's body sent from memory; a 304 sends none
            self.metrics.count_answer_lookup(hit=True)

    def answer_at_once(self, scope: Scope) -> Response | None:
        """The answer to a read that memory holds, made without awaiting anything, for the
        server to write at once, without an ASGI cycle (api/server.py). None: the request
        takes the whole path (`respond`), which answers it or refuses it, saying why.

        Every check of the whole path is made, in another order but to the same outcome:
        each one that fails hands the request over untouched, and nothing is counted (the
        rate limit, the cache's hits) or noted (the token's use) before all have passed.
        Not for sessions (a JWT's session is read from the store), nor while Redis counts
        the rate limit, nor for answers that are the caller's own (see `per_caller`): the
        key needs the caller, and these are seldom asked twice."""
        if scope["method"] not in ("GET", "HEAD"):
            return None
        # Nothing kept and no tag named, as on the first requests after a change of the
        # data: nothing memory can answer, told before the route and key are found, which
        # cost such a miss 5 of its 6 us in process.
        if not self.answers.entries and not names_a_tag(scope["headers"]):
            return None
        found = match_request(self.routes, scope)
        if found is None:
            return None
        op = self.from_memory.get(found[0].operation_ids.get("GET", ""))
        if op is None:
            return None
        version = self.db.data_version()
        if version is None:
            return None
        request = Request(scope, receive_nothing, found[1], 0, 0, 1)
        if not request.declares_no_body():
            return None
        headers = {"Cache-Control": CACHE_CONTROL}
        key = make_key(
            op.operation_id, request.path_params, request.query, self.key_context(op, request)
        )
        kept = self.answers.get(version, key)
        answer = self.find_answer(
            op, version, key, kept, request.headers.get("if-none-match"), headers
        )
        identity = None if answer is None else self.auth.identity_from_memory(request)
        if answer is None or identity is None:
            return None
        try:
            # A kept answer's parameters were read without fault when it was made, and
            # reading them depends on nothing but its key (path, query, and the caller or
            # URL where the answer depends on them): read again, they cost an aggregation
            # answered from memory 10 of its 25 us in process. A 304 for an answer not kept
            # here reads them: its tag may be one a client made up. (What `admit_caller`
            # adds for an expired secret refuses sessions only, which take the whole path.)
            if kept is None:
                self.admit_caller(op, request, identity)
            else:
                self.authorize_caller(op, request, identity)
            headers.update(self.preference_applied(request))
        except ApiError:
            return None
        if request.shows_now:  # never kept, but a tag of the version might be named
            return None
        if self.limiter is not None:
            client = client_address(scope, self.settings.trusted_proxies)
            verdict = self.limiter.record_hit_in_memory(client)
            if verdict is None or not verdict.admitted:  # a refusal is not counted
                return None
        scope[OPERATION] = op.operation_id
        self.count_found(op, answer)
        self.touch_token(identity)
        return answer

    def key_context(self, op: Operation, request: Request) -> list[str | None]:
        """What an answer depends on besides the operation and its parameters."""
        context: list[str | None] = []
        if op.operation_id in self.per_caller:
            context.append(request.caller.principal.user_id)
        if op.operation_id in self.per_base_url:
            context.append(request.base_url())
        return context

    def preference_applied(self, request: Request) -> dict[str, str]:
        """The answer's headers, with Preference-Applied when the client sent `Prefer`
        (checked here too: an answer from memory runs no handler, and so no timeout)."""
        prefer = request.headers.get("prefer")
        wait = parse_prefer(prefer, self.settings)
        if prefer is None or not prefer.strip().startswith("wait="):
            return {}
        return {"Preference-Applied": f"wait={-1 if wait is None else wait}"}

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
                except DATABASE_ERRORS as exc:  # the next one may land; the timeout is long
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
        """`run_operation` for a write, its audit events stored in its transaction."""
        with recording_audit() as events:
            answer = await self.run_operation(op, conn, request, arguments, decoder)
        await store_audit_events(
            conn,
            events,
            request.caller,
            request.scope.get(REQUEST_ID_KEY, ""),
            client_address(request.scope, self.settings.trusted_proxies),
            self.settings.audit_retention_days,
        )
        return answer

    async def run_operation(
        self,
        op: Operation,
        conn: Connection,
        request: Request,
        arguments: dict[str, Any],
        decoder: msgspec.json.Decoder[Any] | None,
    ) -> msgspec.Struct:
        """The handler's answer, within the wait the request asked for."""
        limit = parse_prefer(request.headers.get("prefer"), self.settings)
        if limit is not None and request.upload is not None:
            limit += request.upload.size // UPLOAD_BYTES_PER_SECOND
        arguments = dict(arguments)
        if decoder is not None:
            arguments["body"] = decode_json(decoder, await request.body(), "body")
        if request.upload is not None:
            arguments["upload"] = request.upload
        try:
            async with asyncio.timeout(limit):
                body: msgspec.Struct = await op.handler(conn, **arguments)
                return body
        except TimeoutError:
            raise ApiError(
                500, f"request timed out after {limit} seconds", "timeout", code="timeout"
            ) from None

    def admit_caller(self, op: Operation, request: Request, identity: Identity) -> dict[str, Any]:
        """Authorize the caller for `op` and read its parameters: the handler's arguments, but
        for its body."""
        principal = self.authorize_caller(op, request, identity)
        refuse_nul_in_query(request.query)
        names = self.query_names.get(op.operation_id)
        if names is not None:
            refuse_undeclared_query(request.query, names)
        arguments: dict[str, Any] = {}
        for parameter in op.parameters:
            value = parameter.parse(request, self.context)
            if parameter.argument is not None:
                arguments[parameter.argument] = value
        if principal.secret_expired:
            refuse_expired_secret(op, principal.user_id, arguments)
        return arguments

    def authorize_caller(
        self, op: Operation, request: Request, identity: Identity
    ) -> accounts.Principal:
        """The user the request acts for, if it may run `op`; noted in the request."""
        request.scope[CALLER] = caller_fields(identity)
        principal = self.auth.authorize(identity, op.permission)
        request.caller = Caller(principal, identity.token_id, self.auth.permissions_of(principal))
        return principal

    def touch_token(self, identity: Identity) -> None:
        """Note the token's last access, after the answer and by one writer at a time: on
        SQLite the write waits behind an ingest's write lock, which a read must not wait
        for. A token used while the writer is busy waits for its next round, never dropped."""
        token_id = identity.token_id
        if token_id is None or not self.auth.token_needs_touch(token_id):
            return
        self.touches[token_id] = datetime.now(UTC)
        if self.touching is None:
            self.touching = asyncio.create_task(self.write_token_touches())

    async def write_token_touches(self) -> None:
        try:
            while self.touches:
                touches, self.touches = self.touches, {}
                try:
                    # No answer that is cached shows a token's last access (see `cached`).
                    async with self.db.transaction(changes_answers=False) as conn:
                        for token_id, when in touches.items():
                            await accounts.touch_token(conn, token_id, when)
                except DATABASE_ERRORS as exc:
                    log.debug("last access of %d tokens not written: %s", len(touches), exc)
                    for token_id in touches:
                        self.auth.forget_touch(token_id)  # written by a later request
        finally:
            self.touching = None


BUSY_RETRY_SECONDS = 5
NO_CONNECTION_RETRY_SECONDS = 1
UNLIMITED = ("/health", "/ready", "/metrics")  # probes and scrapes, sent often
CALLER = "graphsvc.caller"  # the scope key the request path notes its caller under
OPERATION = "graphsvc.operation"  # and the operationId it is
LOGIN_PATH = "/api/v2/login"  # its failures are audited with the user name tried
AUDITED = {
    401: ("auth.failed", "authentication failed"),
    403: ("auth.forbidden", "permission refused"),
    429: ("rate_limited", "rate limit reached"),
}
# An upload's timeout counts from the end of its body, one second more per this many bytes
# (32 s per GiB: a 1 GiB upload took 14 s in all, receiving and storing, on PostgreSQL here).
UPLOAD_BYTES_PER_SECOND = 32 * 1024 * 1024
REQUEST_ID = re.compile(rb"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


async def receive_nothing() -> dict[str, Any]:
    """The receive of a request answered at once, which declared no body to receive."""
    return {"type": "http.disconnect"}


def names_a_tag(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a request's raw headers hold an If-None-Match."""
    return any(name == b"if-none-match" for name, _ in headers)


def incoming_request_id(scope: Scope) -> str | None:
    """A client's X-Request-ID, when it is a UUID (the error body's request_id is one)."""
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            return value.decode().lower() if REQUEST_ID.fullmatch(value) else None
    return None


def refuse_expired_secret(op: Operation, user_id: str, arguments: dict[str, Any]) -> None:
    """A session of a user whose secret an administrator expired (`needs_password_reset`)
    may read the user and set its own new secret, nothing else, as the reference's login
    answer `auth_expired: true` tells its client."""
    if op.operation_id == "GetSelf":
        return
    if op.operation_id == "SetUserSecret" and arguments.get("user_id") == user_id:
        return
    raise forbidden(
        f"the secret of this user has expired: set a new one with PUT "
        f"/api/v2/bloodhound-users/{user_id}/secret, then log in again",
        "expired_secret",
    )


TOKEN_PATH = "/api/v2/tokens/"  # noqa: S105 - a route, not a secret


def logged_path(path: str) -> str:
    """A request's path as its log line shows it: a token's id in it (revoking one) as its
    token_hash, like every token id a line shows."""
    if path.startswith(TOKEN_PATH) and len(path) > len(TOKEN_PATH):
        return TOKEN_PATH + token_hash(path[len(TOKEN_PATH) :])
    return path


def caller_fields(identity: Identity) -> dict[str, str]:
    fields = {}
    if identity.principal is not None:
        fields["user_id"] = identity.principal.user_id
    if identity.token_id is not None:
        fields["token_hash"] = token_hash(identity.token_id)
    return fields


def body_limit(op: Operation, settings: Settings) -> int:
    if op.max_body_bytes is not None:
        return op.max_body_bytes
    return settings.max_upload_bytes if op.upload else settings.max_body_bytes


def create_app(settings: Settings, database: Database | None = None) -> App:
    return App(settings, database)


def parse_prefer(header: str | None, settings: Settings) -> int | None:
    """Seconds the request may take; None means no limit (wait=-1, when allowed)."""
    if header is None:
        return settings.default_wait_seconds
    if settings.sdk_compatibility and BARE_NUMBER.fullmatch(header.strip()):
        # The reference SDK sends `Prefer: 0` on every call; older reference servers took a
        # bare number as no preference.
        return settings.default_wait_seconds
    match = PREFER.fullmatch(header.strip())
    if match is None:
        raise bad_request(
            f"Prefer header must be 'wait=<seconds>' or 'wait=-1', got {header!r}", "Prefer"
        )
    wait = int(match.group(1))
    if wait == -1:
        if not settings.allow_unlimited_wait:
            raise bad_request("Prefer: wait=-1 (no timeout) is disabled on this server", "Prefer")
        return None
    if wait == 0:
        return settings.default_wait_seconds
    return min(wait, settings.max_wait_seconds)
