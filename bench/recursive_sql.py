"""The traversals as a SQL user writes them on the store's tables, for the benchmarks that
set them beside graphsvc's (bench/paths.py, bench/cypher.py): recursive CTEs over `edges`
on PostgreSQL. A walk whose rows are (node, depth) needs a depth cap to end on a graph with
cycles; each benchmark says which it gives.
"""

# The length of the shortest path from $1 to $2, as a SQL user writes it: a breadth-first
# expansion from the start, one edge a level over the traversable kinds ($4), keeping
# (node, depth) rows, where UNION drops a row already produced (the same node reached again
# at the same depth), not a node already reached at a smaller depth, so every level holds
# every node some walk of that length reaches. It stops at the depth cap ($3), then the
# least depth at which the end appears is the length (NULL: no path within the cap).
PATH_SQL = """
WITH RECURSIVE walk(node, depth) AS (
    SELECT $1::bigint, 0
    UNION
    SELECT e.end_id, w.depth + 1
    FROM walk AS w JOIN edges AS e ON e.start_id = w.node
    WHERE w.depth < $3 AND e.kind_id = ANY($4::int[])
)
SELECT min(depth) FROM walk WHERE node = $2
"""

# Exposure the same way, backwards from every target ($1) at once: each node that reaches a
# target within the cap ($2), with the least depth it was found at (0 for the targets).
EXPOSURE_SQL = """
WITH RECURSIVE back(node, depth) AS (
    SELECT unnest($1::bigint[]), 0
    UNION
    SELECT e.start_id, b.depth + 1
    FROM back AS b JOIN edges AS e ON e.end_id = b.node
    WHERE b.depth < $2 AND e.kind_id = ANY($3::int[])
)
SELECT node, min(depth) FROM back GROUP BY node
"""

# A user's groups through MemberOf ($2) at any depth, from user $1: rows of one node, so
# UNION ends the walk on its own.
NESTED_SQL = """
WITH RECURSIVE up(node) AS (
    SELECT e.end_id FROM edges AS e WHERE e.start_id = $1 AND e.kind_id = $2
    UNION
    SELECT e.end_id FROM up JOIN edges AS e ON e.start_id = up.node AND e.kind_id = $2
)
SELECT count(*) FROM up JOIN nodes AS n ON n.id = up.node WHERE n.label = 'Group'
"""

# A node's ($1) relationships of one kind ($2) in.
ONE_HOP_SQL = "SELECT count(*) FROM edges WHERE end_id = $1 AND kind_id = $2"

# Every enabled Kerberoastable user's shortest distance to $1 within $2 hops over kinds
# $3, the nearest 1,000 first: EXPOSURE_SQL's walk from one target.
MANY_SQL = """
WITH RECURSIVE back(node, depth) AS (
    SELECT $1::bigint, 0
    UNION
    SELECT e.start_id, b.depth + 1
    FROM back AS b JOIN edges AS e ON e.end_id = b.node
    WHERE b.depth < $2 AND e.kind_id = ANY($3::int[])
)
SELECT n.name, min(b.depth) AS length FROM back AS b JOIN nodes AS n ON n.id = b.node
WHERE b.depth > 0 AND n.label = 'User' AND (n.properties::jsonb ->> 'hasspn')::boolean
    AND (n.properties::jsonb ->> 'enabled')::boolean
GROUP BY n.id, n.name ORDER BY length, n.id LIMIT 1000
"""
