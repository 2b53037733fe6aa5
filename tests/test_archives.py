"""Collector zips: each opened once per ingest run, whatever its number of entries; the caps
on a zip's entries and on an ingest's documents; and damaged zips reported as the damaged
entry, by `graphsvc ingest` in one line and by an upload job in its status message, on both
stores."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from graphsvc.accounts import tokens
from graphsvc.cli import main
from graphsvc.ingest.records import IngestError
from graphsvc.ingest.run import IngestResult, ingest_files
from graphsvc.ingest.sources import MAX_OPEN_ZIPS, IngestLimits, count_zip_entries
from graphsvc.store import graph
from tests.conftest import TEST_FERNET_KEY, Env, ingest
from tests.test_cli import one_error_line
from tests.test_uploads import upload, wait_for_job

SID = "S-1-5-21-1-2-3"
META = {"version": 6, "methods": 0}
ZIP_TYPE = "application/zip"
MAX_ENTRIES, MAX_DOCUMENTS = "GRAPHSVC_MAX_ZIP_ENTRIES", "GRAPHSVC_MAX_INGEST_DOCUMENTS"


def sharphound_document(kind: str, first: int, count: int = 1) -> bytes:
    records = [
        {"ObjectIdentifier": f"{SID}-{first + i}", "Properties": {"name": f"U{first + i}@X"}}
        for i in range(count)
    ]
    return json.dumps({"data": records, "meta": {"type": kind, "count": count, **META}}).encode()


def opengraph_document(node_id: str) -> bytes:
    return json.dumps({"graph": {"nodes": [{"id": node_id, "kinds": ["Thing"]}]}}).encode()


def tiny_documents(count: int, prefix: str = "") -> dict[str, bytes]:
    """`count` documents of one object each, SharpHound and OpenGraph alternately."""
    return {
        f"{prefix}{i:04d}.json": (
            opengraph_document(f"{prefix}N{i}") if i % 2 else sharphound_document("users", i)
        )
        for i in range(count)
    }


def write_zip(
    path: Path, entries: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED
) -> Path:
    with zipfile.ZipFile(path, "w", compression) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return path


def run_cli(env: Env, *args: str, settings: dict[str, str] | None = None) -> Result:
    """A `graphsvc` command on the env's store, with these GRAPHSVC_* variables too."""
    environment = {
        "GRAPHSVC_DATABASE_URL": env.url,
        "GRAPHSVC_DATA_DIR": str(env.settings.data_dir),
        "GRAPHSVC_TOKEN_ENCRYPTION_KEY": TEST_FERNET_KEY,
        **(settings or {}),
    }
    return CliRunner().invoke(main, list(args), env=environment)


@pytest.fixture
def opened_zips(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[zipfile.ZipFile]]:
    """Every ZipFile opened for reading while the test runs."""
    opened: list[zipfile.ZipFile] = []

    class CountedZipFile(zipfile.ZipFile):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if self.mode == "r":
                opened.append(self)

    monkeypatch.setattr(zipfile, "ZipFile", CountedZipFile)
    yield opened


@pytest.fixture
def uploading(make_env: Callable[..., Env]) -> Callable[..., tuple[Env, tokens.CreatedToken]]:
    """A store with an admin, an ingester that looks for jobs often and these settings, and
    an Upload-Only token."""

    def build(**settings: Any) -> tuple[Env, tokens.CreatedToken]:
        made = make_env(ingester=True, ingest_poll_seconds=0.05, **settings)
        made.create_admin()
        return made, made.user_with_token("collector", "Upload-Only")

    return build


def failed_job_message(env: Env, token: tokens.CreatedToken, files: list[Path]) -> str:
    """The status message of a job of these files, which must fail."""
    job_id = upload(env, token, [(p.name, p.read_bytes(), ZIP_TYPE) for p in files])
    job = wait_for_job(env, token, job_id)
    assert job["status"] == 5, job
    message: str = job["status_message"]
    return message


# --- each zip opened once ------------------------------------------------------------------


def test_a_zip_is_opened_once_per_run_and_closed_when_it_ends(
    env: Env, tmp_path: Path, opened_zips: list[zipfile.ZipFile]
) -> None:
    """Opened for every entry and every pass, a zip of 20,000 tiny entries took over 17
    minutes to ingest (bench/zip_entries.py)."""
    path = write_zip(tmp_path / "many.zip", tiny_documents(60))
    result = ingest(env, path)
    assert (len(result.files), result.nodes) == (60, 60)
    assert len(opened_zips) == 1 and opened_zips[0].fp is None, "opened once, then closed"

    entries = tiny_documents(60)
    entries["0059.json"] = b'{"graph": {"nodes": [{"id": "broken"}]}}'
    broken = write_zip(tmp_path / "broken.zip", entries)
    with pytest.raises(IngestError, match=r"broken\.zip: 0059\.json: graph\.nodes\[0\]"):
        ingest(env, broken)
    assert len(opened_zips) == 2 and opened_zips[1].fp is None, "closed after an error too"


