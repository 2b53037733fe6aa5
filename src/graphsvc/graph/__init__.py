"""The graph and what is read from it, shared by the HTTP API and the CLI: the data-quality
statistics, nodes (search, the AD domains and Azure tenants, an entity's lists such as DCOM
rights), shortest paths, the collection clients and the schema extensions. Each module here
but the path index's (path_index, index_files) has a store module and a wire module of the
same name."""
