"""Input files: plain JSON files, folders of them, and collector zips, opened as byte streams."""

from __future__ import annotations

import re
import struct
import zipfile
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, BinaryIO, cast

from graphsvc.ingest.records import IngestError

ZIP_MAGIC = b"PK\x03\x04"
BOM = b"\xef\xbb\xbf"
Progress = Callable[[int], None]

# What ZipFile raises for damaged bytes: BadZipFile (a bad CRC-32, a bad local header, an
# entry whose data overlaps another's), zlib.error (deflate data that is not deflate) and
# EOFError (the archive ends before the entry's compressed data does).
ZIP_DAMAGE = (zipfile.BadZipFile, zlib.error, EOFError)

# The records of a zip's end that say where its central directory is, and one entry's
# header in it (APPNOTE.TXT 4.3.12 to 4.3.16).
END_RECORD = struct.Struct("<4s4H2LH")
ZIP64_LOCATOR = struct.Struct("<4sLQL")
ZIP64_END_RECORD = struct.Struct("<4sQ2H2L4Q")
CENTRAL_HEADER = struct.Struct("<4s4B4HL2L5H2L")
END_SIGNATURE, CENTRAL_SIGNATURE = b"PK\x05\x06", b"PK\x01\x02"
ZIP64_LOCATOR_SIGNATURE, ZIP64_END_SIGNATURE = b"PK\x06\x07", b"PK\x06\x06"
MAX_COMMENT = 0xFFFF

# A run reads the entries of one zip after another, so keeping a few zips open is enough
# for a zip to be opened once (or twice: listed, then read, past this many zips), and a
# folder of thousands of zips stays within the open-file limit.
MAX_OPEN_ZIPS = 16

# SharpHound names its files and zips after the collection's start, `yyyyMMddHHmmss_`.
COLLECTION_TIME_PREFIX = re.compile(r"(\d{14})_")
# A zip entry time before this is a placeholder (1980-01-01 is the format's least).
EARLIEST_ENTRY_YEAR = 1981


@dataclass(frozen=True)
class IngestLimits:
    """What one ingest may read; None is no limit. The caller takes them from its settings."""

    zip_entries: int | None = None  # GRAPHSVC_MAX_ZIP_ENTRIES
    documents: int | None = None  # GRAPHSVC_MAX_INGEST_DOCUMENTS


NO_LIMITS = IngestLimits()


class Archives:
    """The zips one ingest run reads, kept open from their listing through the passes over
    their entries, and closed when the run ends.

    Opening a ZipFile parses its whole central directory (about 3 s for 100,000 entries):
    opened for every entry and every pass, 2,500 tiny entries took 109 s to ingest and
    5,000 took 442 s, and a 3 MB zip of 20,000 kept an upload job ingesting for over 17
    minutes. Kept open, they take 0.4 and 0.7 s (bench/zip_entries.py).
    """

    def __init__(self) -> None:
        self.open_zips: OrderedDict[Path, zipfile.ZipFile] = OrderedDict()

    def __enter__(self) -> Archives:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def open_zip(self, path: Path, name: str) -> zipfile.ZipFile:
        """The zip at `path`, still open or opened now (closing the least recently used
        beyond MAX_OPEN_ZIPS); `name` is what an error names."""
        archive = self.open_zips.pop(path, None)
        if archive is None:
            try:
                archive = zipfile.ZipFile(path)
            except zipfile.BadZipFile as exc:
                raise IngestError(name, f"not a readable zip file ({exc})") from None
            if len(self.open_zips) >= MAX_OPEN_ZIPS:
                self.open_zips.popitem(last=False)[1].close()
        self.open_zips[path] = archive
        return archive

    def close(self) -> None:
        while self.open_zips:
            self.open_zips.popitem()[1].close()


