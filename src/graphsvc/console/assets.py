"""The console's files, read once when the app is made, and named by their content.

Scripts and styles are served under `/ui/<version>/assets/<name>`, where the version is a
hash of every file: a browser may keep them for a year, and a release that changes any file
changes every address. The two pages (the console and the API reference) are answered with
the current version written into them, are revalidated on each visit, and are the only
answers a browser keeps no longer than that.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from importlib import resources

ASSETS_MARK = b"{{ASSETS}}"  # where a page names its assets' folder
PAGES = ("index.html", "docs.html")
HTML = b"text/html; charset=utf-8"
MEDIA_TYPES = {
    ".js": b"text/javascript; charset=utf-8",
    ".css": b"text/css; charset=utf-8",
    ".html": HTML,
}
# Nothing but the console's own files: no inline script or style, no other origin. A value
# from collector data that reached the page as markup could not run.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
ASSET_HEADERS = {
    "Cache-Control": "public, max-age=31536000, immutable",
    "X-Content-Type-Options": "nosniff",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: bytes


@dataclass(frozen=True)
class ConsoleFiles:
    version: str  # of every file: part of each asset's address
    pages: dict[str, bytes]  # HTML by file name, their assets' addresses written in
    assets: dict[str, Asset]  # scripts and styles by file name

    @property
    def etag(self) -> str:
        return f'"{self.version}"'


def load_console_files() -> ConsoleFiles:
    """Every file of `static/`, the pages with their assets' folder written in."""
    folder = resources.files("graphsvc.console") / "static"
    raw = {
        entry.name: entry.read_bytes()
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.is_file() and os.path.splitext(entry.name)[1] in MEDIA_TYPES
    }
    digest = hashlib.blake2b(digest_size=8)
    for name, body in raw.items():
        digest.update(name.encode() + b"\0" + body + b"\0")
    version = digest.hexdigest()
    folder_address = f"/ui/{version}/assets".encode()
    pages = {name: raw[name].replace(ASSETS_MARK, folder_address) for name in PAGES}
    assets = {
        name: Asset(body, MEDIA_TYPES[os.path.splitext(name)[1]])
        for name, body in raw.items()
        if name not in PAGES
    }
    return ConsoleFiles(version, pages, assets)
