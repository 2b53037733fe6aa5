"""Read-only Cypher (`POST /api/v2/graphs/cypher`, `graphsvc query`): parsed from a grammar
(parse.py, grammar.lark) into a syntax tree (syntax.py), planned (plan.py) and run on the
in-memory graph (execute.py)."""