@dataclass(frozen=True)
class Source:
    """One JSON document: a file, or an entry of a zip (`label` is `zip: entry`) that
    `archives` keeps open."""

    label: str
    size: int
    path: Path
    entry: zipfile.ZipInfo | None = None
    archives: Archives | None = None

    def collection_time(self) -> datetime | None:
        """When the collector made the document, if it says: the time SharpHound puts at the
        start of its file names (the entry's, else the zip's), else a zip entry's time.
        Collectors write local times without a zone; they are taken as UTC."""
        names = [self.entry.filename.rsplit("/", 1)[-1]] if self.entry is not None else []
        names.append(self.label.split(": ", 1)[0].replace("\\", "/").rsplit("/", 1)[-1])
        for name in names:
            match = COLLECTION_TIME_PREFIX.match(name)
            if match is not None:
                try:
                    return datetime.strptime(match.group(1), "%Y%m%d%H%M%S").replace(tzinfo=UTC)
                except ValueError:
                    continue
        if self.entry is not None and self.entry.date_time[0] >= EARLIEST_ENTRY_YEAR:
            return datetime(*self.entry.date_time, tzinfo=UTC)
        return None

    @contextmanager
    def open(self, progress: Progress | None = None) -> Iterator[IO[bytes]]:
        """The document's bytes, without a UTF-8 byte-order mark."""
        if self.entry is None:
            with self.path.open("rb") as raw:
                yield skip_bom(raw, progress)
        else:
            assert self.archives is not None
            archive = self.archives.open_zip(self.path, self.label)
            with open_entry(archive, self.entry, self.label) as raw:
                yield skip_bom(raw, progress)


class EntryReader:
    """A zip entry's bytes, whose damage is reported as an IngestError naming the entry:
    ZipFile finds it while reading (a bad CRC-32 only once the entry's last byte is read),
    so inside the JSON parser's call to read()."""

    def __init__(self, raw: IO[bytes], label: str) -> None:
        self.raw = raw
        self.label = label

    def read(self, size: int = -1) -> bytes:
        try:
            return self.raw.read(size)
        except ZIP_DAMAGE as exc:
            raise damaged_entry(self.label, exc) from None

    def seek(self, offset: int, whence: int = 0) -> int:
        try:
            return self.raw.seek(offset, whence)
        except ZIP_DAMAGE as exc:
            raise damaged_entry(self.label, exc) from None


def damaged_entry(label: str, exc: Exception) -> IngestError:
    # ZipFile's EOFError says nothing: the archive ended inside the entry's compressed data.
    reason = str(exc) or "the archive ends inside the entry's data"
    return IngestError(label, f"corrupted zip entry ({reason})")


@contextmanager
def open_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo, label: str) -> Iterator[IO[bytes]]:
    """One entry's stream; a damaged local header is refused as the entry's damage too."""
    try:
        raw = archive.open(info)
    except ZIP_DAMAGE as exc:
        raise damaged_entry(label, exc) from None
    with raw:
        yield cast(BinaryIO, EntryReader(raw, label))


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


def display(path: Path, names: Mapping[Path, str] | None) -> str:
    """How errors and the run's file list name a file: by its name in `names`, if there,
    else by its path."""
    return names.get(path, str(path)) if names else str(path)


def count_zip_entries(path: Path, most: int) -> int:
    """The entries of a zip's central directory, counted from their headers alone and up to
    `most + 1` at most; 0 when the directory cannot be found (ZipFile then says why).

    Opening a ZipFile builds an object of about 540 bytes per entry (54 MB for 100,000), so
    a zip is counted before it is opened: a central directory of a few hundred megabytes of
    empty entries would otherwise take gigabytes before it could be refused. Where the
    directory starts is found as ZipFile finds it, so both count the same entries.
    """
    with path.open("rb") as f:
        file_size = f.seek(0, 2)
        tail_start = max(0, file_size - END_RECORD.size - MAX_COMMENT)
        f.seek(tail_start)
        tail = f.read()
        at = tail.rfind(END_SIGNATURE)
        if at < 0 or len(tail) - at < END_RECORD.size:
            return 0
        directory_size = END_RECORD.unpack_from(tail, at)[5]
        directory_end = tail_start + at
        zip64_end = directory_end - ZIP64_LOCATOR.size - ZIP64_END_RECORD.size
        if zip64_end >= 0:
            f.seek(zip64_end)
            records = f.read(ZIP64_END_RECORD.size + ZIP64_LOCATOR.size)
            locator = ZIP64_LOCATOR.unpack_from(records, ZIP64_END_RECORD.size)
            record = ZIP64_END_RECORD.unpack_from(records)
            if locator[0] == ZIP64_LOCATOR_SIGNATURE and record[0] == ZIP64_END_SIGNATURE:
                directory_size, directory_end = record[8], zip64_end
        if directory_size > directory_end:
            return 0
        f.seek(directory_end - directory_size)
        count = read = 0
        while read < directory_size and count <= most:
            header = f.read(CENTRAL_HEADER.size)
            if len(header) < CENTRAL_HEADER.size or header[:4] != CENTRAL_SIGNATURE:
                break
            fields = CENTRAL_HEADER.unpack(header)
            variable = fields[12] + fields[13] + fields[14]  # name, extra field, comment
            f.seek(variable, 1)
            read += CENTRAL_HEADER.size + variable
            count += 1
    return count


