"""Certificate-services escalations, as the reference's ADCS post-processing derives them:
EnrollOnBehalfOf and ADCSESC1, 3, 4, 6a, 6b, 9a, 9b, 10a, 10b, 13 and 16, each through an
enterprise CA chained to the domain (pki.py), to every domain it is chained to.

Who gets an edge: the principals holding every right the escalation needs, at the level
where the rights first meet (a group enrolling on both the template and the CA, not its
members: principals.calculate_cross_product); Authenticated Users or Everyone holding a
right makes that right everyone's. ESC9 and ESC10 go instead from whoever controls an
enrolling account (GenericAll, GenericWrite, Owns, WriteOwner, WriteDacl on it). Where the
template requires a DNS name in the subject alternative name, plain users cannot be
victims (gMSA and sMSA accounts can: they have one). ESC13 ends at the group the template's
issuance policy links to; the others at the domain.

Template tests, by property (a property missing fails the test):
- enrollable without a second signature: not (schemaversion > 1 and authorizedsignatures > 0);
- ESC1: requiresmanagerapproval false, authenticationenabled and enrolleesuppliessubject true;
- ESC3: the target template authenticationenabled, no manager approval; the agent template
  (EnrollOnBehalfOf from it) no manager approval and schema 1 or no signature needed,
  enrollment on it and on a CA it is published to; a CA with enrollment agent restrictions
  adds its DelegatedEnrollmentAgent holders to the rights needed;
- ESC4: control of the template (Owns, GenericAll, WriteDacl, WriteOwner) or GenericWrite
  with enrollment (Enroll or AllExtendedRights), with CA enrollment; or write access to its
  flags where they open it up (WritePKINameFlag, WritePKIEnrollmentFlag);
- ESC6a/6b: a CA whose EDITF_ATTRIBUTESUBJECTALTNAME2 is set (isuserspecifiessanenabled) and
  a template without manager approval and signature; 6a with no security extension and
  authentication, 6b with Schannel authentication to a domain whose forest maps by UPN;
- ESC9a/9b and ESC10a/10b: a template without manager approval or signature, the subject
  not supplied, requiring a UPN or SPN (a) or a DNS name (b, computers only), with
  authentication and no security extension (ESC9, to domains binding weakly) or Schannel
  authentication (ESC10, to domains mapping by UPN);
- ESC13: an issuance policy linked to a group (OIDGroupLink);
- ESC16: a CA with the security extension disabled (disabledextensions) and
  isuserspecifiessanenabled, a template without manager approval, schema 1 or no signature.
"""

from __future__ import annotations

from collections.abc import Iterable

from graphsvc.analysis.pki import PublicKeyServices, flag, number, strings
from graphsvc.analysis.principals import calculate_cross_product
from graphsvc.store import analysis as store
from graphsvc.store.analysis import AnalysedNode, DerivedEdge
from graphsvc.store.db import Connection

ANY_PURPOSE = "2.5.29.37.0"
CERTIFICATE_REQUEST_AGENT = "1.3.6.1.4.1.311.20.2.1"
CLIENT_AUTHENTICATION = "1.3.6.1.5.5.7.3.2"
SECURITY_EXTENSION = "1.3.6.1.4.1.311.25.2"  # szOID_NTDS_CA_SECURITY_EXT (ESC16)
CONTROL = ("Owns", "GenericAll", "WriteDacl", "WriteOwner")
VICTIM_CONTROL = ("GenericAll", "GenericWrite", "Owns", "WriteOwner", "WriteDacl")
ATTACKER_LABELS = ("User", "Computer", "Group")


class Templates:
    """Property tests of one certificate template."""

    def __init__(self, pki: PublicKeyServices) -> None:
        self.pki = pki

    def node(self, template: str) -> AnalysedNode:
        return self.pki.nodes[template]

    def is_false(self, template: str, key: str) -> bool:
        return flag(self.node(template), key) is False

    def is_true(self, template: str, key: str) -> bool:
        return flag(self.node(template), key) is True

    def needs_no_signature(self, template: str) -> bool:
        schema = number(self.node(template), "schemaversion")
        signatures = number(self.node(template), "authorizedsignatures")
        if schema is None or signatures is None:
            return False
        return not (schema > 1 and signatures > 0)

    def schema_one_or_no_signature(self, template: str) -> bool:
        schema = number(self.node(template), "schemaversion")
        if schema == 1:
            return True
        signatures = number(self.node(template), "authorizedsignatures")
        return schema is not None and schema > 1 and signatures == 0

    def valid_for_user_victims(self, template: str) -> bool:
        return self.is_false(template, "subjectaltrequiredns") and self.is_false(
            template, "subjectaltrequiredomaindns"
        )

    def schannel(self, template: str) -> bool:
        value = flag(self.node(template), "schannelauthenticationenabled")
        if value is not None:
            return value
        ekus = strings(self.node(template), "effectiveekus")
        if ekus is None:
            return False
        return not ekus or CLIENT_AUTHENTICATION in ekus or ANY_PURPOSE in ekus


