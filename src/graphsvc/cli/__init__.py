"""The `graphsvc` command: each subcommand is imported from its module when it is called
(`common.COMMAND_MODULES`); `graphsvc.__main__.run` is the program around it."""

from graphsvc.cli.common import main

__all__ = ["main"]
