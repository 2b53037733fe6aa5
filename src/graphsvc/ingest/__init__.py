"""Collector files to records: SharpHound, AzureHound and OpenGraph documents, read as
streams, stored as one collection run with its statistics. `run.ingest_files` is the entry
point. (Nothing is imported here: a command that only needs `records.IngestError` must not
load the whole ingest, and numpy with it.)"""
