// The continuous-batching engine (include/nuvec/lm/engine.h): requests, the step scheduler
// (decodes first, then prefill chunks, then admissions; preemption by recomputation), prefix
// sharing, and the thread that steps while requests are pending. The forward pass over the
// ragged batch is src/lm/paged_forward.cpp; the block bookkeeping src/lm/block_allocator.h.
#include "nuvec/lm/engine.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <stdexcept>
#include <unordered_set>

#include "block_allocator.h"
#include "layers.h"
#include "nuvec/compile.h"
#include "nuvec/device.h"
#include "nuvec/memory.h"
#include "nuvec/ops.h"
#include "nuvec/transforms.h"

namespace nuvec::lm {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("[lm.Engine] " + what);
}

int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

// The bucket of a step dimension n: the smallest power of two >= n (1 for 0).
int bucket(int n) {
  int b = 1;
  while (b < n) b <<= 1;
  return b;
}

} // namespace

struct Engine::Impl {
  struct Sequence {
    int64_t id = 0;
    EngineRequest request;
    EngineTokenCallback on_token;
    EngineFinishCallback on_finish;
    Sampler sampler;
    std::vector<int> tokens; // prompt, then the generated tokens
    int prompt_len = 0;
    int max_new = 0;         // max_tokens bounded by the context
    std::vector<int> blocks; // block table
    int state_slot = -1;     // its row in the Gated DeltaNet state pools (hybrid models)
    int restore_from = -1;   // hybrid: the snapshot row its state starts from (shared prefix)
    std::vector<int> snapshot_at; // hybrid: positions (ascending) whose state to keep
    int computed = 0;        // positions whose keys and values are in the pools
    int published = 0;       // leading full blocks offered for prefix sharing
    int64_t admitted = -1;   // first admission's order (preemption takes the latest)
    std::string finish_reason;

    Sequence(int64_t id, EngineRequest r, EngineTokenCallback t, EngineFinishCallback f)
        : id(id), request(std::move(r)), on_token(std::move(t)), on_finish(std::move(f)), sampler(request.sampling) {}
  };
  using SeqPtr = std::unique_ptr<Sequence>;

  Impl(const Model& model, const EngineOptions& o, int num_blocks)
      : model(model), options(o), blocks(num_blocks), hybrid(model.config().has_linear_layers()),
        snapshot_rows(hybrid && o.prefix_sharing ? prefix_state_rows(o) : 0),
        sharing(o.prefix_sharing && (!hybrid || snapshot_rows > 0)),
        state_rows(hybrid ? state_pool_rows(o) + snapshot_rows : 0) {
    if (hybrid) {
      for (int r = options.max_running - 1; r >= 0; --r) free_state_slots.push_back(r);
    }
    make_pools();
  }

  // Every layer's pools (detail::make_layer_pools), zeroed dense buffers (a zeros broadcast
  // would be copied by the first write): KV pools with one block more than the allocator
  // hands out, where the padding rows of a bucketed step write; Gated DeltaNet state pools of
  // state_rows rows. And the step's forward pass, compiled afresh with them (its CUDA graphs
  // hold the pools they were captured on).
  // Built aside and swapped in: if making them fails, the engine keeps its previous pools.
  void make_pools() {
    const ModelConfig& c = model.config();
    forward = nullptr; // its graphs hold the old pools: let them go first
    // Fresh pools hold no snapshot.
    snapshots.clear();
    free_snapshot_rows.clear();
    for (int r = state_rows - 1; r >= state_rows - snapshot_rows; --r) free_snapshot_rows.push_back(r);
    std::vector<array> ks, vs;
    for (int i = 0; i < c.num_hidden_layers; ++i) {
      auto [k, v] =
          detail::make_layer_pools(c, i, blocks.total() + 1, options.block_size, state_rows, model.dtype());
      ks.push_back(k);
      vs.push_back(v);
    }
    std::vector<array> all = ks;
    all.insert(all.end(), vs.begin(), vs.end());
    eval(all);
    k_pools = std::move(ks);
    v_pools = std::move(vs);
    if (options.compiled_steps) forward = compile_forward();
  }

  // The inputs of the compiled step before the pools.
  static constexpr size_t kBatchInputs = 7;

  // paged_forward as a compiled function of (tokens, positions, slots, tables, lengths,
  // sample_rows, state_slots, k pools..., v pools...) → (logits, k pools..., v pools...).
  // Only steps without fresh segments or state ranges are compiled (run_forward).
  std::function<std::vector<array>(const std::vector<array>&)> compile_forward() const {
    const ModelConfig& c = model.config();
    return compile_graph([&c, w = model.run_weights()](const std::vector<array>& in) {
      const int L = c.num_hidden_layers;
      detail::PagedBatch b;
      b.tokens = in[0];
      b.positions = in[1];
      b.slots = in[2];
      b.tables = in[3];
      b.lengths = in[4];
      b.sample_rows = in[5];
      b.state_slots = in[6];
      std::vector<array> k(in.begin() + kBatchInputs, in.begin() + kBatchInputs + L),
          v(in.begin() + kBatchInputs + L, in.end());
      std::vector<array> out{detail::paged_forward(c, w, b, k, v)};
      out.insert(out.end(), k.begin(), k.end());
      out.insert(out.end(), v.begin(), v.end());
      return out;
    });
  }