def zip_sources(
    path: Path, archives: Archives, names: Mapping[Path, str] | None, limits: IngestLimits
) -> Iterator[Source]:
    name = display(path, names)
    most = limits.zip_entries
    if most is not None and count_zip_entries(path, most) > most:
        raise IngestError(
            name,
            f"more than {most:,} entries; a zip may hold at most {most:,} "
            "(GRAPHSVC_MAX_ZIP_ENTRIES)",
        )
    archive = archives.open_zip(path, name)
    for info in archive.infolist():
        if info.is_dir():
            continue
        label = f"{name}: {info.filename}"
        if info.flag_bits & 0x1:
            raise IngestError(
                label,
                "encrypted (a password-protected collection); unzip it with its password first",
            )
        with open_entry(archive, info, label) as entry:
            if info.filename.lower().endswith(".zip") or entry.read(4) == ZIP_MAGIC:
                raise IngestError(
                    label,
                    "a zip inside a zip is not supported; unpack the inner zip and ingest it",
                )
        if not info.filename.lower().endswith(".json"):
            continue  # collectors add status files (CSV, logs) beside the JSON
        yield Source(label, info.file_size, path, info, archives)


def collector_files(folder: Path) -> list[Path]:
    """The .json and .zip files under a folder, at any depth, in name order."""
    return sorted(
        p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in (".json", ".zip")
    )


def input_files(path: Path, names: Mapping[Path, str] | None) -> list[Path]:
    """The file itself, or the collector files of a folder."""
    name = display(path, names)
    if path.is_dir():
        found = collector_files(path)
        if not found:
            raise IngestError(name, "folder holds no .json or .zip files")
        return found
    if not path.exists():
        raise IngestError(name, "no such file or folder")
    return [path]


def expand(
    paths: list[Path],
    archives: Archives,
    names: Mapping[Path, str] | None = None,
    limits: IngestLimits = NO_LIMITS,
) -> list[Source]:
    """Every JSON document in the given files, folders (recursively) and zips, whose zips
    `archives` opens; labelled by `names` where it names them. Refused past `limits` before
    any document is parsed."""
    return list(expanding(paths, archives, names, limits))


def expanding(
    paths: list[Path],
    archives: Archives,
    names: Mapping[Path, str] | None = None,
    limits: IngestLimits = NO_LIMITS,
) -> Iterator[Source]:
    """`expand`'s documents one by one, for a caller that gives way between them: listing
    the 100,000 entries of a zip took 1.7 s."""
    count = 0
    for path in paths:
        for file in input_files(path, names):
            name = display(file, names)
            if is_zip(file):
                for source in zip_sources(file, archives, names, limits):
                    count += 1
                    yield source
            elif file.suffix.lower() == ".zip":
                raise IngestError(name, "named .zip but not a zip file (no zip signature)")
            else:
                count += 1
                yield Source(name, file.stat().st_size, file)
            most = limits.documents
            if most is not None and count > most:
                raise IngestError(
                    name,
                    f"takes the ingest past {most:,} JSON documents, the most one ingest may "
                    "read (GRAPHSVC_MAX_INGEST_DOCUMENTS); ingest the files in parts",
                )
