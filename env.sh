#!/usr/bin/env bash
# parapush environment wrapper.
#
#   ./env.sh CMD [ARGS...]   run CMD inside the built workspace environment (from any directory)
#   source env.sh            prepare the current (bash) shell the same way
#
# It sources /opt/ros/<distro>/setup.bash when a system ROS 2 exists, activates .venv, sources the colcon overlay
# install/setup.bash, and puts the directory holding the `parapush` console script on PATH.
# Run `make setup` first.

_parapush_env() {
    local root venv ros_setup d restore_u=0 sp
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
    venv="$root/.venv"

    if [ ! -x "$venv/bin/python" ] || [ ! -f "$root/install/setup.bash" ]; then
        echo "env.sh: workspace not built ($root/.venv or install/setup.bash missing) — run 'make setup' first" >&2
        return 1
    fi

    # ROS / colcon setup scripts read unset variables: relax nounset while sourcing them.
    case $- in *u*) restore_u=1; set +u ;; esac

    ros_setup=""
    if [ "${PARAPUSH_USE_SYSTEM_ROS:-1}" != "0" ]; then
        if [ -n "${ROS_DISTRO:-}" ] && [ -f "/opt/ros/${ROS_DISTRO}/setup.bash" ]; then
            ros_setup="/opt/ros/${ROS_DISTRO}/setup.bash"
        else
            for d in jazzy humble kilted rolling iron; do
                if [ -f "/opt/ros/$d/setup.bash" ]; then ros_setup="/opt/ros/$d/setup.bash"; break; fi
            done
        fi
    fi
    # shellcheck disable=SC1090
    [ -n "$ros_setup" ] && source "$ros_setup"

    # shellcheck disable=SC1091
    source "$venv/bin/activate"

    if [ -z "$ros_setup" ]; then
        # pip ROS: the venv prefix holds the wheels' share/ament_index and CMake configs (quirk 1 of the wheels).
        case ":${AMENT_PREFIX_PATH:-}:" in *":$venv:"*) ;; *) export AMENT_PREFIX_PATH="$venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}" ;; esac
        case ":${CMAKE_PREFIX_PATH:-}:" in *":$venv:"*) ;; *) export CMAKE_PREFIX_PATH="$venv${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}" ;; esac
        # Do once here what the wheels' .pth bootstrapper otherwise does by re-executing every python process:
        # put the venv's lib/ and site-packages/ros_*.libs on LD_LIBRARY_PATH.
        if [ -z "${_ROS_WHEELS_BOOTSTRAP_COMPLETE:-}" ]; then
            local libs="$venv/lib" x
            for sp in "$venv"/lib/python3*/site-packages; do
                for x in "$sp"/ros_*.libs; do [ -d "$x" ] && libs="$libs:$x"; done
            done
            export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
            export _ROS_WHEELS_BOOTSTRAP_COMPLETE=1
        fi
    fi

    # shellcheck disable=SC1091
    source "$root/install/setup.bash"

    # Console scripts of ament_python packages land in install/<pkg>/lib/<pkg> (setup.cfg), which is not on PATH.
    case ":$PATH:" in *":$root/install/parapush_ros/lib/parapush_ros:"*) ;; *) export PATH="$root/install/parapush_ros/lib/parapush_ros:$PATH" ;; esac
    export PARAPUSH_ROOT="$root"

    [ "$restore_u" = 1 ] && set -u
    return 0
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then
    # sourced: prepare the current shell
    if _parapush_env; then
        unset -f _parapush_env
        echo "parapush environment ready (root: $PARAPUSH_ROOT)" >&2
    else
        unset -f _parapush_env
        return 1
    fi
else
    if [ "$#" -eq 0 ]; then
        echo "usage: ./env.sh CMD [ARGS...]   |   source env.sh" >&2
        exit 2
    fi
    _parapush_env || exit 1
    exec "$@"
fi