async def escalation_edges(conn: Connection, pki: PublicKeyServices) -> list[DerivedEdge]:
    """Every escalation edge; EnrollOnBehalfOf first (ESC3 reads it)."""
    behalf = enroll_on_behalf_of(pki)
    edges: list[DerivedEdge] = list(behalf)
    agents: dict[str, set[str]] = {}  # target template -> the agent templates
    collected = await store.list_edges_of_kinds(conn, ("EnrollOnBehalfOf",), collected_only=True)
    for start, end in [(s, e) for s, e, _, _ in behalf] + [(s, e) for s, _, e in collected]:
        agents.setdefault(end, set()).add(start)
    rules = Rules(conn, pki, agents)
    for ca, domains in sorted(pki.chained.items()):
        found = await rules.for_ca(ca)
        for kind, principals in found.items():
            ends = sorted(domains)
            for principal in sorted(principals):
                edges += [(principal, domain, kind, domain) for domain in ends]
        for group, principals in sorted((await rules.esc13(ca)).items()):
            edges += [(p, group, "ADCSESC13", sorted(domains)[0]) for p in sorted(principals)]
    by_domain = {
        "ADCSESC6b": pki.upn_mapping,
        "ADCSESC10a": pki.upn_mapping,
        "ADCSESC10b": pki.upn_mapping,
        "ADCSESC9a": pki.weak_binding,
        "ADCSESC9b": pki.weak_binding,
    }
    return [
        edge
        for edge in dict.fromkeys(edges)
        if edge[2] not in by_domain or edge[1] in by_domain[edge[2]]
    ]


def enroll_on_behalf_of(pki: PublicKeyServices) -> list[DerivedEdge]:
    """EnrollOnBehalfOf (template → template), over the templates published to CAs chained
    to a common domain: an agent template (certificate request agent among its effective
    EKUs) to a schema 2+ template needing exactly one signature with that application
    policy; any agent or any-purpose template (or one with no EKU) to a schema 1 one."""
    templates = Templates(pki)
    edges: list[DerivedEdge] = []
    for first_ca, first_domains in sorted(pki.chained.items()):
        for second_ca, second_domains in sorted(pki.chained.items()):
            shared = first_domains & second_domains
            if not shared:
                continue
            domain = sorted(shared)[0]
            for agent in pki.published.get(first_ca, []):
                ekus = strings(templates.node(agent), "effectiveekus")
                if ekus is None:
                    continue
                for target in pki.published.get(second_ca, []):
                    schema = number(templates.node(target), "schemaversion")
                    if schema is not None and schema >= 2:
                        policies = strings(templates.node(target), "applicationpolicies") or []
                        if (
                            ANY_PURPOSE not in ekus
                            and CERTIFICATE_REQUEST_AGENT in ekus
                            and agent != target
                            and number(templates.node(target), "authorizedsignatures") == 1
                            and CERTIFICATE_REQUEST_AGENT in policies
                        ):
                            edges.append((agent, target, "EnrollOnBehalfOf", domain))
                    elif schema == 1 and (
                        not ekus or CERTIFICATE_REQUEST_AGENT in ekus or ANY_PURPOSE in ekus
                    ):
                        edges.append((agent, target, "EnrollOnBehalfOf", domain))
    return list(dict.fromkeys(edges))


