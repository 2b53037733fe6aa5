"""The one settings class; its field docstrings are the configuration reference
(docs/configuration.md, held to them by tests/test_settings.py)."""

from __future__ import annotations

import base64
import dataclasses
import difflib
import functools
import hashlib
import math
import os
import re
import secrets
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

DATABASE_SCHEMES = ("sqlite:///", "postgresql://", "postgres://")


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "graphsvc"


class Secret:
    """A key or token: shown as *** in a repr or a log, its value only by `reveal()`."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"a secret is text, not {type(value).__name__}")
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and secrets.compare_digest(
            self._value.encode(), other._value.encode()
        )

    def __hash__(self) -> int:
        return hash(Secret)


def setting(
    default: Any,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    former: str | None = None,
) -> Any:
    """A setting's default, the bounds of its number, and the variable that held it before
    its present name (read too: GRAPHSVC_ACCEPT_PATH_ONLY_SIGNATURES until 0.2,
    GRAPHSVC_INGEST_WORKER until 0.3)."""
    bounds = {k: v for k, v in (("ge", ge), ("gt", gt), ("le", le)) if v is not None}
    return dataclasses.field(default=default, metadata={"bounds": bounds, "former": former})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Settings:
    """Read from environment variables with the prefix GRAPHSVC_ (for example GRAPHSVC_EDITION)
    by `Settings.from_environment()`; each field is checked and converted when the settings
    are made, so a bad value stops a command before it does anything.

    Our own reading and checking, not pydantic-settings': importing pydantic and
    pydantic-settings and building their model cost every command about 90 ms of CPU (0.13 s
    against 0.04 s to import this module and read the settings), the larger share of a
    command's start (bench/README "The command line's CPU")."""

    data_dir: Path = dataclasses.field(default_factory=default_data_dir)
    """Folder for the default SQLite file and for secrets generated on first start."""

    database_url: str | None = dataclasses.field(default=None, repr=False)  # a password
    """`sqlite:///path/file.db` or `postgresql://user@host:port/db`; default SQLite in data_dir."""

    edition: Literal["enterprise", "community"] = "enterprise"
    """`enterprise` serves every operation; `community` answers 404 for GET /api/v2/clients/{id}."""

    public_url: str | None = None
    """Base URL the service is reached at, used for SAML sp_* URIs; default the request's own."""

    jwt_secret: Secret | None = None
    """HS256 key for session JWTs; generated once into data_dir when not set."""

    token_encryption_key: Secret | None = None
    """Fernet key encrypting API token keys at rest; generated once into data_dir when not set."""

    jwt_lifetime_seconds: int = setting(8 * 3600, ge=60)
    """How long a JWT from POST /api/v2/login is valid."""

    signature_max_age_seconds: int = setting(2 * 3600, ge=1)
    """A signed request whose RequestDate is older than this is rejected as a replay."""

    signature_max_future_seconds: int = setting(15 * 60, ge=0)
    """A signed request whose RequestDate is further ahead than this is rejected."""

    token_cache_seconds: float = setting(1.0, ge=0)
    """Seconds a process may reuse a token's stored record; revoking takes this long at most."""

    answer_cache_bytes: int = setting(32 * 1024**2, ge=0)
    """Memory per process for answers kept until the data changes (32 MiB); 0 keeps none."""

    sdk_compatibility: bool = setting(
        False, former="GRAPHSVC_ACCEPT_PATH_ONLY_SIGNATURES"
    )  # before 0.2
    """Weaker, for the reference SDK: path-only signatures, and a bare `Prefer: 0` as none."""

    accept_local_time_signatures: bool = False
    """Weaker, for the reference SDK: accept a RequestDate in any offset, not only UTC."""

    max_body_bytes: int = setting(16 * 1024, ge=1)
    """Largest request body accepted (login and every read); a larger one is a 413."""

    max_upload_bytes: int = setting(4 * 1024**3, ge=1)
    """Largest file one file-upload request may carry (4 GiB); a larger one is a 413."""

    ingester: bool = setting(True, former="GRAPHSVC_INGEST_WORKER")
    """Ingest ended file-upload jobs in this process, in the background, one per store at once."""

    ingest_poll_seconds: float = setting(2.0, gt=0, le=3600)
    """How often an idle ingester looks for a queued file-upload job."""

    ingest_lease_seconds: float = setting(60.0, ge=1, le=86400)
    """An ingesting replica renews its job's lease every third of this; dead, it loses the job."""

    audit_retention_days: int = setting(365, ge=1, le=36500)
    """Audit events older than this are deleted, at the next change that is audited."""

    cypher_max_rows: int = setting(100_000, ge=1)
    """Most rows a Cypher query may answer with or hold to sort, group or deduplicate (a 413)."""

    cypher_max_paths: int = setting(10_000, ge=1)
    """Most paths a Cypher shortest-path pattern may find in one query (a 413)."""

    cypher_max_memory_mb: int = setting(1024, ge=16)
    """Most MiB a Cypher query may grow the server's resident memory by while it runs (a 413)."""

    path_index_dir: Path | None = None
    """The shortest-path index's folder, the service user's alone; default data_dir/path-index."""

    upload_job_timeout_seconds: int = setting(600, ge=1)
    """A running file-upload job whose client is silent this long is Timed Out, files dropped."""

    header_timeout_seconds: float = setting(10.0, gt=0)
    """A request's headers must arrive within this long of its first byte; else 408, closed."""

    body_timeout_seconds: float = setting(10.0, gt=0)
    """Longest pause allowed while a request body arrives; else 408 and the request ends."""

    body_min_bytes_per_second: int = setting(16 * 1024, ge=1)
    """Past its first body_timeout_seconds, a request body must average this rate; else 408."""

    max_connections: int = setting(1000, ge=1)
    """Connections open at once per process (capped by the open-file limit); more get 503."""

    max_connections_per_client: int = setting(100, ge=1)
    """Connections per client address and process (503 past it); behind proxies, bodies arriving."""

    max_waiting_connections: int = setting(500, ge=1)
    """Connections per process waiting on their clients; past it, the slowest gets 408."""

    max_limit: int = setting(10000, ge=1)
    """Largest `limit` a paginated operation accepts; larger is a 400."""

    default_wait_seconds: int = setting(30, ge=1)
    """Request timeout when no `Prefer: wait=N` header (or wait=0) is sent."""

    max_wait_seconds: int = setting(60, ge=1)
    """Cap on the timeout a client may ask for with `Prefer: wait=N`."""

    allow_unlimited_wait: bool = False
    """Whether `Prefer: wait=-1` (no timeout at all) is honoured; otherwise it is a 400."""

    rate_limit_per_second: int = setting(55, ge=0)
    """Requests per second each client IP may make (before authentication); 0 turns limits off."""

    rate_limit_burst: int = setting(10, ge=0)
    """Extra requests allowed within one second, the ten-second average staying at the rate."""

    login_failures_per_minute: int = setting(10, ge=1)
    """Failed logins allowed per user name and per address in a minute; then 429s, unchecked."""

    redis_url: str | None = dataclasses.field(default=None, repr=False)  # a password
    """`redis://host:port/db`: keep rate-limit counters in Redis, shared by every replica."""

    trusted_proxies: int = setting(0, ge=0)
    """How many reverse proxies in front of the server append to X-Forwarded-For (0: ignore it)."""

    console: Literal["on", "off"] = "on"
    """The web console at /ui/ and the API reference at /api/v2/docs: on, or off (404)."""

    metrics: Literal["off", "open", "token"] = "off"
    """GET /metrics (Prometheus text): off (404), open, or token (GRAPHSVC_METRICS_TOKEN)."""

    metrics_token: Secret | None = None
    """The bearer token a scraper sends for GET /metrics when GRAPHSVC_METRICS=token."""

    shutdown_grace_seconds: int = setting(30, ge=0)
    """On SIGTERM, how long requests under way may take to finish before the server exits."""

    db_pool_size: int = setting(8, ge=1)
    """Database connections each server process keeps open."""

    db_acquire_timeout_seconds: float = setting(5.0, gt=0)
    """Longest a request waits for a free database connection; then 503 with Retry-After."""

    max_zip_entries: int = setting(100_000, ge=1)
    """Entries one uploaded or ingested zip may hold; a larger archive is refused."""

    max_ingest_documents: int = setting(200_000, ge=1)
    """JSON documents one ingest (an upload job or `graphsvc ingest`) may read, zip entries too."""

    ingest_cache_mb: int = setting(128, ge=0, le=65_536)
    """SQLite's page cache of an ingest run in MiB: more memory, fewer rewrites (0: SQLite's)."""

    citrix_rdp_support: bool = False
    """CanRDP on a computer with a "Direct Access Users" local group needs it too (Citrix)."""

    log_level: Literal["debug", "info", "warning", "error"] = "info"
    """Log level of the server process (debug, info, warning, error)."""

    log_format: Literal["auto", "json", "text"] = "auto"
    """Log lines as JSON objects, or as text; auto: text on a terminal, JSON elsewhere."""

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, **values: Any) -> Settings:
        """The settings the environment (os.environ unless given) sets; keyword values (a
        test's, a tool's) take precedence. A SettingsError names every bad variable."""
        given = environment_values(os.environ if environ is None else environ)
        return cls(**{**given, **values})

    def __post_init__(self) -> None:
        problems: list[Problem] = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            try:
                converted = convert(field, value)
            except ValueError as exc:
                given = None if field.name in SECRET_SETTINGS else value  # never kept
                problems.append(Problem(field.name, given, str(exc)))
                continue
            object.__setattr__(self, field.name, converted)
        if not problems and self.metrics == "token" and self.metrics_token is None:
            problems.append(
                Problem(None, None, "GRAPHSVC_METRICS=token needs GRAPHSVC_METRICS_TOKEN")
            )
        if problems:
            raise SettingsError(problems)

    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'graphsvc.sqlite3'}"

    def resolved_path_index_folder(self) -> Path:
        """The index files of this store: a subfolder per database, so that two stores
        sharing a data folder do not replace each other's index."""
        from graphsvc.store.db import redact_url

        url = redact_url(self.resolved_database_url())  # the folder's name shows no password
        digest = hashlib.sha256(url.encode()).hexdigest()[:16]
        return (self.path_index_dir or self.data_dir / "path-index") / digest

    def resolved_jwt_secret(self) -> bytes:
        if self.jwt_secret is not None:
            return self.jwt_secret.reveal().encode()
        return read_or_create_secret(self.data_dir / "jwt-signing.key", secrets.token_urlsafe(48))

    def resolved_token_encryption_key(self) -> bytes:
        """The configured key, else the one generated into data_dir (a SettingsFileError if
        that file no longer holds a key)."""
        if self.token_encryption_key is not None:
            return self.token_encryption_key.reveal().encode()
        from cryptography.fernet import Fernet

        path = self.data_dir / "token-encryption.key"
        key = read_or_create_secret(path, Fernet.generate_key().decode())
        if not is_fernet_key(key.decode(errors="replace")):
            raise SettingsFileError(
                f"{path} does not hold a Fernet key (was it edited?): restore it from a "
                "backup, or set GRAPHSVC_TOKEN_ENCRYPTION_KEY to the key the tokens were "
                "sealed with"
            )
        return key


