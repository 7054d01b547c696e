"""The order of one benchmark run and its progress lines.

Configurations run one after another (never two at once: they would share the two cores), per
size class: ceiling (plain, transactional), raw loop, the JVM exactly-once copier, eosmirror
exactly_once (followed by the empty run on the first size class), eosmirror at_least_once,
MirrorMaker 2 exactly-once and at-least-once tuned as its users tune it (``mm2.TUNED``), then at its
defaults (not with --quick); then the slot sweep on the first size class.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from eosmirror_tools.bench import configurations as configs
from eosmirror_tools.bench import distance, served
from eosmirror_tools.bench.results import ConfigResult
from eosmirror_tools.bench.settings import BenchSettings
from eosmirror_tools.kit import machine

Step = tuple[str, Callable[[configs.Context], list[ConfigResult]]]


def plan(settings: BenchSettings) -> list[Step]:
    steps: list[Step] = []
    sizes = settings.size_classes
    for index, size in enumerate(sizes):
        if "ceiling" in settings.kinds:
            steps.append((f"{size.name} ceiling: ProducerPerformance, non-transactional",
                          lambda c, s=size: [configs.run_ceiling(c, s, transactional=False)]))
            steps.append((f"{size.name} ceiling: ProducerPerformance, transactional",
                          lambda c, s=size: [configs.run_ceiling(c, s, transactional=True)]))
        if "raw" in settings.kinds:
            steps.append((f"{size.name} raw copy loop", lambda c, s=size: [configs.run_raw(c, s)]))
        if "jvmcopier" in settings.kinds:
            steps.append((f"{size.name} JVM exactly-once copier, {settings.main_slots} slots",
                          lambda c, s=size: [configs.run_jvm_copier(c, s, settings.main_slots)]))
        if "eosmirror" in settings.kinds:
            steps.append((f"{size.name} eosmirror exactly_once, {settings.main_slots} slots"
                          + (" (+ empty run)" if index == 0 else ""),
                          lambda c, s=size, first=index == 0: configs.run_eosmirror(
                              c, s, "exactly_once", settings.main_slots, then_empty_run=first)))
            steps.append((f"{size.name} eosmirror at_least_once, {settings.main_slots} slots",
                          lambda c, s=size: configs.run_eosmirror(c, s, "at_least_once", settings.main_slots)))
        if "served" in settings.kinds:
            steps.append((f"{size.name} eosmirror exactly_once in the run server, {settings.main_slots} slots"
                          + (" (+ empty run)" if index == 0 else ""),
                          lambda c, s=size, first=index == 0: served.run_eosmirror_served(
                              c, s, settings.main_slots, then_empty_run=first)))
            steps.append((f"{size.name} eosmirror at_least_once in the run server, {settings.main_slots} slots",
                          lambda c, s=size: served.run_eosmirror_served(c, s, settings.main_slots,
                                                                        delivery="at_least_once")))
        if "mm2" in settings.kinds:
            for tuned in (True, False) if settings.mm2_defaults_too else (True,):
                how = "tuned" if tuned else "defaults"
                steps.append((f"{size.name} MirrorMaker 2 exactly-once, {how}",
                              lambda c, s=size, t=tuned: [configs.run_mm2(c, s, True, tuned=t)]))
                steps.append((f"{size.name} MirrorMaker 2 at-least-once, {how}",
                              lambda c, s=size, t=tuned: [configs.run_mm2(c, s, False, tuned=t)]))
    if "eosmirror" in settings.kinds and sizes:
        for slots in settings.slot_sweep:
            if slots != settings.main_slots:
                steps.append((f"{sizes[0].name} eosmirror exactly_once, {slots} slots (slot sweep)",
                              lambda c, n=slots: configs.run_eosmirror(c, sizes[0], "exactly_once", n)))
    if "distance" in settings.kinds:
        # Last: its own source broker (behind the proxy) runs only while its rows are measured.
        steps += distance.plan(settings)
    return steps


def ensure_clusters(say: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Reuse the running local clusters, or start them (``eosmirror local up`` is idempotent)."""
    from eosmirror_tools.kit import cluster

    clusters = cluster.default_clusters()
    if not all(cluster.is_reachable(c) for c in clusters):
        say("starting the local clusters (eosmirror local up)")
        cluster.up(clusters)
    else:
        say("reusing the running local clusters")
    source, target = clusters
    return source.client_config(), target.client_config()