def test_more_zips_than_are_kept_open_are_each_opened_at_most_twice(
    env: Env, tmp_path: Path, opened_zips: list[zipfile.ZipFile]
) -> None:
    folder = tmp_path / "zips"
    folder.mkdir()
    count = MAX_OPEN_ZIPS + 4
    for z in range(count):
        write_zip(folder / f"{z:02d}.zip", tiny_documents(6, prefix=f"z{z}-"))
    assert len(ingest(env, folder).files) == count * 6
    opens = [Path(str(archive.filename)).name for archive in opened_zips]
    assert sorted(set(opens)) == [f"{z:02d}.zip" for z in range(count)]
    assert max(opens.count(name) for name in opens) <= 2, "listed, then read"
    assert all(archive.fp is None for archive in opened_zips)


# --- the caps ------------------------------------------------------------------------------


def test_a_zip_over_the_entry_cap_is_refused_before_it_is_opened(
    env: Env, tmp_path: Path, opened_zips: list[zipfile.ZipFile]
) -> None:
    path = write_zip(tmp_path / "six.zip", {**tiny_documents(5), "notes.txt": b"not JSON"})

    def run(limits: IngestLimits) -> IngestResult:
        return env.run_in_transaction(lambda conn: ingest_files(conn, [path], limits=limits))

    with pytest.raises(IngestError) as refused:
        run(IngestLimits(zip_entries=5))
    assert str(refused.value) == (
        f"{path}: more than 5 entries; a zip may hold at most 5 ({MAX_ENTRIES})"
    )
    assert opened_zips == [], "counted from the central directory, before ZipFile parses it"
    assert env.run_in_transaction(graph.count_graph) == (0, 0)
    assert run(IngestLimits(zip_entries=6)).nodes == 5


def test_entries_are_counted_in_zip64_and_prefixed_zips(tmp_path: Path) -> None:
    """Past 65,535 entries a zip needs the zip64 end records; a self-extracting zip has a
    program before it. Counting stops once past the cap."""
    entries = 65_537
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for i in range(entries):
            archive.writestr(str(i), b"")
    big = tmp_path / "big.zip"
    big.write_bytes(buffer.getvalue())
    assert count_zip_entries(big, entries) == entries
    assert count_zip_entries(big, 1_000) == 1_001
    small = write_zip(tmp_path / "small.zip", tiny_documents(3)).read_bytes()
    prefixed = tmp_path / "prefixed.zip"
    prefixed.write_bytes(b"\x7fELF" + bytes(5000) + small)
    assert count_zip_entries(prefixed, 100) == 3
    assert len(zipfile.ZipFile(prefixed).infolist()) == 3


def test_the_cli_refuses_input_past_either_cap_in_one_line(env: Env, tmp_path: Path) -> None:
    path = write_zip(tmp_path / "six.zip", tiny_documents(6))
    line = one_error_line(run_cli(env, "ingest", str(path), settings={MAX_ENTRIES: "5"}))
    assert line == (
        f"graphsvc: error: {path}: more than 5 entries; a zip may hold at most 5 ({MAX_ENTRIES})"
    )
    folder = tmp_path / "files"
    folder.mkdir()
    for name, data in tiny_documents(3).items():
        (folder / name).write_bytes(data)
    for given, named in ((folder, folder / "0002.json"), (path, path)):
        result = run_cli(env, "ingest", str(given), settings={MAX_DOCUMENTS: "2"})
        assert one_error_line(result) == (
            f"graphsvc: error: {named}: takes the ingest past 2 JSON documents, the most one "
            f"ingest may read ({MAX_DOCUMENTS}); ingest the files in parts"
        )
    assert env.run_in_transaction(graph.count_graph) == (0, 0)


def test_an_upload_job_past_either_cap_fails_naming_the_file(
    uploading: Callable[..., tuple[Env, tokens.CreatedToken]], tmp_path: Path
) -> None:
    env, collector = uploading(max_zip_entries=5, max_ingest_documents=8)
    six = write_zip(tmp_path / "six.zip", tiny_documents(6, prefix="a"))
    assert failed_job_message(env, collector, [six]) == (
        f"six.zip: more than 5 entries; a zip may hold at most 5 ({MAX_ENTRIES})"
    )
    four = write_zip(tmp_path / "four.zip", tiny_documents(4, prefix="b"))
    five = write_zip(tmp_path / "five.zip", tiny_documents(5, prefix="c"))
    assert failed_job_message(env, collector, [four, five]) == (
        "five.zip: takes the ingest past 8 JSON documents, the most one ingest may read "
        f"({MAX_DOCUMENTS}); ingest the files in parts"
    )
    assert env.run_in_transaction(graph.count_graph) == (0, 0)


