"""``parapush demos record``: record a DG-OC demonstration while a person drives the pusher.

Run the stack (``parapush sim --scene block_003``, or the robot), drive the pusher with any teleop that publishes
``pusher_cmd_teleop`` (``parapush teleop`` on a keyboard) or ``pusher_cmd``, and::

    parapush demos record --scene block_003 --out my_push.json

The recorder (an rclpy node) subscribes to ``scene_state``, ``pusher_cmd_teleop`` and ``pusher_cmd`` (one of them
drives the pusher: no planner runs while a person demonstrates); it starts at the first command to
move and stops when the command has been zero for ``--idle`` s (or after ``--max-time`` s, or on Ctrl-C), then
writes the demonstration in the shipped JSON format (``core/planning/ddp/demonstrations.py``; the conversion is
``core/planning/ddp/recording.py``). Put the file into a library directory (``config/demonstrations/<scene>/`` or
the planner's ``dgoc.demonstrations``) for DG-OC's k-NN selection to use it.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from ..arguments import output_file
from ..core.planning.ddp.dgoc import HORIZON_S
from ..core.planning.ddp.recording import DemonstrationRecorder
from ..core.scene.spec import load_scene


def make_recorder_node(scene, recorder: DemonstrationRecorder, context=None, use_sim_time: bool = True,
                       name: str = "demo_recorder"):
    """An rclpy node feeding ``recorder`` from ``scene_state`` and ``pusher_cmd`` / ``pusher_cmd_teleop``;
    ``node.finished`` is set once the recording is done. Only this node's callbacks touch the recorder (under
    ``node.lock``)."""
    import rclpy  # noqa: PLC0415
    from geometry_msgs.msg import TwistStamped  # noqa: PLC0415
    from parapush_msgs.msg import SceneState  # noqa: PLC0415
    from rclpy.parameter import Parameter  # noqa: PLC0415

    from ..ros import qos, topics  # noqa: PLC0415
    from ..ros.conversions import ConversionError, scene_state_to_array  # noqa: PLC0415

    node = rclpy.create_node(name, context=context,
                             parameter_overrides=[Parameter("use_sim_time", value=bool(use_sim_time))])
    node.lock = threading.Lock()
    node.finished = threading.Event()
    node.states_received = 0
    node.rejected = ""

    def on_state(msg):
        try:
            x = scene_state_to_array(msg, scene, require_valid=True, field="scene_state")
        except ConversionError as e:
            node.rejected = str(e)
            return
        t = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        with node.lock:
            recorder.on_state(t, x)
            node.states_received += 1
            if recorder.done:
                node.finished.set()

    def on_cmd(msg):
        with node.lock:
            recorder.on_command((msg.twist.linear.x, msg.twist.linear.y))

    node.create_subscription(SceneState, topics.SCENE_STATE, on_state, qos.RELIABLE)
    node.create_subscription(TwistStamped, topics.PUSHER_CMD, on_cmd, qos.RELIABLE)
    node.create_subscription(TwistStamped, topics.PUSHER_CMD_TELEOP, on_cmd, qos.RELIABLE)
    return node


def run(args) -> dict:
    import rclpy  # noqa: PLC0415

    from ..ros.spinning import SpinningNodes  # noqa: PLC0415

    scene = load_scene(args.scene)
    index = scene.object_index(args.object) if args.object else 0
    if scene.objects[index].shape != "box":
        raise ValueError(f"--object: DG-OC demonstrations push a box; {scene.objects[index].name!r} is a "
                         f"{scene.objects[index].shape}")
    out = Path(args.out)
    if out.suffix != ".json":
        raise ValueError(f"--out: the demonstration file must end in .json, got {args.out!r}")
    recorder = DemonstrationRecorder(scene, index, idle=args.idle, max_time=args.max_time)
    context = rclpy.Context()
    rclpy.init(context=context)
    spinning = SpinningNodes(context, num_threads=2, name="demo-recorder")
    node = spinning.add(make_recorder_node(scene, recorder, context, use_sim_time=not args.wall_time))
    spinning.start()
    print(f"demos record: scene {scene.name!r}, object {scene.objects[index].name!r}: drive the pusher (e.g. "
          f"`parapush teleop`); recording starts at the first command to move on pusher_cmd_teleop or pusher_cmd "
          f"and ends after {args.idle:g} s without one (Ctrl-C ends it too)", flush=True)
    started = False
    try:
        while not node.finished.wait(0.2):
            with node.lock:
                if recorder.started and not started:
                    started = True
                    print("demos record: recording ...", flush=True)
    except KeyboardInterrupt:
        print("demos record: stopped", flush=True)
    finally:
        spinning.shutdown(timeout=5.0)
        if context.ok():
            rclpy.shutdown(context=context)
    if not recorder.started:
        raise ValueError("pusher_cmd: no command to move was received: nothing recorded"
                         + (f" (scene_state rejected: {node.rejected})" if node.rejected else ""))
    name = args.name or out.stem
    demo = recorder.demonstration(name, source=f"recorded by `parapush demos record` on "
                                               f"{time.strftime('%Y-%m-%d %H:%M:%S')}")
    out.parent.mkdir(parents=True, exist_ok=True)
    demo.save(out)
    x, y, th = demo.final_pose
    print(f"demos record: wrote {out}: {demo.horizon * demo.dt:.2f} s, {demo.face_switches} face switch(es), the "
          f"slider ends at x {x:+.3f} m, y {y:+.3f} m, yaw {np.degrees(th):+.0f} deg of its start pose", flush=True)
    return {"file": str(out), "duration_s": demo.horizon * demo.dt, "face_switches": demo.face_switches}


def add_parser(sub):
    p = sub.add_parser("record", help="record a demonstration from scene_state while a person drives the pusher",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--scene", required=True, help="scene name or path (the stack's scene)")
    p.add_argument("--out", type=output_file, required=True, help="demonstration file to write (.json)")
    p.add_argument("--object", default="", help="the box pushed (default: the scene's first object)")
    p.add_argument("--name", default="", help="demonstration name (default: the file name)")
    p.add_argument("--idle", type=float, default=1.0, help="s without a command to move that end it (default 1)")
    p.add_argument("--max-time", type=float, default=HORIZON_S,
                   help=f"s of recording at most (default {HORIZON_S:g}: the shipped demonstrations' length; a "
                        f"longer one lengthens every DG-OC plan)")
    p.add_argument("--wall-time", action="store_true", help="run on wall time (a robot without /clock)")
    p.set_defaults(func=run)
    return p

