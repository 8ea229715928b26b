"""``parapush sim``: the simulated stack of ``launch/sim.launch.py`` on a machine without ``ros2 launch``.

The same nodes (``bringup.nodes("sim")``) with the same parameters (``config/<node>.yaml``, ``config/sim.yaml``,
the launch arguments; merged by ``bringup.node_parameters`` exactly as the launch file hands them to ROS) run in
one process on a ``MultiThreadedExecutor`` and talk over real ROS topics, services and actions, so any other ROS
process (``ros2 topic echo``, RViz on a full install) sees them too.

With ``--push`` a ``PushObject`` goal (the scene's goal, or ``--goal X Y``) is sent through the planner's action;
the run then ends with a summary (outcome, actions, planning time per step, model) and a PNG of the executed path.
"""
from __future__ import annotations

import argparse
import math
import signal
import sys
import time
from pathlib import Path

from .arguments import nonnegative_float, output_dir
from . import bringup
from .core.models.registry import AUTO_COARSE_RULE, coarse_choices, spec_names
from .core.planning.planners import planner_entry
from .ros import topics
from .ros.static_tf import TF_AVAILABLE, static_transform_node
from .ros.spinning import SpinningNodes

class SimStack:
    """All sim-mode nodes in one process; ``start()`` spins them in a background thread."""

    def __init__(self, arguments: dict | None = None, overrides: dict | None = None, without=(), context=None,
                 num_threads: int = 8, share=None):
        """``arguments``: launch arguments (scene, model, use_sim_time, ...; empty = config files);
        ``overrides``: {node name: {parameter: value}} on top of everything; ``without``: node names to leave out
        (explicitly: a node that is missing is otherwise an error)."""
        import rclpy  # noqa: PLC0415
        from rclpy.exceptions import ParameterException  # noqa: PLC0415
        from rclpy.parameter import Parameter  # noqa: PLC0415

        from .ros.node import autostart  # noqa: PLC0415

        args = {name: d for name, (d, _) in bringup.launch_argument_defaults("sim").items()}
        args.update({k: v for k, v in (arguments or {}).items() if v is not None})
        bringup.check_arguments("sim", args)
        overrides = overrides or {}
        unknown = set(without) - {s.name for s in bringup.nodes("sim")}
        if unknown:
            raise ValueError(f"--without: {sorted(unknown)} are not nodes of the sim "
                             f"({', '.join(s.name for s in bringup.nodes('sim'))})")
        said = bringup.planner_defaults_in_effect("sim", args, share)
        if said:  # what the planner brings (its scene, model), as the launch says it too
            print("parapush sim: " + said, flush=True)
        self._own_context = context is None
        if self._own_context:  # without rclpy's signal handlers: see ros.node.run_node (the zeros at shutdown)
            from rclpy.signals import SignalHandlerOptions  # noqa: PLC0415
            context = rclpy.Context()
            rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
        self.context = context
        self.nodes = {}
        self.parameters = {}
        self.spinning = SpinningNodes(context, num_threads=num_threads, name="parapush-sim")
        self.executor = self.spinning.executor
        try:
            for spec in bringup.nodes("sim", args):
                if spec.name in without:
                    continue
                try:
                    cls = spec.node_class()
                    spec.param_spec()
                except (ImportError, LookupError) as e:
                    raise RuntimeError(f"node {spec.name!r} is not available: {e} (leave it out explicitly with "
                                       f"--without {spec.name})") from None
                params = bringup.node_parameters(spec, "sim", args, share)
                params.update(overrides.get(spec.name, {}))
                self.parameters[spec.name] = params
                try:
                    node = cls(context=context, parameter_overrides=[Parameter(k, value=v)
                                                                     for k, v in params.items()])
                except ParameterException as e:  # a value of another type than declared: one line, as a node
                    raise ValueError(f"{spec.name}: cannot start: {e}") from None  # under ros2 launch says
                self.add_node(spec.name, node)
                if spec.lifecycle:  # autostart: true (config/<node>.yaml) configures and activates it, as under
                    autostart(node)  # ros2 launch, where the node's own main() does it
            # the launch file's static_transform_publisher: mocap frame -> table frame on /tf_static
            self.static_transform = bringup.mocap_static_transform("sim", args, share)
            self.static_tf_node = None
            if TF_AVAILABLE:
                self.static_tf_node = self.spinning.add(static_transform_node(
                    bringup.MOCAP_TF_NODE, [self.static_transform], bringup.coerce(args["use_sim_time"], False,
                                                                           "use_sim_time"), context))
        except BaseException:
            self.shutdown()
            raise

    def add_node(self, name: str, node):
        """Spin one more node with the stack (a client of it, e.g. the CLI's watcher); destroyed with it."""
        self.nodes[name] = self.spinning.add(node)
        return node

    @property
    def errors(self) -> list:
        """Exceptions raised by the nodes' callbacks so far (printed when they happen)."""
        return self.spinning.errors

    def start(self) -> SimStack:
        self.spinning.start()
        return self

    def shutdown(self):
        """Stop spinning, end running pushes, wait for callbacks in flight, destroy every node (``spinning``)."""
        import rclpy  # noqa: PLC0415
        self.spinning.shutdown(timeout=5.0)
        self.nodes = {}
        if self._own_context and self.context.ok():
            rclpy.shutdown(context=self.context)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.shutdown()
        return False


