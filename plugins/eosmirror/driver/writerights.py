"""Write rights move with the role, and who can write a mirrored target topic: the admin I/O around the pure
decisions of core/writerights.py (docs/disaster-recovery.md, "Write rights during the switch").

Each switch step (``Rights``) reads the ACLs it needs, plans against what is there (a re-run finds its work
done and says so) and changes them in one CreateAcls and one DeleteAcls call, after checking up front that
the mirror's principal has Alter on the cluster (KIP-430 authorized operations; DescribeAcls needs Describe
on it, see driver/acls.py for why "no permission" is told apart from "no ACLs" that way). Without the right
to change ACLs, or on brokers without an authorizer, the step fails, naming every ACL an operator must add
or remove by hand (principal, host, operation, permission, resource, pattern): a switch step that is
optional by design, so the command completes and its exit code (6) says the step did not run.

``target_writers`` (each run, ``target_guard``; the readiness report) lists the principals other than the
mirror that can write the mirrored target topics, and what ``allow.everyone.if.no.acl.found`` the brokers
report when a topic has no ACL at all.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from eosmirror.core import writerights as rules
from eosmirror.core.aclcopy import TopicAcl
from eosmirror.core.errors import AuthorizationError, EosMirrorError, TargetGuardError
from eosmirror.core.stagedrights import Staged
from eosmirror.core.writerights import CANNOT_WRITE_YET, RightsChange
from eosmirror.driver import acls
from eosmirror.driver.acls import NoAuthorizerError
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)


class RightsNotMovedError(AuthorizationError):
    """A switch could not change the write ACLs it moves; the message names each ACL to change by hand."""


@dataclass
class Rights:
    """One write-rights step of a switch: its report lines and the changes to record (kept even when the step
    fails, so that what the switch meant to change is recorded and undone later all the same)."""

    lines: list[str] = field(default_factory=list)
    changes: list[RightsChange] = field(default_factory=list)
    audit_to: Callable[[str], None] | None = None     # writes an audit record of what a step changed

    def as_dict(self) -> dict[str, Any]:
        return {"lines": self.lines, "changes": [c.as_dict() for c in self.changes]}

    def grant_on_target(self, source: Cluster, target: Cluster, target_of: dict[str, str],
                        configured: Iterable[str] = ()) -> None:
        """Switchover and promote: every principal that can write a mirrored topic on the source gets ALLOW WRITE
        on its target copy (the mirror's own principals left out: ``configured``, its ``mirror_principals``, and
        its SASL usernames)."""
        target_acls = self._acls_or_none(target)
        if target_acls is None:
            self.lines.append(f"the target ({target.label}) has no authorizer: every principal can write its "
                              f"topics; no write right to move")
            return
        try:
            source_acls = acls.list_topic_acls(source)
        except NoAuthorizerError:
            raise RightsNotMovedError(
                f"the source ({source.label}) has no authorizer, so no ACL says who writes the mirrored topics, and "
                f"the target has one: {CANNOT_WRITE_YET}. Grant each producer principal ALLOW WRITE (host *, "
                f"pattern LITERAL) on the target topics {', '.join(sorted(target_of.values()))}") from None
        self._readable(source, source_acls)
        self._grant(target, target_acls, rules.grants(source_acls, target_of, _own(configured, source, target)))

    def grant_staged(self, target: Cluster, staged: Staged) -> None:
        """Promote with a silent source: the grants the latest readiness report staged (core/stagedrights.py)."""
        target_acls = self._acls_or_none(target)
        if target_acls is None:
            self.lines.append(f"the target ({target.label}) has no authorizer: every principal can write its "
                              f"topics; no write right to move")
            return
        self.lines.append(staged.said())
        self._grant(target, target_acls, list(staged.acls))

    def _grant(self, target: Cluster, target_acls: list[TopicAcl], wanted: list[TopicAcl]) -> None:
        self.changes = [RightsChange(rules.NEW_PRIMARY, rules.GRANTED, a) for a in wanted]
        if not wanted:
            self.lines.append("no principal but the mirror can write the mirrored topics on the source: nothing to "
                              "grant on the target")
            return
        self._apply(target, rules.plan(target_acls, create=wanted), CANNOT_WRITE_YET)

    def regrant(self, target: Cluster, recorded: Iterable[RightsChange]) -> None:
        """A switchover done before: the grants it recorded, made again where they are missing (the step that
        could not run then, run again)."""
        self.changes = [c for c in recorded if c.side == rules.NEW_PRIMARY and c.action == rules.GRANTED]
        wanted = [c.acl for c in self.changes]
        target_acls = self._acls_or_none(target)
        if target_acls is None:
            self.lines.append(f"the target ({target.label}) has no authorizer: every principal can write its topics")
            return
        if not wanted:
            self.lines.append("the switchover recorded no write right to grant")
            return
        self._apply(target, rules.plan(target_acls, create=wanted), CANNOT_WRITE_YET)

    def plan_takeaway(self, old: Cluster, topics: list[str], configured: Iterable[str] = ()) -> rules.Takeaway:
        """Reverse, before anything is recorded: what to take from the old source so that only the reverse
        mirror's principals (``configured`` and its SASL username there) write the reversed topics (read only)."""
        old_acls = self._acls_or_none(old)
        if old_acls is None:
            raise RightsNotMovedError(
                f"the old source ({old.label}) has no authorizer: every principal can write the reversed topics "
                f"{', '.join(topics)} there while the reverse mirror copies into them. Stop every producer of the "
                f"old source by hand (or enable an authorizer)")
        return rules.takeaway(old_acls, topics, _own(configured, old))

    def take_from_old_source(self, old: Cluster, recorded: Iterable[RightsChange], left: Iterable[rules.Writer]) -> None:
        """Reverse: apply the recorded takeaway (idempotent)."""
        mine = [c for c in recorded if c.side == rules.OLD_SOURCE]
        self.changes = mine
        create = [c.acl for c in mine if c.action == rules.DENIED]
        delete = [c.acl for c in mine if c.action == rules.REMOVED]
        old_acls = self._acls_or_none(old) or []
        if create or delete:
            self._apply(old, rules.plan(old_acls, create, delete), "others can still write the old source")
        else:
            self.lines.append("no principal but the reverse mirror could write the reversed topics on the old "
                              "source: nothing to take away")
        stays = list(left)
        if stays:
            raise RightsNotMovedError(
                "a grant to everyone still lets any principal write the old source (denying User:* would stop the "
                "reverse mirror too): " + "; ".join(w.line() for w in stays)
                + ". Narrow it by hand (grant the principals that need it by name), then reverse again")

    def give_back(self, cluster: Cluster, recorded: Iterable[RightsChange], where: str) -> bool:
        """The switch back and resume: undo the recorded changes made on ``where`` (``core/writerights.give_back``).
        True once done (a failure raises)."""
        create, delete = rules.give_back(recorded, where)
        if not create and not delete:
            self.lines.append(f"no write right of the {'old source' if where == rules.OLD_SOURCE else 'target'} "
                              f"was recorded as changed: nothing to give back")
            return True
        present = self._acls_or_none(cluster)
        if present is None:
            self.lines.append(f"{cluster.label} has no authorizer: every principal can write it")
            return True
        consequence = (CANNOT_WRITE_YET if where == rules.OLD_SOURCE
                       else "the producers' grants stay on the target, which the mirror writes again")
        self._apply(cluster, rules.plan(present, create, delete), consequence)
        return True

    # --- the I/O ----------------------------------------------------------------------------------

    @staticmethod
    def _acls_or_none(cluster: Cluster) -> list[TopicAcl] | None:
        """The cluster's topic bindings; None on brokers without an authorizer."""
        try:
            found = acls.list_topic_acls(cluster)
        except NoAuthorizerError:
            return None
        Rights._readable(cluster, found)
        return found

    @staticmethod
    def _readable(cluster: Cluster, found: list[TopicAcl]) -> None:
        """An empty listing may be a missing Describe on the cluster (driver/acls.py): tell which."""
        if not found and not acls.may(cluster, "DESCRIBE"):
            raise RightsNotMovedError(
                f"{acls.principal(cluster)} lacks Describe on the {cluster.role} cluster (resource CLUSTER "
                f"kafka-cluster) at {cluster.label}, needed to list its topic ACLs (DescribeAcls); the write rights "
                f"were not moved. Grant it, then run the command again")

    def _apply(self, cluster: Cluster, plan: rules.Plan, consequence: str) -> None:
        self.lines += [f"present already: {rules.shown(a)}" for a in plan.present]
        self.lines += [f"absent already: {rules.shown(a)}" for a in plan.absent]
        if plan.empty:
            return
        if not acls.may(cluster, "ALTER"):
            raise RightsNotMovedError(
                f"{acls.principal(cluster)} lacks Alter on the {cluster.role} cluster (resource CLUSTER kafka-cluster) "
                f"at {cluster.label}, needed to change topic ACLs: {consequence}. Nothing was changed; an operator "
                f"changes these by hand on {cluster.label} (or grants Alter and runs the command again): "
                + "; ".join(plan.by_hand()))
        try:
            acls.create_acls(cluster, list(plan.create))
        except EosMirrorError as exc:
            raise RightsNotMovedError(f"{exc}: {consequence}. Nothing was changed; by hand on {cluster.label}: "
                                      + "; ".join(plan.by_hand())) from None
        try:
            acls.delete_acls(cluster, list(plan.delete))
        except EosMirrorError as exc:
            raise RightsNotMovedError(
                f"{exc}: {consequence}. Created already: {'; '.join(rules.shown(a) for a in plan.create) or 'none'}; "
                f"still to remove by hand on {cluster.label}: {'; '.join(rules.shown(a) for a in plan.delete)}"
            ) from None
        made = [f"added: {rules.shown(a)}" for a in plan.create] + [f"removed: {rules.shown(a)}" for a in plan.delete]
        self.lines += made
        log.info("%s: write rights: %s", cluster.label, "; ".join(made))
        if self.audit_to is not None:
            self.audit_to(f"on {cluster.label}: " + "; ".join(made))


