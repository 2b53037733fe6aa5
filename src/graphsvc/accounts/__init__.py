"""Who may do what, shared by the HTTP API and the CLI: users and their roles, the permissions
a role grants, API tokens, sessions (login) and the SAML identity providers.

Over HTTP a service function acts for a `Caller`; the CLI runs on the server's host with the
store's credentials, and so acts with every right (`caller` None). Every change is logged on
`graphsvc.audit`, naming who made it.
"""
