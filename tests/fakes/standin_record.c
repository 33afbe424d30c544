/* A stand-in vendor runtime that implements only the stand-in C ABI
 * (csrc/fingrav/sim/standin_abi.h) by writing what it is handed to a text
 * file, for the tests of the simulated application. It loads no tool.
 * The file is FINGRAV_TEST_STANDIN_OUT: one line per call,
 *   init | D name start_ns end_ns device queue g0 g1 g2 b0 b1 b2 | flush | fini
 * FINGRAV_TEST_STANDIN_FAIL_INIT=N makes init return N. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>

#include "fingrav/sim/standin_abi.h"

static FILE* out_file = NULL;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int fingrav_standin_init(void) {
  const char* fail = getenv("FINGRAV_TEST_STANDIN_FAIL_INIT");
  if (fail != NULL && atoi(fail) != 0) return atoi(fail);
  const char* path = getenv("FINGRAV_TEST_STANDIN_OUT");
  if (path == NULL) return FINGRAV_STANDIN_TOOL_LOAD_FAILED;
  pthread_mutex_lock(&lock);
  out_file = fopen(path, "w");
  if (out_file != NULL) fputs("init\n", out_file);
  pthread_mutex_unlock(&lock);
  return out_file == NULL ? FINGRAV_STANDIN_TOOL_LOAD_FAILED : FINGRAV_STANDIN_OK;
}

int fingrav_standin_dispatch(const char* kernel_name, int64_t start_ns, int64_t end_ns, int32_t device,
                             uint64_t queue, const uint32_t grid[3], const uint32_t block[3]) {
  if (out_file == NULL) return FINGRAV_STANDIN_NOT_INITIALISED;
  if (kernel_name == NULL || end_ns < start_ns || grid == NULL || block == NULL) return FINGRAV_STANDIN_BAD_ARGUMENT;
  pthread_mutex_lock(&lock);
  fprintf(out_file, "D %s %lld %lld %d %llu %u %u %u %u %u %u\n", kernel_name, (long long)start_ns,
          (long long)end_ns, (int)device, (unsigned long long)queue, grid[0], grid[1], grid[2], block[0], block[1],
          block[2]);
  pthread_mutex_unlock(&lock);
  return FINGRAV_STANDIN_OK;
}

void fingrav_standin_flush(void) {
  pthread_mutex_lock(&lock);
  if (out_file != NULL) {
    fputs("flush\n", out_file);
    fflush(out_file);
  }
  pthread_mutex_unlock(&lock);
}

void fingrav_standin_fini(void) {
  pthread_mutex_lock(&lock);
  if (out_file != NULL) {
    fputs("fini\n", out_file);
    fclose(out_file);
    out_file = NULL;
  }
  pthread_mutex_unlock(&lock);
}
