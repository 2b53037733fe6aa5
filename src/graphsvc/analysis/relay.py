"""NTLM relay, as the reference's post-processing derives it: from a domain's Authenticated
Users group (every principal of the domain can coerce an authentication) to each computer
whose coerced NTLM authentication can be relayed somewhere that grants control:

- CoerceAndRelayNTLMToSMB: to a computer that does not require SMB signing
  (`smbsigning` false), where one of its administrators (AdminTo, a group's members at any
  depth) is another computer whose authentication can be coerced and relayed;
- CoerceAndRelayNTLMToLDAP / ToLDAPS: from a computer whose authentication can be coerced
  over HTTP (`webclientrunning` true) to a domain controller of its domain (other than
  itself) with LDAP available and no LDAP signing (`ldapsigning` false), or LDAPS available
  without channel binding (`ldapsepa` false);
- CoerceAndRelayNTLMToADCS: to a computer that may enroll (on the template and the CA, as
  ESC edges count enrollment) in a template published to an enterprise CA chained to the
  domain with a web enrollment endpoint open to relay (`hasvulnerableendpoint`), the
  template needing no manager approval nor signature and allowing authentication.

A computer's authentication can be coerced and relayed when it does not restrict outgoing
NTLM (`restrictoutboundntlm` false: a computer whose value was not collected counts as
restricted) and it is not in Protected Users, unless its domain's functional level is 2012
or older (where Protected Users does not stop NTLM).
"""

from __future__ import annotations

from collections import defaultdict

from graphsvc.analysis.escalations import Rules
from graphsvc.analysis.pki import PublicKeyServices
from graphsvc.analysis.principals import Memberships
from graphsvc.store import analysis as store
from graphsvc.store.analysis import AnalysedNode, DerivedEdge
from graphsvc.store.db import Connection

AUTHENTICATED_USERS = "-S-1-5-11"
PROTECTED_USERS = "-525"
# Functional levels where Protected Users does not keep NTLM away (the reference's list).
WEAK_FUNCTIONAL_LEVELS = {"2000 Mixed/Native", "2003 Interim", "2003", "2008", "2008 R2", "2012"}


def domain_sid(node: AnalysedNode) -> str | None:
    sid = node.properties.get("domainsid")
    return sid.upper() if isinstance(sid, str) and sid else None


async def relay_edges(conn: Connection, pki: PublicKeyServices) -> list[DerivedEdge]:
    domains = {
        domain_sid(node) or node.object_id.upper(): node
        for node in await store.list_nodes_of_kinds(conn, ("Domain",))
    }
    authenticated: dict[str, str] = {}  # domain sid -> its Authenticated Users group
    for group in await store.find_analysed_nodes(
        conn, await store.list_ids_ending_with(conn, (AUTHENTICATED_USERS,))
    ):
        group_domain = domain_sid(group)
        if group_domain is not None:
            authenticated[group_domain] = group.object_id
    memberships = Memberships(conn)
    protected: dict[str, set[str]] = {}
    for group in await store.find_analysed_nodes(
        conn, await store.list_ids_ending_with(conn, (PROTECTED_USERS,))
    ):
        group_domain = domain_sid(group)
        if group_domain is not None:
            below = await memberships.find_members_below({group.object_id}) or set()
            protected.setdefault(group_domain, set()).update(below)
    relayable: set[str] = set()  # computers whose authentication can be relayed
    for computer in await store.list_nodes_with(conn, ("Computer",), "restrictoutboundntlm", False):
        home = domain_sid(computer)
        if home is None or home not in authenticated or home not in domains:
            continue
        level = domains[home].properties.get("functionallevel")
        if computer.object_id in protected.get(home, set()) and level not in WEAK_FUNCTIONAL_LEVELS:
            continue
        relayable.add(computer.object_id)
    edges = await smb_edges(conn, memberships, authenticated, relayable)
    edges += await ldap_edges(conn, domains, authenticated, relayable)
    edges += await adcs_edges(conn, pki, authenticated, relayable)
    return edges


