"""Topic ACL sync (MirrorMaker 2's ``sync.topic.acls.enabled``): which source ACLs go to the target.

Pure. As MM2 does (apache/kafka connect/mirror/.../MirrorSourceConnector.java: syncTopicAcls keeps
TOPIC + LITERAL bindings of replicated topics; shouldReplicateAcl drops ALLOW WRITE, since only the
mirror writes target topics; targetAclBinding renames the topic and downgradeAllowAllACL turns ALLOW
ALL into ALLOW READ). Everything else is copied as it is, DENY entries included (DENY ALL stays DENY
ALL). MM2 silently ignores PREFIXED bindings and the LITERAL wildcard ``*``; here they are reported when
they cover a mirrored topic, because copying them would grant on other topics of the target.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class TopicAcl:
    topic: str
    pattern: str        # LITERAL, PREFIXED, MATCH
    principal: str
    host: str
    operation: str      # READ, WRITE, ALL, DESCRIBE, ...
    permission: str     # ALLOW, DENY


def to_target(acls: list[TopicAcl], target_of: dict[str, str]) -> tuple[list[TopicAcl], list[str]]:
    """(the target's ACLs, what was not copied and why) for the source ACLs of mirrored topics."""
    wanted: list[TopicAcl] = []
    skipped: list[str] = []
    for acl in acls:
        if acl.pattern != "LITERAL" or acl.topic == "*":
            if acl.topic == "*" or any(t.startswith(acl.topic) for t in target_of):
                skipped.append(f"{acl.pattern} ACL on {acl.topic!r} for {acl.principal} ({acl.permission} "
                               f"{acl.operation}): not copied (it would cover other target topics); grant it on "
                               f"the target by hand if wanted")
            continue
        if acl.topic not in target_of:
            continue
        if acl.permission == "ALLOW" and acl.operation == "WRITE":
            continue   # only the mirror writes the target topics
        operation = "READ" if (acl.permission == "ALLOW" and acl.operation == "ALL") else acl.operation
        copied = replace(acl, topic=target_of[acl.topic], operation=operation)
        if copied not in wanted:
            wanted.append(copied)
    return wanted, skipped
