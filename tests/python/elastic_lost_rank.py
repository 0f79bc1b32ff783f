#!/usr/bin/python3
"""A rank lost under hvd.elastic.run on gravac's fixed membership (issue 22 not done yet).

Run as a script under gravacrun: every rank trains under hvd.elastic.run and commits at step 3;
at step 5 the ranks of the last node SIGKILL themselves (on one node: the last rank), as when a
node is lost. Every survivor must then see the lost peer as a
HorovodInternalError inside the training function, get its state restored to the step-3 commit,
and have the reset end the job with a GravacError that names the missing membership change
(issue 22), within --deadline seconds of the kill. The survivor prints
"ELASTIC_LOST_RANK_OK" when all of that held (CTest matches it: gravacrun itself exits non-zero
because a rank was killed).
"""

import os
import signal
import sys
import time

import torch

import gravac
import gravac.torch as hvd
from gravac.common.exceptions import HorovodInternalError


def flat(model):
    return torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])


def main():
    deadline = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    hvd.init()
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 8)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, optimizer, step=0)
    seen = {"internal": [], "restored": None, "committed": None, "killed_at": None}
    restore = state.restore

    def restore_and_record():
        restore()
        seen["restored"] = (state.step, flat(model))

    state.restore = restore_and_record
    nodes = hvd.size() // hvd.local_size()
    if nodes > 1:
        victim = int(os.environ.get("GRAVAC_NODE_RANK", "0")) == nodes - 1
    else:
        victim = hvd.rank() == hvd.size() - 1

    @hvd.elastic.run
    def train(state):
        try:
            while state.step < 50:
                state.step += 1
                if state.step == 5 and victim:
                    os.kill(os.getpid(), signal.SIGKILL)
                optimizer.zero_grad()
                model(torch.randn(4, 64)).sum().backward()
                optimizer.step()
                if state.step == 3:
                    state.commit()
                    seen["committed"] = flat(model)
                if state.step == 4:
                    seen["killed_at"] = time.monotonic()
            return "finished"
        except HorovodInternalError as e:
            seen["internal"].append(e)
            raise

    try:
        result = train(state)
    except gravac.GravacError as e:
        elapsed = time.monotonic() - seen["killed_at"]
        message = str(e)
        problems = []
        if isinstance(e, HorovodInternalError):
            problems.append("the reset raised a HorovodInternalError (would retry forever)")
        if "issue 22" not in message:
            problems.append("the error does not name issue 22: %s" % message)
        if len(seen["internal"]) != 1:
            problems.append("%d HorovodInternalErrors in the training function, want 1"
                            % len(seen["internal"]))
        elif seen["internal"][0].status not in ("GRAVAC_ERR_UNAVAILABLE", "GRAVAC_ERR_SHUTDOWN",
                                                "GRAVAC_ERR_TIMEOUT"):
            problems.append("unexpected status %s" % seen["internal"][0].status)
        if seen["restored"] is None:
            problems.append("the state was not restored")
        elif seen["restored"][0] != 3 or not torch.equal(seen["restored"][1], seen["committed"]):
            problems.append("restored step %d, not the committed step 3 (or other weights)"
                            % seen["restored"][0])
        if elapsed > deadline:
            problems.append("the job ended %.1f s after the kill (> %.0f s)" % (elapsed, deadline))
        if problems:
            print("FAIL: rank %d: %s" % (hvd.rank(), "; ".join(problems)), flush=True)
            return 1
        print("ELASTIC_LOST_RANK_OK rank %d: %s after a lost rank (%s), restored to step 3, "
              "ended %.2f s after the kill: %s" % (hvd.rank(), type(seen["internal"][0]).__name__,
                                                    seen["internal"][0].status, elapsed, message),
              flush=True)
        return 0
    print("FAIL: rank %d: training ended with %r although ranks were killed"
          % (hvd.rank(), result), flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
