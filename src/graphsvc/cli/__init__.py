"""The `graphsvc` command."""

from graphsvc.cli import accounts, data, server, upload
from graphsvc.cli.common import main

for command in (
    server.serve,
    server.db,
    server.demo,
    server.examples,
    server.sign,
    data.ingest,
    upload.upload,
    data.schema,
    data.find,
    data.path,
    data.exposure,
    data.domains,
    accounts.user,
    accounts.token,
    accounts.saml,
    accounts.client,
):
    main.add_command(command)

__all__ = ["main"]
