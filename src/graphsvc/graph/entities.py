"""The entity routes: an AD object's properties (`GET /api/v2/computers/{object_id}`...) and
the lists around it (who is admin on a computer, what a user controls, a domain's users), on
the reference server's paths and count names.

Every list is one entry of `ENTITY_LISTS`: the route's kind, the list's path segment, its
name among the entity's counts, and the walk through the graph that fills it (see
`store.entities.Walk`). A new list is a new entry; the routes and the OpenAPI document
follow from the table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import msgspec

from graphsvc import wire
from graphsvc.errors import ApiError, not_found
from graphsvc.store import entities
from graphsvc.store import tags as store_tags
from graphsvc.store.db import Connection
from graphsvc.store.entities import Walk
from graphsvc.store.graph import ACL_KINDS
from graphsvc.store.paging import Page, SortKey

# The route segment of each kind of entity, and its label in the graph.
ENTITY_KINDS = {
    "computers": "Computer",
    "users": "User",
    "groups": "Group",
    "domains": "Domain",
    "ous": "OU",
    "gpos": "GPO",
    "containers": "Container",
    "certtemplates": "CertTemplate",
    "enterprisecas": "EnterpriseCA",
    "rootcas": "RootCA",
    "aiacas": "AIACA",
    "ntauthstores": "NTAuthStore",
    "issuancepolicies": "IssuancePolicy",
    "base": "Base",  # any AD object, whatever its own kind
}
# Certificate services, as the reference names them; each entity also lists its controllers.
CERTIFICATE_SERVICES = ("certtemplates", "enterprisecas", "rootcas", "aiacas", "ntauthstores",
                        "issuancepolicies")  # fmt: skip
TRUSTS = ("SameForestTrust", "CrossForestTrust")
# The edges a domain's `adcs-escalations` lists, as the reference's (ESC13 ends at a group;
# the reference leaves ESC16 out too).
ADCS_ESCALATIONS = ("GoldenCert", "ADCSESC1", "ADCSESC3", "ADCSESC4", "ADCSESC6a",
                    "ADCSESC6b", "ADCSESC9a", "ADCSESC9b", "ADCSESC10a", "ADCSESC10b")  # fmt: skip
# Up a CA's chain: to the CAs that signed it, its root CAs, the NTAuth stores trusting it and
# the domains of those.
PKI_UPWARD = ("EnterpriseCAFor", "TrustedForNTAuth", "IssuedSignedBy", "RootCAFor",
              "NTAuthStoreFor")  # fmt: skip


@dataclass(frozen=True)
class EntityList:
    segment: str  # of the entity's route: computers, users...
    path: str  # the list's own segment: admin-users
    count_key: str  # its name among the entity's counts (the reference's): adminUsers
    summary: str
    walk: Walk


def held_by(kind: str) -> Walk:
    """Who holds `kind` on the entity, directly or as a member of a holder."""
    return Walk((kind,), "in", "holders")


def held_on(kind: str) -> Walk:
    """What the entity holds `kind` on, itself or through a group it is in."""
    return Walk((kind,), "out", "groups")


# Constrained delegation (AllowedToDelegate), chain by chain; group membership plays no part.
DELEGATES_TO = Walk(("AllowedToDelegate",), "out", "terminals")
DELEGATED_FROM = Walk(("AllowedToDelegate",), "in", "terminals")

# The seed's DCOM rights are this list too (`list_dcom_rights`).
DCOM_USERS = EntityList(
    "computers",
    "dcom-users",
    "dcomUsers",
    "Who may use DCOM on the computer, through nested groups (as dcom-rights)",
    held_by("ExecuteDCOM"),
)
CONTROLLERS = Walk(ACL_KINDS, "in", "holders")
CONTROLLABLES = Walk(ACL_KINDS, "out", "groups")
MEMBERSHIPS = Walk(("MemberOf",), "out", "transitive")

ENTITY_LISTS: tuple[EntityList, ...] = (
    EntityList("computers", "sessions", "sessions", "Users with a session on the computer",
               Walk(("HasSession",), "out", "direct")),
    EntityList("computers", "admin-users", "adminUsers",
               "Who is a local administrator of the computer, through nested groups",
               held_by("AdminTo")),
    EntityList("computers", "rdp-users", "rdpUsers",
               "Who may log on to the computer by remote desktop, through nested groups",
               held_by("CanRDP")),
    DCOM_USERS,
    EntityList("computers", "ps-remote-users", "psRemoteUsers",
               "Who may use PowerShell remoting on the computer, through nested groups",
               held_by("CanPSRemote")),
    EntityList("computers", "sql-admins", "sqlAdminUsers",
               "Who is a SQL Server administrator on the computer (an SPN target)",
               Walk(("SQLAdmin",), "in", "terminals")),
    EntityList("computers", "constrained-users", "constrainedUsers",
               "Who may delegate to the computer (constrained delegation), at the chains' "
               "starts", DELEGATED_FROM),
    EntityList("computers", "constrained-delegation-rights", "constrainedPrivs",
               "What the computer may delegate to (constrained delegation), at the chains' "
               "ends", DELEGATES_TO),
    EntityList("computers", "controllers", "controllers",
               "Who holds a right over the computer (an ACE), and their members",
               CONTROLLERS),
    EntityList("computers", "group-membership", "groupMembership",
               "The groups the computer is in, at any depth", MEMBERSHIPS),
    EntityList("computers", "admin-rights", "adminRights",
               "The computers the computer is a local administrator of", held_on("AdminTo")),
    EntityList("computers", "controllables", "controllables",
               "What the computer holds a right over (an ACE), itself or through its groups",
               CONTROLLABLES),
    EntityList("users", "sessions", "sessions", "Computers the user has a session on",
               Walk(("HasSession",), "in", "direct")),
    EntityList("users", "memberships", "groupMembership",
               "The groups the user is in, at any depth", MEMBERSHIPS),
    EntityList("users", "admin-rights", "adminRights",
               "The computers the user is a local administrator of, through its groups",
               held_on("AdminTo")),
    EntityList("users", "rdp-rights", "rdpRights",
               "The computers the user may reach by remote desktop, through its groups",
               held_on("CanRDP")),
    EntityList("users", "dcom-rights", "dcomRights",
               "The computers the user may use DCOM on, through its groups",
               held_on("ExecuteDCOM")),
    EntityList("users", "ps-remote-rights", "psRemoteRights",
               "The computers the user may use PowerShell remoting on, through its groups",
               held_on("CanPSRemote")),
    EntityList("users", "sql-admin-rights", "sqlAdmin",
               "The computers the user is a SQL Server administrator on (an SPN target)",
               Walk(("SQLAdmin",), "out", "terminals")),
    EntityList("users", "constrained-delegation-rights", "constrainedDelegation",
               "What the user may delegate to (constrained delegation), at the chains' ends",
               DELEGATES_TO),
    EntityList("users", "controllables", "controllables",
               "What the user holds a right over (an ACE), itself or through its groups",
               CONTROLLABLES),
    EntityList("users", "controllers", "controllers",
               "Who holds a right over the user (an ACE), and their members", CONTROLLERS),
    EntityList("groups", "sessions", "sessions",
               "Computers where a member of the group, at any depth, has a session",
               Walk(("HasSession",), "in", "members")),
    EntityList("groups", "members", "members", "The group's members, at any depth",
               Walk(("MemberOf",), "in", "transitive")),
    EntityList("groups", "memberships", "membership",
               "The groups the group is in, at any depth", MEMBERSHIPS),
    EntityList("groups", "admin-rights", "adminRights",
               "The computers the group's members are local administrators of",
               held_on("AdminTo")),
    EntityList("groups", "rdp-rights", "rdpRights",
               "The computers the group's members may reach by remote desktop",
               held_on("CanRDP")),
    EntityList("groups", "dcom-rights", "dcomRights",
               "The computers the group's members may use DCOM on", held_on("ExecuteDCOM")),
    EntityList("groups", "ps-remote-rights", "psRemoteRights",
               "The computers the group's members may use PowerShell remoting on",
               held_on("CanPSRemote")),
    EntityList("groups", "controllables", "controllables",
               "What the group holds a right over (an ACE), itself or through its groups",
               CONTROLLABLES),
    EntityList("groups", "controllers", "controllers",
               "Who holds a right over the group (an ACE), and their members", CONTROLLERS),
    EntityList("domains", "users", "users", "The domain's users",
               Walk(("User",), "in", "environment")),
    EntityList("domains", "groups", "groups", "The domain's groups",
               Walk(("Group",), "in", "environment")),
    EntityList("domains", "computers", "computers", "The domain's computers",
               Walk(("Computer",), "in", "environment")),
    EntityList("domains", "ous", "ous", "The domain's OUs", Walk(("OU",), "in", "environment")),
    EntityList("domains", "gpos", "gpos", "The domain's GPOs",
               Walk(("GPO",), "in", "environment")),
    EntityList("domains", "dc-syncers", "dcsyncers",
               "Who may replicate the domain's secrets (DCSync)",
               Walk(("DCSync",), "in", "direct")),
    EntityList("domains", "inbound-trusts", "inboundTrusts",
               "The domains that trust this one, at any depth", Walk(TRUSTS, "in", "transitive")),
    EntityList("domains", "outbound-trusts", "outboundTrusts",
               "The domains this one trusts, at any depth", Walk(TRUSTS, "out", "transitive")),
    EntityList("domains", "linked-gpos", "linkedgpos", "The GPOs linked to the domain",
               Walk(("GPLink",), "in", "direct")),
    EntityList("domains", "foreign-users", "foreignUsers",
               "Users of other domains in the domain's groups, at any depth",
               Walk(("MemberOf",), "in", "foreign", target="Group", result="User")),
    EntityList("domains", "foreign-groups", "foreignGroups",
               "Groups of other domains in the domain's groups, at any depth",
               Walk(("MemberOf",), "in", "foreign", target="Group", result="Group")),
    EntityList("domains", "foreign-admins", "foreignAdmins",
               "Principals of other domains who are administrators of the domain's computers, "
               "directly or through groups",
               Walk(("AdminTo",), "in", "foreign", target="Computer")),
    EntityList("domains", "foreign-gpo-controllers", "foreignGPOControllers",
               "Principals of other domains who hold a right over the domain's GPOs (an ACE), "
               "directly or through groups", Walk(ACL_KINDS, "in", "foreign", target="GPO")),
    EntityList("domains", "adcs-escalations", "adcs-escalations",
               "Who can escalate to the domain through its certificate services (GoldenCert "
               "and the ESC edges to it)", Walk(ADCS_ESCALATIONS, "in", "direct")),
    EntityList("domains", "tier-zero", "tierzero",
               "The domain's tier zero: the domain, its well-known admin users and groups, "
               "its AdminSDHolder, and every member of those groups at any depth",
               Walk((), "in", "tier_zero")),
    EntityList("domains", "controllers", "controllers",
               "Who holds a right over the domain (an ACE), and their members", CONTROLLERS),
    EntityList("ous", "gpos", "gpos", "The GPOs linked to the OU",
               Walk(("GPLink",), "in", "direct")),
    EntityList("ous", "controllers", "controllers",
               "Who holds a right over the OU (an ACE), and their members", CONTROLLERS),
    EntityList("gpos", "ous", "ous", "The domains and OUs the GPO is linked to",
               Walk(("GPLink",), "out", "direct")),
    EntityList("gpos", "controllers", "controllers",
               "Who holds a right over the GPO (an ACE), and their members", CONTROLLERS),
    EntityList("containers", "controllers", "controllers",
               "Who holds a right over the container (an ACE), and their members",
               CONTROLLERS),
    EntityList("base", "controllers", "controllers",
               "Who holds a right over the object (an ACE), and their members", CONTROLLERS),
    EntityList("base", "controllables", "controllables",
               "What the object holds a right over (an ACE), itself or through its groups",
               CONTROLLABLES),
    *(EntityList(segment, "controllers", "controllers",
                 f"Who holds a right over the {ENTITY_KINDS[segment]} (an ACE, enrolment "
                 "and CA management included), and their members", CONTROLLERS)
      for segment in CERTIFICATE_SERVICES),
    EntityList("certtemplates", "published-to-cas", "published-to-cas",
               "The enterprise CAs the template is published to",
               Walk(("PublishedTo",), "out", "transitive")),
    EntityList("enterprisecas", "published-templates", "published-templates",
               "The certificate templates published to the CA",
               Walk(("PublishedTo",), "in", "transitive")),
    EntityList("ntauthstores", "trusted-cas", "trusted-cas",
               "The enterprise CAs the NTAuth store trusts for NT authentication",
               Walk(("TrustedForNTAuth",), "in", "transitive")),
    *(EntityList(segment, "pki-hierarchy", "pki-hierarchy",
                 f"The {ENTITY_KINDS[segment]}'s place in the PKI: the CAs it issued and "
                 "signed (and their hosts) below it, and above it the CAs that signed it, "
                 "the root CAs and NTAuth stores of its chain and their domains",
                 Walk(("HostsCAService", "IssuedSignedBy", "EnterpriseCAFor"), "in",
                      "transitive", outward=PKI_UPWARD))
      for segment in ("aiacas", "enterprisecas")),
    EntityList("rootcas", "pki-hierarchy", "pki-hierarchy",
               "The CAs the root CA issued and signed, at any depth, and the computers "
               "hosting them", Walk(("HostsCAService", "IssuedSignedBy", "EnterpriseCAFor"),
                                    "in", "transitive")),
    EntityList("issuancepolicies", "linkedtemplates", "linkedTemplates",
               "The certificate templates the issuance policy extends",
               Walk(("ExtendedByPolicy",), "in", "transitive")),
)  # fmt: skip


def entity_not_found(segment: str, object_id: str) -> ApiError:
    label = ENTITY_KINDS[segment]
    return not_found(
        f"no {label} with object id {object_id!r}; find one by name with "
        f"GET /api/v2/search?q=NAME&type={label} or `graphsvc find NAME --kind {label}`",
        "object_id",
    )


async def find_entity(conn: Connection, segment: str, object_id: str) -> entities.EntityRow:
    entity = await entities.find_entity(conn, object_id, ENTITY_KINDS[segment])
    if entity is None:
        raise entity_not_found(segment, object_id)
    return entity


def define_entity_shapes(segment: str) -> tuple[type[msgspec.Struct], type[msgspec.Struct]]:
    keys = [entry.count_key for entry in ENTITY_LISTS if entry.segment == segment]
    return wire.define_entity_shapes(ENTITY_KINDS[segment], keys)


ENTITY_SHAPES = {segment: define_entity_shapes(segment) for segment in ENTITY_KINDS}


def build_entity_getter(segment: str) -> Callable[..., Awaitable[msgspec.Struct]]:
    """The service function of `GET /api/v2/{segment}/{object_id}`."""
    lists = [entry for entry in ENTITY_LISTS if entry.segment == segment]
    data, response = ENTITY_SHAPES[segment]
    kind_names = sorted({name for entry in lists for name in entities.walk_kind_names(entry.walk)})

    async def get_entity(conn: Connection, object_id: str, counts: bool) -> msgspec.Struct:
        entity = await find_entity(conn, segment, object_id)
        numbers: dict[str, int] = {}
        if counts:
            start = entities.WalkStart(
                entity.node_id, await entities.find_kind_ids(conn, kind_names)
            )
            for entry in lists:
                numbers[wire.count_attribute(entry.count_key)] = await entities.count_reached(
                    conn, start, entry.walk
                )
        props = entity_props(entity)
        return response(data(props=props, **numbers))

    get_entity.__name__ = f"get_{segment}_entity"
    return get_entity


def entity_props(entity: entities.EntityRow) -> dict[str, object]:
    """An entity's properties as its route answers them: the stored ones, with its object id
    and name, when its newest collection was made, and its marks."""
    props = {
        "objectid": entity.object_id,
        "name": entity.name,
        **entity.properties,
        # As the reference's: when the newest collection of it was made (the collector's
        # time, ingest/sources.Source.collection_time).
        "lastseen": entity.seen,
        "isTierZero": entity.is_tier_zero,
        "isOwnedObject": entity.is_owned,
    }
    tags = store_tags.system_tags(entity.is_tier_zero, entity.is_owned)
    if tags:
        props["system_tags"] = tags
    return props


def build_list_reader(entry: EntityList) -> Callable[..., Awaitable[wire.PagedRelatedNodeList]]:
    """The service function of one list route."""
    label = ENTITY_KINDS[entry.segment]

    async def list_related(
        conn: Connection, object_id: str, sort: Sequence[SortKey], page: Page
    ) -> wire.PagedRelatedNodeList:
        start = await entities.find_walk_start(conn, object_id, label, entry.walk)
        if start is None:
            raise entity_not_found(entry.segment, object_id)
        total, rows = await entities.list_reached(
            conn, start, entry.walk, sort, page.skip, page.limit
        )
        ids = [node_id for node_id, _ in rows]
        held = await entities.holdings(conn, start, entry.walk, ids)
        tagged = await store_tags.read_tag_labels(conn, ids)
        related = [
            wire.RelatedNode(
                row.objectID,
                row.name,
                row.label,
                [*row.kinds, *tagged.get(node_id, [])],
                held.get(node_id, []),
            )
            for node_id, row in rows
        ]
        return wire.PagedRelatedNodeList(total, page.skip, page.limit, related)

    list_related.__name__ = f"list_{entry.segment}_{entry.path.replace('-', '_')}"
    return list_related


async def list_dcom_rights(
    conn: Connection, object_id: str, sort: Sequence[SortKey], page: Page
) -> wire.PagedNodeList:
    """The seed's `GET /api/v2/computers/{object_id}/dcom-rights`: the dcom-users list, with
    the seed's 404, which also says what an object id looks like."""
    computer = ENTITY_KINDS[DCOM_USERS.segment]
    start = await entities.find_walk_start(conn, object_id, computer, DCOM_USERS.walk)
    if start is None:
        raise not_found(
            f"no computer with object id {object_id!r}; object ids are SIDs (S-1-5-21-...): "
            f"find one by name with GET /api/v2/search?q=NAME&type=Computer "
            f"or `graphsvc find NAME --kind Computer`",
            "object_id",
        )
    total, rows = await entities.list_reached(
        conn, start, DCOM_USERS.walk, sort, page.skip, page.limit
    )
    return wire.PagedNodeList(total, page.skip, page.limit, [row for _, row in rows])