  // The step's logits [sample rows, vocab]; the pools are replaced by the updated ones.
  array run_forward(detail::PagedBatch& pb) {
    if (!forward || !pb.fresh.empty() || !pb.state_chunks.empty()) {
      return detail::paged_forward(model.config(), model.run_weights(), pb, k_pools, v_pools);
    }
    const size_t L = k_pools.size();
    std::vector<array> in{pb.tokens, pb.positions, pb.slots, pb.tables, pb.lengths, pb.sample_rows, pb.state_slots};
    // Moved in, so that the compiled step holds the pools' only handles and updates them in place.
    for (auto& p : k_pools) in.push_back(std::move(p));
    for (auto& p : v_pools) in.push_back(std::move(p));
    k_pools.clear();
    v_pools.clear();
    std::vector<array> out;
    try {
      out = forward(in);
    } catch (...) {
      // A trace that throws leaves the pools as they were: take them back.
      k_pools.assign(in.begin() + kBatchInputs, in.begin() + kBatchInputs + L);
      v_pools.assign(in.begin() + kBatchInputs + L, in.end());
      throw;
    }
    in.clear();
    k_pools.assign(out.begin() + 1, out.begin() + 1 + L);
    v_pools.assign(out.begin() + 1 + L, out.end());
    return out[0];
  }

  // Padding rows take the rows no sequence holds, then spare rows. A padded step has only
  // one-token continuations, no admission, T of them: either every running sequence (R = T,
  // max_running − T rows free, bucket(T) − T padding rows) or a full token budget
  // (T = max_batch_tokens < R). Either way bucket(N) − N spare rows suffice, N the smaller of
  // max_running and max_batch_tokens (0 for powers of two).
  static int state_pool_rows(const EngineOptions& o) {
    const int n = std::min(o.max_running, o.max_batch_tokens);
    return o.max_running + bucket(n) - n;
  }

  // Snapshot rows of a hybrid model's state pools (EngineOptions::prefix_state_rows).
  static int prefix_state_rows(const EngineOptions& o) {
    return o.prefix_state_rows >= 0 ? o.prefix_state_rows : std::max(1, o.max_running / 8);
  }
  // Every state pool row: the sequences', the padding spares, the snapshots.
  static int total_state_rows(const EngineOptions& o) {
    return state_pool_rows(o) + (o.prefix_sharing ? prefix_state_rows(o) : 0);
  }

  const Model& model;
  EngineOptions options;
  detail::BlockAllocator blocks;
  const bool hybrid; // Gated DeltaNet layers: each running sequence holds a state row
  // Hybrid models: state pool rows that keep the Gated DeltaNet states at a shared prefix's
  // end (a block's keys and values do not give them), for later sequences to start from.
  const int snapshot_rows;
  // Prefix sharing: always for attention-only models; for hybrid ones when there are
  // snapshot rows (only prefixes whose end state was kept are shared).
  const bool sharing;
  // State pool rows: one per running sequence (max_running), then the spare rows that the
  // padding rows of a bucketed step may need (state_pool_rows): gated_delta_slots requires
  // distinct rows; then the snapshot rows.
  const int state_rows;
  // Hybrid prefix sharing: the snapshot row of the state after the published block that
  // ends a prefix (block id -> row, last use), and the rows free. A snapshot goes with its
  // block (the block's content identifies the prefix only while the block lives).
  struct Snapshot {
    int row;
    int64_t used;
  };
  std::unordered_map<int, Snapshot> snapshots;
  std::vector<int> free_snapshot_rows;
  int64_t snapshot_clock = 0;
  std::vector<int> free_state_slots;
  std::vector<array> k_pools, v_pools;
  std::function<std::vector<array>(const std::vector<array>&)> forward; // null: not compiled

  // Shared with submit()/cancel()/stats() on other threads.
  mutable std::mutex mtx;
  std::condition_variable cv;
  std::deque<SeqPtr> inbox;
  std::unordered_set<int64_t> cancels;
  int64_t next_id = 1;
  int64_t unfinished = 0;
  EngineStats stats;
  bool stopping = false;
  bool self_stopped = false; // stopping was asked by a callback on the worker
  bool closed = false;       // the destructor has begun: no more requests, no new worker
  std::thread::id worker_id; // the background thread's, while it runs
  std::thread worker;        // touched only under `lifecycle`
  // Held through start() and stop() from other threads than the worker (which never takes it),
  // so that two of them do not join or replace the worker at once.
  std::mutex lifecycle;

  // The stepping thread's own.
  std::deque<SeqPtr> waiting; // admission order; preempted sequences go to the front
  std::vector<SeqPtr> running;
  int64_t admissions = 0;