class SettingsFileError(Exception):
    """A file graphsvc keeps a generated secret in cannot be used; the message says why."""


REDIS_SCHEMES = ("redis", "rediss", "redis+unix")
FERNET_KEY_ADVICE = (
    'make one with python -c "from cryptography.fernet import Fernet; '
    'print(Fernet.generate_key().decode())"'
)


def is_fernet_key(text: str) -> bool:
    """Whether `text` is a Fernet key: 32 bytes in URL-safe base64 (44 characters)."""
    try:
        return len(text) == 44 and len(base64.urlsafe_b64decode(text.encode())) == 32
    except ValueError:
        return False


def read_or_create_secret(path: Path, fresh: str) -> bytes:
    """Keep a generated secret in a 0600 file so restarts keep sessions and tokens valid; a
    SettingsFileError naming the file when it cannot be read or made."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return path.read_text().strip().encode()
        with os.fdopen(fd, "w") as f:
            f.write(fresh + "\n")
    except UnicodeDecodeError:
        raise SettingsFileError(
            f"{path} does not hold a key graphsvc wrote (was it edited?): restore it from a "
            "backup, or set the key's GRAPHSVC_ variable"
        ) from None
    except OSError as exc:
        raise SettingsFileError(
            f"{path}: {exc.strerror}: GRAPHSVC_DATA_DIR must be a folder graphsvc may write "
            "(it keeps generated keys there)"
        ) from None
    return fresh.encode()


SECRET_SETTINGS = {"jwt_secret", "token_encryption_key", "metrics_token"}


# GRAPHSVC_* variables that are not settings: the command line's client side (`graphsvc
# sign`, `upload`, a user's secret), and names the test suite and benchmarks keep for theirs.
CLIENT_VARIABLES = (
    "GRAPHSVC_URL",
    "GRAPHSVC_TOKEN_ID",
    "GRAPHSVC_TOKEN_KEY",
    "GRAPHSVC_USER_SECRET",
    "GRAPHSVC_CA_FILE",
)
RESERVED_PREFIXES = ("GRAPHSVC_TEST_", "GRAPHSVC_BENCH_")


def setting_variables() -> dict[str, list[str]]:
    """Each setting's variables, in the order they are looked for: GRAPHSVC_ and its name
    upper-cased, then the name it had before, if it had one."""
    variables = {}
    for field in dataclasses.fields(Settings):
        variables[field.name] = [f"GRAPHSVC_{field.name.upper()}"]
        if field.metadata.get("former"):
            variables[field.name].append(field.metadata["former"])
    return variables


def environment_values(environ: Mapping[str, str]) -> dict[str, str]:
    """The settings the environment sets, by setting name: each from the first of its
    variables that is set, names compared in any case (as pydantic-settings, which read
    them before, compared them)."""
    given = {name.upper(): value for name, value in environ.items()}
    values = {}
    for name, variables in setting_variables().items():
        found = next((given[v] for v in variables if v in given), None)
        if found is not None:
            values[name] = found
    return values


def known_variables() -> set[str]:
    """Every GRAPHSVC_* variable graphsvc reads: each setting's (former names too) and the
    client side's."""
    known = set(CLIENT_VARIABLES)
    for variables in setting_variables().values():
        known.update(variables)
    return known