# --- damaged zips --------------------------------------------------------------------------

GROUPS = sharphound_document("groups", 512)
USERS = sharphound_document("users", 1000, 2000)  # 166 KB, deflated to 11 KB


def data_offset(raw: bytes | bytearray, info: zipfile.ZipInfo) -> int:
    """Where an entry's compressed bytes start: after its local header, name and extra."""
    name_length, extra_length = struct.unpack_from("<HH", raw, info.header_offset + 26)
    return int(info.header_offset + 30 + name_length + extra_length)


def damage_crc(path: Path) -> None:
    """One byte of users.json's stored text changed: the JSON stays valid, its CRC-32 not."""
    write_zip(path, {"groups.json": GROUPS, "users.json": USERS}, zipfile.ZIP_STORED)
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"U1999@X", b"U1999@Y"))


def damage_deflate(path: Path) -> None:
    """The first block header of users.json's deflate stream names the reserved block type."""
    write_zip(path, {"groups.json": GROUPS, "users.json": USERS})
    raw = bytearray(path.read_bytes())
    raw[data_offset(raw, zipfile.ZipFile(path).getinfo("users.json"))] = 0b111
    path.write_bytes(raw)


def damage_truncate(path: Path) -> None:
    """The second half of users.json's deflate stream cut out, its stated size kept: the
    archive ends before the stream does."""
    write_zip(path, {"groups.json": GROUPS, "users.json": USERS})
    raw = path.read_bytes()
    info = zipfile.ZipFile(path).getinfo("users.json")
    start, cut = data_offset(raw, info), info.compress_size // 2
    shortened = bytearray(raw[: start + cut] + raw[start + info.compress_size :])
    end = shortened.rfind(b"PK\x05\x06")
    directory = struct.unpack_from("<L", shortened, end + 16)[0]
    struct.pack_into("<L", shortened, end + 16, directory - (info.compress_size - cut))
    path.write_bytes(shortened)


def damage_overlap(path: Path) -> None:
    """users.json's central directory entry points at groups.json's bytes."""
    write_zip(path, {"groups.json": GROUPS, "users.json": USERS})
    raw = bytearray(path.read_bytes())
    users_header = raw.rfind(b"PK\x01\x02")  # the last entry of the central directory
    struct.pack_into("<L", raw, users_header + 42, 0)
    path.write_bytes(raw)


# (how the zip is damaged, the reason given, whether the damage shows only once the entry is
# read, after `graphsvc ingest` has listed the zip)
DAMAGES = {
    "crc": (damage_crc, "Bad CRC-32 for file 'users.json'", True),
    "deflate": (damage_deflate, "Error -3 while decompressing data: invalid block type", False),
    "truncated": (damage_truncate, "the archive ends inside the entry's data", True),
    "overlap": (
        damage_overlap,
        "File name in directory 'users.json' and header b'groups.json' differ.",
        False,
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_the_cli_reports_a_damaged_zip_entry_in_one_line(
    env: Env, tmp_path: Path, damage: str
) -> None:
    damage_zip, reason, when_read = DAMAGES[damage]
    path = tmp_path / "collection.zip"
    damage_zip(path)
    result = run_cli(env, "ingest", str(path))
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    error = f"graphsvc: error: {path}: users.json: corrupted zip entry ({reason})"
    if when_read:  # in the run, after the progress lines of the documents read
        sizes = {"groups.json": len(GROUPS), "users.json": len(USERS)}
        assert result.stderr.splitlines() == [
            *(f"reading {path}: {name} ({size:,} bytes)" for name, size in sizes.items()),
            f"{error} (nothing was written)",
        ]
    else:  # while the zip is listed
        assert one_error_line(result) == error
    assert env.run_in_transaction(graph.count_graph) == (0, 0)


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_an_upload_job_of_a_damaged_zip_fails_naming_the_entry(
    uploading: Callable[..., tuple[Env, tokens.CreatedToken]], tmp_path: Path, damage: str
) -> None:
    env, collector = uploading()
    damage_zip, reason, _ = DAMAGES[damage]
    path = tmp_path / "collection.zip"
    damage_zip(path)
    assert failed_job_message(env, collector, [path]) == (
        f"collection.zip: users.json: corrupted zip entry ({reason})"
    )
    assert env.run_in_transaction(graph.count_graph) == (0, 0)