def run(settings: BenchSettings, out: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every step; write build/bench/report.{json,md} and throughput.png; return the report."""
    from eosmirror_tools.bench import report

    def emit(line: str) -> None:
        (out or (lambda text: print(text, flush=True)))(line)

    started = time.monotonic()
    emit(f"eosmirror bench {settings.run_id}: N={settings.records:,}, sizes {', '.join(settings.sizes)}, "
         f"kinds {', '.join(settings.kinds)}{' (quick)' if settings.quick else ''}")
    source_conf, target_conf = ensure_clusters(lambda text: emit("  " + text))
    info = machine.describe()
    busy = os.getloadavg()[0] / (os.cpu_count() or 1)
    if busy > 0.5:
        # Every configuration shares the same CPUs with whatever else runs: say so up front.
        emit(f"  WARNING: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs before the bench starts; "
             f"other work on this machine will make the numbers noisy (see load_average_1m per configuration)")
    steps = plan(settings)
    results: list[ConfigResult] = []
    try:
        for number, (title, step) in enumerate(steps, 1):
            emit(f"[{number}/{len(steps)}] {title}  ({time.monotonic() - started:.0f} s since start)")
            ctx = configs.Context(settings, source_conf, target_conf, lambda text: emit("      " + text))
            load_before = os.getloadavg()[0]
            produced = step(ctx)
            # Other work on the machine shows up here: a configuration measured under load is suspect.
            for result in produced:
                result.details["load_average_1m"] = {"before": round(load_before, 2),
                                                     "after": round(os.getloadavg()[0], 2)}
            results.extend(produced)
    finally:
        if "distance" in settings.kinds:
            distance.stop_far_source()
    translation_costs = None
    if "translation" in settings.kinds:
        from eosmirror_tools.bench import translation

        emit(f"[translation] group-offset translation and progress recovery vs offset-sync history  "
             f"({time.monotonic() - started:.0f} s since start)")
        translation_costs = translation.run(target_conf, settings.quick, settings.keep_topics,
                                            lambda text: emit("      " + text))
    rereads_section = None
    if "rereads" in settings.kinds:
        from eosmirror_tools.bench import rereads

        emit(f"[rereads] consumer-group re-reads after failover, eosmirror vs MirrorMaker 2  "
             f"({time.monotonic() - started:.0f} s since start)")
        rereads_section = rereads.run(source_conf, target_conf, settings.quick, settings.keep_topics,
                                      settings.mm2_dir / f"{settings.run_id}-rereads", lambda text: emit("      " + text))
    scale_section = None
    if "scale" in settings.kinds:
        from eosmirror_tools.bench import scale

        emit(f"[scale] costs that grow with the partition count  ({time.monotonic() - started:.0f} s since start)")
        scale_section = scale.run(source_conf, target_conf, settings.quick, settings.keep_topics, settings.run_id,
                                  settings.work_dir / "scale", lambda text: emit("      " + text))
        emit(f"      written: {scale.write(scale_section, settings.out_dir)}")
    cap_section = None
    if "cap" in settings.kinds:
        from eosmirror_tools.bench import capbench

        emit(f"[cap] max_bytes_per_second held for {capbench.QUICK_HOLD if settings.quick else capbench.HOLD:.0f} s, "
             f"measured on the target  ({time.monotonic() - started:.0f} s since start)")
        cap_section = capbench.run(source_conf, target_conf, settings.quick, settings.run_id,
                                   lambda text: emit("      " + text))
        emit(f"      written: {capbench.write(cap_section, settings.out_dir)}")
    storm_section = None
    if "storm" in settings.kinds:
        from eosmirror_tools.bench import storm

        emit(f"[storm] the catch-up storm: latencies beside it, no cap and capped  ({time.monotonic() - started:.0f} s since start)")
        storm_section = storm.run(source_conf, target_conf, settings.quick, settings.keep_topics, settings.run_id,
                                  settings.storm_partitions, lambda text: emit("      " + text))
        emit(f"      written: {storm.write(storm_section, settings.out_dir)}")
    profiles: dict[str, Any] = {}
    if settings.profile:
        from eosmirror_tools.bench import profiling

        emit("[profile] pyinstrument: one slot's copy loop in-process, and an empty run's driver")
        ctx = configs.Context(settings, source_conf, target_conf, lambda text: emit("      " + text))
        profiles = profiling.run_all(ctx)
    document = report.build(settings, results, info, time.monotonic() - started, profiles, translation_costs,
                            rereads_section, scale_section, storm_section, cap_section)
    written = report.write_all(document, settings.out_dir)
    emit(report.console_summary(document))
    emit("written: " + ", ".join(str(p) for p in written))
    return document
