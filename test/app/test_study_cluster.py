"""The study engine on a real two-node Ray cluster on this machine (issue 32): a head and a second node, each with
one CPU (the second with its own resource ``node2``), started here in a temporary directory and stopped after (also
on failure). A small ``datagen --primitive`` study runs through ``--ray ADDRESS``: one unit's worker kills itself
(SIGKILL) the first time, Ray retries it; the study completes on both nodes with every unit finished once, its
chunks identical to the serial run's; a re-run does no unit; a changed setting is refused by name; a unit that
keeps failing is reported by name and a re-run does only it. Then a driver killed mid-study (``--workers 1``) is
resumed without losing or redoing a unit."""
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import psutil
import pytest

from parapush_ros.tools.learning import chunks, datagen_primitive
from parapush_ros.tools.study import ENV_FAULT, Study

RAY = str(Path(sys.executable).with_name("ray"))
CHUNK = 4  # pushes per chunk: tiny units, the test is about the engine
# the cluster's own token (Ray's token authentication), given to its nodes and drivers only: not ~/.ray/auth_token,
# which a local ray.init() of another run writes and `ray start` would otherwise pick up
AUTH = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def ray_start(temp, *args):
    p = free_ports(6)
    cmd = [RAY, "start", "--num-cpus", "1", "--disable-usage-stats", "--object-store-memory", str(80 * 2 ** 20),
           "--node-ip-address", "127.0.0.1", "--min-worker-port", str(20000 + p[0] % 10000),
           "--max-worker-port", str(20000 + p[0] % 10000 + 60), "--metrics-export-port", str(p[1]),
           "--dashboard-agent-listen-port", str(p[2]), "--dashboard-agent-grpc-port", str(p[3]),
           "--runtime-env-agent-port", str(p[4]), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, start_new_session=True,
                       env={**os.environ, "RAY_TMPDIR": temp, **AUTH})
    assert r.returncode == 0, f"{' '.join(cmd)}:\n{r.stdout}\n{r.stderr}"


def stop_cluster(temp):
    """Stop the processes of this test's cluster only: those whose command line names its temporary directory,
    and their descendants (the workers)."""
    procs = {}
    for p in psutil.process_iter(["cmdline"]):
        if any(temp in a for a in (p.info["cmdline"] or [])):
            procs[p.pid] = p
            for c in p.children(recursive=True):
                procs[c.pid] = c
    for p in procs.values():
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(signal.SIGKILL)
    psutil.wait_procs(list(procs.values()), timeout=10)


@pytest.fixture(scope="module")
def cluster():
    temp = tempfile.mkdtemp(prefix="pp-ray-", dir="/tmp")  # short: Ray's socket paths live under it
    try:
        port = free_ports(1)[0]
        ray_start(temp, "--head", "--port", str(port), "--include-dashboard", "false", "--temp-dir", temp)
        address = f"127.0.0.1:{port}"
        ray_start(temp, "--address", address, "--resources", '{"node2": 1}')
        yield address
    finally:
        stop_cluster(temp)
        shutil.rmtree(temp, ignore_errors=True)


def parapush(*args, fault=None, check=True):
    env = {**{k: v for k, v in os.environ.items() if k not in (ENV_FAULT, "RAY_ADDRESS", "PARAPUSH_WORKERS")},
           **AUTH}
    if fault:
        env[ENV_FAULT] = fault
    r = subprocess.run([sys.executable, "-m", "parapush_ros.cli", *args], capture_output=True, text=True,
                       timeout=120, env=env)
    if check:
        assert r.returncode == 0, r.stderr[-3000:]
    return r


def datagen(out, *args, fault=None, check=True):
    return parapush("datagen", "--primitive", "--chunk-size", str(CHUNK), "--out", str(out), *args, fault=fault,
                    check=check)


def finished(out):
    """The units of the study in ``out`` in the order they finished (its ``study.log``)."""
    return [u for u, _, _ in Study(out, "datagen --primitive", {}, manifest=chunks.META_NAME).log()]


def same_chunks(a, b, n):
    for c in range(n):
        with np.load(chunks.chunk_path(a, c)) as x, np.load(chunks.chunk_path(b, c)) as y:
            for k in ("poses", "actions", "poses_next"):
                assert np.array_equal(x[k], y[k]), f"chunk {c} {k}"


