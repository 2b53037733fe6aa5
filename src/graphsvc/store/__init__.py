"""Storage: connections and dialects (db), migrations, and the SQL by subject."""
