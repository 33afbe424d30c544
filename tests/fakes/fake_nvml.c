/* A stand-in for libnvidia-ml.so.1, so the NVML power source can be tested on
 * machines without an NVIDIA GPU. It implements the NVML functions fingrav
 * resolves, with the contract nvml.h documents (NVML API 13), over a state the
 * tests set through the fake_nvml_* control functions (called through ctypes
 * on the same loaded copy: dlopen of the same path shares it).
 *
 * The types are declared here independently of fingrav's (and of nvml.h, which
 * the build never needs); tests/test_nvml.py checks both against the header.
 * fake_nvml_set_refresh switches on a driver that refreshes its values every
 * period while the caller polls faster, stamping fields with the query time
 * (what a timestamp-only deduplication could not see).
 *
 * Plain C99 plus pthreads; every entry point takes one mutex, because the
 * sampler thread polls while the test thread pushes samples. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define API __attribute__((visibility("default")))

typedef int nvmlReturn_t;
typedef struct fake_device *nvmlDevice_t;

typedef union {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;

typedef struct {
  unsigned long long timeStamp;
  nvmlValue_t sampleValue;
} nvmlSample_t;

typedef struct {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

typedef struct {
  unsigned int isC2cEnabled;
} nvmlC2cModeInfo_v1_t;

typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

enum {
  SUCCESS = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3, NOT_FOUND = 6,
  INSUFFICIENT_SIZE = 7, GPU_IS_LOST = 15
};
enum { FI_ENERGY = 83, FI_POWER_AVERAGE = 185, FI_POWER_INSTANT = 186 };

/* Bits of fake_nvml_set_supported. */
enum {
  SUP_SAMPLES = 1, SUP_INSTANT = 2, SUP_AVERAGE = 4, SUP_ENERGY_FIELD = 8, SUP_ENERGY_FN = 16, SUP_USAGE = 32,
  SUP_MODULE = 64, /* the power fields at NVML_POWER_SCOPE_MODULE (needs C2C on: fake_nvml_set_c2c) */
  SUP_MEMORY = 128 /* the power fields at NVML_POWER_SCOPE_MEMORY (fake_nvml_set_memory; off by default: a driver
                      older than the scope, which answers NOT_SUPPORTED) */
};
enum { SCOPE_GPU = 0, SCOPE_MODULE = 1, SCOPE_MEMORY = 2 };
/* Functions fake_nvml_fail_next can make fail. */
enum { FN_SAMPLES = 0, FN_FIELDS = 1, FN_ENERGY = 2, FN_USAGE = 3, FN_COUNT = 4 };

#define MAX_DEVICES 4
#define MAX_SAMPLES 4096

