"""Node scaffolding: the one ``main()`` of every node executable, parameters declared from the config dataclasses,
and the lifecycle (managed node) helpers.

Lifecycle: a node whose output moves the robot (``velocity_commander``, ``mpc_planner``) is an
``rclpy.lifecycle`` node. It starts *unconfigured* and sends nothing; ``configure`` builds what it needs,
``activate`` enables its output, ``deactivate`` stops the robot and disables it. With its parameter ``autostart``
(true in ``config/<node>.yaml``, so under both launch files and ``parapush sim``) the node configures and activates
itself as soon as it has started (``autostart`` here); with ``autostart: false`` it waits for
``ros2 lifecycle set /<node> configure`` / ``activate``. Not launch_ros' lifecycle events: they hang on one DDS service
call each, and with Fast DDS on a loaded host a ``change_state`` request sent as soon as the service is discovered
was seen never to arrive (both managed nodes still unconfigured 300 s later), so the stack never started.
rclpy swallows an exception raised in a transition callback (the transition just fails); ``transition`` below logs
it first, so a bad parameter is said in the log.
"""
from __future__ import annotations

import contextlib
import faulthandler
import functools
import os
import select
import signal
import sys
import threading
from pathlib import Path

from ..core.config import ConfigError, knobs
from ..executable import STOP_SIGNALS, hear_stop, say

SIGNAL_POLL_S = 0.05  # s: how often the main thread looks whether a stop was asked or the spin ended
# s the stop-signal thread waits for a signal before it re-arms the watchdog (each arming starts a thread of
# faulthandler's)
LISTEN_S = 1.0
STOP_LIMIT_S = 20.0  # s a node's stop may take after the signal (its own three waits are bounded by 5 s each)
DESTROY_LIMIT_S = 5.0  # s the middleware's cleanup may take once the node has stopped (it takes milliseconds)
# s a node may go without any of its Python threads running (a C call that holds the GIL: a deadlock below Python),
# or its main thread without getting to its stop once a stop signal came (a C call stuck without the GIL, in a
# single-threaded node's spin): no signal reaches such a node (a planner was once left running 60 s after SIGTERM,
# mocap_ingest once), so it ends with every thread's traceback and status 1, and the launch ends the stack
WEDGED_LIMIT_S = 30.0


def exit_after(seconds: float, status: int) -> bool:
    """End the process with ``_exit(status)`` after ``seconds``, from a thread of the C library (a POSIX timer
    with ``SIGEV_THREAD``), not from Python: rclpy's ``destroy_node`` can block below Python holding the GIL, where
    no Python thread runs again, and faulthandler's watchdog (which needs no GIL either) can only exit with 1.
    Returns False where the C library has no POSIX timers (the caller keeps faulthandler's exit then)."""
    import ctypes  # noqa: PLC0415

    class SigevThread(ctypes.Structure):
        _fields_ = [("function", ctypes.c_void_p), ("attribute", ctypes.c_void_p)]

    class SigevUnion(ctypes.Union):
        _fields_ = [("pad", ctypes.c_int * 12), ("thread", SigevThread)]

    class Sigevent(ctypes.Structure):  # glibc's struct sigevent (64 bytes on 64-bit Linux)
        _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                    ("un", SigevUnion)]

    class Timespec(ctypes.Structure):
        _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]

    class Itimerspec(ctypes.Structure):
        _fields_ = [("interval", Timespec), ("value", Timespec)]

    sigev_thread, clock_monotonic = 2, 1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        timer_create, timer_settime, c_exit = libc.timer_create, libc.timer_settime, libc._exit
    except (OSError, AttributeError):
        return False
    event = Sigevent(value=status, notify=sigev_thread)  # _exit(int) takes the sigval's int (its low 32 bits)
    event.un.thread.function = ctypes.cast(c_exit, ctypes.c_void_p).value
    timer = ctypes.c_void_p()
    if timer_create(clock_monotonic, ctypes.byref(event), ctypes.byref(timer)) != 0:
        return False
    whole = int(seconds)
    when = Itimerspec(value=Timespec(whole, int((seconds - whole) * 1e9)))
    return timer_settime(timer, 0, ctypes.byref(when), None) == 0


