"""The test kit's link (kit/link.py): a broker behind toxiproxy, a round trip away.

A real librdkafka client measures the round trip through the proxy (a metadata request, an acks=all produce)
and through the broker's direct listener; the bandwidth cap is measured by a consumer's read time; a mirror
through the proxy copies exactly once (records read back from both clusters by real consumers). Bad input is
refused before anything starts, and a proxy that cannot start leaves nothing running.

The far broker is this file's own (the worker's source port + 30), so the session's clusters stay untouched."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from eosmirror_tools.kit import cluster, link
from tests.helpers import cli, create_topic, mirror, producer, read_all, run
from tests.support.clusters import killable_cluster, own_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]
RTT_MS = 100


@pytest.fixture(scope="module")
def far():
    with killable_cluster("link-far", own_port(30), link=link.Link.round_trip(RTT_MS)) as far:
        yield far


def produce_round_trips_ms(conf: dict, topic: str, tries: int = 5) -> list[float]:
    """acks=all produce of one record, timed from produce() to its delivery report, after a warm-up."""
    p = producer(conf, **{"linger.ms": 0, "acks": "all"})
    p.produce(topic, b"warm-up")
    assert p.flush(30) == 0
    took = []
    for n in range(tries):
        began = time.perf_counter()
        p.produce(topic, f"timed-{n}".encode())
        assert p.flush(30) == 0
        took.append((time.perf_counter() - began) * 1000)
    return took


def test_the_proxy_adds_its_round_trip_to_a_real_client_and_the_direct_listener_does_not(far, unique):
    topic = create_topic(far.client_config(), unique("rtt"))
    through = link.measured_rtt_ms(far.far_config())
    direct = link.measured_rtt_ms(far.client_config())
    assert through >= RTT_MS, f"a metadata request through the proxy took {through:.1f} ms, under {RTT_MS} ms"
    assert direct < RTT_MS / 2, f"the direct listener took {direct:.1f} ms: the proxy must not be on its path"
    produced = produce_round_trips_ms(far.far_config(), topic)
    assert min(produced) >= RTT_MS, f"acks=all produce through the proxy: {produced} ms"
    assert max(produce_round_trips_ms(far.client_config(), topic)) < RTT_MS / 2

    # The link changes on the running proxy (the bench sets each round trip this way).
    link.apply(far, link.Link.round_trip(25))
    try:
        assert link.current(far) == link.Link.round_trip(25)
        shorter = link.measured_rtt_ms(far.far_config())
        assert 25 <= shorter < RTT_MS, f"at 25 ms the metadata request took {shorter:.1f} ms"
    finally:
        link.apply(far, link.Link.round_trip(RTT_MS))
    print(f"metadata round trip: {through:.1f} ms through a {RTT_MS} ms link, {direct:.1f} ms direct; "
          f"produce acks=all {min(produced):.1f}-{max(produced):.1f} ms; at 25 ms: {shorter:.1f} ms")


def test_the_bandwidth_cap_holds_a_consumer_to_its_rate(far, unique):
    topic = create_topic(far.client_config(), unique("cap"))
    p = producer(far.client_config())
    for n in range(400):
        p.produce(topic, bytes(1000) + str(n).encode())     # ~400 KB, written directly
    assert p.flush(30) == 0
    link.apply(far, link.Link(link.Direction(), link.Direction(kilobytes_per_second=100)))
    try:
        began = time.monotonic()
        records = read_all(far.far_config(), topic)
        took = time.monotonic() - began
    finally:
        link.apply(far, link.Link.round_trip(RTT_MS))
    assert len(records) == 400
    # 400 KB at 100 KB/s: at least ~4 s (the first fetch's bytes pass within the first second's allowance)
    assert took >= 3.0, f"400 KB through a 100 KB/s downstream cap were read in {took:.1f} s"
    print(f"400 KB read through a 100 KB/s cap in {took:.1f} s")


def test_a_mirror_through_the_proxy_copies_exactly_once(far, target_conf, unique):
    source_conf = far.far_config()
    topic = create_topic(far.client_config(), unique("far"), partitions=2)
    p = producer(far.client_config(), **{"enable.idempotence": True})
    for n in range(300):
        p.produce(topic, f"v{n}".encode(), partition=n % 2)
    assert p.flush(30) == 0
    m = mirror(unique("m"), [topic], source={"config": source_conf})
    began = time.monotonic()
    report = run(m)
    took = time.monotonic() - began
    assert report["status"] == "ok" and report["records"] == 300, report
    for k in range(2):
        want = [r.value for r in read_all(far.client_config(), topic, k)]
        got = [r.value for r in read_all(target_conf, topic, k)]
        assert got == want and len(want) == 150, (k, len(got), len(want))
    again = run(m)      # nothing new: copies nothing, writes nothing twice
    assert again["status"] == "ok" and again["records"] == 0, again
    assert [len(read_all(target_conf, topic, k)) for k in range(2)] == [150, 150]
    print(f"a {RTT_MS} ms away run of 300 records: {took:.1f} s; slot steps "
          f"{[s.get('step_seconds') for s in report['slots']]}")


def test_bad_links_are_refused_and_a_proxy_that_cannot_start_leaves_nothing_running(unique):
    for bad in (lambda: link.Link.round_trip(-1), lambda: link.Link.round_trip(10, jitter_ms=-1),
                lambda: link.Link.round_trip(10, kilobytes_per_second=-5)):
        with pytest.raises(link.LinkError, match="negative"):
            bad()
    with pytest.raises(link.LinkError, match="exceeds"):
        link.Link(link.Direction(10, 20), link.Direction()).check()
    refused = cli("local", "up", "--source-rtt", "-5", timeout=60)
    assert refused.returncode == 2 and "negative" in refused.stderr, refused.stdout + refused.stderr
    orphan = cli("local", "up", "--source-kbps", "10", timeout=60)
    assert orphan.returncode == 2 and "need --source-rtt" in orphan.stderr, orphan.stderr

    # The proxy's port taken by someone else: a clear error naming the port, and no proxy left behind.
    lonely = cluster.LocalCluster("link-lonely", own_port(40), link=link.Link.round_trip(10))
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", link.proxy_port(lonely)))
        squatter.listen(1)
        with pytest.raises(link.LinkError, match=str(link.proxy_port(lonely))):
            link.start(lonely, lonely.link)
        assert link.running_pid(lonely) is None and not (lonely.dir / "proxy.pid").exists()
        # ... and the kit's launch refuses before its broker starts.
        with pytest.raises(link.LinkError, match=str(link.proxy_port(lonely))):
            cluster.launch(lonely)
        assert cluster.running_pid(lonely) is None and not cluster._port_in_use(lonely.port)
    # Once the port is free the proxy starts; stopped, it is gone (reaped: no zombie left in this process).
    link.start(lonely, lonely.link)
    pid = link.running_pid(lonely)
    assert pid is not None and link.current(lonely) == lonely.link
    assert link.stop(lonely) and not Path(f"/proc/{pid}").exists() and link.running_pid(lonely) is None