class Rules:
    """The escalations through one enterprise CA."""

    def __init__(
        self, conn: Connection, pki: PublicKeyServices, agents: dict[str, set[str]]
    ) -> None:
        self.conn = conn
        self.pki = pki
        self.templates = Templates(pki)
        self.agents = agents
        self.crossed: dict[tuple[frozenset[str], ...], set[str]] = {}

    async def cross(self, *holder_sets: set[str]) -> set[str]:
        """The cross product, kept (templates share their enrollers and CAs theirs) and
        shared: callers must not change it."""
        key = tuple(frozenset(holders) for holders in holder_sets)
        if key not in self.crossed:
            found = await calculate_cross_product(self.pki.memberships, list(holder_sets))
            self.crossed[key] = found
        return self.crossed[key]

    async def without_dns_users(self, principals: set[str], template: str) -> set[str]:
        """The principals less plain users, where the template requires a DNS name."""
        if self.templates.valid_for_user_victims(template) or not principals:
            return principals
        nodes = await store.find_analysed_nodes(self.conn, principals)
        plain_users = {
            n.object_id
            for n in nodes
            if "User" in n.kinds
            and n.properties.get("gmsa") is not True
            and n.properties.get("msa") is not True
        }
        return principals - plain_users

    async def for_ca(self, ca: str) -> dict[str, set[str]]:
        pki, t = self.pki, self.templates
        ca_enrollers = pki.ca_enrollers(ca)
        found: dict[str, set[str]] = {}

        def add(kind: str, principals: Iterable[str]) -> None:
            found.setdefault(kind, set()).update(principals)

        san_flag = pki.property_of(ca, "isuserspecifiessanenabled") is True and (
            pki.property_of(ca, "isuserspecifiessanenabledcollected") is not False
        )
        disabled = pki.property_of(ca, "disabledextensions")
        security_extension_off = (
            isinstance(disabled, list)
            and SECURITY_EXTENSION in disabled
            and pki.property_of(ca, "disabledextensionscollected") is not False
        )
        for template in pki.published.get(ca, []):
            enrollers = pki.enrollers(template)
            no_approval = t.is_false(template, "requiresmanagerapproval")
            no_signature = t.needs_no_signature(template)
            authentication = t.is_true(template, "authenticationenabled")
            supplies_subject = t.is_true(template, "enrolleesuppliessubject")
            if no_approval and authentication and no_signature and supplies_subject:
                add("ADCSESC1", await self.cross(enrollers, ca_enrollers))
            add("ADCSESC3", await self.esc3(ca, template))
            add("ADCSESC4", await self.esc4(ca, template))
            if san_flag and no_approval and no_signature:
                both = await self.cross(enrollers, ca_enrollers)
                both = await self.without_dns_users(both, template)
                if t.is_true(template, "nosecurityextension") and authentication:
                    add("ADCSESC6a", both)
                if t.schannel(template):
                    add("ADCSESC6b", both)
            if (
                san_flag
                and security_extension_off
                and no_approval
                and authentication
                and t.schema_one_or_no_signature(template)
            ):
                both = await self.cross(enrollers, ca_enrollers)
                add("ADCSESC16", await self.without_dns_users(both, template))
            for kind, principals in (await self.esc9_and_10(ca, template)).items():
                add(kind, principals)
        return found

    async def esc3(self, ca: str, target: str) -> set[str]:
        pki, t = self.pki, self.templates
        if not (
            t.is_true(target, "authenticationenabled")
            and t.is_false(target, "requiresmanagerapproval")
        ):
            return set()
        restricted = pki.property_of(ca, "hasenrollmentagentrestrictions") is True and (
            pki.property_of(ca, "enrollmentagentrestrictionscollected") is not False
        )
        delegated = pki.holders(target, "DelegatedEnrollmentAgent")
        if restricted and not delegated:
            return set()
        found: set[str] = set()
        for agent in sorted(self.agents.get(target, set())):
            if not (
                t.is_false(agent, "requiresmanagerapproval") and t.schema_one_or_no_signature(agent)
            ):
                continue
            # The agent's CA need not be chained itself (the reference's ESC3 tests expect
            # an agent template of a CA no store trusts to count).
            for agent_ca in pki.template_cas.get(agent, []):
                needed = [
                    pki.enrollers(agent),
                    pki.enrollers(target),
                    pki.ca_enrollers(agent_ca),
                    pki.ca_enrollers(ca),
                ]
                if restricted:
                    needed.append(delegated)
                principals = await self.cross(*needed)
                found |= await self.without_dns_users(principals, agent)
        return found

    async def esc4(self, ca: str, template: str) -> set[str]:
        pki, t = self.pki, self.templates
        if flag(t.node(template), "enrolleesuppliessubject") is None or (
            flag(t.node(template), "requiresmanagerapproval") is None
        ):
            return set()
        ca_enrollers = pki.ca_enrollers(ca)
        enroll = pki.holders(template, "Enroll", "AllExtendedRights")
        name_flag = pki.holders(template, "WritePKINameFlag")
        enrollment_flag = pki.holders(template, "WritePKIEnrollmentFlag")
        found = set(await self.cross(ca_enrollers, pki.holders(template, *CONTROL)))
        found |= await self.cross(ca_enrollers, pki.holders(template, "GenericWrite"), enroll)
        if not (t.is_true(template, "authenticationenabled") and t.needs_no_signature(template)):
            return found
        found |= await self.cross(ca_enrollers, enroll, name_flag, enrollment_flag)
        if t.is_true(template, "enrolleesuppliessubject"):
            found |= await self.cross(ca_enrollers, enroll, enrollment_flag)
        if t.is_false(template, "requiresmanagerapproval"):
            found |= await self.cross(ca_enrollers, enroll, name_flag)
        return found

    async def esc9_and_10(self, ca: str, template: str) -> dict[str, set[str]]:
        pki, t = self.pki, self.templates
        enrollers, ca_enrollers = pki.enrollers(template), pki.ca_enrollers(ca)
        if not enrollers or not ca_enrollers:
            return {}
        if not (
            t.is_false(template, "requiresmanagerapproval")
            and t.is_false(template, "enrolleesuppliessubject")
            and t.needs_no_signature(template)
        ):
            return {}
        upn = t.is_true(template, "subjectaltrequireupn") or t.is_true(
            template, "subjectaltrequirespn"
        )
        dns = t.is_true(template, "subjectaltrequiredns")
        esc9 = t.is_true(template, "authenticationenabled") and t.is_true(
            template, "nosecurityextension"
        )
        esc10 = t.schannel(template)
        if not ((esc9 or esc10) and (upn or dns)):
            return {}
        victims = await self.victims(enrollers, ca_enrollers)
        found: dict[str, set[str]] = {}
        if upn:
            attackers = await self.attackers(await self.without_dns_users(victims, template))
            if esc9:
                found["ADCSESC9a"] = attackers
            if esc10:
                found["ADCSESC10a"] = attackers
        if dns:
            attackers = await self.attackers(victims, computers_only=True)
            if esc9:
                found["ADCSESC9b"] = attackers
            if esc10:
                found["ADCSESC10b"] = attackers
        return found

    async def victims(self, enrollers: set[str], ca_enrollers: set[str]) -> set[str]:
        """The accounts that may enroll: both sets' accounts (groups' members at any depth),
        each set everyone's where Authenticated Users or Everyone holds it."""
        pki, memberships = self.pki, self.pki.memberships
        on_template = await memberships.expand_to_accounts(enrollers, pki.groups)
        on_ca = await memberships.expand_to_accounts(ca_enrollers, pki.groups)
        special_template = await pki.has_special_enroller(enrollers)
        special_ca = await pki.has_special_enroller(ca_enrollers)
        if not special_template and not special_ca:
            return on_template & on_ca
        return (on_ca if special_template else set()) | (on_template if special_ca else set())

    async def attackers(self, victims: set[str], computers_only: bool = False) -> set[str]:
        """Users, computers and groups holding control of a victim directly."""
        if not victims:
            return set()
        labels, member_labels = self.pki.labels, self.pki.memberships.labels
        return {
            holder
            for holder, label, _, target in await store.list_rights_into(
                self.conn, victims, VICTIM_CONTROL
            )
            if label in ATTACKER_LABELS
            and (not computers_only or member_labels.get(target, labels.get(target)) == "Computer")
        }

    async def esc13(self, ca: str) -> dict[str, set[str]]:
        """ADCSESC13: group -> the principals that may enroll for membership in it."""
        pki, t = self.pki, self.templates
        found: dict[str, set[str]] = {}
        for template in pki.published.get(ca, []):
            groups = pki.policy_groups.get(template)
            if not groups or not (
                t.is_false(template, "requiresmanagerapproval")
                and t.is_true(template, "authenticationenabled")
                and t.needs_no_signature(template)
            ):
                continue
            principals = await self.cross(pki.enrollers(template), pki.ca_enrollers(ca))
            principals = await self.without_dns_users(principals, template)
            for group in groups:
                found.setdefault(group, set()).update(principals)
        return found
