"""The entry points of the node executables (``setup.py``'s NODE_ENTRY_POINTS, one per ``bringup.NODES`` entry).

Each hears SIGINT and SIGTERM from its first line, before it imports its node module (rclpy, MuJoCo, torch: half a
second to several on a loaded host). A Ctrl-C in that time met Python's default handler: the node died of it with
a traceback and status -2, and ``ros2 launch`` reported ``parareal_predictor`` so when the stack was stopped while
it was still starting. Here a stop heard that early is kept and the node ends cleanly (``ros.node.run_node``) as
soon as its imports are done. Only the standard library is imported in this module, so what is left unguarded is
the interpreter's own start."""
from __future__ import annotations

import contextlib
import importlib
import signal
import sys
import threading

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def say(text: str) -> None:
    """One line on stderr that never raises: a node's stderr is a pipe to its ``ros2 launch``, and a launch ended
    by SIGTERM or SIGKILL leaves it broken (Python ignores SIGPIPE, so the write raises ``BrokenPipeError``). What
    a node says while it stops (its launch gone) must not end the thread that says it before it acts."""
    with contextlib.suppress(OSError, ValueError):  # a broken pipe; a closed stream
        print(text, file=sys.stderr, flush=True)


def hear_stop(stop: threading.Event | None = None) -> threading.Event:
    """Install the handlers that set ``stop`` (a new event if None) on SIGINT or SIGTERM; returns it."""
    stop = threading.Event() if stop is None else stop
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda signum, frame: stop.set())
    return stop


def start(module: str) -> None:
    """Hear a stop, then import ``module`` and run its ``main`` (``ros.node.node_main``) with that stop."""
    stop = hear_stop()  # first: the import below takes the time
    importlib.import_module(module).main(stop=stop)


def _entry(module: str):
    def main():
        start(module)
    main.module = module
    main.__doc__ = f"Run the node of {module} until Ctrl-C, SIGTERM or shutdown."
    return main


parareal_predictor = _entry("parapush_ros.nodes.parareal_predictor")
mpc_planner = _entry("parapush_ros.nodes.mpc_planner")
mocap_ingest = _entry("parapush_ros.nodes.mocap_ingest")
velocity_commander = _entry("parapush_ros.nodes.velocity_commander")
mujoco_sim = _entry("parapush_ros.nodes.mujoco_sim")
natnet_bridge = _entry("parapush_ros.nodes.natnet_bridge")
pose_recorder = _entry("parapush_ros.nodes.pose_recorder")