async def smb_edges(
    conn: Connection, memberships: Memberships, authenticated: dict[str, str], relayable: set[str]
) -> list[DerivedEdge]:
    targets = {
        n.object_id: sid
        for n in await store.list_nodes_with(conn, ("Computer",), "smbsigning", False)
        if (sid := domain_sid(n)) in authenticated
    }
    admins: dict[str, set[str]] = defaultdict(set)
    groups: set[str] = set()
    for holder, label, _, target in await store.list_rights_into(conn, targets, ("AdminTo",)):
        admins[target].add(holder)
        if label == "Group":
            groups.add(holder)
    edges: list[DerivedEdge] = []
    # Each administrator's relayable accounts, found once: a computer's administrators are a
    # few principals shared with many computers (at a million objects, expanding each
    # computer's set of them took 50 s).
    relayable_of: dict[str, set[str]] = {}
    # Every nesting level of every administering group read in one walk (one statement a
    # level), not group by group.
    await memberships.find_members_below(groups)
    for target, sid in sorted(targets.items()):
        for admin in admins[target]:
            if admin not in relayable_of:
                # The reference counts a group's members, not the group itself.
                if admin in groups:
                    below = await memberships.find_members_below({admin}) or set()
                    relayable_of[admin] = {
                        m for m in below & relayable if m not in memberships.groups
                    }
                else:
                    relayable_of[admin] = {admin} & relayable
            found = relayable_of[admin]
            if len(found) > 1 or (found and target not in found):
                edges.append((authenticated[sid], target, "CoerceAndRelayNTLMToSMB", sid))
                break
    return edges


async def ldap_edges(
    conn: Connection,
    domains: dict[str, AnalysedNode],
    authenticated: dict[str, str],
    relayable: set[str],
) -> list[DerivedEdge]:
    ldap: dict[str, set[str]] = defaultdict(set)  # domain sid -> DCs open to LDAP relay
    ldaps: dict[str, set[str]] = defaultdict(set)
    for dc in await store.list_nodes_with(conn, ("Computer",), "isdc", True):
        sid, properties = domain_sid(dc), dc.properties
        if sid is None:
            continue
        if properties.get("ldapsigning") is False and properties.get("ldapavailable") is True:
            ldap[sid].add(dc.object_id)
        if properties.get("ldapsavailable") is True and properties.get("ldapsepa") is False:
            ldaps[sid].add(dc.object_id)
    edges: list[DerivedEdge] = []
    for victim in await store.list_nodes_with(conn, ("Computer",), "webclientrunning", True):
        sid = domain_sid(victim)
        if victim.object_id not in relayable or sid is None or sid not in domains:
            continue
        for kind, controllers in (
            ("CoerceAndRelayNTLMToLDAP", ldap[sid]),
            ("CoerceAndRelayNTLMToLDAPS", ldaps[sid]),
        ):
            if controllers - {victim.object_id}:
                edges.append((authenticated[sid], victim.object_id, kind, sid))
    return edges


async def adcs_edges(
    conn: Connection, pki: PublicKeyServices, authenticated: dict[str, str], relayable: set[str]
) -> list[DerivedEdge]:
    rules = Rules(conn, pki, {})
    templates = rules.templates
    edges: list[DerivedEdge] = []
    for ca, domains in sorted(pki.chained.items()):
        if pki.property_of(ca, "hasvulnerableendpoint") is not True:
            continue
        victims: set[str] = set()
        for template in pki.published.get(ca, []):
            enrollers = pki.enrollers(template)
            if not enrollers or not (
                templates.is_false(template, "requiresmanagerapproval")
                and templates.is_true(template, "authenticationenabled")
                and templates.schema_one_or_no_signature(template)
            ):
                continue
            victims |= await rules.victims(enrollers, pki.ca_enrollers(ca))
        for domain in sorted(domains):
            sid = domain_sid(pki.nodes[domain]) or domain
            if sid not in authenticated:
                continue
            edges += [
                (authenticated[sid], victim, "CoerceAndRelayNTLMToADCS", sid)
                for victim in sorted(victims & relayable)
            ]
    return edges
