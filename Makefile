# parapush — workspace entry points. Everything runs inside .venv + the colcon overlay (see env.sh).
#   make setup      create .venv, install pinned requirements, build the colcon workspace (incremental, idempotent)
#   make test       lint (ruff) and run the test suite
#   make test-stress  the suite from a fresh clone of HEAD while busy loops occupy every core (scripts/test-stress.sh)
#   make demo       the main job: the closed-loop sim, one PushObject goal around the obstacle (parapush sim --push)
#   make build      force a colcon build
#   make clean      remove build/ install/ log/ (keeps .venv)
#   make distclean  clean + remove .venv and caches

SHELL := /bin/bash
.DEFAULT_GOAL := setup

# Per-test timeout (s, pytest-timeout) and a wall-clock cap for the whole run (s).
TEST_TIMEOUT ?= 120
TEST_WALL_TIMEOUT ?= 1800
PYTEST_ARGS ?=

.PHONY: setup test test-stress demo build clean distclean

setup:
	@./scripts/setup.sh

test: setup
	./env.sh ruff check .
	PARAPUSH_REQUIRE_ROS=1 timeout --signal=INT --kill-after=30 $(TEST_WALL_TIMEOUT) ./env.sh python -m pytest test -q --timeout=$(TEST_TIMEOUT) $(PYTEST_ARGS)

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
