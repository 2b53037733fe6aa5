"""Input files: plain JSON files, folders of them, and collector zips, opened as byte streams."""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from graphsvc.ingest.records import IngestError

ZIP_MAGIC = b"PK\x03\x04"
BOM = b"\xef\xbb\xbf"
Progress = Callable[[int], None]


@dataclass(frozen=True)
class Source:
    """One JSON document: a file, or an entry of a zip (`label` is `zip: entry`)."""

    label: str
    size: int
    path: Path
    entry: str | None = None

    @contextmanager
    def open(self, progress: Progress | None = None) -> Iterator[IO[bytes]]:
        """The document's bytes, without a UTF-8 byte-order mark."""
        if self.entry is None:
            with self.path.open("rb") as raw:
                yield skip_bom(raw, progress)
        else:
            with zipfile.ZipFile(self.path) as archive, archive.open(self.entry) as raw:
                yield skip_bom(raw, progress)


class CountingReader:
    """Reports how many bytes have been read, for progress display."""

    def __init__(self, raw: IO[bytes], progress: Progress) -> None:
        self.raw = raw
        self.progress = progress

    def read(self, size: int = -1) -> bytes:
        chunk = self.raw.read(size)
        self.progress(len(chunk))
        return chunk


def skip_bom(raw: IO[bytes], progress: Progress | None) -> IO[bytes]:
    if raw.read(3) != BOM:
        raw.seek(0)
    return CountingReader(raw, progress) if progress else raw  # type: ignore[return-value]


def is_zip(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == ZIP_MAGIC


def display(path: Path, root: Path | None) -> str:
    """How errors and the run's file list name a file: relative to `root`, when given."""
    return str(path if root is None else path.relative_to(root))


def zip_sources(path: Path, root: Path | None = None) -> list[Source]:
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise IngestError(display(path, root), f"not a readable zip file ({exc})") from None
    sources = []
    with archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            label = f"{display(path, root)}: {info.filename}"
            if info.flag_bits & 0x1:
                raise IngestError(
                    label,
                    "encrypted (a password-protected collection); unzip it with its password first",
                )
            with archive.open(info) as entry:
                if info.filename.lower().endswith(".zip") or entry.read(4) == ZIP_MAGIC:
                    raise IngestError(
                        label,
                        "a zip inside a zip is not supported; unpack the inner zip and ingest it",
                    )
            if not info.filename.lower().endswith(".json"):
                continue  # collectors add status files (CSV, logs) beside the JSON
            sources.append(Source(label, info.file_size, path, info.filename))
    return sources


def collector_files(folder: Path) -> list[Path]:
    """The .json and .zip files under a folder, at any depth, in name order."""
    return sorted(
        p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in (".json", ".zip")
    )


def expand(paths: list[Path], root: Path | None = None) -> list[Source]:
    """Every JSON document in the given files, folders (recursively) and zips; labelled
    relative to `root`, when given."""
    sources: list[Source] = []
    for path in paths:
        name = display(path, root)
        if path.is_dir():
            found = collector_files(path)
            if not found:
                raise IngestError(name, "folder holds no .json or .zip files")
            sources += expand(found, root)
        elif not path.exists():
            raise IngestError(name, "no such file or folder")
        elif is_zip(path):
            sources += zip_sources(path, root)
        elif path.suffix.lower() == ".zip":
            raise IngestError(name, "named .zip but not a zip file (no zip signature)")
        else:
            sources.append(Source(name, path.stat().st_size, path))
    return sources