struct fake_device {
  unsigned int supported;
  unsigned int arch;
  int cc_major, cc_minor;
  /* the driver's power sample ring */
  unsigned int capacity;
  unsigned long long ts[MAX_SAMPLES];
  unsigned int mw[MAX_SAMPLES];
  unsigned int head, count; /* oldest at head */
  unsigned long long overwritten;
  int value_type;   /* 0: double, 1: unsigned int */
  int newest_first; /* return samples newest first (order is undocumented) */
  /* field values: timestamp and value per field */
  long long inst_ts, avg_ts, energy_ts;
  unsigned int inst_mw, avg_mw, usage_mw;
  unsigned long long energy_mj;
  /* identity (fake_nvml_set_identity): "" and 0 mean the defaults */
  char uuid[96];
  unsigned int bus;
  char name[96]; /* fake_nvml_set_name: "" means "Fake GPU <i>" */
  /* Grace Hopper (fake_nvml_set_c2c): -1 the C2C query is not supported, 0 off, 1 on; the module's
   * power fields read the GPU's plus module_extra_mw (the Grace CPU and its memory) */
  int c2c;
  unsigned int module_extra_mw;
  /* GPU memory power (fake_nvml_set_memory): what the power fields read at NVML_POWER_SCOPE_MEMORY */
  unsigned int memory_mw;
  /* time-driven sensors (fake_nvml_set_refresh) */
  unsigned long long refresh_us, refresh_start;
  unsigned int refresh_mw;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct fake_device devs[MAX_DEVICES];
static unsigned int device_count = 1;
static nvmlReturn_t init_result = SUCCESS;
static int initialised = 0;
static int init_calls = 0, shutdown_calls = 0;
static int fail_code[FN_COUNT], fail_left[FN_COUNT], fail_skip[FN_COUNT];
static unsigned long long samples_calls = 0;

static void reset_locked(void) {
  unsigned int i;
  memset(devs, 0, sizeof devs);
  for (i = 0; i < MAX_DEVICES; ++i) {
    devs[i].supported =
        SUP_SAMPLES | SUP_INSTANT | SUP_AVERAGE | SUP_ENERGY_FIELD | SUP_ENERGY_FN | SUP_USAGE | SUP_MODULE;
    devs[i].arch = 9; /* Hopper */
    devs[i].cc_major = 9;
    devs[i].cc_minor = 0;
    devs[i].capacity = 100;
    devs[i].value_type = 1;
    devs[i].c2c = -1; /* a discrete board: NVML answers NOT_SUPPORTED */
  }
  device_count = 1;
  init_result = SUCCESS;
  /* initialised and the init/shutdown counts survive a reset: they belong to
   * whoever has NVML open (a source a failed test left alive), not to a test. */
  memset(fail_code, 0, sizeof fail_code);
  memset(fail_left, 0, sizeof fail_left);
  memset(fail_skip, 0, sizeof fail_skip);
  samples_calls = 0;
}

static int dev_index(nvmlDevice_t d) {
  long i = d - devs;
  return (d != NULL && i >= 0 && i < (long)device_count) ? (int)i : -1;
}

/* The injected error for fn, if one is armed. */
static nvmlReturn_t injected(int fn) {
  if (fail_left[fn] > 0 && fail_skip[fn] > 0) {
    --fail_skip[fn];
    return SUCCESS;
  }
  if (fail_left[fn] > 0) {
    --fail_left[fn];
    return fail_code[fn];
  }
  return SUCCESS;
}

static unsigned long long realtime_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000ull;
}

/* A driver that refreshes its sensors every refresh_us while the caller may
 * poll faster: the refresh index now, from when the model was switched on. */
static unsigned long long refresh_index(const struct fake_device *d) {
  return realtime_us() / d->refresh_us - d->refresh_start;
}

/* With the refresh model on: every power value is refresh_mw plus a ripple
 * that differs at each refresh (a 1 s average moves a little every 100 ms)
 * and stays the same between refreshes; the energy counter moves by
 * refresh_mw x refresh_us at each refresh; field timestamps are the time of
 * the query (the value is cached), the case a timestamp-only deduplication
 * cannot see. Caller holds mu. */
static void refresh_locked(struct fake_device *d) {
  unsigned long long k;
  if (d->refresh_us == 0) return;
  k = refresh_index(d);
  d->inst_mw = d->avg_mw = d->usage_mw = d->refresh_mw + 10u * (unsigned int)(k % 5u);
  if (d->supported & SUP_MEMORY) d->memory_mw = d->refresh_mw / 4u + 3u * (unsigned int)(k % 7u);
  d->energy_mj = (unsigned long long)((double)k * (double)d->refresh_mw * (double)d->refresh_us / 1e6);
  d->inst_ts = d->avg_ts = d->energy_ts = (long long)realtime_us();
}

/* Loaded with a default state: one Hopper GPU that supports every mode. */
__attribute__((constructor)) static void fake_nvml_load(void) { reset_locked(); }

