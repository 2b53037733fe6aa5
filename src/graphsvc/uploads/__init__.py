"""File uploads: the jobs a collector sends its files to (`jobs`), and the ingester that loads
the ended ones in the background on every serving replica (`ingester`)."""
