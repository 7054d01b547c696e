"""eosmirror's exceptions. Each names the thing to fix; none carries a secret.

Exit codes used by the CLI and the Spark entry point:
  0  every slot committed or had nothing to do
  1  the run failed (a slot failed, a cluster is unreachable, data was lost on the source ...)
  2  the configuration or the command line is wrong; nothing was written
  3  `eosmirror verify`: no difference found, but part of the ranges could no longer be checked
  4  `eosmirror groups ... --direction failback` left partitions of a group where they were (target
     records that are not copies, nothing mirrored, a refused rewind): the table says which and why
  5  `eosmirror promote`: promoted, but source records known to exist were not copied (or a partition's
     source end was never observed): the loss report says which; a promotion is then no success to hide
  6  a disaster-recovery command completed, but a step optional by design did not run (promote's final
     group sync while the source does not answer; a write-rights step without the right to change ACLs;
     promote's foreign-records check): its outcome lists the step and why
  7  a run refused by ``target_guard: refuse``: principals other than the mirror can write a mirrored target
     topic (named with the grant that lets them); nothing was copied
  8  a run refused: a mirrored target partition holds records the mirror did not write (foreign writes,
     core/foreign.py); the message names partitions, offsets and producers. Not retried: an operator decides
  9  `eosmirror readiness`: the report was made and says NOT READY (the target could not take over now; the
     report names each blocking check; a cluster that does not answer is such a check, naming it). A finding, not
     an error of the command: 1 stays an unexpected failure, 2 a bad mirror name or file
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_INCOMPLETE = 3
EXIT_GROUPS_LEFT = 4
EXIT_MAY_HAVE_LOST = 5
EXIT_STEP_NOT_RUN = 6
EXIT_OTHER_WRITERS = 7
EXIT_FOREIGN = 8
EXIT_NOT_READY = 9


class EosMirrorError(Exception):
    """Base class. ``exit_code`` tells the CLI how to exit."""

    exit_code = EXIT_FAILED


class ConfigError(EosMirrorError):
    """A mirror definition, a client setting or a command-line value is wrong. Nothing was written."""

    exit_code = EXIT_CONFIG


class BrokerTooOldError(ConfigError):
    """A cluster's brokers lack an API version the command needs (read from their ApiVersions answer):
    the message names the cluster, its release as the answer tells it, the feature and the minimum. Exit 2,
    never retried: only an upgrade of those brokers changes the answer. Nothing was written."""


class ClusterUnreachableError(EosMirrorError):
    """A cluster did not answer within the bounded time."""


class AuthorizationError(EosMirrorError):
    """The principal lacks a permission (ACL); the message names which one."""


class DataLossError(EosMirrorError):
    """Source data the mirror has not copied yet is gone (retention, delete-records, re-created topic)."""


class TargetMismatchError(EosMirrorError):
    """The target topics cannot hold the mirror (too few partitions, re-created, foreign writers)."""


class TargetGuardError(TargetMismatchError):
    """``target_guard: refuse`` and principals other than the mirror can write a mirrored target topic."""

    exit_code = EXIT_OTHER_WRITERS


class ForeignWriteError(TargetMismatchError):
    """A mirrored target partition holds committed records the mirror did not write (core/foreign.py).
    A data problem: retrying does not help, an operator decides what the target should hold."""

    exit_code = EXIT_FOREIGN


class OversizeRecordError(EosMirrorError):
    """A source record is larger than the target topic accepts."""


class FencedError(EosMirrorError):
    """A newer instance of this slot (or a newer generation of the mirror) took over."""


class ProgressUnavailableError(EosMirrorError):
    """The mirror's committed progress could not be read or recovered exactly."""
