"""Storage: what the rest uses of a store (db), the two pools (sqlite, postgres), what their
SQL differs by (dialect), the data version, migrations, and the SQL by subject."""