def _own(configured: Iterable[str], *clusters: Cluster) -> list[str]:
    """The mirror's principals (they write the mirrored topics by design): ``mirror_principals`` and the SASL
    usernames of its clients of ``clusters``."""
    return rules.own_principals(configured, *(c.settings for c in clusters))


# --- who can write the mirrored target topics (each run; the readiness report) -------------------------

SUPER_USERS, ALLOW_EVERYONE = "super.users", "allow.everyone.if.no.acl.found"


@dataclass
class TargetWriters:
    """Who can write the mirrored target topics, as far as the brokers tell."""

    writers: list[rules.Writer] = field(default_factory=list)
    everyone: list[str] = field(default_factory=list)    # why every principal can write (no authorizer, ...)
    unknown: str = ""                                    # why it could not be told
    super_users: list[str] = field(default_factory=list)    # super.users: writers no ACL stops (reported only)
    super_unknown: str = ""                              # why super.users could not be read

    @property
    def clear(self) -> bool:
        """Nothing a guard refuses (super users are reported, never refused)."""
        return not self.writers and not self.everyone and not self.unknown

    def refusing(self) -> list[str]:
        out = [w.line() for w in self.writers] + self.everyone
        return out + ([f"cannot tell who can write the target: {self.unknown}"] if self.unknown else [])

    def lines(self) -> list[str]:
        return self.refusing() + self.super_users