def describe_unknown_variables(environ: Mapping[str, str]) -> str | None:
    """One line naming each GRAPHSVC_* variable set that graphsvc does not read (a misspelt
    one would otherwise be ignored), with the known name nearest to it; None if none."""
    known = known_variables()
    settings = {v for variables in setting_variables().values() for v in variables}
    unknown = sorted(
        name
        for name in environ
        if name.upper().startswith("GRAPHSVC_")
        and name not in known
        and name.upper() not in settings  # settings are read in any case
        and not name.upper().startswith(RESERVED_PREFIXES)
    )
    if not unknown:
        return None
    parts = []
    prefix = len("GRAPHSVC_")  # compared without it: it alone made every name look alike
    endings = {name[prefix:]: name for name in known}
    for name in unknown:
        near = difflib.get_close_matches(name.upper()[prefix:], sorted(endings), n=1, cutoff=0.75)
        parts.append(f"{name} (did you mean {endings[near[0]]}?)" if near else name)
    return (
        f"unknown variable {', '.join(parts)}: graphsvc reads no such setting; unset it or "
        "correct its name (docs/configuration.md lists them)"
    )


def describe_settings_error(error: SettingsError) -> str:
    """One line naming each bad GRAPHSVC_* variable, its value and what is allowed."""
    from graphsvc.store.db import redact_url

    parts = []
    for problem in error.problems:
        if problem.name is None:  # a rule across settings: its message names them
            parts.append(problem.message)
            continue
        shown = "(hidden)" if problem.name in SECRET_SETTINGS else repr(problem.given)
        if problem.name in ("database_url", "redis_url") and isinstance(problem.given, str):
            shown = repr(redact_url(problem.given))
        parts.append(f"{variable_of(problem.name)}={shown}: {problem.message}")
    return "; ".join(parts)


