"""The QoS profiles of the stack, defined once: every node, ``parapush sim`` and the tests take them from here."""
import time

from rclpy.duration import Duration
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

from ..core.robot.mocap import POSE_RELIABILITIES

# commands, scene states, plans, diagnostics: nothing may be lost
RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
# status strings and the latest plan: a late subscriber (RViz, a test) still gets the last one
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
# mocap poses as drivers stream them (vrpn_mocap: best effort); a best-effort reader takes reliable writers too
SENSOR = qos_profile_sensor_data
# /clock, as simulators publish it: only the newest tick matters
CLOCK = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
# what pose_recorder records: best effort connects to reliable and best-effort drivers alike (as mocap_ingest); a
# deep queue keeps a busy recorder from dropping samples that the default sensor-data depth (5) would lose
RECORDING = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.BEST_EFFORT)
# pose publishers by their ``qos`` / ``pose_reliability`` parameter
POSE = dict(zip(POSE_RELIABILITIES, (RELIABLE, SENSOR)))

# s a last message before a process ends is repeated for, at most, until every reader has acknowledged it
LAST_MESSAGE_ACK_TIMEOUT = 2.0


def repeat_until_acknowledged(publisher, send, period: float, limit: float = LAST_MESSAGE_ACK_TIMEOUT):
    """Call ``send()`` (it publishes one message on the reliable ``publisher``) now and again every ``period`` until
    every matched reader has acknowledged what was sent, for at most ``limit`` s; returns (acknowledged, messages
    sent, seconds taken). For the last message of a process that ends right after (the arm's zero at a stop): DDS
    repairs a sample a reader lost (its queue overrun on a starved host) only while the writer lives, and only after
    the writer's next heartbeat, which Fast DDS sends every 3 s unless one rides on a new sample (measured: one zero,
    acknowledged after up to 2.9 s on a quiet host; repeated every 10 ms, within 0.4 s). eProsima/Fast-DDS#6098 sends
    one from ``wait_for_all_acked``, later than the pinned wheels. A reader whose process ended without leaving DDS
    never acknowledges: then this takes ``limit``."""
    start, sent = time.monotonic(), 0
    while True:
        send()
        sent += 1
        acked = publisher.wait_for_all_acked(Duration(seconds=period))
        if acked or time.monotonic() - start >= limit:
            return acked, sent, time.monotonic() - start