def take_back_sigint() -> bool:
    """Give SIGINT back its usual handler where this process inherited it ignored; True if it did.

    A shell script's background job (``ros2 launch ... &`` in a start script, ``nohup make test &``) starts with
    SIGINT ignored. ``ros2 launch`` hears SIGINT only through Python's handler, so it would then ignore ``kill -INT``
    and Ctrl-C for good: it passes no stop on to its processes and, if one of them does not end by itself, never
    ends (its SIGTERM / SIGKILL escalation starts from that SIGINT). Only the main thread may set a handler."""
    if signal.getsignal(signal.SIGINT) != signal.SIG_IGN or threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return True


LAUNCH_PID_ENV = "PARAPUSH_LAUNCH_PID"  # our launch files give each node the pid of the ros2 launch that starts it


def stop_with_parent(stop: threading.Event) -> None:
    """Stop this node as on Ctrl-C when the process that started it dies. ``ros2 launch`` given SIGTERM (or
    SIGQUIT, or killed) exits and leaves its processes running ("using SIGTERM can result in orphaned processes"):
    a commander would go on driving the arm with a planner mid-push. On Linux the kernel sends this process
    SIGINT when its parent dies (``prctl(PR_SET_PDEATHSIG)``); a parent already gone sets ``stop`` at once. So does
    a launch (``LAUNCH_PID_ENV``) that ended while this node was still starting (its imports take seconds): this
    process was then handed to another parent before it could ask, and nothing would ever stop it."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes  # noqa: PLC0415
    name = os.path.basename(sys.argv[0])
    parent = os.getppid()
    pr_set_pdeathsig = 1
    if ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGINT), 0, 0, 0) != 0:
        say(f"{name}: cannot ask for a signal at the parent's death (errno {ctypes.get_errno()}): this node "
            f"outlives a launch that is killed")
    launch = os.environ.get(LAUNCH_PID_ENV, "")
    if os.getppid() != parent:  # it died before the request took effect
        stop.set()
    elif launch.isdigit() and _ended(int(launch)):
        stop.set()
        say(f"{name}: the ros2 launch that started this node (pid {launch}) has already ended: stopping")


def _ended(launch: int) -> bool:
    """Whether the process ``launch`` is no longer among this one's ancestors (not only its parent: a launch-prefix
    may sit between), read from /proc; False where that cannot be told."""
    pid, seen = os.getppid(), set()
    while pid not in seen:
        if pid == launch:  # (a launch may be pid 1: a container's entry point)
            return False
        if pid <= 1:
            return True
        seen.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # after the command name (which may hold spaces): state, ppid
    return False


def listen_for_stop(stop: threading.Event, parent: int | None = None):
    """Hear SIGINT and SIGTERM on a thread of their own (``stop`` is set), and keep faulthandler's watchdog
    (``WEDGED_LIMIT_S``, no GIL needed) re-armed while that thread runs; returns the function that ends both.
    Only the main thread may call it, after it has installed its Python handlers for those signals. With
    ``parent`` (the pid of the process that started this one) the thread also sets ``stop`` once that process has
    ended (this one then has another parent), whatever became of the kernel's parent-death signal
    (``stop_with_parent``): a node once kept running 60 s after its ``ros2 launch`` died of SIGTERM, hearing
    nothing.

    Python runs a signal's handler only on the main thread, between two bytecodes. A single-threaded node spins
    there, so a C call stuck in its spin left it deaf for ever (mocap_ingest still running 60 s after SIGTERM, in CI).
    Python's C-level handler, on whichever thread the kernel picks, also writes the signal's number to the wakeup fd
    (``signal.set_wakeup_fd``): this thread reads it, so a stop is heard whatever the main thread does. Once one is
    heard the watchdog is re-armed no more, so a main thread that cannot get to its stop ends ``WEDGED_LIMIT_S``
    later; a C call that holds the GIL (no Python thread runs) ends the node as long after it began, stop or not."""
    read, write = os.pipe()
    os.set_blocking(write, False)  # (the C handler must never block)
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    done = threading.Event()
    numbers = {int(sig) for sig in STOP_SIGNALS}

    def listen():
        while not done.is_set():
            faulthandler.dump_traceback_later(WEDGED_LIMIT_S, exit=True)
            if select.select([read], [], [], LISTEN_S)[0] and numbers & set(os.read(read, 64)):
                stop.set()
                return
            if parent is not None and os.getppid() != parent and not done.is_set():
                stop.set()  # first: its launch gone, the line below goes to a broken pipe (``say``)
                say(f"{os.path.basename(sys.argv[0])}: the process that started it (pid {parent}) has ended: "
                    f"stopping")
                return

    listener = threading.Thread(target=listen, name="stop-signals", daemon=True)
    listener.start()

    def stop_listening():
        if done.is_set():
            return
        done.set()
        with contextlib.suppress(BlockingIOError):  # (a full pipe wakes it as well)
            os.write(write, b"\0")  # wakes the listener at once: no signal's number
        listener.join()
        faulthandler.cancel_dump_traceback_later()
        signal.set_wakeup_fd(-1)
        os.close(read)
        os.close(write)
    return stop_listening


def run_node(node_class, args=None, num_threads: int = 1, stop: threading.Event | None = None):
    """The whole ``main()`` of a node executable: init, spin until SIGINT (Ctrl-C), SIGTERM or shutdown (on
    ``num_threads`` threads where the node runs callbacks concurrently), then the teardown of ``ros/spinning.py``'s
    docstring.

    The node owns SIGINT and SIGTERM (rclpy's own handlers are not installed; ``listen_for_stop`` hears them):
    rclpy's would invalidate the context before the node could say anything, so a node that commands motion could
    not send its last zero (``Failed to publish: publisher's context is invalid``). Here a signal only ends the spin
    loop; the node's ``stop_activity`` then sends its zero on a live context, and only then is the node destroyed. A
    node that cannot start (a parameter it cannot take) says so in one line on stderr and exits with status 2. One
    whose parent process dies stops the same way (``stop_with_parent``). ``stop``: the event the executable's
    entry point (``parapush_ros.executable``) set on a signal heard while it imported the node; a node stopped
    that early ends here with status 0 before it is built."""
    import rclpy  # noqa: PLC0415
    from rclpy.exceptions import ParameterException  # noqa: PLC0415
    from rclpy.signals import SignalHandlerOptions  # noqa: PLC0415

    from ..core.scene.spec import SceneError  # noqa: PLC0415
    from .spinning import SpinningNodes  # noqa: PLC0415

    stop = hear_stop(stop)  # (run on the main thread when it can; listen_for_stop hears them anyway)
    stop_listening = listen_for_stop(stop, parent=os.getppid())
    stop_with_parent(stop)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    try:
        if stop.is_set():
            say(f"{os.path.basename(sys.argv[0]) or node_class.__name__}: stopped while starting")
            return
        try:
            node = node_class()
        except (ValueError, LookupError, ConfigError, ParameterException) as e:  # SceneError is a ValueError;
            # ParameterException: a value of another type than declared (rclpy's text names the parameter)
            what = f"parameter scene: {e}" if isinstance(e, SceneError) else str(e)
            print(f"{os.path.basename(sys.argv[0]) or node_class.__name__}: cannot start: {what}", file=sys.stderr,
                  flush=True)
            raise SystemExit(2) from None
        autostart(node)  # before the spin: the transitions' own waits run on timers, never block on a service
        spinning = SpinningNodes(num_threads=num_threads, name=node.get_name())
        spinning.add(node)
        try:
            if num_threads == 1:  # spun right here: a single-threaded executor costs a node a fraction of the CPU
                while not stop.is_set() and rclpy.ok():
                    spinning.executor.spin_once(timeout_sec=SIGNAL_POLL_S)
            else:  # a callback that raised is kept by the spin thread: the node ends as the single-threaded one
                spinning.start()  # does (fail-safe: the launch then ends and the arm is sent its zero)
                while not stop.wait(SIGNAL_POLL_S) and rclpy.ok() and spinning.spin.running and not spinning.errors:
                    pass
        except Exception as e:
            log_failure(node, "the spin", e)
            raise
        finally:  # stop spinning, let the node stop (its zeros go out), wait for callbacks, destroy it
            stop_listening()
            # faulthandler's watchdog thread needs no GIL: a stop that hangs ends with its traceback and status 1
            faulthandler.dump_traceback_later(STOP_LIMIT_S, exit=True)
            try:
                errors = spinning.stop(timeout=5.0)
            except Exception as e:
                log_failure(node, "the stop", e)
                raise
            faulthandler.cancel_dump_traceback_later()
            # The node has stopped: what is left is the middleware's cleanup (and the interpreter's exit, which
            # destroys the context). rclpy 7.1's destroy_node can block there for ever, below Python and holding
            # the GIL (about once in 70 stops of the whole stack; seen in a plain rclpy.spin() program too). That
            # is no fault of the node, whose work ended above: its traceback is printed, and the process exits
            # with the status the stop earned; DDS peers then drop it when its participant's lease runs out.
            faulthandler.dump_traceback_later(DESTROY_LIMIT_S, exit=False)
            if not exit_after(DESTROY_LIMIT_S + 0.2, 1 if errors else 0):
                faulthandler.dump_traceback_later(DESTROY_LIMIT_S, exit=True)
            errors = spinning.destroy()
        if errors:
            raise SystemExit(1)
    finally:
        stop_listening()  # (a node that could not start)
        if rclpy.ok():
            rclpy.shutdown()
        # ros2 launch sends its own SIGINT after the terminal's: one that lands while the interpreter finalises
        # would meet the default action (exit -2), as Python resets its handlers there, but not an ignored signal
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


def log_failure(node, what: str, error: BaseException) -> None:
    """An exception that ends a node, with its traceback, in the node's ROS log file too (``~/.ros/log``): its
    stderr, where Python prints it, is a pipe to a ``ros2 launch`` that may be gone (ended by SIGTERM: the stop
    of a node is then the one moment no one reads it)."""
    import traceback  # noqa: PLC0415
    with contextlib.suppress(Exception):  # (the logger may be gone with the context)
        node.get_logger().fatal(f"{what} raised {error!r}:\n"
                                + "".join(traceback.format_exception(type(error), error, error.__traceback__)))


def node_main(node_class, num_threads: int = 1):
    """The ``main(args=None, stop=None)`` of a node module, which its executable's entry point
    (``parapush_ros.executable``) runs: ``main = node_main(MyNode)``."""
    def main(args=None, stop: threading.Event | None = None):
        run_node(node_class, args, num_threads, stop)
    main.__doc__ = f"Run {node_class.__name__} until Ctrl-C or shutdown."
    return main


def declare_config(node, config_class, ns: str = "", read_only: bool = True, **given):
    """Declare the settings of ``config_class`` (its ``core.config.knob`` fields) on ``node`` as parameters
    ``<ns><name>`` with their defaults and descriptions, and return the typed config built from their values
    (``given`` fills the fields that are not settings). An invalid value raises ``ValueError`` in the one format
    "parameter <ns><name>: must be ..., got ...". Read-only unless the node applies sets itself (see
    ``ros.params.declare_all`` and ``config_setter``)."""
    from rcl_interfaces.msg import ParameterDescriptor  # noqa: PLC0415

    values = {}
    for name, (default, description) in knobs(config_class).items():
        node.declare_parameter(ns + name, default, ParameterDescriptor(description=description, read_only=read_only))
        values[name] = node.get_parameter(ns + name).value
    try:
        return config_class(**values, **given)
    except ConfigError as e:
        raise ValueError(f"parameter {ns}{e}") from None


def config_setter(config_getter, apply, ns: str = ""):
    """A set-parameters callback (``node.add_on_set_parameters_callback``) for a config declared writable with
    ``declare_config(..., read_only=False)``: the settings in a set are checked by rebuilding the config with
    them (``dataclasses.replace``: its ``__post_init__`` is the one check), a bad value is refused with the
    ``ConfigError`` text ("parameter max_speed: must be > 0, got -1.0") and a good config is handed to
    ``apply(config, changed names)`` at once; ``apply`` may refuse it by returning the reason (a setting that
    cannot change in the node's present state), having changed nothing. Other parameters (``use_sim_time``) pass
    through to ROS."""
    import dataclasses  # noqa: PLC0415

    from rcl_interfaces.msg import SetParametersResult  # noqa: PLC0415

    def on_set(params):
        config = config_getter()
        names = set(knobs(type(config)))
        changes = {p.name[len(ns):]: p.value for p in params
                   if p.name.startswith(ns) and p.name[len(ns):] in names}
        if not changes:
            return SetParametersResult(successful=True)
        try:
            new = dataclasses.replace(config, **changes)
        except ConfigError as e:
            return SetParametersResult(successful=False, reason=f"parameter {e.within(ns)}")
        refused = apply(new, sorted(changes))
        if refused:
            return SetParametersResult(successful=False, reason=refused)
        return SetParametersResult(successful=True)
    return on_set


def transition(method):
    """Decorate a lifecycle transition callback (``on_configure(self, state)`` ...): returning None means
    SUCCESS; an exception is logged with the node's logger and the transition FAILS (the node stays where it was),
    instead of rclpy's silent ERROR."""
    from rclpy.lifecycle import TransitionCallbackReturn  # noqa: PLC0415

    @functools.wraps(method)
    def wrapper(self, state):
        try:
            ret = method(self, state)
        except Exception as e:  # noqa: BLE001 - a failed transition is reported, never raised into rclpy
            self.get_logger().error(f"{method.__name__[3:]} failed: {e}")
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS if ret is None else ret
    return wrapper


class ManagedEntities:
    """Mixin (before ``LifecycleNode`` in the bases) for what a lifecycle node's ``configure`` creates: it appends
    ``(destroy function, entity)`` to ``self._entities``; ``cleanup`` and ``shutdown`` destroy them in reverse, then
    call the node's ``_forget()`` to drop its references; ``shutdown`` deactivates an active node first (its own
    ``on_deactivate`` stops the robot). ``_active`` says whether the node is active."""

    _active = False
    _entities: list

    @transition
    def on_cleanup(self, state):
        self._take_down()

    @transition
    def on_shutdown(self, state):
        if self._active:
            self.on_deactivate(state)
        self._take_down()

    def destroy_node(self):
        """rclpy's ``destroy_node`` destroys a node's publishers, services and timers but not its waitables: an
        action server made by configure would outlive a node destroyed without its shutdown transition (``parapush
        sim``, a test) until garbage collection, still advertised by the process's DDS participant and answering no
        one. A client in that process then took it for the planner and sent it its goal (a launch test after node
        tests: the goal was never answered). What configure made goes with the node."""
        self._take_down()
        super().destroy_node()

    def _take_down(self):
        for destroy, entity in reversed(getattr(self, "_entities", [])):
            destroy(entity)
        self._entities = []
        self._forget()

    def _forget(self):
        """Drop the node's references to what configure made (the entities themselves are destroyed)."""


def period_clock(node):
    """The clock a node's periodic work (its timers, the ages it measures) runs on: the node's clock under
    ``use_sim_time``, where the simulated world sets the pace; otherwise the steady clock. An rcl timer on the system
    clock stalls after that clock steps back (an NTP step) until real time has made the step up (ros2/rclpy#1490):
    the node would fall silent for as long as the step, instead of reporting what the step did."""
    from rclpy.clock import Clock, ClockType  # noqa: PLC0415

    if node.get_parameter("use_sim_time").value:
        return node.get_clock()
    return Clock(clock_type=ClockType.STEADY_TIME)


def autostart(node) -> bool:
    """Configure and activate a lifecycle node whose parameter ``autostart`` is true (in the caller's thread, before
    it spins); whether it is active. A transition that fails leaves the node where it stopped, running, with the
    reason in its log and how to retry: the stack stays up (the planner refuses goals saying why), as a node managed
    by hand would."""
    if not (node.has_parameter("autostart") and node.get_parameter("autostart").value):
        return False
    try:
        bring_up(node)
    except RuntimeError as e:
        node.get_logger().error(f"autostart: {e}; the node stays up (`ros2 lifecycle set /{node.get_name()} "
                                f"<transition>` to retry)")
        return False
    return True


def bring_up(node):
    """Configure, then activate a lifecycle node (what the launch files do with events), in the caller's thread;
    returns the node. ``RuntimeError`` names the node and the transition that failed (its log says why)."""
    from rclpy.lifecycle import TransitionCallbackReturn  # noqa: PLC0415

    for name, trigger in (("configure", node.trigger_configure), ("activate", node.trigger_activate)):
        ret = trigger()
        if ret != TransitionCallbackReturn.SUCCESS:
            raise RuntimeError(f"{node.get_name()}: {name} failed ({ret.to_label()}); see its log")
    return node
