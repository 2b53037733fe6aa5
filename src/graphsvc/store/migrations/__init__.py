"""Alembic migrations: the database schema, for SQLite and PostgreSQL alike."""
