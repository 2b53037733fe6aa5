"""The signals that stop a command, shared by the program's entry and its commands."""

import signal

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# The exit status of a command stopped by SIGTERM or SIGINT (128 + SIGINT, as a shell
# reports Ctrl-C), whichever came: scripts can tell a stop from a failure (1).
EXIT_INTERRUPTED = 130


def interrupt(signum: int, frame: object) -> None:
    """SIGTERM as Ctrl-C, where no transaction is under way (which handles both itself)."""
    raise KeyboardInterrupt