def test_a_study_on_a_two_node_cluster_survives_a_killed_worker_and_resumes(cluster, tmp_path):
    out, marker = tmp_path / "cluster", tmp_path / "killed_once"
    r = datagen(out, "--samples", str(6 * CHUNK), "--ray", cluster, fault=f"kill:chunk=1:{marker}")
    assert "Ray with 2 node(s), 2 CPUs" in r.stderr
    assert marker.exists()  # chunk 1's worker was killed once (SIGKILL) and Ray ran it again
    log = Study(out, "datagen --primitive", {}, manifest=chunks.META_NAME).log()
    assert sorted(u for u, _, _ in log) == [f"chunk={c}" for c in range(6)]  # none lost, none done twice
    assert len({w.split(":")[0] for _, _, w in log}) == 2  # units ran on both nodes
    serial = tmp_path / "serial"
    datagen_primitive.generate(serial, 6 * CHUNK, chunk_size=CHUNK, progress=False)  # in this process, no Ray
    same_chunks(out, serial, 6)
    # a re-run does no unit; another setting in the same directory is refused by name
    assert "0 to run" in datagen(out, "--samples", str(6 * CHUNK), "--ray", cluster).stderr
    bad = datagen(out, "--samples", str(6 * CHUNK), "--seed", "1", "--ray", cluster, check=False)
    assert bad.returncode != 0 and "seed = 0, this run asks for 1" in bad.stderr
    # extended by two chunks, one of which keeps failing: reported by name, the other kept; a re-run does only it
    bad = datagen(out, "--samples", str(8 * CHUNK), "--ray", cluster, "--retries", "1", fault="raise:chunk=7",
                  check=False)
    assert bad.returncode != 0 and "chunk=7: " in bad.stderr and "1 unit(s) failed" in bad.stderr
    assert "1 to run" in datagen(out, "--samples", str(8 * CHUNK), "--ray", cluster).stderr
    assert sorted(finished(out)) == [f"chunk={c}" for c in range(8)]


def test_a_killed_driver_resumes_without_losing_or_redoing_a_unit(tmp_path):
    out = tmp_path / "serial"
    killed = datagen(out, "--samples", str(5 * CHUNK), "--workers", "1", fault=f"kill:chunk=2:{tmp_path / 'k'}",
                     check=False)
    assert killed.returncode == -signal.SIGKILL  # the unit killed this (the driver's) process: no Ray here
    assert finished(out) == ["chunk=0", "chunk=1"]
    assert "3 to run" in datagen(out, "--samples", str(5 * CHUNK), "--workers", "1").stderr
    assert finished(out) == [f"chunk={c}" for c in range(5)]


def test_a_bench_gives_the_same_json_on_the_cluster_as_in_one_process(cluster, tmp_path):
    """``bench mpc`` (2 scenes x 2 models x 2 worlds) through the cluster and one unit after another in this
    process: the same runs, timings aside."""
    from parapush_ros.cli import main
    argv = ["bench", "mpc", "--scenes", "2", "--models", "coarse,parareal1", "--mismatch", "--max-actions", "2",
            "--samples", "4", "--iterations", "1", "--no-timing", "--seed", "2"]
    parapush(*argv, "--ray", cluster, "--out", str(tmp_path / "ray"))
    assert main(argv + ["--workers", "1", "--out", str(tmp_path / "serial")]) == 0
    ray, serial = (json.loads((tmp_path / d / "bench_mpc.json").read_text()) for d in ("ray", "serial"))
    keys = ("scene", "model", "world", "outcome", "reason", "actions", "final_distance_m", "plan_iterations",
            "world_config", "fine_slices", "trajectories", "path")
    assert [[r[k] for k in keys] for r in ray["runs"]] == [[r[k] for k in keys] for r in serial["runs"]]
    assert len(ray["runs"]) == 8 and ray["scene_defs"] == serial["scene_defs"]
    manifest = json.loads((tmp_path / "ray" / "mpc_study" / "study.json").read_text())  # reopened as it was made
    settings = {k: v for k, v in manifest.items() if k not in ("format", "kind")}
    nodes = {w.split(":")[0] for _, _, w in Study(tmp_path / "ray" / "mpc_study", "bench mpc", settings).log()}
    assert len(nodes) == 2  # both nodes ran units
