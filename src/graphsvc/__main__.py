"""`python -m graphsvc ...` is the `graphsvc` command."""

from graphsvc.cli import main

main()