def variable_of(name: str) -> str:
    """The environment variable a setting was read from: its former name, when that is the
    one set."""
    variables = setting_variables().get(name, [f"GRAPHSVC_{name.upper()}"])
    return next((v for v in variables if v in os.environ), variables[0])


@dataclasses.dataclass(frozen=True)
class Problem:
    """One bad setting: its field (None for a rule across settings), what was given, why."""

    name: str | None
    given: Any
    message: str


class SettingsError(Exception):
    """Settings that cannot be used; `problems` says which and why."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")
TRUE_WORDS = {"1", "true", "t", "yes", "y", "on"}
FALSE_WORDS = {"0", "false", "f", "no", "n", "off"}


@functools.cache
def field_types() -> dict[str, Any]:
    """Each setting's type, its annotation evaluated once."""
    return typing.get_type_hints(Settings)


def convert(field: dataclasses.Field[Any], value: Any) -> Any:
    """`value` (as given, or text from the environment) as the field's type, within its
    bounds and past its own check; a ValueError saying what is allowed."""
    kind = field_types()[field.name]
    options = typing.get_args(kind)
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in options:
        if value is None or value == "":  # an empty variable leaves the setting unset
            return None
        kind = next(option for option in options if option is not type(None))
    converted = as_type(kind, value)
    bounds = field.metadata.get("bounds", {})
    if "ge" in bounds and converted < bounds["ge"]:
        raise ValueError(f"should be greater than or equal to {bounds['ge']}")
    if "gt" in bounds and converted <= bounds["gt"]:
        raise ValueError(f"should be greater than {bounds['gt']}")
    if "le" in bounds and converted > bounds["le"]:
        raise ValueError(f"should be less than or equal to {bounds['le']}")
    check = FIELD_CHECKS.get(field.name)
    return converted if check is None else check(converted)


