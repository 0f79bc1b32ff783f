/* A worker process in plain C over libgravac.so, for tests/client/process_test.cc.
 *   c_worker allreduce    allreduce 4 floats of (rank + 1) and check the sum; exit 0
 *   c_worker expect_fail  as allreduce, but expect GRAVAC_ERR_UNAVAILABLE; exit 3 when so
 *   c_worker idle         say hello and sleep (the test kills it)
 * Configuration comes from the GRAVAC_* environment. Exit 1 on any unexpected result. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gravac/gravac.h"

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "allreduce";
  gravac_context* ctx = NULL;
  char error[512];
  gravac_status s = gravac_init_verbose(&ctx, error, sizeof(error));
  if (s != GRAVAC_OK) {
    fprintf(stderr, "init: %s: %s\n", gravac_status_string(s), error);
    return 1;
  }
  if (strcmp(mode, "idle") == 0) {
    for (int i = 0; i < 600; ++i) sleep(1);
    return 0;
  }
  float data[4];
  for (int i = 0; i < 4; ++i) data[i] = (float)(gravac_rank(ctx) + 1);
  const int64_t shape[1] = {4};
  gravac_tensor_options opts = {1, 8, 0, {NULL, 0}};
  gravac_request* req = NULL;
  s = gravac_allreduce_async(ctx, "c.grad", data, data, shape, 1, GRAVAC_FLOAT32, GRAVAC_SUM,
                             &opts, &req);
  if (s != GRAVAC_OK) {
    fprintf(stderr, "post: %s\n", gravac_last_error(ctx));
    return 1;
  }
  s = gravac_wait(req);
  int rc = 1;
  if (strcmp(mode, "expect_fail") == 0) {
    fprintf(stderr, "rank %d: %s: %s\n", gravac_rank(ctx), gravac_status_string(s),
            gravac_request_error(req));
    if (s == GRAVAC_ERR_UNAVAILABLE && strstr(gravac_request_error(req), "worker rank 1")) rc = 3;
  } else if (s == GRAVAC_OK) {
    const int n = gravac_size(ctx);
    const float expect = (float)(n * (n + 1) / 2);
    rc = 0;
    for (int i = 0; i < 4; ++i) {
      if (data[i] != expect) rc = 1;
    }
  } else {
    fprintf(stderr, "wait: %s\n", gravac_request_error(req));
  }
  gravac_request_free(req);
  gravac_shutdown(ctx);
  return rc;
}