/* ------------------------------------------------------------ controls */
API void fake_nvml_reset(void) {
  pthread_mutex_lock(&mu);
  reset_locked();
  pthread_mutex_unlock(&mu);
}
API void fake_nvml_set_device_count(unsigned int n) {
  pthread_mutex_lock(&mu);
  device_count = n > MAX_DEVICES ? MAX_DEVICES : n;
  pthread_mutex_unlock(&mu);
}
API void fake_nvml_set_init_result(int code) {
  pthread_mutex_lock(&mu);
  init_result = code;
  pthread_mutex_unlock(&mu);
}
API void fake_nvml_set_supported(unsigned int dev, unsigned int mask) {
  pthread_mutex_lock(&mu);
  if (dev < MAX_DEVICES) devs[dev].supported = mask;
  pthread_mutex_unlock(&mu);
}
API void fake_nvml_set_arch(unsigned int dev, unsigned int arch, int cc_major, int cc_minor) {
  pthread_mutex_lock(&mu);
  if (dev < MAX_DEVICES) {
    devs[dev].arch = arch;
    devs[dev].cc_major = cc_major;
    devs[dev].cc_minor = cc_minor;
  }
  pthread_mutex_unlock(&mu);
}
API void fake_nvml_set_sample_capacity(unsigned int dev, unsigned int capacity) {
  pthread_mutex_lock(&mu);
  if (dev < MAX_DEVICES && capacity > 0 && capacity <= MAX_SAMPLES) {
    devs[dev].capacity = capacity;
    devs[dev].head = devs[dev].count = 0;
  }
  pthread_mutex_unlock(&mu);
}
API void fake_nvml_set_sample_format(unsigned int dev, int value_type, int newest_first) {
  pthread_mutex_lock(&mu);
  if (dev < MAX_DEVICES) {
    devs[dev].value_type = value_type;
    devs[dev].newest_first = newest_first;
  }
  pthread_mutex_unlock(&mu);
}
/* Appends one power sample to the ring, overwriting the oldest when full. */
API void fake_nvml_push_sample(unsigned int dev, unsigned long long ts_us, unsigned int mw) {
  struct fake_device *d;
  pthread_mutex_lock(&mu);
  if (dev < MAX_DEVICES) {
    d = &devs[dev];
    if (d->count == d->capacity) {
      d->head = (d->head + 1) % d->capacity;
      --d->count;
      ++d->overwritten;
    }
    d->ts[(d->head + d->count) % d->capacity] = ts_us;
    d->mw[(d->head + d->count) % d->capacity] = mw;
    ++d->count;
  }
  pthread_mutex_unlock(&mu);
}
API unsigned long long fake_nvml_overwritten(unsigned int dev) {
  unsigned long long n;
  pthread_mutex_lock(&mu);
  n = dev < MAX_DEVICES ? devs[dev].overwritten : 0;
  pthread_mutex_unlock(&mu);
  return n;
}
/* field 186 / 185 (mW) or 83 (mJ, also what the energy function returns), with its timestamp. */
API void fake_nvml_set_field(unsigned int dev, unsigned int field, long long ts_us, unsigned long long value) {
  pthread_mutex_lock(&mu);
  if (dev < MAX_DEVICES) {
    if (field == FI_POWER_INSTANT) {
      devs[dev].inst_ts = ts_us;
      devs[dev].inst_mw = (unsigned int)value;
    } else if (field == FI_POWER_AVERAGE) {
      devs[dev].avg_ts = ts_us;
      devs[dev].avg_mw = (unsigned int)value;
    } else if (field == FI_ENERGY) {
      devs[dev].energy_ts = ts_us;
      devs[dev].energy_mj = value;
    }
  }
  pthread_mutex_unlock(&mu);
}
API void fake_nvml_set_usage(unsigned int dev, unsigned int mw) {
  pthread_mutex_lock(&mu);
  if (dev < MAX_DEVICES) devs[dev].usage_mw = mw;
  pthread_mutex_unlock(&mu);
}
/* What nvmlDeviceGetUUID and nvmlDeviceGetPciInfo_v3 report, so a test can
 * pair the fake with a fake CUDA driver's device. */
API void fake_nvml_set_name(unsigned int dev, const char *name) {
  pthread_mutex_lock(&mu);
  if (dev < MAX_DEVICES) snprintf(devs[dev].name, sizeof devs[dev].name, "%s", name ? name : "");
  pthread_mutex_unlock(&mu);
}
API void fake_nvml_set_identity(unsigned int dev, const char *uuid, unsigned int bus) {
  pthread_mutex_lock(&mu);
  if (dev < MAX_DEVICES) {
    snprintf(devs[dev].uuid, sizeof devs[dev].uuid, "%s", uuid ? uuid : "");
    devs[dev].bus = bus;
  }
  pthread_mutex_unlock(&mu);
}
/* A Grace Hopper superchip (state 1), a board with C2C off (0) or one that does not support the query
 * (-1, the default); the module's power fields read the GPU's plus extra_mw. */
