"""gravac.torch against a gravacd --serve_jobs that refuses the worker's job: hvd.init() raises
JobRefusedError (a GravacError, not a HorovodInternalError; status "GRAVAC_ERR_REFUSED") whose
message names the job and the node. Two refusals: a job not in --jobs, and a job needing more
worker slots than --slots. Run without a launcher (run_pytest.py --no_launcher --script):

  job_refused.py --gravacd PATH
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import gravac
import gravac.torch as hvd
from gravac.common.exceptions import JobRefusedError


def expect_refused(env, *words):
    os.environ.update(env)
    try:
        hvd.init()
    except hvd.JobRefusedError as e:
        message = str(e)
        assert e.status == "GRAVAC_ERR_REFUSED", e.status
        assert isinstance(e, gravac.GravacError) and isinstance(e, JobRefusedError)
        assert not isinstance(e, hvd.HorovodInternalError)
        for w in words:
            assert w in message, "%r not in %r" % (w, message)
        print("refused: %s" % message)
        return
    raise AssertionError("hvd.init() succeeded for %s" % env)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gravacd", required=True)
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="gravac_refused_")
    sock = os.path.join(work, "gravacd.sock")
    log = open(os.path.join(work, "gravacd.log"), "w")
    daemon = subprocess.Popen(
        [args.gravacd, "--serve_jobs", "--jobs=served", "--slots=1", "--socket=" + sock,
         "--node_name=refuse-n0", "--metrics_address=off", "--controller=127.0.0.1:9",
         "--insecure_plaintext"], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(sock):
            assert daemon.poll() is None and time.monotonic() < deadline, "gravacd did not start"
            time.sleep(0.05)
        base = {"GRAVAC_RANK": "0", "GRAVAC_SIZE": "1", "GRAVAC_LOCAL_RANK": "0",
                "GRAVAC_LOCAL_SIZE": "1", "GRAVAC_DAEMON_SOCKET": sock,
                "GRAVAC_CONNECT_TIMEOUT_S": "5", "GRAVAC_RUN_ID": "r1"}
        expect_refused(dict(base, GRAVAC_JOB_NAME="gamma"), "job 'gamma' run 'r1'",
                       "node 'refuse-n0'", "does not serve job 'gamma'")
        expect_refused(dict(base, GRAVAC_JOB_NAME="served", GRAVAC_SIZE="2",
                            GRAVAC_LOCAL_SIZE="2"),
                       "job 'served' run 'r1'", "node 'refuse-n0'", "needs 2 worker slots")
        assert daemon.poll() is None, "gravacd exited after refusing"
    finally:
        daemon.terminate()
        daemon.wait(timeout=15)
        shutil.rmtree(work, ignore_errors=True)
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
