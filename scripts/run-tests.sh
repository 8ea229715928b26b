#!/usr/bin/env bash
# make test's pytest runs (arguments: pytest's, e.g. --timeout=120 -k NAME): the suite on TEST_WORKERS pytest-xdist
# workers (default 2; 0: one process), a test file to a worker, then the tests marked `alone` in one process with
# nothing of the suite beside them. An `alone` test judges a real-time stack by what it achieved on the host's
# clock (the robot soak: the stack under the real ros2 launch on the system clock, whose follow check may e-stop
# an arm that a starved host did not move): busy loops on every core leave it enough (make test-stress), a second
# worker's tests on top of them did not (1 run of 1: an e-stop the soak could not explain). Both runs always go;
# the status is the first failure's (pytest's 5, nothing selected, counts as a pass: PYTEST_ARGS may pick one file).
set -u
trap 'exit 130' INT
trap 'exit 143' TERM
status=0
pytest_run() {
    python -m pytest test -q "$@"
    local r=$?
    [ "$r" = 5 ] && r=0
    [ "$status" = 0 ] && status=$r
    return 0
}
pytest_run -n "${TEST_WORKERS:-2}" --dist loadfile -m "not alone" "$@"
pytest_run -m alone "$@"
exit "$status"
