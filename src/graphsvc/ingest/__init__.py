"""Collector files to records: SharpHound, AzureHound and OpenGraph documents, read as
streams, stored as one collection run with its statistics. `ingest_files` is the entry point."""

from graphsvc.ingest.run import IngestResult, ingest_files

__all__ = ["IngestResult", "ingest_files"]
