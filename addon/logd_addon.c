/*
 * logd's small optional C addon (see index.ts in this folder), built with a
 * plain C compiler against Node-API (ABI-stable, so one build serves every
 * Node the package supports):
 *
 * - mallocTrim(): glibc keeps freed memory inside its heap and only gives back
 *   what lies at the top; malloc_trim(0) also releases the free pages in
 *   between (the daemon, when it goes quiet).
 * - mapFile(fd, length): a MAP_SHARED mapping of a file as an ArrayBuffer, for
 *   the client's crash journal. Stores into it are plain memory writes; the
 *   kernel keeps the pages when the process dies, however it dies.
 * - unmap(buffer): detaches the ArrayBuffer and unmaps it at once (otherwise
 *   the garbage collector's finaliser does).
 * - reserve(fd, length): posix_fallocate, so that every page of the journal
 *   has its blocks before a store touches it. A store into a mapped hole of a
 *   full filesystem is a SIGBUS, which would kill the trainer.
 * - mappingLost(buffer): whether a mapping from mapFile() lost its file. A
 *   file truncated under the mapping (a cleanup script, a tool that rewrites
 *   files) turns every store past its new end into a SIGBUS. A SIGBUS handler,
 *   installed with the first mapping, takes a fault inside one of these
 *   mappings: it puts anonymous zero pages over the whole mapping (the stores
 *   land in memory, the process goes on) and marks it lost, for the client to
 *   open a new journal. A SIGBUS anywhere else goes to the handler that was
 *   there before (the default: the process dies, as without logd).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdio.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <node_api.h>

typedef struct mapping {
  void *addr;
  size_t length;
  struct mapping *next;
} mapping;

/* Live mappings, so that unmap() can tell the finaliser the pages are gone
   (worker threads load this addon too: one list, one lock). */
static mapping *live = NULL;
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;

/* The mappings the SIGBUS handler may repair: read there without a lock (a handler cannot take one), so each
   slot is atomics only. A slot is free when its start is 0 (1: being filled). More mappings than slots are simply not guarded. */
#define GUARD_SLOTS 256
typedef struct {
  _Atomic uintptr_t start;
  _Atomic size_t length;
  atomic_int lost;
} guard_slot;
static guard_slot guards[GUARD_SLOTS];
static struct sigaction previous_bus;
static atomic_int handler_installed = 0;

static void on_bus(int sig, siginfo_t *si, void *uctx) {
  uintptr_t a = (uintptr_t)si->si_addr;
  for (int i = 0; i < GUARD_SLOTS; i++) {
    uintptr_t start = atomic_load(&guards[i].start);
    size_t length = atomic_load(&guards[i].length);
    if (start <= 1 || a < start || a >= start + length) continue;
    /* Anonymous pages in place of the file's: the faulting store is retried on them and succeeds. */
    if (mmap((void *)start, length, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED) {
      atomic_store(&guards[i].lost, 1);
      return;
    }
    break;
  }
  /* Not ours (or not repairable): what was there before decides, as if logd had never been loaded. */
  if (previous_bus.sa_flags & SA_SIGINFO) {
    if (previous_bus.sa_sigaction != NULL) {
      previous_bus.sa_sigaction(sig, si, uctx);
      return;
    }
  } else if (previous_bus.sa_handler != SIG_DFL && previous_bus.sa_handler != SIG_IGN && previous_bus.sa_handler != NULL) {
    previous_bus.sa_handler(sig);
    return;
  }
  signal(SIGBUS, SIG_DFL); /* the store faults again on return, and the default action ends the process */
}

static void install_bus_handler(void) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&handler_installed, &expected, 1)) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_bus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &previous_bus);
}

/* A slot is claimed with start 1 (which the handler skips), filled, then published with its real start. */
static void guard(void *addr, size_t length) {
  for (int i = 0; i < GUARD_SLOTS; i++) {
    uintptr_t free_slot = 0;
    if (!atomic_compare_exchange_strong(&guards[i].start, &free_slot, (uintptr_t)1)) continue;
    atomic_store(&guards[i].length, length);
    atomic_store(&guards[i].lost, 0);
    atomic_store(&guards[i].start, (uintptr_t)addr);
    return;
  }
}

static void unguard(void *addr) {
  for (int i = 0; i < GUARD_SLOTS; i++) {
    if (atomic_load(&guards[i].start) == (uintptr_t)addr) {
      atomic_store(&guards[i].start, 0);
      return;
    }
  }
}

static napi_value Trim(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value out;
  napi_get_boolean(env, malloc_trim(0) != 0, &out);
  return out;
}

/* Unmaps and forgets the mapping at addr (if still live); the record itself stays until its finaliser. */
static void release_addr(void *addr) {
  pthread_mutex_lock(&live_lock);
  for (mapping *m = live; m != NULL; m = m->next) {
    if (m->addr == addr) {
      unguard(m->addr);
      munmap(m->addr, m->length);
      m->addr = NULL;
      break;
    }
  }
  pthread_mutex_unlock(&live_lock);
}

static void finalize_mapping(napi_env env, void *data, void *hint) {
  (void)env;
  (void)data;
  mapping *m = (mapping *)hint;
  pthread_mutex_lock(&live_lock);
  for (mapping **p = &live; *p != NULL; p = &(*p)->next) {
    if (*p == m) {
      *p = m->next;
      break;
    }
  }
  pthread_mutex_unlock(&live_lock);
  if (m->addr != NULL) {
    unguard(m->addr);
    munmap(m->addr, m->length);
  }
  free(m);
}

