"""The demo dataset, and the collector-file writers it (and the tests) build it with."""
