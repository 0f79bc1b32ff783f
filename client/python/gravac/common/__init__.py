"""Framework-independent pieces of gravac's Horovod-compatible API (Horovod's
``horovod.common``): the exceptions a Horovod script catches and the elastic training loop."""
