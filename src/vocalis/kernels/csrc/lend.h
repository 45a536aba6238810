// vocalis: the codec's idle core lent to the model thread's quantized products.
//
// The engine runs the model (talker and code predictor) on one thread and the codec on another.
// A lone stream's codec decodes 4 frames per call and waits between calls, about half the time
// at int8; meanwhile one thread reads the model's weights at the rate one core reaches, short of
// what two cores read (docs/speed-choices.md, "Engine threads"). While the engine says the codec
// waits (lend(true)), one helper thread of ours takes blocks of output tiles of the products
// called from a one-thread caller; the caller takes blocks too, so a helper that is slow to wake
// only means fewer blocks for it. lend(false) (the codec starts a call) stops it taking blocks
// at once: it finishes the block in hand (tens of microseconds) and sleeps.
//
// Why not OpenMP: the engine's two threads each own an OpenMP pool; a third pool would make
// GNU OpenMP spin far less before sleeping in every pool (see vocalis.engine.openmp), and a
// model thread at two OpenMP threads would keep its second worker spinning on the codec's core.
//
// Each output element is computed by the same code whichever thread computes it, so results
// do not depend on lending (the tests compare them bit for bit).
#pragma once
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "simd.h"  // vocalis_simd::relax: the spin-wait pause of this instruction set

namespace vocalis_lend {

// How long the helper polls for the next product before sleeping: the model thread's products
// follow each other within microseconds (norms, attention and Python in between).
constexpr auto SPIN = std::chrono::microseconds(200);

struct Job {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t n, grain;
  std::atomic<int64_t> next{0};
};

struct State {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> lent{false};
  std::atomic<bool> sleeping{false};
  std::atomic<uint64_t> seq{0};     // bumped per published job
  std::atomic<Job*> job{nullptr};   // the product on offer, or null
  std::atomic<int> users{0};        // helpers inside a job (its caller waits for 0)
  std::atomic<int64_t> blocks{0};   // blocks the helper computed (tests: it took part)
  bool started = false;             // under mu
};

// Never destroyed: the helper is detached and may still wait on mu at exit.
inline State& state() {
  static State* s = new State;
  return *s;
}

inline void helper_main() {
  State& s = state();
  uint64_t done = 0;
  for (;;) {
    const auto until = std::chrono::steady_clock::now() + SPIN;
    bool fresh = false;
    for (int i = 0;; ++i) {
      if (s.lent.load() && s.seq.load() != done) { fresh = true; break; }
      if (!s.lent.load() || ((i & 63) == 63 && std::chrono::steady_clock::now() > until)) break;
      vocalis_simd::relax();
    }
    if (!fresh) {
      std::unique_lock<std::mutex> lk(s.mu);
      s.sleeping.store(true);
      s.cv.wait(lk, [&] { return s.lent.load() && s.seq.load() != done; });
      s.sleeping.store(false);
      continue;
    }
    const uint64_t seen = s.seq.load();
    s.users.fetch_add(1);
    if (Job* j = s.job.load()) {  // safe while users > 0: its caller waits for 0
      int64_t c;
      while (s.lent.load(std::memory_order_relaxed) && (c = j->next.fetch_add(j->grain)) < j->n)
      {
        (*j->fn)(c, std::min(c + j->grain, j->n));
        s.blocks.fetch_add(1, std::memory_order_relaxed);
      }
    }
    s.users.fetch_sub(1);
    done = seen;
  }
}

// Lend (true) or take back (false) the helper; the first lend starts it.
inline void lend(bool on) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  if (on && !s.started) {
    std::thread(helper_main).detach();
    s.started = true;
  }
  s.lent.store(on);
  if (on) s.cv.notify_one();
}

// Blocks of products the lent core has computed since the process started (tests: it took part).
inline int64_t lent_blocks() { return state().blocks.load(); }

// f(i0, i1) over [0, n) in blocks of grain: with the helper when lent and the caller runs on one
// thread outside a parallel region, else through at::parallel_for as before.
template <class F>
void parallel_for(int64_t n, int64_t grain, const F& f) {
  State& s = state();
  if (!s.lent.load(std::memory_order_relaxed) || n < 2 * grain || at::get_num_threads() != 1 ||
      at::in_parallel_region()) {
    at::parallel_for(0, n, grain, f);
    return;
  }
  const std::function<void(int64_t, int64_t)> fn = f;
  Job j;
  j.fn = &fn;
  j.n = n;
  j.grain = grain;
  s.job.store(&j);
  s.seq.fetch_add(1);
  if (s.sleeping.load()) {
    std::lock_guard<std::mutex> lk(s.mu);
    s.cv.notify_one();
  }
  int64_t c;
  while ((c = j.next.fetch_add(grain)) < n) f(c, std::min(c + grain, n));
  s.job.store(nullptr);
  while (s.users.load() != 0) vocalis_simd::relax();
}

}  // namespace vocalis_lend