def target_writers(target: Cluster, topics: list[str], configured: Iterable[str] = ()) -> TargetWriters:
    """Principals other than the mirror's (``configured``: its ``mirror_principals``, and the target client's
    SASL username) that can write ``topics``: literal, prefixed and wildcard ALLOW WRITE/ALL grants minus DENY;
    every principal when the brokers have no authorizer, or when ``allow.everyone.if.no.acl.found`` is true on
    a broker and no binding names a topic; and apart, the brokers' ``super.users``, whom no ACL stops."""
    mine = _own(configured, target)
    try:
        bindings = acls.list_topic_acls(target)
    except NoAuthorizerError:
        return TargetWriters(everyone=[f"the target ({target.label}) has no authorizer: every principal can write "
                                       f"the mirrored topics"])
    except EosMirrorError as exc:
        return TargetWriters(unknown=str(exc))
    if not bindings and not acls.may(target, "DESCRIBE"):
        return TargetWriters(unknown=f"{acls.principal(target)} lacks Describe on the target cluster (resource "
                                     f"CLUSTER kafka-cluster) at {target.label}, needed to list its topic ACLs")
    found = TargetWriters(writers=rules.writers(bindings, topics, mine))
    bare = rules.unguarded(bindings, topics)
    try:
        settings = acls.broker_settings(target, (SUPER_USERS, ALLOW_EVERYONE))
    except EosMirrorError as exc:
        found.super_unknown = f"the brokers' {SUPER_USERS} could not be read: {exc}"
        if bare:
            found.unknown = (f"{len(bare)} mirrored topic(s) have no ACL at all ({', '.join(bare[:5])}) and "
                             f"{ALLOW_EVERYONE} could not be read: {exc}")
        return found
    found.super_users = rules.super_users(_reported(settings, SUPER_USERS), mine)
    if bare:
        true, hidden = rules.allow_everyone(_reported(settings, ALLOW_EVERYONE))
        if true:
            found.everyone.append(f"{ALLOW_EVERYONE}=true on broker(s) {', '.join(true)} of {target.label} and no ACL "
                                  f"names {', '.join(bare)}: every principal can write them")
        elif hidden:
            found.unknown = (f"{len(bare)} mirrored topic(s) have no ACL at all ({', '.join(bare[:5])}) and broker(s) "
                             f"{', '.join(hidden)} hide their {ALLOW_EVERYONE} (Kafka reports the authorizer's settings "
                             f"as sensitive): if it is true, every principal can write them. Grant the mirror's "
                             f"principal its write on each mirrored target topic by name (then an ACL names them)")
    return found


