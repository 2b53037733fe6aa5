"""The `graphsvc` program (`graphsvc ...` and `python -m graphsvc ...`)."""

import os
import signal
import sys

from graphsvc.signals import EXIT_INTERRUPTED, STOP_SIGNALS, interrupt


def run() -> None:
    """The command, with stop signals handled from the first moment and blocked once it has
    ended.

    Before the command's modules are imported (0.2 s and more), a SIGTERM killed the process
    without a word and a Ctrl-C printed a traceback: both are an interruption here. Once the
    command has said how it ended, a signal would only kill the interpreter as it exits
    (its default handlers are back by then) with a status that contradicts it: seen in 2 of
    20 ingests stopped near their end. (Only here, not in `cli.main`: a blocked mask is
    inherited, and tests run `main` in the process that starts their servers.)

    Blocking holds only if no other thread is left to take the signal: numpy (the survey's
    fast pass, the path index) loads OpenBLAS, which starts a worker thread per core that
    lives until the process ends, with the signals unblocked. graphsvc does no linear
    algebra, so BLAS gets one thread, its caller's: no worker is started."""
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    signal.signal(signal.SIGTERM, interrupt)
    try:
        from graphsvc.cli import main

        main()
    except KeyboardInterrupt:  # before the command had begun
        print("graphsvc: error: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


if __name__ == "__main__":
    run()