def as_type(kind: Any, value: Any) -> Any:
    """`value` as one of the types settings have, from itself or from its text."""
    if typing.get_origin(kind) is Literal:
        choices = typing.get_args(kind)  # all lower case: a value is taken in any case
        if isinstance(value, str) and value.lower() in choices:
            return value.lower()
        listed = ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}"
        raise ValueError(f"should be {listed}")
    if kind is bool:
        if isinstance(value, bool):
            return value
        word = str(value).strip().lower()
        if word in TRUE_WORDS | FALSE_WORDS:
            return word in TRUE_WORDS
        raise ValueError("should be true or false (or 1 or 0, yes or no, on or off)")
    if kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        text = str(value).strip()
        if not WHOLE_NUMBER.fullmatch(text):  # not 1e3, 5_000, nor digits of other scripts
            raise ValueError("should be a valid integer, a whole number like 30")
        return int(text)
    if kind is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and value.isascii() and "_" not in value:
            try:
                number = float(value.strip())
            except ValueError:
                raise ValueError("should be a number, like 2.5") from None
        else:
            raise ValueError("should be a number, like 2.5")
        try:
            number = float(number)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise ValueError("should be a finite number")
        return number
    if kind is Path:
        if isinstance(value, Path):
            return value
        if isinstance(value, str):
            return Path(value)
        raise ValueError(f"should be a folder's path, not {type(value).__name__}")
    if kind is Secret:
        if isinstance(value, str):
            value = Secret(value)
        if not isinstance(value, Secret):
            raise ValueError(f"should be text, not {type(value).__name__}")
        try:
            value.reveal().encode()
        except UnicodeEncodeError:  # bytes the environment held that are not UTF-8
            raise ValueError("should be text in UTF-8") from None
        return value
    if kind is str and isinstance(value, str):
        return value
    raise ValueError(f"should be text, not {type(value).__name__}")


def fernet_key(value: Secret) -> Secret:
    key = value.reveal().strip()  # a newline from a file or a paste
    if not is_fernet_key(key):
        raise ValueError(f"must be a Fernet key: {FERNET_KEY_ADVICE}")
    return Secret(key)


def redis_location(value: str) -> str:
    """A Redis URL the rate limiter's client takes: checked here, since that client's own
    refusals are tracebacks that show the password (the limits package's)."""
    usage = "use redis://host:port/db (rediss:// for TLS, redis+unix:///path/socket)"
    scheme, separator, rest = value.partition("://")
    if not separator or scheme not in REDIS_SCHEMES or not rest.strip("/"):
        raise ValueError(usage)
    if scheme == "redis+unix":
        return value
    try:
        parts = urlsplit(value)
        port = parts.port
        host = parts.hostname
    except ValueError:  # a port that is no number or out of range, a broken [IPv6] host
        raise ValueError(f"{usage}: the host or port cannot be read") from None
    if not host or port is None:
        raise ValueError(f"{usage}: name the host and its port")
    index = parts.path.strip("/")
    if index and not (index.isascii() and index.isdigit()):
        raise ValueError(f"the database index {index!r} must be a whole number, like /0")
    for name, given in parse_qsl(parts.query):
        if name == "ssl_cert_reqs" and given not in ("none", "optional", "required"):
            raise ValueError("ssl_cert_reqs must be none, optional or required")
    return value


def supported_database(value: str) -> str:
    if not value.startswith(DATABASE_SCHEMES):
        raise ValueError("use sqlite:///path/file.db or postgresql://user@host:port/database")
    if value.startswith("sqlite:///"):
        folder = Path(value.removeprefix("sqlite:///")).parent
        try:
            found = folder.is_dir()
        except OSError as exc:  # a name too long, say
            raise ValueError(f"the folder cannot be used: {exc.strerror}") from None
        if not found:
            raise ValueError(f"the folder {folder} does not exist; create it first")
    return value


# Checks of one setting past its type and bounds.
FIELD_CHECKS: dict[str, typing.Callable[[Any], Any]] = {
    "token_encryption_key": fernet_key,
    "redis_url": redis_location,
    "database_url": supported_database,
}