# ------------------------------------------------------------------------------------------------ CLI
def add_parser(sub):
    p = sub.add_parser("sim", help="run the simulated stack (sim.launch.py's nodes) in one process over real ROS",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scene", default=None, help="scene name or path for every node (default: config files)")
    p.add_argument("--model", default=None, help=f"planner prediction model: {', '.join(spec_names())} "
                                                 f"(default: config/mpc_planner.yaml)")
    p.add_argument("--planner", default=None, help="the launch argument planner, "
                   + bringup.LAUNCH_ARGUMENTS["planner"][1])
    p.add_argument("--coarse", default=None, choices=coarse_choices(),
                   help=f"coarse model inside Parareal (default: config files; {AUTO_COARSE_RULE})")
    p.add_argument("--duration", type=nonnegative_float, default=0.0,
                   help="stop after this many simulated seconds (0 = until Ctrl-C, or until the push ends)")
    p.add_argument("--real-time-factor", type=float, default=None, help="simulation speed (default: config)")
    p.add_argument("--without", action="append", default=[], metavar="NODE",
                   help="leave a node out (e.g. mpc_planner while it is not available); repeatable")
    p.add_argument("--params-file", default=None, metavar="FILE",
                   help="the launch argument params_file: " + bringup.LAUNCH_ARGUMENTS["params_file"][1])
    p.add_argument("--push", action="store_true", help="send a PushObject goal and report the result")
    p.add_argument("--goal", type=float, nargs=2, default=None, metavar=("X", "Y"),
                   help="goal of the push in the table frame (default: the scene's goal)")
    p.add_argument("--yaw", type=float, default=None,
                   help="goal yaw of the push (rad; default: none for mpc, 0 for dgoc, which pushes to a pose)")
    p.add_argument("--yaw-tolerance", type=float, default=0.1, help="with a goal yaw: its tolerance (rad, 0.1)")
    p.add_argument("--target", default="", help="object to push (default: the scene goal's object)")
    p.add_argument("--tolerance", type=float, default=None,
                   help="success radius of the push (m; default: the scene goal's radius)")
    p.add_argument("--out", type=output_dir, default="out", help="directory for the executed-path PNG (default: ./out)")
    p.add_argument("--status-period", type=float, default=2.0, help="seconds of wall time between status lines")
    p.add_argument("--record", default=None, metavar="FILE",
                   help="record the mocap pose topics to this MCAP bag (for parapush replay / calibrate)")
    p.set_defaults(func=run)
    return p


class _Watch:
    """Subscriptions of the runner: the latest state and statuses, and the executed path."""

    def __init__(self, node):
        from parapush_msgs.msg import SceneState  # noqa: PLC0415
        from rosgraph_msgs.msg import Clock  # noqa: PLC0415
        from std_msgs.msg import String  # noqa: PLC0415

        from .ros import qos  # noqa: PLC0415
        self.state = None
        self.sim_time = 0.0
        self.path = []  # (t, pusher x, y, {object: (x, y, valid)})
        self.planner_status = ""
        self.commander_status = ""
        node.create_subscription(SceneState, topics.SCENE_STATE, self._on_state, qos.RELIABLE)
        node.create_subscription(Clock, topics.CLOCK, self._on_clock, qos.CLOCK)
        node.create_subscription(String, topics.PLANNER_STATUS, lambda m: setattr(self, "planner_status", m.data),
                                 qos.LATCHED)
        node.create_subscription(String, "velocity_commander/status",
                                 lambda m: setattr(self, "commander_status", m.data), qos.LATCHED)

    def _on_state(self, msg):
        self.state = msg
        t = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.path.append((t, msg.pusher_x, msg.pusher_y, {o.name: (o.x, o.y, o.tracking_valid, o.yaw)
                                                          for o in msg.objects}))

    def _on_clock(self, msg):
        self.sim_time = msg.clock.sec + msg.clock.nanosec * 1e-9

    def line(self) -> str:
        s = self.state
        if s is None:
            return f"t={self.sim_time:7.2f} s  waiting for scene_state"
        objs = "  ".join(f"{o.name}=({o.x:+.3f}, {o.y:+.3f}){'' if o.tracking_valid else ' LOST'}"
                         for o in s.objects)
        return (f"t={self.sim_time:7.2f} s  pusher=({s.pusher_x:+.3f}, {s.pusher_y:+.3f})"
                f"{'' if s.pusher_tracking_valid else ' LOST'}  {objs}  commander: {self.commander_status or '-'}"
                f"  planner: {self.planner_status or '-'}")


def run(args) -> dict:
    import rclpy  # noqa: PLC0415
    from rclpy.parameter import Parameter  # noqa: PLC0415

    overrides = {}
    if args.real_time_factor is not None:
        overrides["mujoco_sim"] = {"real_time_factor": float(args.real_time_factor)}
    if args.push and "mpc_planner" in args.without:
        raise SystemExit("parapush sim: --push needs the mpc_planner node (remove --without mpc_planner)")
    if args.planner is not None:
        try:
            planner_entry(args.planner)
        except ValueError as e:
            raise ValueError(f"--{e}") from None
    arguments = {"scene": args.scene or "", "model": args.model or "", "coarse_model": args.coarse or "",
                 "planner": args.planner or "", "record": args.record or "", "params_file": args.params_file or ""}
    _stop_signals()
    stack = SimStack(arguments, overrides, without=args.without)
    watch_node = rclpy.create_node("parapush_sim_cli", context=stack.context,
                                   parameter_overrides=[Parameter("use_sim_time", value=True)])
    watch = _Watch(watch_node)
    stack.add_node("parapush_sim_cli", watch_node)
    summary = {}
    print(f"parapush sim: nodes {', '.join(n for n in stack.nodes if n != 'parapush_sim_cli')}"
          + (f" (left out: {', '.join(args.without)})" if args.without else ""), flush=True)
    t = stack.static_transform
    print("parapush sim: " + (f"TF {t.parent_frame} -> {t.child_frame} on /tf_static ({bringup.MOCAP_TF_NODE})"
                               if stack.static_tf_node is not None else
                               f"no TF {t.parent_frame} -> {t.child_frame}: tf2_msgs is not installed (it comes with "
                               f"a ROS 2 install; ros2 launch publishes it with tf2_ros)"), flush=True)
    stack.start()
    try:
        push = _PushClient(watch_node, stack, args) if args.push else None
        last = 0.0
        while True:
            time.sleep(0.05)
            if time.monotonic() - last >= args.status_period:
                last = time.monotonic()
                print(watch.line(), flush=True)
            if args.duration > 0.0 and watch.sim_time >= args.duration:
                print(f"parapush sim: {args.duration:g} s of simulated time done", flush=True)
                break
            if push is not None and push.step(watch):
                break
            if stack.errors:  # as under ros2 launch, where the node exits and the launch ends: fail-safe, not deaf
                raise SystemExit(f"parapush sim: a node's callback raised {stack.errors[0]!r} (traceback above): "
                                 f"stopping the stack, as ros2 launch stops when a node fails")
        if push is not None:
            summary = push.summary(watch)
    except KeyboardInterrupt:
        print("parapush sim: interrupted", file=sys.stderr)
    finally:
        stack.shutdown()
    if args.push and summary.get("outcome") != "REACHED":
        raise SystemExit(f"parapush sim: the push ended {summary.get('outcome', 'unfinished')}, not REACHED")
    return summary


def _stop_signals():
    """SIGTERM ends ``parapush sim`` as Ctrl-C does (KeyboardInterrupt: the stack's shutdown sends the zeros), and
    so does SIGINT where it was inherited ignored (as ``ros2 launch`` takes it back: ``ros.node.take_back_sigint``)."""
    from .ros.node import take_back_sigint  # noqa: PLC0415

    def interrupt(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupt)
    if take_back_sigint():
        print("parapush sim: started with SIGINT ignored (a script's background job?): it takes SIGINT back, so "
              "Ctrl-C or kill -INT stops the stack", flush=True)


class _PushClient:
    """Sends one PushObject goal once the scene state is valid and collects the result."""

    def __init__(self, node, stack, args):
        from parapush_msgs.action import PushObject  # noqa: PLC0415
        from .ros.actions import ActionClient, ResentGoal  # noqa: PLC0415
        self.PushObject, self.ResentGoal = PushObject, ResentGoal
        self.node, self.stack, self.args = node, stack, args
        self.client = ActionClient(node, PushObject, topics.PUSH_ACTION)
        self.scene = stack.nodes["mpc_planner"].scene
        self.sent = None  # the goal sent (``ResentGoal``: sent again when its answer does not come)
        self.result = None
        self.start_wall = None
        self.late_plans = 0  # the feedback's count of plans that arrived after their switch
        self.model = stack.parameters["mpc_planner"].get("model", "")
        self.planner = stack.nodes["mpc_planner"].kind.name  # the one planning (planner auto: the one it chose)

    def step(self, watch) -> bool:
        """Advance; True when the push is over."""
        s = watch.state
        if self.sent is None:
            if s is None or not s.pusher_tracking_valid or not all(o.tracking_valid for o in s.objects):
                return False
            if not self.client.server_is_ready():
                return False
            goal = self.PushObject.Goal()
            g = self.scene.goal
            goal.target_object = self.args.target or (g.object if g is not None else self.scene.objects[0].name)
            xy = self.args.goal if self.args.goal is not None else (g.position if g is not None else None)
            if xy is None:
                raise SystemExit("parapush sim: the scene has no goal: give --goal X Y")
            goal.goal_x, goal.goal_y = float(xy[0]), float(xy[1])
            goal.position_tolerance = float(g.radius) if (g is not None and self.args.goal is None) else 0.0
            if self.args.tolerance is not None:
                if not (math.isfinite(self.args.tolerance) and self.args.tolerance > 0.0):
                    raise SystemExit(f"parapush sim: --tolerance: must be > 0, got {self.args.tolerance}")
                goal.position_tolerance = float(self.args.tolerance)
            goal.yaw_tolerance = -1.0
            yaw = self.args.yaw if self.args.yaw is not None else (0.0 if self.planner == "dgoc" else None)
            if yaw is not None:
                goal.goal_yaw, goal.yaw_tolerance = float(yaw), float(self.args.yaw_tolerance)
            print(f"parapush sim: pushing {goal.target_object!r} to ({goal.goal_x:+.3f}, {goal.goal_y:+.3f})"
                  + (f", yaw {goal.goal_yaw:+.2f} rad" if yaw is not None else "")
                  + f" with planner {self.planner}", flush=True)
            self.goal = goal
            self.start_wall = time.monotonic()
            self.sent = self.ResentGoal(self.client, goal, feedback_callback=self._on_feedback)
            return False
        lost = self.sent.lost
        try:
            handle = self.sent.poll()
        except TimeoutError as e:
            raise SystemExit(f"parapush sim: the planner did not answer: {e}") from None
        if self.sent.lost > lost:
            print(f"parapush sim: no answer to the goal within {self.sent.timeout:g} s (an answer Fast DDS lost?): "
                  f"sent it again", file=sys.stderr, flush=True)
        if handle is None:
            return False
        if not handle.accepted:
            self.result = None
            print("parapush sim: the planner rejected the goal", file=sys.stderr)
            return True
        if self.result is None:
            self.result = handle.get_result_async()
        return self.result.done()

    def _on_feedback(self, msg):
        self.late_plans = int(msg.feedback.late_plans)

    def summary(self, watch) -> dict:
        names = {v: k for k, v in vars(self.PushObject.Result).items() if k.isupper() and isinstance(v, int)}
        if self.result is None or not self.result.done():
            print("parapush sim: the push did not finish", flush=True)
            return {"outcome": "unfinished"}
        r = self.result.result().result
        out = {"outcome": names.get(r.outcome, str(r.outcome)), "message": r.message,
               "actions": int(r.actions_executed),
               "final_distance_m": float(r.final_distance) if r.final_distance >= 0.0 else None,  # -1: never seen
               "mean_planning_time_s": float(r.mean_planning_time), "planner": self.planner,
               "model": self.model if self.planner != "dgoc" else "quasistatic",
               "late_plans": self.late_plans, "wall_time_s": time.monotonic() - self.start_wall}
        print("\nparapush sim: push result")
        for k, v in out.items():
            print(f"  {k:22s} {v:.4f}" if isinstance(v, float) else f"  {k:22s} {v}")
        if self.late_plans and self.planner == "fast":
            print(f"  ({self.late_plans} cycle(s) ended after their hand-over: the plan was dropped and the running "
                  f"one, which covers its horizon, went on; other jobs on the cores make more of them late)")
        elif self.late_plans:
            print(f"  ({self.late_plans} plan(s) arrived after their switch: planning took longer than a control "
                  f"on this host, so the pusher ran on the previous plan meanwhile; other jobs on the cores make "
                  f"more of them late)")
        png = self._plot(watch)
        if png:
            out["png"] = str(png)
            print(f"  {'executed path':22s} {png}")
        return out

    def _plot(self, watch):
        if not watch.path:
            return None
        import numpy as np  # noqa: PLC0415
        from matplotlib.patches import Circle, Polygon  # noqa: PLC0415

        from .plots import pyplot, save_figure  # noqa: PLC0415
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(6, 7))
        sc = self.scene
        hx, hy = sc.table.half
        ax.add_patch(plt.Rectangle((-hx, -hy), 2 * hx, 2 * hy, fill=False, ec="0.5"))
        for o in sc.obstacles:
            r = o.radius if o.shape == "cylinder" else math.hypot(o.size[0], o.size[1]) / 2
            ax.add_patch(Circle(o.pose[:2], r, fc="0.3", alpha=0.8))
        ax.add_patch(Circle((self.goal.goal_x, self.goal.goal_y),
                            self.goal.position_tolerance or 0.02, fc="tab:green", alpha=0.3))
        px = [p[1] for p in watch.path]
        py = [p[2] for p in watch.path]
        ax.plot(px, py, "-", color="0.2", lw=1, label="pusher")
        for name in watch.path[-1][3]:
            pts = [p[3][name] for p in watch.path if name in p[3] and p[3][name][2]]
            if not pts:
                continue
            line, = ax.plot([q[0] for q in pts], [q[1] for q in pts], "-", lw=2, label=name)
            obj = sc.objects[sc.object_index(name)]
            for (x, y, _, yaw), ls in ((pts[0], ":"), (pts[-1], "-")):  # outline at the start and at the end
                if obj.shape == "cylinder":
                    ax.add_patch(Circle((x, y), obj.radius, fill=False, ec=line.get_color(), ls=ls))
                else:
                    ax.add_patch(Polygon(obj.footprint.corners(np.array([x, y, yaw])), fill=False,
                                         ec=line.get_color(), ls=ls))
        ax.set_aspect("equal")
        ax.set_xlabel("x (m, table frame)")
        ax.set_ylabel("y (m)")
        ax.legend(loc="upper right")
        ax.set_title(f"parapush sim: {sc.name}, " + (f"model {self.model}" if self.planner != "dgoc" else
                                                      f"planner {self.planner}"))
        out = Path(self.args.out)
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"sim_push_{sc.name}.png"
        save_figure(fig, path)
        return path