  // One user of block b less; a block that becomes free takes its snapshot with it.
  void release_block(int b) {
    blocks.release(b);
    if (blocks.refs(b) == 0) {
      if (auto it = snapshots.find(b); it != snapshots.end()) {
        free_snapshot_rows.push_back(it->second.row);
        snapshots.erase(it);
      }
    }
  }

  // Frees s's blocks and state row; it starts afresh when admitted again.
  void release_blocks(Sequence& s) {
    for (int b : s.blocks) release_block(b);
    s.blocks.clear();
    s.computed = 0;
    s.published = 0;
    if (s.state_slot >= 0) free_state_slots.push_back(s.state_slot);
    s.state_slot = -1;
    s.restore_from = -1;
    s.snapshot_at.clear();
  }

  // Copies state row `from` into row `to` in every Gated DeltaNet layer's pools (conv inputs
  // in k_pools, recurrent states in v_pools), evaluated at once.
  void copy_state_row(int from, int to) {
    const ModelConfig& c = model.config();
    std::vector<array> changed;
    for (int i = 0; i < c.num_hidden_layers; ++i) {
      if (!c.is_linear_layer(i)) continue;
      k_pools[i] = detail::copy_pool_row(k_pools[i], from, to);
      v_pools[i] = detail::copy_pool_row(v_pools[i], from, to);
      changed.push_back(k_pools[i]);
      changed.push_back(v_pools[i]);
    }
    eval(changed);
  }

