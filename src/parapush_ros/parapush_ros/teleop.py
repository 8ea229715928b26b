"""``parapush teleop``: drive the pusher from the keyboard (for recording DG-OC demonstrations on machines with no
joystick or GUI: the terminal in raw mode, nothing else).

Arrow keys or W/A/S/D move the pusher in the table frame (up/W = +x forward, left/A = +y left, down/S = -x,
right/D = -y; two keys held together move diagonally), space stops, +/- change the speed (up to ``--max-speed``),
q or Ctrl-C quits (sending zero). A terminal sends a held key as repeated presses, so a direction is held for
``--hold`` s after its last press, longer than the keyboard's auto-repeat delay, and then lapses. The command is
published on ``pusher_cmd_teleop`` (TwistStamped, frame ``table``) at ``--rate``, zeros included: the
velocity_commander downstream gives it priority over the planner's ``pusher_cmd`` while it keeps coming (and for
its ``teleop_timeout`` after), and enforces the robot's own limits.
"""
from __future__ import annotations

import math
import os
import select
import sys
import time

import numpy as np
from .arguments import positive_float

DIRECTIONS = {  # key -> unit direction in the table frame
    "w": (1.0, 0.0), "\x1b[A": (1.0, 0.0),
    "s": (-1.0, 0.0), "\x1b[B": (-1.0, 0.0),
    "a": (0.0, 1.0), "\x1b[D": (0.0, 1.0),
    "d": (0.0, -1.0), "\x1b[C": (0.0, -1.0),
}
SPEED_STEP = 1.25  # +/- multiply / divide the speed by this


class KeyTeleop:
    """Key presses -> pusher velocity (pure logic; no terminal, no ROS)."""

    def __init__(self, speed: float = 0.03, max_speed: float = 0.1, hold: float = 0.6):
        if not (math.isfinite(max_speed) and max_speed > 0.0):
            raise ValueError(f"--max-speed: must be > 0, got {max_speed}")
        if not (math.isfinite(speed) and 0.0 < speed <= max_speed):
            raise ValueError(f"--speed: must be in (0, --max-speed = {max_speed}], got {speed}")
        if not (math.isfinite(hold) and hold > 0.0):
            raise ValueError(f"--hold: must be > 0, got {hold}")
        self.speed, self.max_speed, self.hold = speed, max_speed, hold
        self.pressed: dict = {}  # direction -> time of its last press
        self.quit = False

    def press(self, key: str, now: float) -> None:
        k = key.lower() if len(key) == 1 else key
        if k in DIRECTIONS:
            d = DIRECTIONS[k]
            opposite = (-d[0], -d[1])
            self.pressed.pop(opposite, None)  # the opposite key cancels at once
            self.pressed[d] = now
        elif k == " ":
            self.pressed.clear()
        elif k in ("+", "="):
            self.speed = min(self.speed * SPEED_STEP, self.max_speed)
        elif k in ("-", "_"):
            self.speed = self.speed / SPEED_STEP
        elif k in ("q", "\x03", "\x04"):
            self.pressed.clear()
            self.quit = True

    def velocity(self, now: float) -> np.ndarray:
        """The command at ``now``: the held directions' sum, at ``speed``."""
        self.pressed = {d: t for d, t in self.pressed.items() if now - t <= self.hold}
        if not self.pressed:
            return np.zeros(2)
        v = np.sum([d for d in self.pressed], axis=0)
        n = float(np.linalg.norm(v))
        return np.zeros(2) if n == 0.0 else self.speed * v / n


def split_keys(data: str) -> list:
    """Terminal input -> keys (arrow keys are 3-character escape sequences)."""
    keys, i = [], 0
    while i < len(data):
        if data[i] == "\x1b" and data[i + 1:i + 2] == "[" and i + 2 < len(data):
            keys.append(data[i:i + 3])
            i += 3
        else:
            keys.append(data[i])
            i += 1
    return keys


def run(args) -> None:
    import termios  # noqa: PLC0415 (POSIX terminals only)
    import tty  # noqa: PLC0415

    import rclpy  # noqa: PLC0415
    from geometry_msgs.msg import TwistStamped  # noqa: PLC0415
    from rclpy.parameter import Parameter  # noqa: PLC0415
    from std_msgs.msg import Header  # noqa: PLC0415

    from .ros import qos, topics  # noqa: PLC0415

    teleop = KeyTeleop(args.speed, args.max_speed, args.hold)
    if not (math.isfinite(args.rate) and args.rate > 0.0):
        raise ValueError(f"--rate: must be > 0, got {args.rate}")
    if not sys.stdin.isatty():
        raise ValueError("stdin: parapush teleop needs a terminal (it reads single key presses)")
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("keyboard_teleop", context=context,
                             parameter_overrides=[Parameter("use_sim_time", value=bool(args.sim_time))])
    pub = node.create_publisher(TwistStamped, topics.PUSHER_CMD_TELEOP, qos.RELIABLE)

    def publish(v):
        msg = TwistStamped()
        msg.header = Header(stamp=node.get_clock().now().to_msg(), frame_id=args.frame_id)
        msg.twist.linear.x, msg.twist.linear.y = float(v[0]), float(v[1])
        pub.publish(msg)

    print(__doc__.split("\n\n")[1].replace("\n", " ") + f"\nspeed {teleop.speed:.3f} m/s; publishing on "
          f"{pub.topic_name} at {args.rate:g} Hz\r", flush=True)
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    period, shown = 1.0 / args.rate, None
    try:
        next_t = time.monotonic()
        while not teleop.quit:
            timeout = max(0.0, next_t - time.monotonic())
            ready, _, _ = select.select([fd], [], [], timeout)
            now = time.monotonic()
            if ready:
                for key in split_keys(os.read(fd, 64).decode(errors="ignore")):
                    teleop.press(key, now)
            if now >= next_t:
                next_t += period
                v = teleop.velocity(now)
                publish(v)
                line = f"v = ({v[0]:+.3f}, {v[1]:+.3f}) m/s, speed {teleop.speed:.3f} m/s"
                if line != shown:
                    sys.stdout.write("\r" + line + "   ")
                    sys.stdout.flush()
                    shown = line
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        publish(np.zeros(2))
        print("\nparapush teleop: stopped (zero sent)", flush=True)
        node.destroy_node()
        rclpy.shutdown(context=context)


def add_parser(sub):
    p = sub.add_parser("teleop", help="drive the pusher from the keyboard (arrow keys / WASD) on pusher_cmd_teleop",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--speed", type=float, default=0.03, help="pusher speed (m/s, default 0.03)")
    p.add_argument("--max-speed", type=float, default=0.1, help="the most +/- may raise it to (m/s, default 0.1)")
    p.add_argument("--hold", type=float, default=0.6, help="s a direction stays on after its key's last press")
    p.add_argument("--rate", type=positive_float, default=50.0, help="publish rate (Hz, default 50)")
    p.add_argument("--frame-id", default="table", help="frame of the twists (default: table)")
    p.add_argument("--sim-time", action="store_true", help="stamp with /clock (simulated time)")
    p.set_defaults(func=run)
    return p