def _reported(settings: dict[str, dict[str, str | None]], name: str) -> dict[str, str | None]:
    """Per broker that reports ``name``: its value (None: hidden)."""
    return {broker: found[name] for broker, found in settings.items() if name in found}


def guard(mirror: Any, target: Cluster, topics: list[str]) -> list[str]:
    """A run's check before it copies (``target_guard``): the lines that say who else can write the mirrored
    target topics ([] when only the mirror can); ``refuse`` raises TargetGuardError naming them. Super users
    are listed, never refused: every secured cluster has some (its operators, often the brokers' own principal),
    and no ACL can remove them (docs/real-clusters.md)."""
    found = target_writers(target, topics, mirror.mirror_principals)
    lines = found.lines()
    if found.super_unknown:
        log.info("mirror %s: target_guard: %s (super users are not listed)", mirror.name, found.super_unknown)
    if not found.clear and mirror.target_guard == "refuse":
        fixes = (["remove those grants (kafka-acls.sh --remove)"] if found.writers else []) + (
            ["enable an authorizer on the target's brokers and set allow.everyone.if.no.acl.found=false"]
            if found.everyone else []) + (["let the mirror tell (Describe and DescribeConfigs on the target cluster, and "
                                           "an ACL that names each mirrored target topic)"] if found.unknown else [])
        raise TargetGuardError(
            f"mirror {mirror.name!r}: target_guard: refuse, and the mirror cannot show that only it writes its target "
            f"topics: {'; '.join(found.refusing())}. Nothing was copied. To copy: {', '.join(fixes)}; or set target_guard: "
            f"report to copy and only report them")
    for line in lines:
        log.warning("mirror %s: target_guard: %s", mirror.name, line)
    return lines
