"""deploy/gravac-workers: ranks, output prefixes, exit codes, signals and refused settings."""

import os
import signal
import subprocess
import time

SCRIPT = os.path.join(os.environ["GRAVAC_SOURCE_DIR"], "deploy", "gravac-workers")
REPORT = 'echo "rank=$GRAVAC_RANK local=$GRAVAC_LOCAL_RANK size=$GRAVAC_SIZE of=$GRAVAC_LOCAL_SIZE"'


def env(**overrides):
    e = {"PATH": "/usr/bin:/bin", "GRAVAC_NODES": "3", "GRAVAC_LOCAL_SIZE": "2",
         "JOB_COMPLETION_INDEX": "1", "GRAVAC_DAEMON_SOCKET": "/run/gravac/gravacd.sock"}
    e.update(overrides)
    return {k: v for k, v in e.items() if v is not None}


def run(command, **overrides):
    return subprocess.run([SCRIPT, "--"] + command, env=env(**overrides), capture_output=True,
                          text=True, timeout=30)


def test_each_worker_gets_node_major_ranks_and_a_prefix():
    done = run(["sh", "-c", REPORT])
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == [
        "[rank 2] rank=2 local=0 size=6 of=2", "[rank 3] rank=3 local=1 size=6 of=2"]


def test_gravac_node_index_wins_over_the_job_index():
    done = run(["sh", "-c", REPORT], GRAVAC_NODE_INDEX="2")
    assert sorted(done.stdout.splitlines())[0] == "[rank 4] rank=4 local=0 size=6 of=2"


def test_the_exit_code_is_the_first_failure_after_every_worker_ended():
    # Local rank 1 fails first (code 7); local rank 0 fails later (code 5) after writing a line.
    done = run(["sh", "-c", 'if [ "$GRAVAC_LOCAL_RANK" = 1 ]; then exit 7; fi; '
                'sleep 0.5; echo late; exit 5'])
    assert done.returncode == 7
    assert "[rank 2] late" in done.stdout


def test_a_killed_worker_gives_128_plus_its_signal():
    done = run(["sh", "-c", "kill -9 $$"], GRAVAC_LOCAL_SIZE="1")
    assert done.returncode == 128 + signal.SIGKILL


def test_sigterm_reaches_every_worker():
    proc = subprocess.Popen([SCRIPT, "--", "sh", "-c",
                             'trap "echo stopped; exit 3" TERM; echo up; while :; do sleep 0.1; done'],
                            env=env(), stdout=subprocess.PIPE, text=True)
    lines = [proc.stdout.readline(), proc.stdout.readline()]
    assert sorted(lines) == ["[rank 2] up\n", "[rank 3] up\n"]
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 3
    assert sorted(out.splitlines()) == ["[rank 2] stopped", "[rank 3] stopped"]


def test_bad_settings_are_refused_with_the_reason():
    cases = [({"GRAVAC_NODES": None}, "GRAVAC_NODES='' is not a positive integer"),
             ({"GRAVAC_LOCAL_SIZE": "0"}, "GRAVAC_LOCAL_SIZE='0' is not a positive integer"),
             ({"JOB_COMPLETION_INDEX": None}, "the node index"),
             ({"JOB_COMPLETION_INDEX": "3"}, "node index 3 is not below GRAVAC_NODES=3"),
             ({"GRAVAC_DAEMON_SOCKET": None}, "GRAVAC_DAEMON_SOCKET is not set")]
    for overrides, message in cases:
        done = run(["true"], **overrides)
        assert done.returncode == 2 and message in done.stderr, (overrides, done.stderr)
    done = subprocess.run([SCRIPT], env=env(), capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "no command" in done.stderr
