"""The ``parapush`` command line: home of every entry point that is not a ROS node."""
from __future__ import annotations

import argparse
import os
import sys

from .arguments import output_dir, output_file


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line naming it (and where the help is), not the usage block first: the
    command line's one rule for errors, whether argparse or the command found them. Its sub-commands' parsers are
    of this class too (``add_subparsers`` makes them of the parent's)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="parapush", description="parapush: fast physics-based pushing with Parareal")
    sub = p.add_subparsers(dest="command", required=True)

    from .tools import demo  # noqa: PLC0415
    demo.add_parser(sub)
    from . import sim_runner  # noqa: PLC0415 (rclpy is imported only when `sim` runs)
    sim_runner.add_parser(sub)
    from .tools import soak  # noqa: PLC0415 (rclpy is imported only when `soak` runs)
    soak.add_parser(sub)
    from .tools import fidelity  # noqa: PLC0415
    fidelity.add_parser(sub)
    from .tools.learning import datagen, train, train_ensemble, train_primitive  # noqa: PLC0415 (torch: only when they run)
    datagen.add_parser(sub)
    train.add_parser(sub)
    train_ensemble.add_parser(sub)
    from .tools import demonstrations_cli  # noqa: PLC0415
    demonstrations_cli.add_parser(sub)
    from . import teleop  # noqa: PLC0415 (rclpy is imported only when `teleop` runs)
    teleop.add_parser(sub)
    train_primitive.add_parser(sub)

    models = sub.add_parser("models", help="list the predictive models (core/models/registry.py) and their options")
    models.set_defaults(func=_list_models)

    bench = sub.add_parser("bench", help="benchmarks: print a table, write JSON and PNG plots")
    bsub = bench.add_subparsers(dest="bench", required=True)
    outputs = argparse.ArgumentParser(add_help=False)
    outputs.add_argument("--out", type=output_dir, default="out", help="directory for JSON and plots (default: ./out)")
    outputs.add_argument("--json", type=output_file, default=None,
                         help="JSON result file (default: <out>/bench_<name>.json)")
    outputs.add_argument("--seed", type=int, default=0, help="random seed (results are deterministic given it)")
    from .tools.bench import calibrate, convergence, physics, speedup, support, table1  # noqa: PLC0415
    from .tools.bench import mpc as bench_mpc  # noqa: PLC0415
    for mod in (physics, table1, convergence, speedup, calibrate, bench_mpc, support):
        mod.add_parser(bsub, outputs)
    from .tools.bench import learned as bench_learned  # noqa: PLC0415
    bench_learned.add_parser(bsub, outputs)
    from .tools.bench import dgoc as bench_dgoc  # noqa: PLC0415
    bench_dgoc.add_parser(bsub, outputs)
    from .tools.bench import uncertainty as bench_uncertainty  # noqa: PLC0415
    bench_uncertainty.add_parser(bsub, outputs)
    from .tools.bench import adaptive as bench_adaptive  # noqa: PLC0415
    bench_adaptive.add_parser(bsub, outputs)
    return p


def _list_models(args):
    from .core.models.registry import MODELS, spec_names  # noqa: PLC0415
    for e in MODELS.values():
        print(f"{e.name:12s} {e.role:6s} {e.description}")
        for option, o in e.options.items():
            print(f"{'':19s} parameter {e.parameter(option)} (default {o.default!r}): {o.description}")
    print(f"model specs: {', '.join(spec_names())}")


def main(argv=None, own_process: bool = False) -> int:
    """Run one command; errors propagate (tests and scripts see the exception). ``own_process``: the ``parapush``
    executable, whose process the command may end itself (a teardown that hangs in rclpy)."""
    args = build_parser().parse_args(argv)
    args.own_process = own_process
    try:
        args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


def console_main(argv=None) -> int:
    """The ``parapush`` executable: a bad argument or input file is reported in one line that names it (exit
    status 2, as argparse does) instead of a traceback; ``PARAPUSH_TRACEBACK=1`` prints the traceback too."""
    import yaml  # noqa: PLC0415

    from .tools.study import StudyError  # noqa: PLC0415 (no Ray: imported only when a study runs on it)
    try:
        return main(argv, own_process=True)
    # our checks raise ValueError (and StudyError) with a message naming the field; OSError: a path that cannot be
    # read or written (a file where a directory is wanted, no permission, ...); a YAML file that does not parse
    except (ValueError, OSError, StudyError, yaml.YAMLError) as e:
        if os.environ.get("PARAPUSH_TRACEBACK") == "1":
            import traceback  # noqa: PLC0415
            traceback.print_exc()
        cmd = " ".join(a for a in (argv if argv is not None else sys.argv[1:])[:2] if not a.startswith("-"))
        print(f"parapush {cmd}: error: {error_line(e)}", file=sys.stderr)
        return 2


def error_line(e: BaseException) -> str:
    """One line for an error: an OSError as "PATH: reason", a multi-line message (a YAML parser's) joined."""
    if isinstance(e, OSError) and e.filename is not None:
        text = f"{e.filename}: {e.strerror or e}"
    else:
        text = str(e) or type(e).__name__
    return "; ".join(" ".join(line.split()) for line in text.splitlines() if line.strip())


if __name__ == "__main__":
    sys.exit(console_main())
