#!/usr/bin/env bash
# make test-stress: the test suite from a fresh clone of this repository's HEAD while busy loops occupy every core.
#
# The suite must not depend on host speed (its worlds run on simulated time): a slow or loaded host makes it slower,
# never different. This checks that claim the hard way: `git clone` of HEAD (committed work only) into a temporary
# directory, `make setup` there (unloaded), then one busy-loop process per core (STRESS_LOOPS, default: nproc) for
# the whole of `make test`. The exit status is make test's. KEEP_STRESS_CLONE=1 keeps the clone for a look after.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOOPS="${STRESS_LOOPS:-$(nproc)}"
DEST="$(mktemp -d "${TMPDIR:-/tmp}/parapush-stress.XXXXXX")"
PIDS=()

cleanup() {
    [ "${#PIDS[@]}" -gt 0 ] && kill "${PIDS[@]}" 2>/dev/null
    if [ "${KEEP_STRESS_CLONE:-0}" = 1 ]; then echo "[stress] clone kept in $DEST"; else rm -rf "$DEST"; fi
}
trap cleanup EXIT

echo "[stress] fresh clone of $(git -C "$ROOT" rev-parse --short HEAD) in $DEST"
git clone -q "$ROOT" "$DEST/parapush"
make -C "$DEST/parapush" setup
echo "[stress] $LOOPS busy loop(s) on $(nproc) core(s) for the whole test run"
for _ in $(seq "$LOOPS"); do
    bash -c 'while :; do :; done' &
    PIDS+=($!)
done
T0=$SECONDS
status=0
# the clone's ../shared is not this checkout's: name the ros2 launch sources that `make test` here would use, so
# that the real-launch tests run under load too
LAUNCH="$(cd "$ROOT" && realpath -m "${LAUNCH_SOURCES:-../shared/ros2-launch}")"
make -C "$DEST/parapush" test LAUNCH_SOURCES="$LAUNCH" || status=$?
echo "[stress] make test exited $status after $((SECONDS - T0)) s under load"
exit $status
