"""The HTTP API: the ASGI app, its operations table, authentication, parameters, limits and
the OpenAPI document built from the table."""
