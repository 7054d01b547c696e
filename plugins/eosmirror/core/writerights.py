"""Write rights move with the role (docs/disaster-recovery.md, "Write rights during the switch"). Pure: topic
ACLs as values (``aclcopy.TopicAcl``); the admin calls are in driver/writerights.py.

While a topic is mirrored only the mirror writes its target copy; after the switch only the producers' new
home is written, and the old one belongs to the reverse mirror:

- ``writers``: who can write a topic, as a Kafka authorizer decides it from topic ACLs: an ALLOW WRITE or
  ALLOW ALL binding that covers the topic (LITERAL on its name, LITERAL ``*``, PREFIXED on a prefix of it),
  unless a DENY WRITE or DENY ALL that covers it names the same principal (or ``User:*``) from the same host
  (or ``*``). The mirror's own principals (``own_principals``) are left out. Super users (``super.users``)
  are no topic ACLs: ``super_users`` lists them apart, as writers no ACL can stop.
- ``grants`` (switchover, promote): for every source principal that can write a mirrored topic, a LITERAL
  ALLOW WRITE on the target topic (the name the naming policy gives it). Exactly the mirrored topics: a
  PREFIXED or wildcard grant on the source becomes literal grants on the mirrored topics it covers, never a
  grant on other target topics.
- ``takeaway`` (reverse): on the old source, for every principal but the reverse mirror's that can write a
  reversed topic: its LITERAL ALLOW WRITE on that topic is removed; a write through ALLOW ALL, a PREFIXED or
  a wildcard grant (which also serve other topics or other operations) is stopped by a LITERAL DENY WRITE
  for that principal on that topic. A grant to ``User:*`` cannot be denied without denying the reverse
  mirror too: it is left, and named.
- ``give_back`` (the switch back, resume): the inverse of a recorded takeaway: each removed grant created
  again, each added DENY deleted.

Every change is a ``RightsChange`` kept in the mirror's state record (``MirrorState.rights``) until the
rights are back where they belong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from eosmirror.core.aclcopy import TopicAcl

WRITE_OPS = ("WRITE", "ALL")
EVERYONE = "User:*"
GRANTED, REMOVED, DENIED = "granted", "removed", "denied"
NEW_PRIMARY, OLD_SOURCE = "target", "source"     # where a change was made: the forward mirror's target / source
CANNOT_WRITE_YET = "producers cannot write yet"
# The switch's steps, as its outcome lists them.
GRANT_STEP = "grant write rights on the target"                 # switchover, promote
TAKE_STEP = "take write rights from the old source"             # reverse
GIVE_BACK_STEP = "give back write rights on the old source"     # the switch back, resume
TAKE_GRANTS_STEP = "take the switch's write rights from the target"   # resume
AUDIT_ACTION = "write-rights"      # the audit record of each change (`eosmirror history <mirror>`)
SYNC_OFF = "sync_topic_acls is off: write ACLs do not move with the role"


@dataclass(frozen=True)
class RightsChange:
    """One ACL change a switch made. ``side``: the forward mirror's ``target`` (the new primary) or
    ``source`` (the old source); ``action``: granted (created ALLOW), removed (deleted ALLOW), denied
    (created DENY)."""

    side: str
    action: str
    acl: TopicAcl

    def as_dict(self) -> dict[str, Any]:
        return {"side": self.side, "action": self.action, "acl": acl_dict(self.acl)}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> "RightsChange":
        return RightsChange(str(data["side"]), str(data["action"]), TopicAcl(**data["acl"]))

    def line(self) -> str:
        return f"{self.action} on the {'new primary' if self.side == NEW_PRIMARY else 'old source'}: {shown(self.acl)}"


@dataclass(frozen=True)
class Writer:
    """``principal`` (from ``host``) can write ``topic`` through the binding ``via``."""

    topic: str
    principal: str
    host: str
    via: TopicAcl

    def line(self) -> str:
        who = "everyone (User:*)" if self.principal == EVERYONE else self.principal
        return f"{who} from host {self.host} can write {self.topic} ({shown(self.via)})"


def acl_dict(acl: TopicAcl) -> dict[str, str]:
    return {"topic": acl.topic, "pattern": acl.pattern, "principal": acl.principal, "host": acl.host,
            "operation": acl.operation, "permission": acl.permission}


def shown(acl: TopicAcl) -> str:
    """Every field an operator types in kafka-acls.sh: principal, host, operation, permission, resource, pattern."""
    return (f"principal {acl.principal}, host {acl.host}, operation {acl.operation}, permission {acl.permission}, "
            f"resource TOPIC {acl.topic!r}, pattern {acl.pattern}")


def covers(acl: TopicAcl, topic: str) -> bool:
    """The binding applies to ``topic`` (MATCH and ANY are filters, never stored bindings)."""
    if acl.pattern == "LITERAL":
        return acl.topic in (topic, "*")
    if acl.pattern == "PREFIXED":
        return topic.startswith(acl.topic)
    return False


def _denied(allow: TopicAcl, denies: list[TopicAcl]) -> bool:
    return any(d.principal in (allow.principal, EVERYONE) and d.host in ("*", allow.host) for d in denies)


def writers(acls: Iterable[TopicAcl], topics: Iterable[str], own: Iterable[str] = ()) -> list[Writer]:
    """Per topic (in the order given), every principal other than ``own`` that can write it, and through which
    binding (one Writer per binding: a principal with two grants shows twice)."""
    acls, mine = list(acls), set(own)
    found = []
    for topic in topics:
        denies = [a for a in acls if a.permission == "DENY" and a.operation in WRITE_OPS and covers(a, topic)]
        for a in acls:
            if (a.permission == "ALLOW" and a.operation in WRITE_OPS and covers(a, topic) and a.principal not in mine
                    and not _denied(a, denies)):
                found.append(Writer(topic, a.principal, a.host, a))
    return found


def unguarded(acls: Iterable[TopicAcl], topics: Iterable[str]) -> list[str]:
    """The topics no binding covers at all: with ``allow.everyone.if.no.acl.found=true`` everyone may write them."""
    acls = list(acls)
    return [t for t in topics if not any(covers(a, t) for a in acls)]


def grants(source_acls: Iterable[TopicAcl], target_of: dict[str, str], own: Iterable[str] = ()) -> list[TopicAcl]:
    """The LITERAL ALLOW WRITE bindings the target needs so that every principal that can write a mirrored
    topic on the source can write its copy (``target_of``: source topic -> target topic)."""
    wanted: list[TopicAcl] = []
    for w in writers(source_acls, sorted(target_of), own):
        acl = TopicAcl(target_of[w.topic], "LITERAL", w.principal, w.host, "WRITE", "ALLOW")
        if acl not in wanted:
            wanted.append(acl)
    return wanted


@dataclass(frozen=True)
class Takeaway:
    remove: tuple[TopicAcl, ...]      # LITERAL ALLOW WRITE bindings to delete
    deny: tuple[TopicAcl, ...]        # LITERAL DENY WRITE bindings to create
    left: tuple[Writer, ...]          # grants to everyone: not removable without stopping the reverse mirror

    def changes(self) -> list[RightsChange]:
        return ([RightsChange(OLD_SOURCE, REMOVED, a) for a in self.remove]
                + [RightsChange(OLD_SOURCE, DENIED, a) for a in self.deny])


def takeaway(old_acls: Iterable[TopicAcl], topics: Iterable[str], keep: Iterable[str]) -> Takeaway:
    """What `reverse` does on the old source so that only ``keep`` (the reverse mirror's principal) writes ``topics``."""
    remove: list[TopicAcl] = []
    deny: list[TopicAcl] = []
    left: list[Writer] = []
    for w in writers(old_acls, topics, keep):
        if w.via.pattern == "LITERAL" and w.via.topic == w.topic and w.via.operation == "WRITE":
            if w.via not in remove:
                remove.append(w.via)
        elif w.principal == EVERYONE:
            left.append(w)
        else:
            denial = TopicAcl(w.topic, "LITERAL", w.principal, "*", "WRITE", "DENY")
            if denial not in deny:
                deny.append(denial)
    return Takeaway(tuple(remove), tuple(deny), tuple(left))


@dataclass(frozen=True)
class Plan:
    """ACL changes on one cluster, split by what is there already (re-running finds them done)."""

    create: tuple[TopicAcl, ...] = ()
    delete: tuple[TopicAcl, ...] = ()
    present: tuple[TopicAcl, ...] = ()       # to create, and there already
    absent: tuple[TopicAcl, ...] = ()        # to delete, and gone already

    @property
    def empty(self) -> bool:
        return not self.create and not self.delete

    def by_hand(self) -> list[str]:
        """What an operator types when the mirror may not change ACLs."""
        return ([f"add: {shown(a)}" for a in self.create] + [f"remove: {shown(a)}" for a in self.delete])


def plan(present: Iterable[TopicAcl], create: Iterable[TopicAcl] = (), delete: Iterable[TopicAcl] = ()) -> Plan:
    """The changes still to make on a cluster whose bindings are ``present``."""
    there = set(present)
    create, delete = list(dict.fromkeys(create)), list(dict.fromkeys(delete))
    return Plan(create=tuple(a for a in create if a not in there), delete=tuple(a for a in delete if a in there),
                present=tuple(a for a in create if a in there), absent=tuple(a for a in delete if a not in there))


def give_back(changes: Iterable[RightsChange], side: str) -> tuple[list[TopicAcl], list[TopicAcl]]:
    """(to create, to delete) that undo the recorded ``changes`` made on ``side``: a removed grant is
    created again, an added DENY deleted, a granted right taken away."""
    create, delete = [], []
    for c in changes:
        if c.side != side:
            continue
        if c.action == REMOVED:
            create.append(c.acl)
        else:
            delete.append(c.acl)
    return create, delete


def merged(*groups: Iterable[RightsChange]) -> tuple[RightsChange, ...]:
    """Recorded changes and new ones, each once, in order."""
    return tuple(dict.fromkeys(c for g in groups for c in g))


def without(changes: Iterable[RightsChange], side: str) -> tuple[RightsChange, ...]:
    """The recorded changes left once those on ``side`` are undone."""
    return tuple(c for c in changes if c.side != side)


def principal_of(settings: dict[str, Any]) -> str | None:
    """The principal a client with these librdkafka settings authenticates as, when the settings say it (SASL
    username; a certificate's or OAuth principal is not known from the settings)."""
    user = settings.get("sasl.username")
    return f"User:{user}" if user else None


def own_principals(configured: Iterable[str], *settings: dict[str, Any]) -> list[str]:
    """The mirror's own principals, left out wherever writers are listed or grants moved: those configured
    (``mirror_principals``: a certificate's or OAuth principal) and its clients' SASL usernames."""
    return list(dict.fromkeys([*configured, *(p for p in map(principal_of, settings) if p)]))


SUPER_USER = "super user"


def super_users(by_broker: dict[str, str | None], own: Iterable[str] = ()) -> list[str]:
    """What the brokers' ``super.users`` (``User:a;User:b``) says, per broker id that reports it (None: the
    broker hides its value, as Kafka does for the authorizer's settings): a super user is authorized for
    everything, whatever the ACLs say (Kafka's StandardAuthorizer and AclAuthorizer check super.users first), so
    no ACL keeps it off a mirrored topic. One line per named principal (the mirror's own left out), and one for
    brokers that hide theirs."""
    mine, found = set(own), dict[str, list[str]]()
    for broker, value in sorted(by_broker.items()):
        for principal in (p.strip() for p in (value or "").split(";")):
            if principal and principal not in mine:
                found.setdefault(principal, []).append(broker)
    lines = [f"{p} ({SUPER_USER} on broker(s) {', '.join(b)}: ACLs cannot stop it writing the mirrored topics)"
             for p, b in found.items()]
    hidden = sorted(b for b, v in by_broker.items() if v is None)
    return lines + ([f"the {SUPER_USER}s of super.users on broker(s) {', '.join(hidden)} (set, its value hidden by the "
                     f"brokers: Kafka reports the authorizer's settings as sensitive): ACLs cannot stop them writing "
                     f"the mirrored topics"] if hidden else [])


def allow_everyone(by_broker: dict[str, str | None]) -> tuple[list[str], list[str]]:
    """(the brokers whose ``allow.everyone.if.no.acl.found`` is true, those that hide its value): a hidden value
    may be true, so a topic no ACL names cannot be called closed there."""
    return (sorted(b for b, v in by_broker.items() if v is not None and v.strip().lower() == "true"),
            sorted(b for b, v in by_broker.items() if v is None))
