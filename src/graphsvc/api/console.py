"""The web console's pages and assets, and the API reference page: served by graphsvc itself
from the files in graphsvc.console, with no credentials (the pages hold no data: their
scripts read the API as the signed-in user), or a 404 when GRAPHSVC_CONSOLE=off."""

from __future__ import annotations

from graphsvc.api.answers import matches_none
from graphsvc.api.context import Context
from graphsvc.api.web import Request, Response
from graphsvc.console.assets import ASSET_HEADERS, HTML, PAGE_HEADERS, ConsoleFiles
from graphsvc.errors import ApiError

CONSOLE_PATH = "/ui/"


def console_files(ctx: Context) -> ConsoleFiles:
    if ctx.console is None:
        raise ApiError(404, "the console is off: set GRAPHSVC_CONSOLE=on to serve it", "route")
    return ctx.console


def serve_page(files: ConsoleFiles, name: str, request: Request) -> Response:
    """A page, or a 304 when the browser holds this release's: pages are revalidated on each
    visit, so a new release's assets are found at once."""
    headers = {**PAGE_HEADERS, "ETag": files.etag}
    if matches_none(request.headers.get("if-none-match"), files.etag):
        return Response(304, b"", headers)
    return Response(200, files.pages[name], headers, HTML)


async def serve_console(ctx: Context, request: Request) -> Response:
    return serve_page(console_files(ctx), "index.html", request)


async def serve_api_reference(ctx: Context, request: Request) -> Response:
    return serve_page(console_files(ctx), "docs.html", request)


async def serve_console_asset(ctx: Context, request: Request) -> Response:
    files = console_files(ctx)
    version, name = request.path_params["version"], request.path_params["name"]
    asset = files.assets.get(name)
    if asset is None:
        raise ApiError(404, f"the console has no file {name!r}", "name")
    if version != files.version:
        # An address of another release: its content is not this file's, and a year-long
        # cache must not keep this one under it.
        raise ApiError(
            404, f"console release {version!r} is not this server's: reload the page", "version"
        )
    return Response(200, asset.body, dict(ASSET_HEADERS), asset.media_type)


async def redirect_to_console(ctx: Context, request: Request) -> Response:
    console_files(ctx)
    return Response(
        302,
        b'<a href="/ui/">The console is at /ui/</a>\n',
        {"Location": CONSOLE_PATH, "Cache-Control": "no-cache"},
        HTML,
    )
