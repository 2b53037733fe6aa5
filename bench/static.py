"""The static ceiling: a bare ASGI app that answers each benchmarked request with the bytes
graphsvc answered it with (body and headers), recorded before the run, and does no other
work.

It runs on the same uvicorn, uvloop and httptools as graphsvc, so what separates the two is
everything graphsvc does per request: the rate limit, authentication, parameters, the SQL,
turning rows into JSON, logs and metrics.

    python bench/static.py --port 8102 --answers answers.json

`answers.json` maps each request target (path and query, as sent) to its recorded answer:
`{"body": ..., "headers": [[name, value], ...]}`, the headers without the `date` and `server`
that uvicorn adds to every answer. (Until 2026-11-25 it sent the body with a content-type
alone, and uvicorn chunked it: 9% more requests a second than with graphsvc's headers, one
target, 32 connections.)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import uvicorn

Answer = tuple[list[tuple[bytes, bytes]], bytes]


def create_static(answers: dict[str, Answer]) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        query = scope["query_string"]
        target = scope["raw_path"] + (b"?" + query if query else b"")
        headers, body = answers[target.decode()]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--answers", type=Path, required=True)
    args = parser.parse_args()
    recorded = json.loads(args.answers.read_text())
    answers = {
        target: (
            [(name.encode(), value.encode()) for name, value in answer["headers"]],
            answer["body"].encode(),
        )
        for target, answer in recorded.items()
    }
    uvicorn.run(
        create_static(answers),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
