#!/usr/bin/env bash
# Check that parapush installs and runs on another Python: 3.10 is what ROS 2 Humble runs (Ubuntu
# 22.04), 3.12 what Jazzy runs (Ubuntu 24.04). By hand, not part of `make test`:
#
#   scripts/check-python.sh 3.10 [PYTEST_ARGS...]     (or 3.12; default PYTEST_ARGS: test -q)
#
# 1. creates a venv outside the repository ($PARAPUSH_CHECK_VENV, default /tmp/parapush-py<version>) with the
#    interpreter $PARAPUSH_PYTHON, else python<version> on PATH, else pyenv's <version>.x;
# 2. installs the pins of requirements.txt the way scripts/setup.sh does beside a system ROS: the lines tagged
#    "# [ros]" dropped, numpy held at that distro's system numpy (3.10: 1.21.5, Ubuntu 22.04's python3-numpy;
#    3.12: 1.26.4, Ubuntu 24.04's; PARAPUSH_CHECK_NUMPY=X.Y.Z for another, =pin for requirements.txt's own line),
#    wheels only; reinstalls only when requirements.txt or those settings changed;
# 3. runs the tests from the source tree (PYTHONPATH=src/parapush_ros, no colcon build) without rclpy: the ROS-free
#    tests run, every test that needs rclpy skips (PARAPUSH_REQUIRE_ROS is unset).
#
# What it does not check: rclpy and the message packages of a system ROS (no ROS install here), colcon.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

die() { printf '[check-python] ERROR: %s\n' "$*" >&2; exit 2; }
log() { printf '[check-python] %s\n' "$*"; }

[ $# -ge 1 ] || die "usage: $0 3.10|3.12 [PYTEST_ARGS...]"
VERSION="$1"; shift
[[ "$VERSION" =~ ^3\.[0-9]+$ ]] || die "the first argument is a Python version such as 3.10, not '$VERSION'"

PY="${PARAPUSH_PYTHON:-}"
if [ -z "$PY" ]; then
    if "python$VERSION" -c '' >/dev/null 2>&1; then  # (a pyenv shim for a version not selected exists but fails)
        PY="$(command -v "python$VERSION")"
    else
        pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
        PY="$(ls -d "$pyenv_root/versions/$VERSION".*/bin/python3 2>/dev/null | sort -V | tail -n 1 || true)"
    fi
fi
[ -n "$PY" ] && [ -x "$PY" ] || die "no Python $VERSION found (set PARAPUSH_PYTHON=/path/to/python$VERSION)"
got="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)"
[ "$got" = "$VERSION" ] || die "$PY is Python $got, not $VERSION"

case "${PARAPUSH_CHECK_NUMPY:-}" in
    "") case "$VERSION" in 3.10) NUMPY=1.21.5 ;; 3.12) NUMPY=1.26.4 ;; *) NUMPY=pin ;; esac ;;
    *) NUMPY="$PARAPUSH_CHECK_NUMPY" ;;
esac

VENV="${PARAPUSH_CHECK_VENV:-/tmp/parapush-py$VERSION}"
case "$VENV" in "$ROOT"|"$ROOT"/*) die "keep the venv outside the repository ($VENV)" ;; esac
if [ "$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)" != "$VERSION" ]; then
    rm -rf "$VENV"
    log "creating $VENV with $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"
    "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"

# The pins, filtered exactly as setup.sh filters them beside a system ROS.
REQ="$VENV/requirements.check.txt"
CON="$VENV/constraints.check.txt"
grep -v '#[[:space:]]*\[ros\]' requirements.txt > "$REQ"
if [ "$NUMPY" = "pin" ]; then
    grep -E '^numpy[=<>!~ ;]' requirements.txt | sed 's/#.*//' > "$CON"   # requirements.txt's own numpy line(s)
else
    echo "numpy==$NUMPY" > "$CON"
fi
stamp="$VENV/.parapush-check.sha256"
want="$(cat "$REQ" "$CON" | sha256sum | cut -d' ' -f1)"
if [ "$want" != "$(cat "$stamp" 2>/dev/null || true)" ]; then
    log "installing the non-ROS pins of requirements.txt with $(tr '\n' ' ' < "$CON")(PyTorch from PyPI: a CUDA build of several GB) ..."
    set +o pipefail
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$VPY" -m pip install --quiet --progress-bar off --only-binary=:all: \
        -r "$REQ" -c "$CON" 2>&1 | { grep -v -E "^WARNING: Location '.*' is ignored" || true; }
    rc=${PIPESTATUS[0]}
    set -o pipefail
    [ "$rc" -eq 0 ] || die "pip install failed (exit $rc): these pins do not install on Python $VERSION"
    echo "$want" > "$stamp"
else
    log "requirements unchanged since the last install into $VENV"
fi
"$VPY" -c 'import sys, numpy, scipy, mujoco, torch, matplotlib, sklearn
print("[check-python] Python %s: numpy %s, scipy %s, mujoco %s, torch %s, matplotlib %s, scikit-learn %s" % (
    sys.version.split()[0], numpy.__version__, scipy.__version__, mujoco.__version__, torch.__version__,
    matplotlib.__version__, sklearn.__version__))'
"$VPY" -c 'import rclpy' 2>/dev/null && die "rclpy is importable from $VENV: this check is for the ROS-free tests"

[ $# -gt 0 ] || set -- test -q
log "pytest $* (ROS-free: the tests that need rclpy skip)"
exec env -u PARAPUSH_REQUIRE_ROS PYTHONPATH="$ROOT/src/parapush_ros${PYTHONPATH:+:$PYTHONPATH}" \
    "$VPY" -m pytest -p no:cacheprovider --timeout="${TEST_TIMEOUT:-120}" "$@"
