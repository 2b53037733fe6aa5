"""The static ceiling: a bare ASGI app that answers each benchmarked request with the bytes
graphsvc answered it with, recorded before the run, and does no other work.

It runs on the same uvicorn, uvloop and httptools as graphsvc, so what separates the two is
everything graphsvc does per request: the rate limit, authentication, parameters, the SQL,
turning rows into JSON, logs and metrics.

    python bench/static.py --port 8102 --answers answers.json

`answers.json` maps each request target (path and query, as sent) to its recorded body.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import uvicorn

HEADERS = [(b"content-type", b"application/json")]


def create_static(answers: dict[str, bytes]) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        query = scope["query_string"]
        target = scope["raw_path"] + (b"?" + query if query else b"")
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        await send({"type": "http.response.body", "body": answers[target.decode()]})

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--answers", type=Path, required=True)
    args = parser.parse_args()
    recorded = json.loads(args.answers.read_text())
    answers = {target: body.encode() for target, body in recorded.items()}
    uvicorn.run(
        create_static(answers),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
