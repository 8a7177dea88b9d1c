/* logd's SIGBUS guard for the Python client's crash journal (python/logd/spool/journal.py).
 *
 * The journal is a file this process maps MAP_SHARED and stores rows into. If
 * another process truncates the file (a cleanup script, a tool that rewrites
 * files, the same user's `truncate`), every access past its new end is a
 * SIGBUS, whose default action kills the trainer. Logging must never do that.
 *
 * A plain C library, no Python API (loaded with ctypes: one build serves every
 * Python 3, as the platform wheel's py3-none tag says):
 *   logd_bus_guard(start, length)  a slot, or -1 (none free: not guarded)
 *   logd_bus_lost(slot)            1 once the guard repaired a fault in that mapping
 *   logd_bus_release(slot)         before the mapping is unmapped
 *
 * The handler, for a fault inside a guarded mapping, maps anonymous memory
 * over the whole mapping (the file's pages past its new end are gone already):
 * the faulting access is retried there and succeeds, and the slot is marked
 * lost, for the writer to give the journal up and say so. A fault anywhere
 * else goes to the handler that was there before, or to the default action,
 * as if this library had never been loaded.
 *
 * The addon of the TypeScript client does the same (addon/logd_addon.c).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define SLOTS 256

/* Read by the handler without a lock (a handler cannot take one): atomics only. start 0: free; 1: being filled. */
typedef struct {
  _Atomic uintptr_t start;
  _Atomic size_t length;
  atomic_int lost;
} slot_t;

static slot_t slots[SLOTS];
static struct sigaction previous;
static atomic_int installed = 0;

static void on_bus(int sig, siginfo_t *si, void *uctx) {
  uintptr_t a = (uintptr_t)si->si_addr;
  for (int i = 0; i < SLOTS; i++) {
    uintptr_t start = atomic_load(&slots[i].start);
    size_t length = atomic_load(&slots[i].length);
    if (start <= 1 || a < start || a >= start + length) continue;
    if (mmap((void *)start, length, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED) {
      atomic_store(&slots[i].lost, 1);
      return;
    }
    break;
  }
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction != NULL) {
      previous.sa_sigaction(sig, si, uctx);
      return;
    }
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN && previous.sa_handler != NULL) {
    previous.sa_handler(sig);
    return;
  }
  signal(SIGBUS, SIG_DFL); /* the access faults again on return, and the default action ends the process */
}

/* Installed once, over whatever is there then (pytest's and `python -X faulthandler`'s handlers are installed at
   start, before any journal). A handler installed later (faulthandler.enable() after logd.init()) takes the
   journal's faults first, and the process ends as it would without this library. */
static void install(void) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&installed, &expected, 1)) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_bus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &previous);
}

int logd_bus_guard(void *start, size_t length) {
  if (start == NULL || length == 0) return -1;
  install();
  for (int i = 0; i < SLOTS; i++) {
    uintptr_t free_slot = 0;
    if (!atomic_compare_exchange_strong(&slots[i].start, &free_slot, (uintptr_t)1)) continue;
    atomic_store(&slots[i].length, length);
    atomic_store(&slots[i].lost, 0);
    atomic_store(&slots[i].start, (uintptr_t)start);
    return i;
  }
  return -1;
}

int logd_bus_lost(int slot) {
  if (slot < 0 || slot >= SLOTS) return 0;
  return atomic_load(&slots[slot].lost);
}

void logd_bus_release(int slot) {
  if (slot < 0 || slot >= SLOTS) return;
  atomic_store(&slots[slot].start, 0);
}
