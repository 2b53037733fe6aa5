"""Answers written at once: a read whose answer is in memory is answered by the server as
soon as its headers are read, without the ASGI cycle (`App.answer_whole`,
`GuardedHttpProtocol._start_asgi_task`). The protocol's side is tested with a stand-in app
whose ASGI path says when it is taken; graphsvc's, served on both stores, must answer as
its ASGI path does, and refuse and count as it does."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import uvicorn

from graphsvc.accounts import tokens
from graphsvc.api.answers import make_key, version_etag
from graphsvc.api.app import App
from graphsvc.api.reads import receive_nothing
from graphsvc.api.server import MAX_PIPELINED, UNSENT_BYTES_AT_ONCE, GuardedHttpProtocol
from graphsvc.api.web import Request, match_request
from graphsvc.demo.dataset import DemoResult
from tests.conftest import (
    DEMO_SECRET,
    Env,
    check_against_openapi,
    free_port,
    served,
    server_environment,
    signed_headers,
)

FAST_BODY = b'{"data":"from memory"}'
BIG_BODY = b'{"data":"%s"}' % (b"x" * (1 << 20))  # a large answer, as a long list kept


class StandInApp:
    """Answers /fast at once; /boom fails at once; everything else (and /boom) takes the
    ASGI path, which notes the paths it was given."""

    def __init__(self) -> None:
        self.asgi_paths: list[str] = []
        self.server: uvicorn.Server | None = None

    def answer_whole(
        self, scope: dict[str, Any]
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
        if scope["path"] == "/boom":
            raise RuntimeError("a fault of the memory path")
        if scope["path"] not in ("/fast", "/big"):
            return None
        body = BIG_BODY if scope["path"] == "/big" else FAST_BODY
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        return 200, headers, b"" if scope["method"] == "HEAD" else body

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        self.asgi_paths.append(scope["path"])
        if scope["path"] == "/big":  # the kept answer, by the cycle
            headers = [(b"content-length", b"%d" % len(BIG_BODY))]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": BIG_BODY})
            return
        body = b'{"data":"by the cycle"}'
        # /hang stays in service while a test opens more; else long enough for a request
        # behind it to be queued
        await asyncio.sleep(2.0 if scope["path"] == "/hang" else 0.05)
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@pytest.fixture
def stand_in(request: pytest.FixtureRequest) -> Iterator[tuple[StandInApp, int]]:
    app = StandInApp()
    port = free_port()
    limits = getattr(request, "param", {})  # configure's limits, by name
    protocol = GuardedHttpProtocol.configure(
        5.0,
        limits.get("max_connections", 100),
        None,
        max_waiting_connections=limits.get("max_waiting_connections", 500),
    )
    # As `graphsvc serve` has it: uvicorn's proxy middleware would hide the app's own methods.
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, http=protocol, log_config=None, proxy_headers=False
    )
    server = app.server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        threading.Event().wait(0.02)
    assert server.started
    yield app, port
    server.should_exit = True
    thread.join(10)


def read_answers(sock: socket.socket, count: int) -> list[tuple[bytes, bytes]]:
    """`count` answers (head, body) read off a kept-alive connection, framed by their
    Content-Length."""
    received = b""
    answers: list[tuple[bytes, bytes]] = []
    while len(answers) < count:
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            assert chunk, f"closed after {len(answers)} answers: {received!r}"
            received += chunk
        head, _, rest = received.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b": ")
            if name == b"content-length":
                length = int(value)
        while len(rest) < length:
            chunk = sock.recv(65536)
            assert chunk
            rest += chunk
        answers.append((head, rest[:length]))
        received = rest[length:]
    return answers


def test_an_answer_at_once_is_written_without_the_cycle(stand_in: tuple[StandInApp, int]) -> None:
    app, port = stand_in
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        for _ in range(3):  # kept alive between them
            sock.sendall(b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
            [(head, body)] = read_answers(sock, 1)
            assert head.startswith(b"HTTP/1.1 200 OK\r\n") and body == FAST_BODY
            # uvicorn's own headers, as on its cycle's answers
            assert b"\r\ndate: " in head and b"\r\nserver: uvicorn" in head
            assert b"connection: close" not in head
        sock.sendall(b"HEAD /fast HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.sendall(b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
        head = sock.recv(65536)
        assert head.count(b"HTTP/1.1 200 OK") in (1, 2)  # HEAD's answer, then GET's
    assert app.asgi_paths == []


def test_answers_at_once_reach_clients_of_several_connections(
    stand_in: tuple[StandInApp, int],
) -> None:
    """Alone, a connection's answer leaves at once; with others open it leaves at the end
    of the loop's pass, with theirs: either way it leaves."""
    app, port = stand_in
    sockets = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
    try:
        for _ in range(2):
            for sock in sockets:
                sock.sendall(b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
            for sock in sockets:
                assert [body for _, body in read_answers(sock, 1)] == [FAST_BODY]
    finally:
        for sock in sockets:
            sock.close()
    assert app.asgi_paths == []


def test_pipelined_requests_are_answered_in_order(stand_in: tuple[StandInApp, int]) -> None:
    app, port = stand_in
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(
            b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        bodies = [body for _, body in read_answers(sock, 4)]
    cycle = b'{"data":"by the cycle"}'
    assert bodies == [FAST_BODY, cycle, FAST_BODY, cycle]
    assert app.asgi_paths == ["/slow", "/slow"]


def test_a_long_pipeline_behind_a_slow_request_is_answered_to_its_bound(
    stand_in: tuple[StandInApp, int],
) -> None:
    """Requests queued behind one on the ASGI path are answered, in order, up to the bound
    of the queue; the last of them says `connection: close` and the connection closes (the
    client sends the rest again). Before the bound, a client pipelining and reading had
    334,520 requests queued on one connection (2.7 GB). An answer written at once that
    starts the next must not nest a call per request either (a hostile client's thousand
    pipelined requests once ran out of stack)."""
    _, port = stand_in
    count = 1500
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
            + b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n" * count
        )
        answers = read_answers(sock, MAX_PIPELINED + 1)
        assert sock.recv(65536) == b""  # closed after them
    bodies = [body for _, body in answers]
    cycle = b'{"data":"by the cycle"}'
    assert bodies[0] == cycle
    assert set(bodies[1:]) == {FAST_BODY, cycle}  # a turn at once, a turn by the cycle
    assert [b"connection: close" in head for head, _ in answers] == [False] * MAX_PIPELINED + [True]


def test_a_client_that_does_not_read_parks_no_pile_of_answers(
    stand_in: tuple[StandInApp, int],
) -> None:
    """Pipelined requests for a large answer from clients that never read: what each
    connection holds unsent stays within the bound plus an answer or two (not a whole
    batch: 32 answers of 1 MB a connection before), and every answer still arrives, in
    order, once the client reads."""
    app, port = stand_in
    assert app.server is not None
    batch, connections = MAX_PIPELINED, 4  # as many as a connection may queue
    sockets = []
    for _ in range(connections):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the kernel takes little
        sock.settimeout(10)
        sock.connect(("127.0.0.1", port))
        sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n" * batch)
        sockets.append(sock)
    try:
        # Each connection's second request waits for its client on the ASGI path (before the
        # bound, none did: the whole batch was written at once). A loaded machine may take
        # seconds to accept them all.
        for _ in range(500):
            accepted = len(app.server.server_state.connections)
            if accepted == connections and app.asgi_paths.count("/big") >= connections:
                break
            threading.Event().wait(0.02)
        protocols = [p for p in app.server.server_state.connections]
        unsent = [p.coalescing.get_write_buffer_size() for p in protocols]  # type: ignore[union-attr]
        assert len(unsent) == connections
        # The largest a connection may hold: an answer begun under the bound and the cycle's
        # answer written before the transport paused.
        most = UNSENT_BYTES_AT_ONCE + 2 * len(BIG_BODY) + 4096
        assert max(unsent) <= most, unsent
        for sock in sockets:
            bodies = [body for _, body in read_answers(sock, batch)]
            assert bodies == [BIG_BODY] * batch
    finally:
        for sock in sockets:
            sock.close()


@pytest.mark.parametrize("stand_in", [{"max_connections": 3}], indirect=True)
def test_a_connection_past_the_cap_is_refused_when_none_waits_on_its_client(
    stand_in: tuple[StandInApp, int],
) -> None:
    """Three connections whose requests are in service (none to shed): a fourth is refused
    with the JSON 503 at once."""
    app, port = stand_in
    busy = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
    try:
        for sock in busy:
            sock.sendall(b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
        for _ in range(100):
            if len(app.asgi_paths) == 3:
                break
            threading.Event().wait(0.02)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as extra:
            answer = extra.recv(65536)
    finally:
        for sock in busy:
            sock.close()
    assert answer.startswith(b"HTTP/1.1 503 Service Unavailable\r\n"), answer[:100]
    assert b'"context":"connections"' in answer


@pytest.mark.parametrize("stand_in", [{"max_waiting_connections": 2}], indirect=True)
def test_a_client_that_never_reads_is_shed_as_one_that_never_sends(
    stand_in: tuple[StandInApp, int],
) -> None:
    """A connection whose answers wait for its client to read them waits on its client as
    a slow sender does: past the cap it is shed, and cut off at once (a close would wait for
    it to read). Before, it was in service for ever, and a thousand such held every
    connection the server allows."""
    app, port = stand_in
    assert app.server is not None
    reader = socket.socket()
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    reader.settimeout(5)
    reader.connect(("127.0.0.1", port))
    reader.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n" * 20)
    for _ in range(100):  # its second request waits, on the ASGI path, for it to read
        if "/big" in app.asgi_paths:
            break
        threading.Event().wait(0.02)
    threading.Event().wait(0.2)  # its writes paused
    idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(2)]
    try:
        for _ in range(100):
            if len(app.server.server_state.connections) == 2:
                break
            threading.Event().wait(0.02)
        assert len(app.server.server_state.connections) == 2  # the reader's is gone
        with contextlib.suppress(ConnectionResetError):  # ends, at once, reset or not
            while reader.recv(1 << 20):
                pass
    finally:
        reader.close()
        for sock in idle:
            sock.close()


@pytest.mark.parametrize(
    "request_head",
    [
        b"GET /fast HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /fast HTTP/1.0\r\nHost: x\r\n\r\n",
    ],
    ids=["connection close", "http/1.0"],
)
def test_an_answer_at_once_closes_when_asked(
    stand_in: tuple[StandInApp, int], request_head: bytes
) -> None:
    _, port = stand_in
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request_head)
        received = b""
        while chunk := sock.recv(65536):  # to the end: the server closes
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    assert b"\r\nconnection: close" in head and body == FAST_BODY


