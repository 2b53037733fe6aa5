"""File uploads: the jobs a collector sends its files to (`jobs`), and the ingester that loads
the ended ones in the background on every serving replica (`ingester`)."""

# The header of a job start's answer that tells the server's upload limit, in bytes.
UPLOAD_LIMIT_HEADER = "Graphsvc-Max-Upload-Bytes"
