"""Tags: what analysts mark, as the reference's Privilege Zones and labels.

A tag is Tier Zero (a tier: the most privileged objects), Owned (the objects an assessment
has compromised) or a label an administrator adds (a high-value application server, say).
Its members are what its selectors select: each selector has seeds, object ids or read-only
Cypher queries, and the tag's type says how far the seeds expand (selection.py): Tier Zero's
to the members of its groups and the contents of its OUs, then to the OUs, GPOs and
unprotected containers above them; a label's to members and contents; Owned's not at all.
Tier Zero starts with the reference's default selectors (migration 0023).

Membership is computed over the whole graph at the end of every ingest run and requested
analysis (tagging.py), and again for a tag whenever its selectors change, so that a mark
survives a later collection: it lives in its selector, not on the node. Every answer that
shows a node reads the members (`tag_members`): Cypher's labels and `system_tags`, the
entity pages' and paths' `isTierZero` and `isOwnedObject`, the search's `system_tags`.
"""
