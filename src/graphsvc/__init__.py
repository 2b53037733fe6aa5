"""graphsvc: a server of the Graph Analysis Service API v2."""
