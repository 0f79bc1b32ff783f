"""gravac: adaptive gradient compression (GraVAC) for data-parallel training.

This package is the worker side of a gravac job. A worker connects to its node's daemon
(gravacd) from the GRAVAC_* environment that gravacrun (or a Kubernetes pod spec) sets:
GRAVAC_RANK, GRAVAC_SIZE, GRAVAC_LOCAL_RANK, GRAVAC_LOCAL_SIZE and GRAVAC_DAEMON_SOCKET.

Framework bindings live in subpackages; ``import gravac.torch as hvd`` gives a Horovod-compatible
API for PyTorch. The extension module ``gravac._gravac`` is the thin binding of the C API
(gravac/gravac.h) that the bindings use.

Errors of the C API and the daemon are raised as :class:`GravacError` (a RuntimeError) whose
message is the daemon's (it names the rank, tensor and field) and whose ``status`` attribute is
the C status name, e.g. ``"GRAVAC_ERR_MISMATCH"``. Its subclass :class:`JobRefusedError`
(``"GRAVAC_ERR_REFUSED"``) says the daemon or controller refused the worker's job (not served,
no free slots, a run id that ended, an exhausted data-port range), naming the job and the node.
"""

from gravac import _gravac
from gravac._gravac import GravacError, JobRefusedError

__all__ = ["GravacError", "JobRefusedError", "__version__"]

__version__ = "0.1.0"