API void fake_nvml_set_c2c(unsigned int dev, int state, unsigned int extra_mw) {
  pthread_mutex_lock(&mu);
  if (dev < MAX_DEVICES) {
    devs[dev].c2c = state;
    devs[dev].module_extra_mw = extra_mw;
  }
  pthread_mutex_unlock(&mu);
}
/* A GPU whose power fields answer at NVML_POWER_SCOPE_MEMORY with mw (Hopper as Zeus reads it; on = 0: the
 * scope answers NOT_SUPPORTED, an older driver's answer). mw = 0 with on = 1 is a GPU without the memory rail
 * that still answers SUCCESS with 0 (Zeus sees this on A40). */
API void fake_nvml_set_memory(unsigned int dev, int on, unsigned int mw) {
  pthread_mutex_lock(&mu);
  if (dev < MAX_DEVICES) {
    if (on) devs[dev].supported |= SUP_MEMORY;
    else devs[dev].supported &= ~(unsigned int)SUP_MEMORY;
    devs[dev].memory_mw = mw;
  }
  pthread_mutex_unlock(&mu);
}
/* Switches the time-driven sensors on (period_us > 0) or off (0): see
 * refresh_locked. The energy counter starts at 0. */
API void fake_nvml_set_refresh(unsigned int dev, unsigned long long period_us, unsigned int mw) {
  pthread_mutex_lock(&mu);
  if (dev < MAX_DEVICES) {
    devs[dev].refresh_us = period_us;
    devs[dev].refresh_mw = mw;
    if (period_us > 0) devs[dev].refresh_start = realtime_us() / period_us;
  }
  pthread_mutex_unlock(&mu);
}
/* The next `times` calls of function fn (FN_*) return code. */
API void fake_nvml_fail_next(int fn, int code, int times) {
  pthread_mutex_lock(&mu);
  if (fn >= 0 && fn < FN_COUNT) {
    fail_code[fn] = code;
    fail_left[fn] = times;
    fail_skip[fn] = 0;
  }
  pthread_mutex_unlock(&mu);
}
/* As fake_nvml_fail_next, after `skip` calls that succeed (a probe before the call under test). */
API void fake_nvml_fail_after(int fn, int skip, int code, int times) {
  pthread_mutex_lock(&mu);
  if (fn >= 0 && fn < FN_COUNT) {
    fail_code[fn] = code;
    fail_left[fn] = times;
    fail_skip[fn] = skip;
  }
  pthread_mutex_unlock(&mu);
}
API int fake_nvml_init_calls(void) {
  int n;
  pthread_mutex_lock(&mu);
  n = init_calls;
  pthread_mutex_unlock(&mu);
  return n;
}
API int fake_nvml_shutdown_calls(void) {
  int n;
  pthread_mutex_lock(&mu);
  n = shutdown_calls;
  pthread_mutex_unlock(&mu);
  return n;
}
API unsigned long long fake_nvml_samples_calls(void) {
  unsigned long long n;
  pthread_mutex_lock(&mu);
  n = samples_calls;
  pthread_mutex_unlock(&mu);
  return n;
}

/* ------------------------------------------------------------ NVML */
API nvmlReturn_t nvmlInit_v2(void) {
  nvmlReturn_t r;
  pthread_mutex_lock(&mu);
  ++init_calls;
  r = init_result;
  if (r == SUCCESS) ++initialised;
  pthread_mutex_unlock(&mu);
  return r;
}

API nvmlReturn_t nvmlShutdown(void) {
  nvmlReturn_t r = SUCCESS;
  pthread_mutex_lock(&mu);
  ++shutdown_calls;
  if (initialised == 0) r = UNINITIALIZED;
  else --initialised;
  pthread_mutex_unlock(&mu);
  return r;
}

