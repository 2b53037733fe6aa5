"""The one path of a read (an operation that takes either kind of credentials and writes
nothing), taken by the ASGI cycle and, for the answers memory holds, by the server's
protocol as soon as a request's headers are read (`answer_at_once`).

Both take the same ordered steps, `admit` and `answer_from_memory`: the caller's permission,
the kept answer (a kept answer's parameters were read when it was made, and depend on
nothing but its key: they are not read again), the parameters when nothing is kept, the
`Prefer` header, then the kept answer or a 304. The ASGI path counts the rate limit before
any of them (api/app.py: refused and unknown requests count too), authenticates with the
store at hand and runs the handler when memory holds no answer; the protocol's path
authenticates from memory and counts the rate limit last, once every other step has passed,
and hands the request over untouched where a step needs an await (a session, a token not
cached, Redis counting the limit, a handler) or refuses it (the ASGI path then says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import msgspec

from graphsvc.api.admission import Admission, refuse_expired_secret
from graphsvc.api.answers import (
    CACHE_CONTROL,
    Answer,
    AnswerCache,
    AnswerKey,
    AnswerKeys,
    answer_kept,
    content_etag,
    etag_salt,
    keep_answer,
    matches_none,
    names_any,
    version_etag,
)
from graphsvc.api.auth import Authenticator, Identity, LastAccess
from graphsvc.api.metrics import Metrics
from graphsvc.api.ratelimit import RateLimiter, client_address
from graphsvc.api.routes import Operation
from graphsvc.api.web import (
    OPERATION_KEY,
    Endpoint,
    Request,
    Response,
    Scope,
    encode,
)
from graphsvc.errors import ApiError
from graphsvc.settings import Settings
from graphsvc.store.db import Connection, Database
from graphsvc.wire.common import Download


@dataclass
class AdmittedRead:
    """A read past its checks, with what memory holds of its answer."""

    op: Operation
    request: Request
    version: int | None  # the data version its answer is of; None: not kept
    key: AnswerKey | None  # its answer's key, when it may be kept
    kept: Answer | None
    arguments: dict[str, Any] | None  # the handler's; None when an answer is kept
    headers: dict[str, str]  # the answer's, so far


class Reads:
    def __init__(
        self,
        settings: Settings,
        db: Database,
        auth: Authenticator,
        admission: Admission,
        limiter: RateLimiter | None,
        metrics: Metrics,
        last_access: LastAccess,
        answers: AnswerCache,
        ops: Sequence[Operation],
    ) -> None:
        self.settings = settings
        self.db = db
        self.auth = auth
        self.admission = admission
        self.limiter = limiter
        self.metrics = metrics
        self.last_access = last_access
        self.answers = answers
        self.keys = AnswerKeys(settings, ops)
        self.etag_salt = etag_salt(settings.edition)
        # The reads asked with a body (a Cypher query): its decoder, by operation.
        self.decoders = {
            op.operation_id: msgspec.json.Decoder(op.request_body)
            for op in ops
            if op.request_body is not None
        }
        # The reads `answer_at_once` may answer: not those whose answer is the caller's own
        # (the key needs the caller, and these are seldom asked twice).
        self.at_once = {
            op.operation_id: op
            for op in ops
            if op.method == "GET"
            and op.cached
            and op.authentication == "any"
            and op.operation_id not in self.keys.per_caller
            and (settings.edition == "enterprise" or not op.enterprise_only)
        }

    def admit(
        self, op: Operation, request: Request, identity: Identity, at_once: bool = False
    ) -> AdmittedRead | None:
        """The read's checks, in order, and what memory holds of its answer. None only
        `at_once`, where memory can answer nothing (nothing kept and no tag named): the
        parameters are then read by the whole path."""
        principal = self.admission.authorize(op, request, identity)
        version = self.db.data_version() if op.cached else None
        key = kept = None
        if version is not None:
            key = self.keys.key(op, request)
            kept = self.answers.get(version, key)
        arguments = None
        if kept is None:
            if at_once and "if-none-match" not in request.headers:
                return None
            arguments = self.admission.parameters(op, request)
        refuse_expired_secret(op, principal, arguments or {})
        headers = {"Cache-Control": CACHE_CONTROL, **self.admission.preference_applied(request)}
        return AdmittedRead(op, request, version, key, kept, arguments, headers)

    def answer_from_memory(self, read: AdmittedRead) -> Response | None:
        """The kept answer, or a 304 when `If-None-Match` names it, kept here or not (a tag
        of this version names an answer that was made, here or by another replica). None:
        the handler must run. `*` names any answer, so only one kept here (the operation
        may fail); a window that ends now has no tag of the version (its tag is its
        records')."""
        if_none_match = read.request.headers.get("if-none-match")
        if read.kept is not None:
            return answer_kept(read.kept, if_none_match, read.headers, read.op.status)
        if (
            read.version is None
            or read.key is None
            or read.request.window_ending_now is not None
            or if_none_match is None
            or names_any(if_none_match)
        ):
            return None
        etag = version_etag(read.version, read.key, self.etag_salt)
        if not matches_none(if_none_match, etag):
            return None
        read.headers["ETag"] = etag
        return Response(304, b"", read.headers)

    def count_found(self, read: AdmittedRead, found: Response) -> None:
        if found.status == read.op.status:  # an answer's body sent from memory; a 304 sends none
            self.metrics.count_answer_lookup(hit=True)

    async def answer_from_handler(self, read: AdmittedRead, conn: Connection) -> Response:
        """The handler's answer, kept when it may be."""
        assert read.arguments is not None
        op, request, headers = read.op, read.request, read.headers
        if_none_match = request.headers.get("if-none-match")
        if read.version is not None:
            self.metrics.count_answer_lookup(hit=False)
        decoder = self.decoders.get(op.operation_id)
        made = await self.admission.run(op, conn, request, read.arguments, decoder)
        if isinstance(made, Download):
            return download_response(made, op.status, headers, if_none_match)
        answer = None
        if read.version is not None and read.key is not None:
            window = request.window_ending_now
            answer = keep_answer(made, read.key, read.version, window, self.etag_salt)
        if answer is None:
            body = encode(made)
            headers["ETag"] = etag = content_etag(body)
            if matches_none(if_none_match, etag):
                return Response(304, b"", headers)
            return Response(op.status, body, headers)
        assert read.version is not None and read.key is not None
        self.answers.put(read.version, read.key, answer)
        if names_any(if_none_match):
            headers["ETag"] = answer.etag
            return Response(304, b"", headers)
        return answer_kept(answer, if_none_match, headers, op.status)

    def endpoint(self, op: Operation) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            self.admission.refuse_other_edition(op, request)
            await request.body()
            # A connection is taken only when a statement needs one: an answer from memory
            # to a token whose record is cached needs none.
            async with self.db.reading_on_demand() as conn:
                identity = await self.auth.authenticate(conn, request)
                read = self.admit(op, request, identity)
                assert read is not None
                response = self.answer_from_memory(read)
                if response is None:
                    response = await self.answer_from_handler(read, conn)
                else:
                    self.count_found(read, response)
            self.last_access.note(identity)
            return response

        return endpoint

    def answer_at_once(
        self, scope: Scope, operation_id: str, path_params: dict[str, str]
    ) -> Response | None:
        """The answer to a read that memory holds, made without awaiting anything, for the
        server to write at once, without an ASGI cycle (api/server.py). None: the request
        takes the whole path, which answers it or refuses it, saying why. Nothing is
        counted (the rate limit, the cache's hits) or noted (the token's use) before every
        step has passed."""
        op = self.at_once.get(operation_id)
        if op is None:
            return None
        request = Request(scope, receive_nothing, path_params, 0, 0, 1)
        if not request.declares_no_body():
            return None
        identity = self.auth.identity_from_memory(request)
        if identity is None:
            return None
        try:
            read = self.admit(op, request, identity, at_once=True)
            response = None if read is None else self.answer_from_memory(read)
        except ApiError:
            return None
        if read is None or response is None:
            return None
        if self.limiter is not None:
            client = client_address(scope, self.settings.trusted_proxies)
            verdict = self.limiter.record_hit_in_memory(client)
            if verdict is None or not verdict.admitted:  # a refusal is not counted
                return None
        scope[OPERATION_KEY] = op.operation_id
        self.count_found(read, response)
        self.last_access.note(identity)
        return response


def download_response(
    made: Download, status: int, headers: dict[str, str], if_none_match: str | None
) -> Response:
    """A file answer (an export): its bytes, named by an ETag of its content, offered to be
    saved under its name (RFC 6266: an ASCII `filename`, and the UTF-8 one in `filename*`)."""
    headers["ETag"] = etag = content_etag(made.body)
    if matches_none(if_none_match, etag):
        return Response(304, b"", headers)
    plain = made.filename.encode("ascii", "replace").decode().replace('"', "_")
    headers["Content-Disposition"] = (
        f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(made.filename)}"
    )
    return Response(status, made.body, headers, made.media_type.encode())


async def receive_nothing() -> dict[str, Any]:
    """The receive of a request answered at once, which declared no body to receive."""
    return {"type": "http.disconnect"}