  // Keeps s's state (at its position `computed`, a block boundary) in a snapshot row, the
  // least recently used one when none is free, under the block ending that prefix. Called
  // after publish_full_blocks, so that block is the published one share_prefix finds for
  // these tokens (an equal block s computed itself was swapped for it).
  void take_snapshot(Sequence& s) {
    const int block = s.blocks[s.computed / options.block_size - 1];
    if (auto it = snapshots.find(block); it != snapshots.end()) {
      it->second.used = ++snapshot_clock;
      return;
    }
    if (free_snapshot_rows.empty()) {
      auto lru = std::min_element(snapshots.begin(), snapshots.end(),
                                  [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
      free_snapshot_rows.push_back(lru->second.row);
      snapshots.erase(lru);
    }
    const int row = free_snapshot_rows.back();
    free_snapshot_rows.pop_back();
    copy_state_row(s.state_slot, row);
    snapshots[block] = {row, ++snapshot_clock};
  }

  // The end of the next chunk of s within `budget` tokens: up to its last token, stopping at
  // the next position whose state is to be kept (hybrid prefix sharing), so that the state
  // there exists at a step's end.
  static int chunk_end(const Sequence& s, int budget) {
    int end = s.computed + std::min(int(s.tokens.size()) - s.computed, budget);
    for (int at : s.snapshot_at) {
      if (at > s.computed && at < end) return at;
    }
    return end;
  }

  // The counts stats() reports, from the scheduler's state (mtx held; engine thread).
  void publish_stats() {
    stats.free_blocks = blocks.free_count();
    stats.free_state_slots = int(free_state_slots.size());
    stats.prefix_states = int(snapshots.size());
    stats.running = int(running.size());
    stats.waiting = int(waiting.size() + inbox.size());
  }

  // Ends s (already out of waiting/running): frees its blocks and reports. The stats are
  // published before the report, so that whoever learns of the end (a client's last event)
  // and then asks stats() sees the request's blocks and state row free.
  void finish(SeqPtr s, const std::string& reason) {
    release_blocks(*s);
    EngineResult r;
    r.tokens.assign(s->tokens.begin() + s->prompt_len, s->tokens.end());
    r.finish_reason = reason;
    r.prompt_tokens = s->prompt_len;
    {
      std::lock_guard<std::mutex> lk(mtx);
      --unfinished;
      cancels.erase(s->id);
      publish_stats();
    }
    if (s->on_finish) {
      try {
        s->on_finish(r);
      } catch (...) {
        // a reporting callback's failure must not stop the other requests
      }
    }
    cv.notify_all();
  }

  // Sends the latest admitted of running[from..] (not yet scheduled this step) back to
  // waiting; it is recomputed when readmitted.
  void preempt_latest(size_t from) {
    auto it = std::max_element(running.begin() + from, running.end(),
                               [](const SeqPtr& a, const SeqPtr& b) { return a->admitted < b->admitted; });
    SeqPtr s = std::move(*it);
    running.erase(it);
    release_blocks(*s);
    waiting.push_front(std::move(s));
    std::lock_guard<std::mutex> lk(mtx);
    ++stats.preemptions;
  }

  // Blocks so that positions [0, end) of s have one; false when the pool has none left.
  bool reserve(Sequence& s, int end) {
    while (int(s.blocks.size()) * options.block_size < end) {
      auto b = blocks.allocate();
      if (!b) return false;
      s.blocks.push_back(*b);
    }
    return true;
  }

  // Prefix sharing for a sequence with nothing computed: its leading full blocks that another
  // sequence published (always leaving its last known token to compute, for the logits).
  // Returns how many blocks it took.
  //
  // A hybrid model's sequence takes the chain only up to its deepest block with a state
  // snapshot (restored into its row with its first step: restore_from), and marks where its
  // own state is to be kept: at the end of the chain others published (which a third
  // sequence with this prefix will then find) and at its last block boundary (for a later
  // request that extends this one, a chat's next turn). A chunk stops at each such position
  // (chunk_end): one more step for the prompt, unless the boundary is the prompt's end.
  int share_prefix(Sequence& s) {
    const int bs = options.block_size;
    int parent = -1, taken = 0;
    while (int(s.blocks.size() + 1) * bs <= int(s.tokens.size()) - 1) {
      const int at = int(s.blocks.size()) * bs;
      std::vector<int> content(s.tokens.begin() + at, s.tokens.begin() + at + bs);
      auto b = blocks.find_prefix(parent, content);
      if (!b) break;
      blocks.retain(*b);
      s.blocks.push_back(*b);
      s.computed += bs;
      s.published += 1;
      parent = *b;
      ++taken;
    }
    if (!hybrid) return taken;
    int keep = taken;
    while (keep > 0 && !snapshots.count(s.blocks[keep - 1])) --keep;
    while (int(s.blocks.size()) > keep) {
      release_block(s.blocks.back()); // still held by its publisher: not freed
      s.blocks.pop_back();
    }
    s.computed = keep * bs;
    s.published = keep;
    if (keep > 0) {
      Snapshot& snap = snapshots.at(s.blocks[keep - 1]);
      snap.used = ++snapshot_clock;
      s.restore_from = snap.row;
    }
    s.snapshot_at.clear();
    if (taken > keep) s.snapshot_at.push_back(taken * bs);
    // (The whole prompt when it ends on a block boundary: its last chunk ends there anyway.)
    const int last_full = int(s.tokens.size()) / bs * bs;
    if (last_full > std::max(keep, taken) * bs) s.snapshot_at.push_back(last_full);
    return keep;
  }

  // Offers s's full blocks for sharing. A block equal to one already published (the same
  // tokens after the same parent: computed by s beside its publisher, or recomputed because
  // no state snapshot came with it) is replaced in s's table by the published one, so that
  // s's later blocks are published under a parent that lookups reach.
  void publish_full_blocks(Sequence& s) {
    const int bs = options.block_size;
    while ((s.published + 1) * bs <= s.computed) {
      const int i = s.published;
      const int parent = i == 0 ? -1 : s.blocks[i - 1];
      std::vector<int> content(s.tokens.begin() + i * bs, s.tokens.begin() + (i + 1) * bs);
      if (auto b = blocks.find_prefix(parent, content); b && *b != s.blocks[i]) {
        blocks.retain(*b);
        release_block(s.blocks[i]);
        s.blocks[i] = *b;
      } else {
        blocks.publish(s.blocks[i], parent, std::move(content));
      }
      ++s.published;
    }
  }

  struct Scheduled {
    Sequence* seq;
    int start, end; // positions computed this step
  };

  bool step();
  // Whether the calling thread is the background worker.
  bool on_worker() const;
};

bool Engine::Impl::step() {
  // Take new requests and cancellations.
  std::unordered_set<int64_t> to_cancel;
  std::vector<SeqPtr> nothing_to_generate; // max_tokens 0: they end without a forward pass
  {
    std::lock_guard<std::mutex> lk(mtx);
    while (!inbox.empty()) {
      (inbox.front()->max_new == 0 ? nothing_to_generate.emplace_back() : waiting.emplace_back()) =
          std::move(inbox.front());
      inbox.pop_front();
    }
    // Taken with the inbox: every pending id is now in waiting or running, and a cancel that
    // arrives later waits for the next step instead of being cleared unseen.
    to_cancel.swap(cancels);
  }
  for (auto& s : nothing_to_generate) finish(std::move(s), "length");
  if (!to_cancel.empty()) {
    auto cancel_in = [&](auto& container) {
      for (auto it = container.begin(); it != container.end();) {
        if (to_cancel.count((*it)->id)) {
          SeqPtr s = std::move(*it);
          it = container.erase(it);
          finish(std::move(s), "cancelled");
        } else {
          ++it;
        }
      }
    };
    cancel_in(running);
    cancel_in(waiting);
  }

  // Schedule: running sequences oldest first (decodes, then prefill continuations), then
  // admissions while blocks and the token budget allow.
  // Oldest first: running[i..] always holds the newest, which preemption takes.
  std::sort(running.begin(), running.end(),
            [](const SeqPtr& a, const SeqPtr& b) { return a->admitted < b->admitted; });
  int budget = options.max_batch_tokens;
  std::vector<Scheduled> batch;
  bool preempted = false;
  for (size_t i = 0; i < running.size() && budget > 0;) {
    Sequence& s = *running[i];
    const int end = chunk_end(s, budget);
    if (!reserve(s, end)) {
      // No block left: the latest admitted sequence (it may be s itself) is recomputed later.
      preempt_latest(i);
      preempted = true;
      continue; // running[i] is s again unless s was the one preempted
    }
    batch.push_back({&s, s.computed, end});
    budget -= end - s.computed;
    ++i;
  }
  // After a preemption the freed blocks go to the running sequences' next steps, not to new
  // admissions (which would be preempted again).
  while (!preempted && !waiting.empty() && budget > 0 && int(running.size()) < options.max_running) {
    Sequence& s = *waiting.front();
    const int shared = sharing ? share_prefix(s) : 0;
    const int end = chunk_end(s, budget);
    if (!reserve(s, end)) {
      release_blocks(s); // admitted later, when blocks are free
      break;
    }
    {
      std::lock_guard<std::mutex> lk(mtx);
      stats.shared_block_hits += shared;
    }
    if (s.admitted < 0) {
      s.admitted = admissions++; // a preempted sequence keeps its seniority
    }
    if (hybrid) {
      // running.size() < max_running: a row is free. Whatever it holds is not read (the
      // sequence's first range is fresh).
      s.state_slot = free_state_slots.back();
      free_state_slots.pop_back();
      // (A shared prefix's state, restore_from, is copied into the row with the step.)
    }
    batch.push_back({&s, s.computed, end});
    budget -= end - s.computed;
    running.push_back(std::move(waiting.front()));
    waiting.pop_front();
  }
  {
    std::lock_guard<std::mutex> lk(mtx);
    ++stats.steps;
  }
  if (batch.empty()) {
    std::lock_guard<std::mutex> lk(mtx);
    return unfinished > 0;
  }

  // The ragged batch: the one-token continuations (decodes) first, then the ranges of
  // several tokens or that start a sequence (PagedBatch's order). Compiled, it is padded to a
  // bucket — tokens, sampled rows and table width each to a power of two — so that a few
  // shapes recur (each a CUDA graph on a GPU); a padding token attends to itself in the spare
  // block (pool block `trash`) and, in a hybrid model, keeps its state in a row no sequence
  // holds (free rows first, then spare rows).
  // A sequence's first chunk (nothing cached before it) attends within itself through the
  // tiled attention kernel (PagedBatch::fresh); such steps are not bucketed: they are few and
  // bound by the device, and their segments' shapes vary. Nor are hybrid models' steps with
  // prompt ranges (each range runs its own conv and recurrence).
  auto continues_by_one = [](const Scheduled& b) { return b.start > 0 && b.end - b.start == 1; };
  std::stable_partition(batch.begin(), batch.end(), continues_by_one);
  const int bs = options.block_size;
  const int trash = blocks.total();
  int T = 0, S = 0;
  int W = 1;
  std::vector<std::pair<int, int>> fresh;
  std::vector<detail::PagedBatch::StateChunk> state_chunks;
  for (auto& b : batch) {
    const int n = b.end - b.start;
    if (b.start == 0 && n > 1) fresh.push_back({T, n});
    if (hybrid && !continues_by_one(b)) state_chunks.push_back({T, n, b.start == 0});
    T += n;
    S += b.end == int(b.seq->tokens.size());
    W = std::max(W, int(b.seq->blocks.size()));
  }
  const bool pad = forward != nullptr && fresh.empty() && state_chunks.empty();
  const int Tb = pad ? bucket(T) : T, Sb = pad ? bucket(S) : S, Wb = pad ? bucket(W) : W;
  std::vector<int32_t> tokens, positions, slots, lengths, tables, sample_rows, state_slots;
  std::vector<Sequence*> sampled;
  tokens.reserve(Tb);
  tables.reserve(size_t(Tb) * Wb);
  for (auto& b : batch) {
    Sequence& s = *b.seq;
    for (int p = b.start; p < b.end; ++p) {
      tokens.push_back(s.tokens[p]);
      positions.push_back(p);
      slots.push_back(s.blocks[p / bs] * bs + p % bs);
      lengths.push_back(p + 1);
      state_slots.push_back(s.state_slot);
      for (int j = 0; j < Wb; ++j) tables.push_back(j < int(s.blocks.size()) ? s.blocks[j] : trash);
    }
    if (b.end == int(s.tokens.size())) {
      sample_rows.push_back(int32_t(tokens.size()) - 1);
      sampled.push_back(&s);
    }
  }
  for (int t = T; t < Tb; ++t) {
    tokens.push_back(0);
    positions.push_back(0);
    slots.push_back(trash * bs);
    lengths.push_back(1);
    const int spare = t - T - int(free_state_slots.size());
    state_slots.push_back(spare < 0 ? free_state_slots[t - T] : options.max_running + spare);
    tables.insert(tables.end(), Wb, trash);
  }
  sample_rows.resize(Sb, 0);
  detail::PagedBatch pb;
  pb.tokens = array(tokens.begin(), {Tb}, int32);
  pb.positions = array(positions.begin(), {Tb}, int32);
  pb.slots = array(slots.begin(), {Tb}, int32);
  pb.lengths = array(lengths.begin(), {Tb}, int32);
  pb.tables = array(tables.begin(), {Tb, Wb}, int32);
  pb.sample_rows = array(sample_rows.begin(), {Sb}, int32);
  pb.fresh = std::move(fresh);
  pb.state_slots = array(state_slots.begin(), {Tb}, int32);
  pb.state_chunks = std::move(state_chunks);

  std::vector<int> next_tokens;
  std::string error;
  try {
    // Admitted sequences that start from a shared prefix: its state into their rows.
    for (auto& b : batch) {
      Sequence& s = *b.seq;
      if (s.restore_from >= 0) {
        copy_state_row(s.restore_from, s.state_slot);
        s.restore_from = -1;
      }
    }
    array logits = run_forward(pb);
    const int V = logits.shape(1);
    // Greedy rows without a penalty (the sampler would take their argmax alone) share one
    // argmax over every row; the others go through their own samplers.
    std::vector<array> outs;
    std::vector<int> own(sampled.size(), -1); // index into outs, or -1: the shared argmax
    for (size_t i = 0; i < sampled.size(); ++i) {
      Sequence& s = *sampled[i];
      const SamplingOptions& so = s.request.sampling;
      if (so.temperature == 0.0f && so.repetition_penalty == 1.0f) continue;
      std::optional<array> context;
      if (so.repetition_penalty != 1.0f) {
        context = array(s.tokens.begin(), {1, int(s.tokens.size())}, int32);
      }
      own[i] = int(outs.size());
      outs.push_back(s.sampler(slice(logits, {int(i), 0}, {int(i) + 1, V}), context));
    }
    array greedy = astype(argmax(logits, 1), int32);
    std::vector<array> all = outs;
    all.push_back(greedy);
    all.insert(all.end(), k_pools.begin(), k_pools.end());
    all.insert(all.end(), v_pools.begin(), v_pools.end());
    eval(all);
    const int32_t* g = greedy.data<int32_t>();
    for (size_t i = 0; i < sampled.size(); ++i) {
      next_tokens.push_back(own[i] < 0 ? g[i] : outs[own[i]].item<int>());
    }
    // The step's positions are in the pools: publish full blocks, keep the states asked for
    // (copies of state rows, which fail as the step does).
    for (auto& b : batch) {
      Sequence& s = *b.seq;
      s.computed = b.end;
      if (sharing) publish_full_blocks(s);
      while (hybrid && sharing && !s.snapshot_at.empty() && s.snapshot_at.front() <= s.computed) {
        if (s.snapshot_at.front() == s.computed) take_snapshot(s);
        s.snapshot_at.erase(s.snapshot_at.begin());
      }
    }
  } catch (const std::exception& e) {
    error = e.what();
  }

  // Account for the step; finish what ended.
  std::unordered_set<Sequence*> done;
  std::vector<std::pair<Sequence*, std::string>> endings;
  if (!error.empty()) {
    // A failed node leaves zeros in its outputs, which may be a whole pool: every running
    // sequence (and every published prefix block) may have lost its keys and values. They all
    // end with the error and the pools start afresh; waiting sequences hold no blocks.
    for (auto& r : running) endings.push_back({r.get(), "error: " + error});
  } else {
    const auto& eos = model.config().eos_token_ids;
    for (size_t i = 0; i < sampled.size(); ++i) {
      Sequence& s = *sampled[i];
      const int token = next_tokens[i];
      s.tokens.push_back(token);
      bool go_on = true;
      if (s.on_token) {
        try {
          go_on = s.on_token(token);
        } catch (const std::exception& e) {
          endings.push_back({&s, std::string("error: ") + e.what()});
          continue;
        } catch (...) {
          endings.push_back({&s, "error: the token callback threw"});
          continue;
        }
      }
      const int made = int(s.tokens.size()) - s.prompt_len;
      if (!go_on || (s.request.stop_at_eos && std::find(eos.begin(), eos.end(), token) != eos.end())) {
        endings.push_back({&s, "stop"});
      } else if (made >= s.max_new) {
        endings.push_back({&s, "length"});
      }
    }
  }
  for (auto& [seq, reason] : endings) {
    auto it = std::find_if(running.begin(), running.end(), [&](const SeqPtr& p) { return p.get() == seq; });
    if (it == running.end()) continue;
    SeqPtr s = std::move(*it);
    running.erase(it);
    finish(std::move(s), reason);
  }
  if (!error.empty()) {
    try {
      make_pools();
    } catch (...) {
      // the next step's forward pass reports it to the requests it runs
    }
  }
  std::lock_guard<std::mutex> lk(mtx);
  return unfinished > 0;
}

Engine::Engine(const Model& model, EngineOptions options) : model_(model), options_(options) {
  const ModelConfig& c = model.config();
  if (options_.prefix_state_rows < -1 || options_.prefix_state_rows > (1 << 30)) {
    fail("prefix_state_rows must be -1 (the default) or in [0, 2^30]; got " + std::to_string(options_.prefix_state_rows));
  }

  if (options_.block_size <= 0 || options_.max_batch_tokens <= 0 || options_.max_running <= 0 ||
      options_.num_blocks < 0) {
    fail("block_size, max_batch_tokens and max_running must be positive and num_blocks non-negative; got " +
         std::to_string(options_.block_size) + ", " + std::to_string(options_.max_batch_tokens) + ", " +
         std::to_string(options_.max_running) + ", " + std::to_string(options_.num_blocks));
  }
  // Steps are bucketed to powers of two and pool slots (block · block_size + offset) are int32.
  constexpr int64_t kLimit = int64_t(1) << 30;
  auto check_limits = [&] {
    if (options_.max_batch_tokens > kLimit || options_.max_running > kLimit ||
        (int64_t(options_.num_blocks) + 1) * options_.block_size > kLimit) {
      fail("max_batch_tokens, max_running and (num_blocks + 1) · block_size must be at most 2^30; got " +
           std::to_string(options_.max_batch_tokens) + ", " + std::to_string(options_.max_running) + " and (" +
           std::to_string(options_.num_blocks) + " + 1) · " + std::to_string(options_.block_size));
    }
  };
  check_limits();
  // The state pools' rows: max_running, fewer padding spares than that, the snapshots.
  if (c.has_linear_layers() &&
      int64_t(options_.max_running) * 2 + (options_.prefix_sharing ? Impl::prefix_state_rows(options_) : 0) >
          (int64_t(1) << 30)) {
    fail("the Gated DeltaNet state pools' rows (max_running, its padding spares and prefix_state_rows) must stay "
         "within 2^30; got max_running " + std::to_string(options_.max_running) + " and prefix_state_rows " +
         std::to_string(options_.prefix_state_rows));
  }
  if (!(options_.gpu_memory_fraction > 0.0f && options_.gpu_memory_fraction <= 1.0f)) {
    fail("gpu_memory_fraction must lie in (0, 1]; got " + std::to_string(options_.gpu_memory_fraction));
  }
  if (options_.num_blocks == 0) {
    const int full = 16 * ceil_div(c.max_position_embeddings, options_.block_size);
    if (default_device().type == Device::gpu) {
      // Keys and values of every attention layer for one block; the state pools first.
      double per_block = 0.0, per_state_row = 0.0;
      for (int i = 0; i < c.num_hidden_layers; ++i) {
        auto [kv, state] = detail::layer_pool_bytes(c, i, options_.block_size, model.dtype());
        per_block += kv;
        per_state_row += state;
      }
      const auto info = device_info(Device::gpu);
      const double free = double(std::get<size_t>(info.at("free_memory"))) + double(get_cache_memory());
      const double states = per_state_row * Impl::total_state_rows(options_);
      const double budget = options_.gpu_memory_fraction * free;
      if (states > 0.0 && states >= budget) {
        fail("the Gated DeltaNet state pools (" + std::to_string(Impl::total_state_rows(options_)) + " rows for " +
           std::to_string(options_.max_running) +
             " sequences, max_running, the padding of bucketed steps and prefix_state_rows) need " +
             std::to_string(states / double(1 << 30)) + " GiB, more than the " +
             std::to_string(budget / double(1 << 30)) + " GiB that gpu_memory_fraction leaves; lower max_running or prefix_state_rows");
      }
      const double fit = per_block > 0.0 ? (budget - states) / per_block : full;
      options_.num_blocks = int(std::max(1.0, std::min(double(full), fit)));
    } else {
      options_.num_blocks = std::min(8192, full);
    }
    check_limits(); // the chosen pool too
  }
  try {
    impl_ = std::make_unique<Impl>(model, options_, options_.num_blocks);
  } catch (const std::exception& e) {
    throw std::runtime_error("[lm.Engine] cannot allocate the pools of " + std::to_string(options_.num_blocks) +
                             " KV blocks (num_blocks)" +
                             (c.has_linear_layers() ? " and " + std::to_string(Impl::total_state_rows(options_)) +
                                                          " state rows (max_running " +
                                                          std::to_string(options_.max_running) +
                                                          ", padding spares and prefix_state_rows)"
                                                    : std::string()) +
                             ": " + e.what());
  }
  impl_->stats.total_blocks = options_.num_blocks;
  impl_->stats.free_blocks = options_.num_blocks;
  impl_->stats.state_slots = impl_->hybrid ? options_.max_running : 0;
  impl_->stats.free_state_slots = impl_->stats.state_slots;
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(impl_->mtx);
    impl_->closed = true; // submit() refuses from here on, start() does nothing
  }
  stop();
  // Requests still pending end as cancelled, so that whoever waits on their on_finish is told.
  std::vector<Impl::SeqPtr> pending;
  {
    std::lock_guard<std::mutex> lk(impl_->mtx);
    for (auto& s : impl_->inbox) pending.push_back(std::move(s));
    impl_->inbox.clear();
  }
  for (auto& s : impl_->waiting) pending.push_back(std::move(s));
  for (auto& s : impl_->running) pending.push_back(std::move(s));
  impl_->waiting.clear();
  impl_->running.clear();
  for (auto& s : pending) impl_->finish(std::move(s), "cancelled");
}

int64_t Engine::submit(EngineRequest request, EngineTokenCallback on_token, EngineFinishCallback on_finish) {
  const ModelConfig& c = model_.config();
  const int n = int(request.prompt.size());
  if (n == 0) {
    fail("the prompt is empty");
  }
  for (int id : request.prompt) {
    if (id < 0 || id >= c.vocab_size) {
      fail("token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(c.vocab_size));
    }
  }
  if (n >= c.max_position_embeddings) {
    fail("the prompt has " + std::to_string(n) + " tokens; the model's context (max_position_embeddings) is " +
         std::to_string(c.max_position_embeddings) + ", which leaves no room to generate");
  }
  if (request.max_tokens < 0) {
    fail("max_tokens must be non-negative; got " + std::to_string(request.max_tokens));
  }
  const int max_new = std::min(request.max_tokens, c.max_position_embeddings - n);
  // Positions computed at most: the prompt and every new token but the last (never fed back).
  if (ceil_div(n + max_new - 1, options_.block_size) > options_.num_blocks) {
    fail("a request of " + std::to_string(n) + " prompt tokens and up to " + std::to_string(max_new) +
         " new ones needs more KV blocks than the pool's " + std::to_string(options_.num_blocks));
  }
  auto seq = std::make_unique<Impl::Sequence>(0, std::move(request), std::move(on_token), std::move(on_finish));
  seq->tokens = seq->request.prompt;
  seq->prompt_len = n;
  seq->max_new = max_new;
  int64_t id;
  {
    std::lock_guard<std::mutex> lk(impl_->mtx);
    if (impl_->closed) fail("the engine is being destroyed");
    id = impl_->next_id++;
    seq->id = id;
    ++impl_->unfinished;
    impl_->inbox.push_back(std::move(seq));
  }
  impl_->cv.notify_all();
  return id;
}

void Engine::cancel(int64_t id) {
  {
    std::lock_guard<std::mutex> lk(impl_->mtx);
    impl_->cancels.insert(id);
  }
  impl_->cv.notify_all();
}

bool Engine::step() {
  bool more = impl_->step();
  std::lock_guard<std::mutex> lk(impl_->mtx);
  impl_->publish_stats();
  return more;
}

void Engine::run_until_idle() {
  while (step()) {
  }
}

bool Engine::Impl::on_worker() const {
  std::lock_guard<std::mutex> lk(mtx);
  return worker_id == std::this_thread::get_id();
}

void Engine::start() {
  if (impl_->on_worker()) {
    // A callback on the worker: undo its own stop(), not another thread's.
    std::lock_guard<std::mutex> lk(impl_->mtx);
    if (impl_->self_stopped && !impl_->closed) impl_->stopping = impl_->self_stopped = false;
    return;
  }
  std::lock_guard<std::mutex> life(impl_->lifecycle);
  {
    std::lock_guard<std::mutex> lk(impl_->mtx);
    if (impl_->closed || (impl_->worker.joinable() && !impl_->stopping)) return;
  }
  if (impl_->worker.joinable()) impl_->worker.join(); // stopped from its own callback: let it end
  std::lock_guard<std::mutex> lk(impl_->mtx);
  impl_->stopping = impl_->self_stopped = false;
  // The new thread first waits for mtx, held here until worker_id is set.
  impl_->worker = std::thread([this] {
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(impl_->mtx);
        impl_->cv.wait(lk, [this] { return impl_->stopping || impl_->unfinished > 0; });
        if (impl_->stopping) return;
      }
      try {
        step();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[lm.Engine] step failed: %s\n", e.what());
      } catch (...) {
        std::fprintf(stderr, "[lm.Engine] step failed\n");
      }
    }
  });
  impl_->worker_id = impl_->worker.get_id();
}

void Engine::stop() {
  if (impl_->on_worker()) {
    // A callback on the worker cannot join it: the worker ends after this step.
    std::lock_guard<std::mutex> lk(impl_->mtx);
    impl_->stopping = impl_->self_stopped = true;
    return;
  }
  std::lock_guard<std::mutex> life(impl_->lifecycle);
  {
    std::lock_guard<std::mutex> lk(impl_->mtx);
    impl_->stopping = true;
    impl_->self_stopped = false;
  }
  impl_->cv.notify_all();
  if (impl_->worker.joinable()) impl_->worker.join();
  std::lock_guard<std::mutex> lk(impl_->mtx);
  impl_->worker_id = std::thread::id();
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lk(impl_->mtx);
  return impl_->stats;
}

std::vector<EngineResult> generate_batch(const Model& model, const std::vector<EngineRequest>& requests,
                                         EngineOptions options) {
  // Before the engine: its destructor reports pending requests into it.
  std::vector<EngineResult> results(requests.size());
  Engine engine(model, options);
  for (size_t i = 0; i < requests.size(); ++i) {
    engine.submit(requests[i], {}, [&results, i](const EngineResult& r) { results[i] = r; });
  }
  engine.run_until_idle();
  return results;
}

} // namespace nuvec::lm