API const char *nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case SUCCESS: return "Success";
    case UNINITIALIZED: return "Uninitialized";
    case INVALID_ARGUMENT: return "Invalid Argument";
    case NOT_SUPPORTED: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case NOT_FOUND: return "Not Found";
    case INSUFFICIENT_SIZE: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
  }
}

API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
  if (version == NULL || length < 8) return INSUFFICIENT_SIZE;
  snprintf(version, length, "%s", "999.99.99");
  return SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) {
  if (n == NULL) return INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  *n = initialised ? device_count : 0;
  pthread_mutex_unlock(&mu);
  return initialised ? SUCCESS : UNINITIALIZED;
}

API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
  nvmlReturn_t r = SUCCESS;
  pthread_mutex_lock(&mu);
  if (!initialised) r = UNINITIALIZED;
  else if (device == NULL || index >= device_count) r = INVALID_ARGUMENT;
  else *device = &devs[index];
  pthread_mutex_unlock(&mu);
  return r;
}

API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
  int i = dev_index(device);
  if (i < 0 || name == NULL) return INVALID_ARGUMENT;
  if (devs[i].name[0])
    snprintf(name, length, "%s", devs[i].name);
  else
    snprintf(name, length, "Fake GPU %d", i);
  return SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
  int i = dev_index(device);
  if (i < 0 || uuid == NULL) return INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  if (devs[i].uuid[0]) snprintf(uuid, length, "%s", devs[i].uuid);
  else snprintf(uuid, length, "GPU-fa4e0000-0000-0000-0000-00000000000%d", i);
  pthread_mutex_unlock(&mu);
  return SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
  int i = dev_index(device);
  if (i < 0 || pci == NULL) return INVALID_ARGUMENT;
  memset(pci, 0, sizeof *pci);
  pthread_mutex_lock(&mu);
  pci->bus = devs[i].bus ? devs[i].bus : (unsigned int)(0x41 + i);
  pthread_mutex_unlock(&mu);
  snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02x:00.0", pci->bus & 0xffu);
  snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus & 0xffu);
  return SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit) {
  if (dev_index(device) < 0 || limit == NULL) return INVALID_ARGUMENT;
  *limit = 700000;
  return SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int *arch) {
  if (dev_index(device) < 0 || arch == NULL) return INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  *arch = device->arch;
  pthread_mutex_unlock(&mu);
  return SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
  nvmlReturn_t r = SUCCESS;
  if (dev_index(device) < 0 || major == NULL || minor == NULL) return INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  if (device->cc_major < 0) {
    r = NOT_SUPPORTED;
  } else {
    *major = device->cc_major;
    *minor = device->cc_minor;
  }
  pthread_mutex_unlock(&mu);
  return r;
}

/* As nvml.h documents it: samples == NULL asks for the count to allocate;
 * only samples newer than lastSeenTimeStamp; NOT_FOUND when there are none;
 * at most *sampleCount returned (here: the oldest that fit). */
API nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, int type, unsigned long long lastSeenTimeStamp,
                                      int *sampleValType, unsigned int *sampleCount, nvmlSample_t *samples) {
  nvmlReturn_t r = SUCCESS;
  struct fake_device *d;
  unsigned int i, n = 0, first = 0, newer = 0;
  if (dev_index(device) < 0 || sampleCount == NULL || sampleValType == NULL) return INVALID_ARGUMENT;
  if (samples != NULL && *sampleCount == 0) return INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  ++samples_calls;
  d = device;
  if (type != 0 || !(d->supported & SUP_SAMPLES)) {
    r = NOT_SUPPORTED;
  } else if ((r = injected(FN_SAMPLES)) != SUCCESS) {
  } else if (samples == NULL) {
    *sampleValType = d->value_type;
    *sampleCount = d->capacity;
  } else {
    for (i = 0; i < d->count; ++i) {
      if (d->ts[(d->head + i) % d->capacity] > lastSeenTimeStamp) {
        if (newer == 0) first = i;
        ++newer;
      }
    }
    if (newer == 0) {
      r = NOT_FOUND;
    } else {
      n = newer < *sampleCount ? newer : *sampleCount;
      for (i = 0; i < n; ++i) {
        unsigned int slot = (d->head + first + i) % d->capacity;
        nvmlSample_t *s = &samples[d->newest_first ? n - 1 - i : i];
        s->timeStamp = d->ts[slot];
        memset(&s->sampleValue, 0, sizeof s->sampleValue);
        if (d->value_type == 0) s->sampleValue.dVal = d->mw[slot];
        else s->sampleValue.uiVal = d->mw[slot];
      }
      *sampleValType = d->value_type;
      *sampleCount = n;
    }
  }
  pthread_mutex_unlock(&mu);
  return r;
}

