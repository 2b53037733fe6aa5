"""The one settings class; its field docstrings are the configuration reference."""

from __future__ import annotations

import base64
import difflib
import hashlib
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

DATABASE_SCHEMES = ("sqlite:///", "postgresql://", "postgres://")


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "graphsvc"


class Settings(BaseSettings):
    """Read from environment variables with the prefix GRAPHSVC_ (for example GRAPHSVC_EDITION)."""

    model_config = SettingsConfigDict(
        env_prefix="GRAPHSVC_", use_attribute_docstrings=True, extra="ignore"
    )

    data_dir: Path = Field(default_factory=default_data_dir)
    """Folder for the default SQLite file and for secrets generated on first start."""

    database_url: str | None = None
    """`sqlite:///path/file.db` or `postgresql://user@host:port/db`; default SQLite in data_dir."""

    edition: Literal["enterprise", "community"] = "enterprise"
    """`enterprise` serves every operation; `community` answers 404 for GET /api/v2/clients/{id}."""

    public_url: str | None = None
    """Base URL the service is reached at, used for SAML sp_* URIs; default the request's own."""

    jwt_secret: SecretStr | None = None
    """HS256 key for session JWTs; generated once into data_dir when not set."""

    token_encryption_key: SecretStr | None = None
    """Fernet key encrypting API token keys at rest; generated once into data_dir when not set."""

    jwt_lifetime_seconds: int = Field(8 * 3600, ge=60)
    """How long a JWT from POST /api/v2/login is valid."""

    signature_max_age_seconds: int = Field(2 * 3600, ge=1)
    """A signed request whose RequestDate is older than this is rejected as a replay."""

    signature_max_future_seconds: int = Field(15 * 60, ge=0)
    """A signed request whose RequestDate is further ahead than this is rejected."""

    token_cache_seconds: float = Field(1.0, ge=0)
    """Seconds a process may reuse a token's stored record; revoking takes this long at most."""

    answer_cache_bytes: int = Field(32 * 1024**2, ge=0)
    """Memory per process for answers kept until the data changes (32 MiB); 0 keeps none."""

    sdk_compatibility: bool = Field(
        False,
        validation_alias=AliasChoices(
            "sdk_compatibility",
            "GRAPHSVC_SDK_COMPATIBILITY",
            "GRAPHSVC_ACCEPT_PATH_ONLY_SIGNATURES",  # its name before 0.2
        ),
    )
    """Weaker, for the reference SDK: path-only signatures, and a bare `Prefer: 0` as none."""

    accept_local_time_signatures: bool = False
    """Weaker, for the reference SDK: accept a RequestDate in any offset, not only UTC."""

    max_body_bytes: int = Field(16 * 1024, ge=1)
    """Largest request body accepted (login and every read); a larger one is a 413."""

    max_upload_bytes: int = Field(4 * 1024**3, ge=1)
    """Largest file one file-upload request may carry (4 GiB); a larger one is a 413."""

    ingester: bool = Field(
        True,
        validation_alias=AliasChoices(
            "ingester",
            "GRAPHSVC_INGESTER",
            "GRAPHSVC_INGEST_WORKER",  # its name before 0.3
        ),
    )
    """Ingest ended file-upload jobs in this process, in the background, one per store at once."""

    ingest_poll_seconds: float = Field(2.0, gt=0, le=3600)
    """How often an idle ingester looks for a queued file-upload job."""

    ingest_lease_seconds: float = Field(60.0, ge=1, le=86400)
    """An ingesting replica renews its job's lease every third of this; dead, it loses the job."""

    audit_retention_days: int = Field(365, ge=1, le=36500)
    """Audit events older than this are deleted, at the next change that is audited."""

    cypher_max_rows: int = Field(100_000, ge=1)
    """Most rows a Cypher query may answer with or hold to sort, group or deduplicate (a 413)."""

    cypher_max_paths: int = Field(10_000, ge=1)
    """Most paths a Cypher shortest-path pattern may find in one query (a 413)."""

    cypher_max_memory_mb: int = Field(1024, ge=16)
    """Most MiB a Cypher query may grow the server's resident memory by while it runs (a 413)."""

    path_index_dir: Path | None = None
    """The shortest-path index's folder, the service user's alone; default data_dir/path-index."""

    upload_job_timeout_seconds: int = Field(600, ge=1)
    """A running file-upload job whose client is silent this long is Timed Out, files dropped."""

    header_timeout_seconds: float = Field(10.0, gt=0)
    """A request's headers must arrive within this long of its first byte; else 408, closed."""

    body_timeout_seconds: float = Field(10.0, gt=0)
    """Longest pause allowed while a request body arrives; else 408 and the request ends."""

    body_min_bytes_per_second: int = Field(16 * 1024, ge=1)
    """Past its first body_timeout_seconds, a request body must average this rate; else 408."""

    max_connections: int = Field(1000, ge=1)
    """Connections open at once per process (capped by the open-file limit); more get 503."""

    max_connections_per_client: int = Field(100, ge=1)
    """Connections per client address and process (503 past it); behind proxies, bodies arriving."""

    max_waiting_connections: int = Field(500, ge=1)
    """Connections per process waiting on their clients; past it, the slowest gets 408."""

    max_limit: int = Field(10000, ge=1)
    """Largest `limit` a paginated operation accepts; larger is a 400."""

    default_wait_seconds: int = Field(30, ge=1)
    """Request timeout when no `Prefer: wait=N` header (or wait=0) is sent."""

    max_wait_seconds: int = Field(60, ge=1)
    """Cap on the timeout a client may ask for with `Prefer: wait=N`."""

    allow_unlimited_wait: bool = False
    """Whether `Prefer: wait=-1` (no timeout at all) is honoured; otherwise it is a 400."""

    rate_limit_per_second: int = Field(55, ge=0)
    """Requests per second each client IP may make (before authentication); 0 turns limits off."""

    rate_limit_burst: int = Field(10, ge=0)
    """Extra requests allowed within one second, the ten-second average staying at the rate."""

    login_failures_per_minute: int = Field(10, ge=1)
    """Failed logins allowed per user name and per address in a minute; then 429s, unchecked."""

    redis_url: str | None = None
    """`redis://host:port/db`: keep rate-limit counters in Redis, shared by every replica."""

    trusted_proxies: int = Field(0, ge=0)
    """How many reverse proxies in front of the server append to X-Forwarded-For (0: ignore it)."""

    console: Literal["on", "off"] = "on"
    """The web console at /ui/ and the API reference at /api/v2/docs: on, or off (404)."""

    metrics: Literal["off", "open", "token"] = "off"
    """GET /metrics (Prometheus text): off (404), open, or token (GRAPHSVC_METRICS_TOKEN)."""

    metrics_token: SecretStr | None = None
    """The bearer token a scraper sends for GET /metrics when GRAPHSVC_METRICS=token."""

    shutdown_grace_seconds: int = Field(30, ge=0)
    """On SIGTERM, how long requests under way may take to finish before the server exits."""

    db_pool_size: int = Field(8, ge=1)
    """Database connections each server process keeps open."""

    db_acquire_timeout_seconds: float = Field(5.0, gt=0)
    """Longest a request waits for a free database connection; then 503 with Retry-After."""

    max_zip_entries: int = Field(100_000, ge=1)
    """Entries one uploaded or ingested zip may hold; a larger archive is refused."""

    max_ingest_documents: int = Field(200_000, ge=1)
    """JSON documents one ingest (an upload job or `graphsvc ingest`) may read, zip entries too."""

    citrix_rdp_support: bool = False
    """CanRDP on a computer with a "Direct Access Users" local group needs it too (Citrix)."""

    log_level: Literal["debug", "info", "warning", "error"] = "info"
    """Log level of the server process (debug, info, warning, error)."""

    log_format: Literal["auto", "json", "text"] = "auto"
    """Log lines as JSON objects, or as text; auto: text on a terminal, JSON elsewhere."""

    @model_validator(mode="after")
    def metrics_token_given(self) -> Settings:
        if self.metrics == "token" and self.metrics_token is None:
            raise ValueError("GRAPHSVC_METRICS=token needs GRAPHSVC_METRICS_TOKEN")
        return self

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def lower_case_level(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("token_encryption_key")
    @classmethod
    def fernet_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        key = value.get_secret_value().strip()  # a newline from a file or a paste
        if not is_fernet_key(key):
            raise ValueError(f"must be a Fernet key: {FERNET_KEY_ADVICE}")
        return SecretStr(key)

    @field_validator("redis_url")
    @classmethod
    def redis_location(cls, value: str | None) -> str | None:
        if not value:
            return None
        scheme, separator, rest = value.partition("://")
        if not separator or scheme not in REDIS_SCHEMES or not rest.strip("/"):
            raise ValueError(
                "use redis://host:port/db (rediss:// for TLS, redis+unix:///path/socket)"
            )
        if scheme != "redis+unix":
            index = rest.partition("?")[0].partition("/")[2]
            if index and not index.isdigit():
                raise ValueError(f"the database index {index!r} must be a whole number, like /0")
        return value

    @field_validator("database_url")
    @classmethod
    def supported_database(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(DATABASE_SCHEMES):
            raise ValueError("use sqlite:///path/file.db or postgresql://user@host:port/database")
        if value.startswith("sqlite:///"):
            folder = Path(value.removeprefix("sqlite:///")).parent
            if not folder.is_dir():
                raise ValueError(f"the folder {folder} does not exist; create it first")
        return value

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
            return self.jwt_secret.get_secret_value().encode()
        return read_or_create_secret(self.data_dir / "jwt-signing.key", secrets.token_urlsafe(48))

    def resolved_token_encryption_key(self) -> bytes:
        """The configured key, else the one generated into data_dir (a SettingsFileError if
        that file no longer holds a key)."""
        if self.token_encryption_key is not None:
            return self.token_encryption_key.get_secret_value().encode()
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


def known_variables() -> set[str]:
    """Every GRAPHSVC_* variable graphsvc reads: each setting's (former names too) and the
    client side's."""
    known = set(CLIENT_VARIABLES)
    for name, field in Settings.model_fields.items():
        known.add(f"GRAPHSVC_{name.upper()}")
        for choice in getattr(field.validation_alias, "choices", []):
            if isinstance(choice, str):
                known.add(choice)
    return known


def describe_unknown_variables(environ: Mapping[str, str]) -> str | None:
    """One line naming each GRAPHSVC_* variable set that graphsvc does not read (a misspelt
    one would otherwise be ignored), with the known name nearest to it; None if none."""
    known = known_variables()
    unknown = sorted(
        name
        for name in environ
        if name.startswith("GRAPHSVC_")
        and name not in known
        and not name.startswith(RESERVED_PREFIXES)
    )
    if not unknown:
        return None
    parts = []
    prefix = len("GRAPHSVC_")  # compared without it: it alone made every name look alike
    endings = {name[prefix:]: name for name in known}
    for name in unknown:
        near = difflib.get_close_matches(name[prefix:], sorted(endings), n=1, cutoff=0.75)
        parts.append(f"{name} (did you mean {endings[near[0]]}?)" if near else name)
    return (
        f"unknown variable {', '.join(parts)}: graphsvc reads no such setting; unset it or "
        'correct its name (README "Configuration" lists them)'
    )


def describe_settings_error(error: ValidationError) -> str:
    """One line naming each bad GRAPHSVC_* variable, its value and what is allowed."""
    from graphsvc.store.db import redact_url

    parts = []
    for problem in error.errors():
        message = problem["msg"].removeprefix("Value error, ").removeprefix("Input ")
        if not problem["loc"]:  # a rule across settings: its message names them
            parts.append(message)
            continue
        name = str(problem["loc"][0])
        variable = variable_of(name)
        shown = "(hidden)" if name in SECRET_SETTINGS else repr(problem.get("input"))
        if name in ("database_url", "redis_url") and isinstance(problem.get("input"), str):
            shown = repr(redact_url(problem["input"]))
        parts.append(f"{variable}={shown}: {message}")
    return "; ".join(parts)


def variable_of(name: str) -> str:
    """The environment variable a setting was read from: the former name, when that is the
    one set (pydantic names the first of a field's aliases whichever was given)."""
    field = Settings.model_fields.get(name)
    choices = getattr(field.validation_alias, "choices", []) if field is not None else []
    for choice in choices:
        if isinstance(choice, str) and choice.startswith("GRAPHSVC_") and choice in os.environ:
            return choice
    variable = name.upper()
    return variable if variable.startswith("GRAPHSVC_") else f"GRAPHSVC_{variable}"
