/* A diagnostic LD_PRELOAD shim, never linked into inca: it breaks Gloo's
 * device-thread spin so that its cost can be measured.
 *
 * Gloo's tcp::Loop waits in epoll_wait on level-triggered EPOLLIN; its
 * Pair::handleEvents takes the pair's mutex with try_to_lock and returns
 * at once when the calling thread holds it, without reading. The event is
 * still pending, so the loop spins through epoll_wait until that thread
 * lets the mutex go, taking a core the lock holder may need.
 *
 * This wrapper sleeps 20 us whenever epoll_wait returns, within 50 us, the
 * same first event as its previous return on this thread: the spin. A
 * second message on the same socket that soon is delayed 20 us too, so it
 * errs against Gloo. Used by scripts/diag/gloo-spin.sh. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <time.h>

static __thread uint64_t last_data;
static __thread uint64_t last_ns;

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int epoll_wait(int epfd, struct epoll_event* events, int maxevents, int timeout) {
  static int (*real)(int, struct epoll_event*, int, int);
  if (real == NULL) real = (int (*)(int, struct epoll_event*, int, int))dlsym(RTLD_NEXT, "epoll_wait");
  const int n = real(epfd, events, maxevents, timeout);
  if (n > 0) {
    if (events[0].data.u64 == last_data && now_ns() - last_ns < 50000) {
      const struct timespec pause = {0, 20000};
      nanosleep(&pause, NULL);
    }
    last_data = events[0].data.u64;
    last_ns = now_ns();
  }
  return n;
}