API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values) {
  int k;
  nvmlReturn_t r;
  struct fake_device *d;
  if (dev_index(device) < 0 || values == NULL) return INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  d = device;
  refresh_locked(d);
  r = injected(FN_FIELDS);
  for (k = 0; r == SUCCESS && k < valuesCount; ++k) {
    nvmlFieldValue_t *v = &values[k];
    /* nvml.h: the power fields take scopeId 0 (GPU), 1 (module: GPU and Grace CPU; only on a C2C device) or
     * 2 (the GPU's memory, where the driver has the scope). Other fields ignore it. */
    int power = v->fieldId == FI_POWER_INSTANT || v->fieldId == FI_POWER_AVERAGE;
    int module = power && v->scopeId == SCOPE_MODULE;
    int memory = power && v->scopeId == SCOPE_MEMORY;
    unsigned int gpu_bit = v->fieldId == FI_POWER_INSTANT ? SUP_INSTANT : SUP_AVERAGE;
    int scope_ok = !power || v->scopeId == SCOPE_GPU || (module && d->c2c == 1 && (d->supported & SUP_MODULE)) ||
                   (memory && (d->supported & SUP_MEMORY) && (d->supported & gpu_bit));
    v->latencyUsec = 5;
    memset(&v->value, 0, sizeof v->value);
    if (power && scope_ok && (module || (d->supported & gpu_bit))) {
      v->nvmlReturn = SUCCESS;
      v->valueType = 1;
      v->timestamp = v->fieldId == FI_POWER_INSTANT ? d->inst_ts : d->avg_ts;
      v->value.uiVal = memory ? d->memory_mw
                              : (v->fieldId == FI_POWER_INSTANT ? d->inst_mw : d->avg_mw) +
                                    (module ? d->module_extra_mw : 0);
    } else if (v->fieldId == FI_ENERGY && (d->supported & SUP_ENERGY_FIELD)) {
      v->nvmlReturn = SUCCESS;
      v->valueType = 3;
      v->timestamp = d->energy_ts;
      v->value.ullVal = d->energy_mj;
    } else {
      v->nvmlReturn = NOT_SUPPORTED;
      v->timestamp = 0;
    }
  }
  pthread_mutex_unlock(&mu);
  return r;
}

API nvmlReturn_t nvmlDeviceGetC2cModeInfoV(nvmlDevice_t device, nvmlC2cModeInfo_v1_t *info) {
  nvmlReturn_t r = SUCCESS;
  if (dev_index(device) < 0 || info == NULL) return INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  if (device->c2c < 0) r = NOT_SUPPORTED;
  else info->isC2cEnabled = (unsigned int)device->c2c;
  pthread_mutex_unlock(&mu);
  return r;
}

API nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy) {
  nvmlReturn_t r;
  if (dev_index(device) < 0 || energy == NULL) return INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  refresh_locked(device);
  if (!(device->supported & SUP_ENERGY_FN)) r = NOT_SUPPORTED;
  else if ((r = injected(FN_ENERGY)) == SUCCESS) *energy = device->energy_mj;
  pthread_mutex_unlock(&mu);
  return r;
}

API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
  nvmlReturn_t r;
  if (dev_index(device) < 0 || power == NULL) return INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  refresh_locked(device);
  if (!(device->supported & SUP_USAGE)) r = NOT_SUPPORTED;
  else if ((r = injected(FN_USAGE)) == SUCCESS) *power = device->usage_mw;
  pthread_mutex_unlock(&mu);
  return r;
}
