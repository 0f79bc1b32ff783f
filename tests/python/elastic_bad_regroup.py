#!/usr/bin/python3
"""Bad regroup requests on the real path (worker -> gravacd's RegroupDesk -> controller), issue 22.

Run under gravacrun -np 2 --nodes 2 --min-np 1 (an elastic job, one worker per node). Rank 0 asks
to regroup from membership 7, which the job never had: the controller must refuse it at once
(InvalidArgument naming the version), without starting a membership change, and the job must go
on: both ranks then run an allreduce in the first membership. Prints "ELASTIC_BAD_REGROUP_OK" on
rank 0 when all of that held.
"""

import os
import sys
import time

import torch

import gravac
import gravac.torch as hvd
from gravac import _gravac


def main():
    hvd.init()
    problems = []
    if hvd.rank() == 0:
        start = time.monotonic()
        try:
            _gravac.regroup(os.environ["GRAVAC_RUN_ID"], 7, 1, 0, 30.0)
            problems.append("a regroup from membership 7 was answered with a placement")
        except gravac.GravacError as e:
            elapsed = time.monotonic() - start
            if "membership 7" not in str(e) or "never had" not in str(e):
                problems.append("unclear error: %s" % e)
            if elapsed > 10:
                problems.append("the refusal took %.1f s" % elapsed)
            print("refused in %.2f s: %s" % (elapsed, e), flush=True)
    total = hvd.allreduce(torch.ones(3), op=hvd.Sum, name="after.bad.regroup")
    if not torch.equal(total, torch.full((3,), 2.0)) or hvd.size() != 2:
        problems.append("the job did not go on in its first membership: %s" % total)
    if hvd.elastic.membership_version() != 0:
        problems.append("membership version %d, want 0" % hvd.elastic.membership_version())
    if problems:
        print("FAIL: rank %d: %s" % (hvd.rank(), "; ".join(problems)), flush=True)
        return 1
    if hvd.rank() == 0:
        print("ELASTIC_BAD_REGROUP_OK", flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