def test_a_fault_of_the_memory_path_takes_the_cycle(stand_in: tuple[StandInApp, int]) -> None:
    app, port = stand_in
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\n")
        [(head, body)] = read_answers(sock, 1)
    assert head.startswith(b"HTTP/1.1 200") and body == b'{"data":"by the cycle"}'
    assert app.asgi_paths == ["/boom"]


# --- graphsvc's answers at once ------------------------------------------------------------

WINDOW = "start=2000-01-01T00:00:00Z&end=2100-01-01T00:00:00Z"


def reads_of(demo: DemoResult) -> list[str]:
    """A read of each kind the demo can answer: lists, a single object, statistics."""
    computer = demo.computer_object_ids[0]
    return [
        f"/api/v2/data-quality-stats-aggregations?schema_environment_kind_id=8&{WINDOW}",
        f"/api/v2/azure-tenants/{demo.tenant_ids[0]}/data-quality-stats?{WINDOW}",
        f"/api/v2/saml/providers/{demo.saml_provider_ids[0]}",
        f"/api/v2/computers/{computer}/dcom-rights?limit=2",
        f"/api/v2/computers/{computer}",
        "/api/v2/saml",
    ]


def scope_of(uri: str, headers: dict[str, str], method: str = "GET") -> dict[str, Any]:
    """An ASGI scope of a request to `uri`, as uvicorn makes it."""
    path, _, query = uri.partition("?")
    return {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "headers": [
            (b"host", b"testserver"),  # as the test client sends it
            *((k.lower().encode(), v.encode()) for k, v in headers.items()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
        "scheme": "http",
    }


@pytest.fixture
def cached_demo_env(
    demo_env: tuple[Env, DemoResult], make_env: Callable[..., Env]
) -> tuple[Env, DemoResult]:
    """The demo, served in process with tokens' records cached, as `graphsvc serve` has
    them (a token not cached is read from the store, which memory cannot answer)."""
    demo_token, demo = demo_env[0].token, demo_env[1]
    env = make_env(token_cache_seconds=60)
    env.token = demo_token
    return env, demo


def test_a_kept_answer_is_answered_at_once_as_the_cycle_answers_it(
    cached_demo_env: tuple[Env, DemoResult],
) -> None:
    env, demo = cached_demo_env
    app: App = env.client.app  # type: ignore[assignment]
    for uri in reads_of(demo):
        headers = env.signed_headers("GET", uri)
        assert app.answer_whole(scope_of(uri, headers)) is None  # not yet kept
        made = env.request("GET", uri, headers)
        assert made.status_code == 200, made.text
        answered = app.answer_whole(scope_of(uri, headers))
        assert answered is not None, uri
        status, sent, body = answered
        named = {name.decode(): value.decode() for name, value in sent}
        assert status == 200 and body == made.content
        assert named["etag"] == made.headers["etag"]
        assert named["cache-control"] == made.headers["cache-control"]
        assert named["content-type"] == made.headers["content-type"]
        assert named["content-length"] == str(len(body))
        assert named["requestid"] != made.headers["requestid"]
        current = {**headers, "If-None-Match": made.headers["etag"]}
        not_modified = app.answer_whole(scope_of(uri, current))
        assert not_modified is not None and not_modified[0] == 304 and not_modified[2] == b""
        assert b"content-length" not in dict(not_modified[1])
        head = app.answer_whole(scope_of(uri, env.signed_headers("HEAD", uri), "HEAD"))
        assert head is not None and head[2] == b""
        assert dict(head[1])[b"content-length"] == str(len(body)).encode()
    # With nothing kept, as on a replica that did not make them, a current tag is still
    # answered 304 at once, and a request without one is not answered.
    app.answers.clear(None)
    for uri in reads_of(demo):
        made = env.request("GET", uri, env.signed_headers("GET", uri))
        app.answers.clear(None)
        headers = env.signed_headers("GET", uri)
        assert app.answer_whole(scope_of(uri, headers)) is None
        current = {**headers, "If-None-Match": made.headers["etag"]}
        not_modified = app.answer_whole(scope_of(uri, current))
        assert not_modified is not None and not_modified[0] == 304, uri


def test_what_memory_cannot_answer_takes_the_whole_path(
    cached_demo_env: tuple[Env, DemoResult],
) -> None:
    env, demo = cached_demo_env
    app: App = env.client.app  # type: ignore[assignment]
    uri = f"/api/v2/saml/providers/{demo.saml_provider_ids[0]}"
    assert env.get(uri).status_code == 200  # kept
    assert env.get("/api/v2/self").status_code == 200  # never kept (a token's last access)
    signed = env.signed_headers("GET", uri)
    assert app.answer_whole(scope_of(uri, signed)) is not None
    collector = env.user_with_token("collector", "Upload-Only")
    env.get(uri, token=collector)  # refused, its record now cached
    session = {"Authorization": f"Bearer {env.login('admin', DEMO_SECRET)}"}
    refused = {
        "a session": scope_of(uri, session),
        "no permission": scope_of(uri, env.signed_headers("GET", uri, collector)),
        "unsigned": scope_of(uri, {}),
        "a bad signature": scope_of(uri, {**signed, "Signature": "AAAA"}),
        "a stale date": scope_of(uri, {**signed, "RequestDate": "2001-01-01T00:00:00Z"}),
        "a body": scope_of(uri, {**signed, "Content-Length": "2"}),
        "a bad Prefer": scope_of(uri, {**signed, "Prefer": "wait=soon"}),
        "another target": scope_of(f"{uri}?x=1", env.signed_headers("GET", f"{uri}?x=1")),
        "another method": scope_of(uri, signed, "DELETE"),
        "an answer never kept": scope_of("/api/v2/self", env.signed_headers("GET", "/api/v2/self")),
        "a wildcard not kept": scope_of(
            "/api/v2/saml/providers/999999",
            {**env.signed_headers("GET", "/api/v2/saml/providers/999999"), "If-None-Match": "*"},
        ),
    }
    # Each refused with the answer kept (the user and the session above moved the data
    # version, and so emptied the cache): memory would answer the same request signed well.
    assert env.get(uri).status_code == 200
    for why, scope in refused.items():
        assert app.answer_whole(scope_of(uri, env.signed_headers("GET", uri))) is not None
        assert app.answer_whole(scope) is None, why
    # and the whole path answers each as it did before answers were written at once
    assert env.request("GET", uri, session).status_code == 200
    assert env.get(uri, token=collector).status_code == 403
    assert env.get(uri).status_code == 200


def test_a_made_up_tag_is_no_way_around_a_parameters_check(
    cached_demo_env: tuple[Env, DemoResult],
) -> None:
    """A kept answer's parameters are not read again (they were read when it was made); a
    304 for a tag of the data version that names no answer kept here reads them."""
    env, demo = cached_demo_env
    app: App = env.client.app  # type: ignore[assignment]
    computer = f"/api/v2/computers/{demo.computer_object_ids[0]}"
    assert env.get(computer).status_code == 200  # the token's record is cached
    uri = f"{computer}/dcom-rights?limit=many"
    scope = scope_of(uri, env.signed_headers("GET", uri))
    found = match_request(app.routes, scope)
    assert found is not None
    request = Request(scope, receive_nothing, found[1], 0, 0, 1)
    version = app.db.data_version()
    assert version is not None
    key = make_key(found[0].operation_ids["GET"], request.path_params, request.query, [])
    made_up = {"If-None-Match": version_etag(version, key, app.reads.etag_salt)}
    headers = {**env.signed_headers("GET", uri), **made_up}
    assert app.answer_whole(scope_of(uri, headers)) is None
    refused = env.request("GET", uri, headers)
    assert refused.status_code == 400, refused.text
    assert refused.json()["errors"][0]["context"] == "limit"


def test_served_answers_from_memory_are_the_cycles_answers(
    demo_env: tuple[Env, DemoResult], database_url: str, tmp_path: Path
) -> None:
    env, demo = demo_env
    collector = env.user_with_token("collector", "Upload-Only")
    environment = server_environment(database_url, tmp_path, rate_limit_per_second="0")
    with served(environment) as (base, _), httpx.Client(base_url=base) as client:

        def get(
            uri: str,
            token: tokens.CreatedToken = env.token,
            sent: dict[str, str] | None = None,
            method: str = "GET",
        ) -> httpx.Response:
            headers = {**signed_headers(token, method, uri), **(sent or {})}
            response = client.request(method, uri, headers=headers)
            if method == "GET":  # HEAD is GET's answer without its body, not documented apart
                check_against_openapi(method, uri.split("?", 1)[0], response)
            return response

        for uri in reads_of(demo):
            made = get(uri)
            assert made.status_code == 200, made.text
            for again in (get(uri), get(uri)):  # from memory, on the same connection
                assert again.status_code == 200 and again.content == made.content
                for name in ("etag", "cache-control", "content-type", "content-length"):
                    assert again.headers[name] == made.headers[name], (uri, name)
                assert again.headers["requestid"] != made.headers["requestid"]
            head = get(uri, method="HEAD")
            assert head.status_code == 200 and head.content == b""
            assert head.headers["content-length"] == made.headers["content-length"]
            current = get(uri, sent={"If-None-Match": made.headers["etag"]})
            assert current.status_code == 304 and current.content == b""
            assert current.headers["etag"] == made.headers["etag"]
            # refused as before, with the answer in memory
            unsigned = client.get(uri)
            assert unsigned.status_code == 401 and "etag" not in unsigned.headers
            forged = client.get(
                uri, headers={**signed_headers(env.token, "GET", uri), "Signature": "AAAA"}
            )
            assert forged.status_code == 401
            assert get(uri, token=collector).status_code == 403


def test_served_answers_from_memory_count_against_the_rate_limit(
    demo_env: tuple[Env, DemoResult], database_url: str, tmp_path: Path
) -> None:
    env, demo = demo_env
    uri = f"/api/v2/saml/providers/{demo.saml_provider_ids[0]}"
    environment = server_environment(
        database_url, tmp_path, rate_limit_per_second="1", rate_limit_burst="3"
    )
    with served(environment) as (base, _), httpx.Client(base_url=base) as client:
        statuses = [
            client.get(uri, headers=signed_headers(env.token, "GET", uri)).status_code
            for _ in range(8)
        ]
    assert statuses[0] == 200 and 429 in statuses, statuses
    assert set(statuses) == {200, 429}
    assert statuses.count(200) <= 4 + 1  # rate and burst, and what refills meanwhile