/* The (fd, length) arguments of mapFile and reserve; 0, with a TypeError thrown, unless they are a file descriptor and a positive byte count. */
static int fd_and_length(napi_env env, napi_callback_info info, const char *name, int32_t *fd, int64_t *length) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  *fd = -1;
  *length = 0;
  if (argc < 2 || napi_get_value_int32(env, argv[0], fd) != napi_ok || napi_get_value_int64(env, argv[1], length) != napi_ok || *fd < 0 || *length <= 0) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s(fd, length): fd must be an open file descriptor and length a positive byte count", name);
    napi_throw_type_error(env, NULL, msg);
    return 0;
  }
  return 1;
}

static napi_value MapFile(napi_env env, napi_callback_info info) {
  int32_t fd;
  int64_t length;
  if (!fd_and_length(env, info, "mapFile", &fd, &length)) return NULL;
  void *addr = mmap(NULL, (size_t)length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) {
    char msg[160];
    snprintf(msg, sizeof msg, "mmap of %lld bytes failed: %s", (long long)length, strerror(errno));
    napi_throw_error(env, "EMMAP", msg);
    return NULL;
  }
  mapping *m = (mapping *)malloc(sizeof(mapping));
  if (m == NULL) {
    munmap(addr, (size_t)length);
    napi_throw_error(env, "ENOMEM", "mapFile: out of memory");
    return NULL;
  }
  m->addr = addr;
  m->length = (size_t)length;
  napi_value ab;
  if (napi_create_external_arraybuffer(env, addr, (size_t)length, finalize_mapping, m, &ab) != napi_ok) {
    munmap(addr, (size_t)length);
    free(m);
    napi_throw_error(env, "EMMAP", "mapFile: this Node cannot wrap external memory in an ArrayBuffer");
    return NULL;
  }
  pthread_mutex_lock(&live_lock);
  m->next = live;
  live = m;
  pthread_mutex_unlock(&live_lock);
  install_bus_handler();
  guard(addr, (size_t)length);
  return ab;
}

static napi_value Reserve(napi_env env, napi_callback_info info) {
  int32_t fd;
  int64_t length;
  if (!fd_and_length(env, info, "reserve", &fd, &length)) return NULL;
  int err = posix_fallocate(fd, 0, (off_t)length);
  if (err != 0) {
    char msg[160];
    snprintf(msg, sizeof msg, "cannot reserve %lld bytes: %s", (long long)length, strerror(err));
    napi_value e, m, c;
    napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &m);
    napi_create_error(env, NULL, m, &e);
    napi_create_string_utf8(env, err == ENOSPC ? "ENOSPC" : err == EOPNOTSUPP ? "EOPNOTSUPP" : err == EFBIG ? "EFBIG" : "EIO", NAPI_AUTO_LENGTH, &c);
    napi_set_named_property(env, e, "code", c);
    napi_throw(env, e);
    return NULL;
  }
  napi_value out;
  napi_get_undefined(env, &out);
  return out;
}

/* The ArrayBuffer argument of unmap() and mappingLost(): its data pointer in *data (NULL when the buffer is
   detached); 0 when the argument is not an ArrayBuffer. */
static int buffer_arg(napi_env env, napi_callback_info info, napi_value *buffer, void **data) {
  size_t argc = 1;
  napi_value argv[1];
  size_t length = 0;
  bool is_ab = false;
  *data = NULL;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_is_arraybuffer(env, argv[0], &is_ab) != napi_ok || !is_ab) return 0;
  *buffer = argv[0];
  napi_get_arraybuffer_info(env, argv[0], data, &length);
  return 1;
}

static napi_value Unmap(napi_env env, napi_callback_info info) {
  napi_value buffer;
  void *data;
  if (!buffer_arg(env, info, &buffer, &data)) {
    napi_throw_type_error(env, NULL, "unmap(buffer): buffer must be an ArrayBuffer from mapFile()");
    return NULL;
  }
  /* Detach first, so no typed array can reach the pages after munmap. The
     finaliser still runs later and frees the record; addr NULL tells it the
     pages are gone already. */
  if (data != NULL && napi_detach_arraybuffer(env, buffer) == napi_ok) release_addr(data);
  napi_value out;
  napi_get_undefined(env, &out);
  return out;
}

static napi_value MappingLost(napi_env env, napi_callback_info info) {
  napi_value buffer;
  void *data;
  int lost = 0;
  if (buffer_arg(env, info, &buffer, &data)) {
    for (int i = 0; data != NULL && i < GUARD_SLOTS; i++) {
      if (atomic_load(&guards[i].start) == (uintptr_t)data) {
        lost = atomic_load(&guards[i].lost);
        break;
      }
    }
  }
  napi_value out;
  napi_get_boolean(env, lost != 0, &out);
  return out;
}

NAPI_MODULE_INIT() {
  napi_property_descriptor props[] = {
      {"mallocTrim", NULL, Trim, NULL, NULL, NULL, napi_default, NULL},
      {"mapFile", NULL, MapFile, NULL, NULL, NULL, napi_default, NULL},
      {"unmap", NULL, Unmap, NULL, NULL, NULL, napi_default, NULL},
      {"reserve", NULL, Reserve, NULL, NULL, NULL, napi_default, NULL},
      {"mappingLost", NULL, MappingLost, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}
