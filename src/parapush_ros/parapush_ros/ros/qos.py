"""The QoS profiles of the stack, defined once: every node, ``parapush sim`` and the tests take them from here."""
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
