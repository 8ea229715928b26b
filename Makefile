# parapush — workspace entry points. Everything runs inside .venv + the colcon overlay (see env.sh).
#   make setup      create .venv, install pinned requirements, build the colcon workspace (incremental, idempotent)
#   make test       lint (ruff) and run the test suite; where ../shared/ros2-launch exists (CI) it first builds the
#                   real `ros2 launch` overlay into build/ros2-launch and runs the launch tests with it (required)
#   make test-stress  the suite from a fresh clone of HEAD while busy loops occupy every core (scripts/test-stress.sh)
#   make demo       the main job: the closed-loop sim, one PushObject goal around the obstacle (parapush sim --push)
#   make build      force a colcon build
#   make clean      remove build/ install/ log/ (keeps .venv)
#   make distclean  clean + remove .venv and caches

SHELL := /bin/bash
.DEFAULT_GOAL := setup

# Per-test timeout (s, pytest-timeout) and a wall-clock cap for the whole run (s). The cap ends a hung run with a
# status well inside CI's 90 min; it is not a speed check, and leaves room for a slow or loaded machine (the suite's
# times, quiet and under make test-stress: docs/development.md).
TEST_TIMEOUT ?= 120
TEST_WALL_TIMEOUT ?= 3600
# pytest-xdist workers (0: one process). About half the suite's time is real-time waiting (soaks, real launches,
# nodes in their own processes), half CPU: two workers overlap them on a 2-core machine (889 tests in 9.0 min against
# 15.5 min in one process). A test file stays on one worker (--dist loadfile: its module fixtures run once); every
# worker is its own process with its own ROS domain (test/conftest.py); tests marked `alone` run after, by
# themselves (scripts/run-tests.sh says why).
export TEST_WORKERS ?= 2
PYTEST_ARGS ?=
# The real ROS 2 launch system for machines without a ROS 2 install (see ../shared/ros2-launch/README.md)
LAUNCH_SOURCES ?= ../shared/ros2-launch
LAUNCH_OVERLAY := build/ros2-launch

.PHONY: setup test test-stress demo build clean distclean

setup:
	@./scripts/setup.sh

test: setup
	./env.sh ruff check .
	@if [ -x "$(LAUNCH_SOURCES)/build.sh" ] && [ ! -x "$(LAUNCH_OVERLAY)/run" ]; then \
		echo "make test: building the ros2 launch overlay ($(LAUNCH_SOURCES) -> $(LAUNCH_OVERLAY))"; \
		"$(LAUNCH_SOURCES)/build.sh" "$(LAUNCH_OVERLAY)"; fi
	@if [ -x "$(LAUNCH_OVERLAY)/run" ]; then run="$(LAUNCH_OVERLAY)/run"; export PARAPUSH_REQUIRE_LAUNCH=1; \
	else run=./env.sh; fi; \
	PARAPUSH_REQUIRE_ROS=1 timeout --signal=INT --kill-after=30 $(TEST_WALL_TIMEOUT) $$run scripts/run-tests.sh --timeout=$(TEST_TIMEOUT) $(PYTEST_ARGS)

test-stress:
	./scripts/test-stress.sh

demo: setup
	./env.sh parapush sim --push --out out

build:
	@PARAPUSH_FORCE_BUILD=1 ./scripts/setup.sh

clean:
	rm -rf build install log

distclean: clean
	rm -rf .venv .pytest_cache
	find . -name __pycache__ -type d -prune -not -path './.git/*' -exec rm -rf {} +
