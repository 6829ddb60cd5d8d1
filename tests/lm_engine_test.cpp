// nuvec-lm's serving engine (include/nuvec/lm/engine.h) on the tiny checkpoints of
// tests/data/lm (float32, CPU): requests run together give each request's output alone and
// the dense path's (generate_tokens with cuda_graphs off: on a GPU it would run the engine),
// under chunked prefill, preemption and prefix sharing;
// no KV block leaks after thousands of random requests with cancellations; bad input throws.
#include <gtest/gtest.h>

#include <cmath>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <thread>
#include <tuple>

#include "donation_checks.h"
#include "lm/layers.h"
#include "lm_fixture.h"
#include "nuvec/lm/engine.h"
#include "nuvec/lm/generate.h"
#include "nuvec/lm/lm.h"
#include "nuvec/ops.h"
#include "nuvec/transforms.h"

using namespace nuvec;
using namespace nuvec::lm;

namespace {

std::string fixture(const std::string& arch) {
  return nuvec::testing::lm_fixture(arch);
}

// Prompts of several lengths (1 to 40 tokens) of random ids.
std::vector<std::vector<int>> prompts(int vocab, int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> id(0, vocab - 1), len(1, 40);
  std::vector<std::vector<int>> out;
  for (int i = 0; i < count; ++i) {
    std::vector<int> p(len(rng));
    for (auto& t : p) t = id(rng);
    out.push_back(p);
  }
  return out;
}

EngineRequest greedy(const std::vector<int>& prompt, int max_tokens) {
  EngineRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.stop_at_eos = false;
  return r;
}

std::vector<EngineRequest> greedy_all(const std::vector<std::vector<int>>& prompts, int max_tokens) {
  std::vector<EngineRequest> out;
  for (auto& p : prompts) out.push_back(greedy(p, max_tokens));
  return out;
}

// Submits requests[i] for i in [from, to), each result stored into got[i] when it ends.
void submit_range(Engine& engine, const std::vector<EngineRequest>& requests, std::vector<EngineResult>& got,
                  size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    engine.submit(requests[i], {}, [&got, i](const EngineResult& r) { got[i] = r; });
  }
}

// Small pools and steps, so that the tiny fixtures exercise chunked prefill and many blocks.
EngineOptions small_engine(int block_size, int num_blocks, int max_batch_tokens) {
  EngineOptions o;
  o.block_size = block_size;
  o.num_blocks = num_blocks;
  o.max_batch_tokens = max_batch_tokens;
  return o;
}

class Engines : public ::testing::TestWithParam<std::string> {};

// Requests run at once, with prefill in chunks of 7 tokens beside the decodes, give each
// request's tokens alone, and the dense path's (generate_tokens).
TEST_P(Engines, TogetherEqualsAloneAndTheDensePath) {
  Model model = Model::load(fixture(GetParam()), float32);
  auto ps = prompts(model.config().vocab_size, 8, 11);
  std::vector<EngineRequest> requests = greedy_all(ps, 10);
  EngineOptions options = small_engine(4, 256, 7);
  std::vector<EngineResult> together = generate_batch(model, requests, options);
  ASSERT_EQ(together.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    std::vector<EngineResult> alone = generate_batch(model, {requests[i]}, options);
    EXPECT_EQ(together[i].tokens, alone[0].tokens) << "request " << i;
    EXPECT_EQ(together[i].finish_reason, "length");
    EXPECT_EQ(together[i].prompt_tokens, int(ps[i].size()));
    GenerationOptions g;
    g.max_tokens = 10;
    g.stop_at_eos = false;
    g.cuda_graphs = false; // the dense loop: on a GPU the default runs this engine
    EXPECT_EQ(together[i].tokens, generate_tokens(model, ps[i], g).tokens) << "request " << i << " vs generate_tokens";
  }
}

// Steps padded to buckets and run through compile_graph (the default; CUDA graphs on a GPU) give the
// tokens of steps built as they are; the padding rows write only the spare block.
TEST_P(Engines, CompiledStepsEqualPlainSteps) {
  Model model = Model::load(fixture(GetParam()), float32);
  auto ps = prompts(model.config().vocab_size, 6, 23);
  std::vector<EngineRequest> requests = greedy_all(ps, 9);
  // Odd step sizes: steps of 13, 5, 3 tokens are padded to 16, 8, 4.
  EngineOptions compiled = small_engine(4, 128, 13);
  ASSERT_TRUE(compiled.compiled_steps);
  EngineOptions plain = compiled;
  plain.compiled_steps = false;
  std::vector<EngineResult> want = generate_batch(model, requests, plain);
  std::vector<EngineResult> got = generate_batch(model, requests, compiled);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].tokens.size(), 9u);
  }
}

// The forward pass over a ragged batch whose middle sequence starts fresh: its rows attend
// among themselves through scaled_dot_product_attention (PagedBatch::fresh) and give the
// logits of the all-paged pass, beside a decode row before them and a continuing chunk after.
TEST_P(Engines, FreshSegmentsEqualThePagedPass) {
  Model model = Model::load(fixture(GetParam()), float32);
  const ModelConfig& c = model.config();
  const int bs = 4, blocks = 10;
  // Every layer's zeroed pools (state pools of 3 rows for Gated DeltaNet layers).
  auto zero_pools = [&](int which) {
    std::vector<array> pools;
    for (int i = 0; i < c.num_hidden_layers; ++i) {
      auto kv = lm::detail::make_layer_pools(c, i, blocks, bs, 3, float32);
      pools.push_back(which == 0 ? kv.first : kv.second);
    }
    return pools;
  };
  std::vector<array> k_pools = zero_pools(0), v_pools = zero_pools(1);
  // Sequence a owns blocks {0, 1, 2} and state row 0, b {3, 4, 5} and row 1, c {6, 7, 8} and
  // row 2 (12 positions each: past gpt_oss's window of 8);
  // rows are (sequence, position, token).
  const std::map<char, std::vector<int>> table = {{'a', {0, 1, 2}}, {'b', {3, 4, 5}}, {'c', {6, 7, 8}}};
  auto batch = [&](const std::vector<std::tuple<char, int, int>>& rows) {
    std::vector<int32_t> tokens, positions, slots, lengths, tables, sample, state_slots;
    lm::detail::PagedBatch pb;
    for (size_t r = 0; r < rows.size(); ++r) {
      auto [seq, pos, tok] = rows[r];
      tokens.push_back(tok);
      positions.push_back(pos);
      slots.push_back(table.at(seq)[pos / bs] * bs + pos % bs);
      lengths.push_back(pos + 1);
      for (int b : table.at(seq)) tables.push_back(b);
      sample.push_back(int32_t(sample.size()));
      state_slots.push_back(seq - 'a');
      // A sequence's consecutive rows form one range unless it is a single continuation.
      const bool follows = r > 0 && std::get<0>(rows[r - 1]) == seq;
      const bool single = pos > 0 && !follows && (r + 1 == rows.size() || std::get<0>(rows[r + 1]) != seq);
      if (follows) {
        ++pb.state_chunks.back().len;
      } else if (!single) {
        pb.state_chunks.push_back({int(r), 1, pos == 0});
      }
    }
    const int T = int(rows.size());
    pb.state_slots = array(state_slots.begin(), {T}, int32);
    pb.tokens = array(tokens.begin(), {T}, int32);
    pb.positions = array(positions.begin(), {T}, int32);
    pb.slots = array(slots.begin(), {T}, int32);
    pb.lengths = array(lengths.begin(), {T}, int32);
    pb.tables = array(tables.begin(), {T, 3}, int32);
    pb.sample_rows = array(sample.begin(), {T}, int32);
    return pb;
  };
  // Fill a's first 10 positions and c's first 9 (both fresh segments).
  std::vector<std::tuple<char, int, int>> first;
  for (int p = 0; p < 10; ++p) first.push_back({'a', p, 3 + 7 * p});
  for (int p = 0; p < 9; ++p) first.push_back({'c', p, 11 + 5 * p});
  lm::detail::PagedBatch fill = batch(first);
  fill.fresh = {{0, 10}, {10, 9}}; // both start at position 0
  eval(lm::detail::paged_forward(c, model.run_weights(), fill, k_pools, v_pools));
  eval(k_pools);
  eval(v_pools);
  // a decodes position 10, b starts fresh with 6 tokens, c continues with positions 9 and 10.
  std::vector<std::tuple<char, int, int>> rows = {{'a', 10, 9}};
  for (int p = 0; p < 6; ++p) rows.push_back({'b', p, 2 + 13 * p});
  rows.push_back({'c', 9, 17});
  rows.push_back({'c', 10, 21});
  auto run = [&](bool with_fresh) {
    std::vector<array> k = k_pools, v = v_pools; // the filled pools, copied by the writes
    lm::detail::PagedBatch pb = batch(rows);
    if (with_fresh) pb.fresh = {{1, 6}};
    return lm::detail::paged_forward(c, model.run_weights(), pb, k, v);
  };
  array want = run(false), got = run(true);
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_TRUE(allclose(got, want, 1e-4, 1e-4).item<bool>()) << "max |diff| " << max(abs(subtract(got, want))).item<float>();
  // Every row's logits are the dense pass's at its position (each sequence's tokens at once):
  // the pools carried keys, values and (Gated DeltaNet) states from the filling pass.
  std::map<char, std::vector<int>> text;
  for (auto& rs : {first, rows}) {
    for (auto& [seq, pos, tok] : rs) {
      ASSERT_EQ(int(text[seq].size()), pos);
      text[seq].push_back(tok);
    }
  }
  std::map<char, array> dense;
  for (auto& [seq, toks] : text) {
    dense.emplace(seq, model(array(toks.begin(), {1, int(toks.size())}, int32))); // [1, L, vocab]
  }
  const int V = c.vocab_size;
  for (size_t r = 0; r < rows.size(); ++r) {
    auto [seq, pos, tok] = rows[r];
    array ref = reshape(slice(dense.at(seq), {0, pos, 0}, {1, pos + 1, V}), {1, V});
    array row = slice(got, {int(r), 0}, {int(r) + 1, V});
    EXPECT_TRUE(allclose(row, ref, 1e-4, 1e-4).item<bool>())
        << "row " << r << " (" << seq << ", position " << pos << "): max |diff| "
        << max(abs(subtract(row, ref))).item<float>();
  }
  // And the filling pass itself equals its all-paged form.
  std::vector<array> k2 = zero_pools(0), v2 = zero_pools(1);
  lm::detail::PagedBatch plain = batch(first);
  array a = lm::detail::paged_forward(c, model.run_weights(), plain, k2, v2);
  lm::detail::PagedBatch again = batch(first);
  again.fresh = {{0, 10}, {10, 9}};
  std::vector<array> k3 = zero_pools(0), v3 = zero_pools(1);
  array b = lm::detail::paged_forward(c, model.run_weights(), again, k3, v3);
  EXPECT_TRUE(allclose(a, b, 1e-4, 1e-4).item<bool>());
}

// A pool too small for every request at once: sequences are preempted and recomputed, and
// each output equals that request's run alone in a roomy pool; every block is free afterwards.
TEST_P(Engines, PreemptionKeepsTheOutputs) {
  Model model = Model::load(fixture(GetParam()), float32);
  auto ps = prompts(model.config().vocab_size, 10, 23);
  std::vector<EngineRequest> requests = greedy_all(ps, 12);
  EngineOptions roomy;
  roomy.block_size = 4;
  roomy.num_blocks = 512;
  EngineOptions tight = roomy;
  tight.num_blocks = 16; // 64 positions: a request needs at most 52
  Engine engine(model, tight);
  std::vector<EngineResult> got(requests.size());
  submit_range(engine, requests, got, 0, requests.size());
  engine.run_until_idle();
  EXPECT_GT(engine.stats().preemptions, 0);
  EXPECT_EQ(engine.stats().free_blocks, engine.stats().total_blocks);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].tokens, generate_batch(model, {requests[i]}, roomy)[0].tokens) << "request " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Lm, Engines, ::testing::Values("llama", "qwen3", "qwen3_moe", "qwen3_next", "gpt_oss"));

// Prompts sharing a prefix reuse its full blocks and give the same tokens as without sharing.
TEST(LmEngine, PrefixSharingGivesTheSameTokens) {
  Model model = Model::load(fixture("qwen3"), float32);
  auto ps = prompts(model.config().vocab_size, 6, 5);
  std::vector<int> prefix = prompts(model.config().vocab_size, 1, 99)[0];
  prefix.resize(13, 7);
  std::vector<EngineRequest> requests;
  for (auto& p : ps) {
    std::vector<int> full = prefix;
    full.insert(full.end(), p.begin(), p.end());
    requests.push_back(greedy(full, 6));
  }
  requests.push_back(greedy(prefix, 6)); // the prefix alone: its last token is computed
  EngineOptions options;
  options.block_size = 4;
  options.num_blocks = 256;
  EngineOptions plain = options;
  plain.prefix_sharing = false;
  Engine engine(model, options);
  std::vector<EngineResult> got(requests.size());
  // The first request runs alone first, so the others find its blocks.
  submit_range(engine, requests, got, 0, 1);
  engine.run_until_idle();
  submit_range(engine, requests, got, 1, requests.size());
  engine.run_until_idle();
  EXPECT_EQ(engine.stats().shared_block_hits, 0) << "the first request's blocks were freed when it finished";
  // Shared while alive: all at once, the long-running first request holds the prefix.
  Engine live(model, options);
  std::vector<EngineResult> got2(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    EngineRequest r = requests[i];
    r.max_tokens = i == 0 ? 30 : 6;
    live.submit(r, {}, [&got2, i](const EngineResult& res) { got2[i] = res; });
    live.step(); // one at a time, so later ones see the published blocks
  }
  live.run_until_idle();
  EXPECT_GT(live.stats().shared_block_hits, 0);
  EXPECT_EQ(live.stats().free_blocks, live.stats().total_blocks);
  std::vector<EngineResult> want = generate_batch(model, requests, plain);
  for (size_t i = 1; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got2[i].tokens, want[i].tokens) << "request " << i << " (shared)";
  }
}

// Seeded sampling gives a request's own tokens whatever else runs beside it.
TEST(LmEngine, SeededSamplingIsPerRequest) {
  Model model = Model::load(fixture("llama"), float32);
  auto ps = prompts(model.config().vocab_size, 5, 3);
  std::vector<EngineRequest> requests;
  for (size_t i = 0; i < ps.size(); ++i) {
    EngineRequest r = greedy(ps[i], 9);
    r.sampling.temperature = 0.8f;
    r.sampling.top_p = 0.9f;
    r.sampling.seed = 100 + i;
    requests.push_back(r);
  }
  std::vector<EngineResult> together = generate_batch(model, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(together[i].tokens, generate_batch(model, {requests[i]})[0].tokens) << "request " << i;
  }
}

// 10,000 random requests with random cancellations and early stops: each finishes once,
// with a valid reason, and every block (and Gated DeltaNet state row) is free at the end.
// A third of the prompts start with one of four 12-token prefixes, so blocks are shared, and
// the pool is small enough that sequences are preempted: both happen (the stats say so).
class EngineLeaks : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineLeaks, NoBlockLeaksUnderRandomCancellations) {
  Model model = Model::load(fixture(GetParam()), float32);
  EngineOptions options;
  options.block_size = 4;
  options.num_blocks = 64;
  options.max_batch_tokens = 64;
  Engine engine(model, options);
  std::mt19937 rng(1);
  const int n = 10000;
  auto ps = prompts(model.config().vocab_size, n, 77);
  const auto prefixes = prompts(model.config().vocab_size, 4, 78);
  for (int i = 0; i < n; i += 3) {
    std::vector<int> p = prefixes[i % 4];
    p.resize(12, 1);
    p.insert(p.end(), ps[i].begin(), ps[i].begin() + std::min<size_t>(ps[i].size(), 28));
    ps[i] = p;
  }
  std::vector<int> finished(n, 0);
  std::vector<std::string> reasons(n);
  std::vector<int64_t> ids;
  std::uniform_int_distribution<int> max_tokens(0, 6), coin(0, 9);
  for (int i = 0; i < n; ++i) {
    EngineRequest r = greedy(ps[i], max_tokens(rng));
    int stop_after = coin(rng) == 0 ? 1 : 1000;
    int seen = 0;
    ids.push_back(engine.submit(
        r, [stop_after, seen](int) mutable { return ++seen < stop_after; },
        [&, i](const EngineResult& res) {
          ++finished[i];
          reasons[i] = res.finish_reason;
        }));
    if (coin(rng) < 2) engine.cancel(ids[std::uniform_int_distribution<int>(0, i)(rng)]);
    if (i % 8 == 7) engine.step();
  }
  engine.run_until_idle();
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(finished[i], 1) << "request " << i;
    EXPECT_TRUE(reasons[i] == "stop" || reasons[i] == "length" || reasons[i] == "cancelled") << reasons[i];
  }
  EngineStats st = engine.stats();
  EXPECT_EQ(st.free_blocks, st.total_blocks);
  EXPECT_EQ(st.free_state_slots, st.state_slots);
  EXPECT_EQ(st.state_slots, GetParam() == "qwen3_next" ? options.max_running : 0);
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.waiting, 0);
  EXPECT_EQ(st.prefix_states, 0);
  EXPECT_GT(st.shared_block_hits, 0);
  EXPECT_GT(st.preemptions, 0);
}

INSTANTIATE_TEST_SUITE_P(Lm, EngineLeaks, ::testing::Values("llama", "qwen3_next"));

// A hybrid model (Gated DeltaNet layers): with fewer state rows than requests, each row
// serves several sequences in turn (a new one never reads what the last left); bucketed
// decode steps pad with rows no sequence holds, then spare rows (max_running and
// max_batch_tokens not powers of two, a budget below max_running); the requests share a
// 12-token prefix, which later admissions take from a state snapshot (prefix_state_rows
// default), or never without snapshot rows (prefix_state_rows 0). The tokens are the dense
// path's either way, and every row, block and snapshot is free at the end.
TEST(LmEngine, HybridStateRowsAreReusedAndPrefixesSharedThroughSnapshots) {
  Model model = Model::load(fixture("qwen3_next"), float32);
  auto ps = prompts(model.config().vocab_size, 9, 41);
  std::vector<int> prefix(12, 5);
  for (auto& p : ps) p.insert(p.begin(), prefix.begin(), prefix.end());
  // Lengths that end the requests at different steps: decode steps of every count of rows.
  std::vector<EngineRequest> requests;
  std::vector<std::vector<int>> want;
  for (size_t i = 0; i < ps.size(); ++i) {
    requests.push_back(greedy(ps[i], 2 + int(i * 5) % 11));
    GenerationOptions g;
    g.max_tokens = requests.back().max_tokens;
    g.stop_at_eos = false;
    g.cuda_graphs = false; // the dense loop: on a GPU the default runs this engine
    want.push_back(generate_tokens(model, ps[i], g).tokens);
  }
  for (int snapshot_rows : {-1, 0}) {
    for (auto [running, budget] : {std::pair{2, 16}, std::pair{5, 3}, std::pair{6, 100}, std::pair{7, 5}}) {
      SCOPED_TRACE("max_running " + std::to_string(running) + ", max_batch_tokens " + std::to_string(budget) +
                   ", prefix_state_rows " + std::to_string(snapshot_rows));
      EngineOptions options = small_engine(4, 128, budget);
      options.max_running = running;
      options.prefix_state_rows = snapshot_rows;
      ASSERT_TRUE(options.prefix_sharing && options.compiled_steps);
      Engine engine(model, options);
      std::vector<EngineResult> got(requests.size());
      submit_range(engine, requests, got, 0, requests.size());
      engine.run_until_idle();
      EngineStats st = engine.stats();
      if (snapshot_rows == 0) EXPECT_EQ(st.shared_block_hits, 0);
      // Admitted over several steps (max_running below 9), later requests find the prefix.
      if (snapshot_rows != 0 && running < 6) EXPECT_GT(st.shared_block_hits, 0);
      EXPECT_EQ(st.state_slots, running);
      EXPECT_EQ(st.free_state_slots, running);
      EXPECT_EQ(st.free_blocks, st.total_blocks);
      EXPECT_EQ(st.prefix_states, 0) << "snapshots go with their blocks";
      for (size_t i = 0; i < requests.size(); ++i) {
        EXPECT_EQ(got[i].tokens, want[i]) << "request " << i;
      }
    }
  }
}

// Hybrid prefix sharing (qwen3_next, blocks of 4). A long-running first request keeps its
// state at its last full prompt block (12 of 15 tokens: its first chunk stops there). Requests
// with its 13-token prefix and other suffixes take the first 3 blocks and that state. Of the
// requests with a second, 9-token prefix, the first publishes it, the second finds it without
// a state, computes it and keeps one at its end (a chunk stops at 8), and the third starts
// there. A request extending the first one's prompt starts from its state too. With one
// snapshot row the two prefixes evict each other's states. The tokens are those of an engine
// without sharing, compiled steps or not, and no snapshot, block or row is left at the end.
TEST(LmEngine, HybridPrefixSharingGivesTheSameTokens) {
  Model model = Model::load(fixture("qwen3_next"), float32);
  const int V = model.config().vocab_size;
  auto suffixes = prompts(V, 6, 17);
  std::vector<int> prefix_a = prompts(V, 1, 5)[0], prefix_b = prompts(V, 1, 6)[0];
  prefix_a.resize(13, 3);
  prefix_b.resize(9, 4);
  std::vector<EngineRequest> requests;
  std::vector<int> first = prefix_a;
  first.insert(first.end(), {1, 2});
  requests.push_back(greedy(first, 30));
  for (int i = 0; i < 6; ++i) {
    std::vector<int> p = i % 2 ? prefix_b : prefix_a;
    p.insert(p.end(), suffixes[i].begin(), suffixes[i].end());
    requests.push_back(greedy(p, 5));
  }
  std::vector<int> extended = first;
  extended.insert(extended.end(), {7, 8, 9});
  requests.push_back(greedy(extended, 5));
  EngineOptions plain = small_engine(4, 256, 64);
  plain.prefix_sharing = false;
  const std::vector<EngineResult> want = generate_batch(model, requests, plain);
  for (int rows : {-1, 1}) {
    for (bool compiled : {true, false}) {
      SCOPED_TRACE("prefix_state_rows " + std::to_string(rows) + (compiled ? ", compiled" : ", plain steps"));
      EngineOptions options = small_engine(4, 256, 64);
      options.prefix_state_rows = rows;
      options.compiled_steps = compiled;
      Engine engine(model, options);
      std::vector<EngineResult> got(requests.size());
      int most_states = 0;
      for (size_t i = 0; i < requests.size(); ++i) {
        engine.submit(requests[i], {}, [&got, i](const EngineResult& r) { got[i] = r; });
        engine.step(); // one at a time, so later ones find the published blocks and states
        most_states = std::max(most_states, engine.stats().prefix_states);
      }
      engine.run_until_idle();
      EngineStats st = engine.stats();
      EXPECT_GE(st.shared_block_hits, rows == 1 ? 3 : 9);
      // Each request keeps its last full prompt block's state too: one row bounds them.
      if (rows == 1) EXPECT_EQ(most_states, 1);
      else EXPECT_GE(most_states, 3);
      EXPECT_EQ(st.prefix_states, 0);
      EXPECT_EQ(st.free_blocks, st.total_blocks);
      EXPECT_EQ(st.free_state_slots, st.state_slots);
      for (size_t i = 0; i < requests.size(); ++i) {
        EXPECT_EQ(got[i].finish_reason, "length") << "request " << i;
        EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
      }
    }
  }
}

// A sequence that recomputes part of a published prefix (no state snapshot under it) takes the
// published blocks in place of its equal ones once computed, so that the blocks it publishes
// after them are found: here B recomputes A's first 2 blocks and publishes 2 more under them,
// and C, B's prompt extended, takes all 4 with B's state at its end.
TEST(LmEngine, HybridBlocksAfterARecomputedPrefixAreFound) {
  Model model = Model::load(fixture("qwen3_next"), float32);
  const int V = model.config().vocab_size;
  std::vector<int> a = prompts(V, 1, 21)[0], fresh = prompts(V, 1, 22)[0];
  a.resize(17, 2);
  fresh.resize(9, 6);
  std::vector<int> b(a.begin(), a.begin() + 8);
  b.insert(b.end(), fresh.begin(), fresh.end()); // 17 tokens: A's first 2 blocks, then its own
  std::vector<int> c = b;
  c.insert(c.end(), {1, 2, 3, 4});
  std::vector<EngineRequest> requests{greedy(a, 40), greedy(b, 20), greedy(c, 4)};
  EngineOptions options = small_engine(4, 256, 64);
  options.prefix_state_rows = 8;
  Engine engine(model, options);
  std::vector<EngineResult> got(3);
  std::vector<int64_t> hits;
  for (size_t i = 0; i < requests.size(); ++i) {
    const int64_t before = engine.stats().shared_block_hits;
    engine.submit(requests[i], {}, [&got, i](const EngineResult& r) { got[i] = r; });
    for (int s = 0; s < 3; ++s) engine.step(); // admitted and its prompt computed
    hits.push_back(engine.stats().shared_block_hits - before);
  }
  engine.run_until_idle();
  EXPECT_EQ(hits, (std::vector<int64_t>{0, 0, 4})) << "B finds A's 2 blocks without a state; C takes B's 4";
  EngineOptions plain = options;
  plain.prefix_sharing = false;
  const std::vector<EngineResult> want = generate_batch(model, requests, plain);
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
  EXPECT_EQ(engine.stats().free_blocks, engine.stats().total_blocks);
  EXPECT_EQ(engine.stats().prefix_states, 0);
}

// Copying a state row (a snapshot, or a restore) updates an unshared pool in place, for the
// conv pool's one head as for the recurrent pool's several.
TEST(LmEngine, StateRowCopiesUpdateThePoolInPlace) {
  for (const Shape& shape : {Shape{10, 1, 3, 128}, Shape{10, 4, 16, 16}}) {
    array base = astype(arange(0, 10 * shape[1] * shape[2] * shape[3], 1), float32);
    array pool = nuvec::testing::fresh_buffer(reshape(base, shape));
    std::weak_ptr<array::Data> buffer = nuvec::testing::watch_buffer(pool);
    // (a buffer of its own: copy() may share the pool's)
    const array row7 = nuvec::testing::fresh_buffer(slice(pool, {7, 0, 0, 0}, {8, shape[1], shape[2], shape[3]}));
    pool = lm::detail::copy_pool_row(pool, 7, 2);
    eval(pool);
    EXPECT_EQ(pool.data_shared_ptr(), buffer.lock()) << "the pool was copied";
    EXPECT_TRUE(array_equal(slice(pool, {2, 0, 0, 0}, {3, shape[1], shape[2], shape[3]}), row7).item<bool>());
    EXPECT_TRUE(array_equal(slice(pool, {7, 0, 0, 0}, {8, shape[1], shape[2], shape[3]}), row7).item<bool>());
  }
}

// Requests submitted from several threads to an engine stepping on its own thread.
TEST(LmEngine, BackgroundThreadServesConcurrentSubmitters) {
  Model model = Model::load(fixture("qwen3"), float32);
  auto ps = prompts(model.config().vocab_size, 12, 8);
  std::vector<EngineRequest> requests = greedy_all(ps, 7);
  std::vector<EngineResult> want = generate_batch(model, requests);
  Engine engine(model);
  engine.start();
  std::vector<EngineResult> got(requests.size());
  std::vector<std::vector<int>> streamed(requests.size());
  std::atomic<int> done{0};
  std::vector<std::thread> clients;
  for (size_t i = 0; i < requests.size(); ++i) {
    clients.emplace_back([&, i] {
      engine.submit(
          requests[i],
          [&streamed, i](int t) {
            streamed[i].push_back(t);
            return true;
          },
          [&, i](const EngineResult& r) {
            got[i] = r;
            ++done;
          });
    });
  }
  for (auto& t : clients) t.join();
  for (int spin = 0; spin < 6000 && done < int(requests.size()); ++spin) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  engine.stop();
  ASSERT_EQ(done.load(), int(requests.size()));
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(streamed[i], want[i].tokens) << "request " << i << " (streamed)";
  }
}

TEST(LmEngine, BadInputThrowsNamingTheEngine) {
  Model model = Model::load(fixture("llama"), float32);
  auto message = [](auto f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  EngineOptions small;
  small.num_blocks = 4;
  small.block_size = 4;
  Engine engine(model, small);
  EXPECT_NE(message([&] { engine.submit(greedy({}, 3)); }).find("[lm.Engine]"), std::string::npos);
  EXPECT_NE(message([&] { engine.submit(greedy({1, 100000}, 3)); }).find("vocabulary"), std::string::npos);
  EXPECT_NE(message([&] { engine.submit(greedy({1, 2}, -1)); }).find("max_tokens"), std::string::npos);
  EXPECT_NE(message([&] { engine.submit(greedy(std::vector<int>(20, 1), 3)); }).find("KV blocks"), std::string::npos);
  // 16 positions: the prompt and every new token but the last (never fed back) fit exactly.
  EXPECT_EQ(engine.stats().free_blocks, 4); // counted from the start
  EXPECT_NO_THROW(engine.submit(greedy(std::vector<int>(14, 1), 3)));
  EXPECT_NE(message([&] { engine.submit(greedy(std::vector<int>(14, 1), 4)); }).find("KV blocks"), std::string::npos);
  engine.run_until_idle();
  // Sizes whose buckets or int32 slots would overflow are refused (a hybrid model's
  // constructor looped for ever on max_running 2^31 - 1).
  const Model hybrid = Model::load(fixture("qwen3_next"), float32);
  for (const Model* m : std::initializer_list<const Model*>{&model, &hybrid}) {
    for (auto [running, tokens, blocks] : {std::tuple{INT32_MAX, INT32_MAX, 0}, std::tuple{256, (1 << 30) + 1, 0},
                                            std::tuple{256, 512, 1 << 29}}) {
      EngineOptions big;
      big.max_running = running;
      big.max_batch_tokens = tokens;
      big.num_blocks = blocks;
      EXPECT_NE(message([&] { Engine e(*m, big); }).find("2^30"), std::string::npos) << m->config().model_type;
    }
  }
  EngineOptions bad;
  bad.block_size = 0;
  EXPECT_NE(message([&] { Engine e(model, bad); }).find("block_size"), std::string::npos);
  for (float f : {0.0f, -0.5f, 1.5f, std::nanf("")}) {
    EngineOptions share;
    share.gpu_memory_fraction = f;
    EXPECT_NE(message([&] { Engine e(model, share); }).find("gpu_memory_fraction"), std::string::npos) << f;
  }
  // Destroying an engine with requests pending ends them as cancelled.
  {
    EngineResult pending;
    {
      Engine e(model);
      e.submit(greedy({1, 2, 3}, 5), {}, [&](const EngineResult& r) { pending = r; });
    }
    EXPECT_EQ(pending.finish_reason, "cancelled");
  }
  // stop() from a callback on the worker thread does not throw (it cannot join itself); the
  // engine serves again after start().
  {
    Engine e(model);
    e.start();
    std::atomic<int> done{0};
    EngineResult first, second;
    e.submit(greedy({1, 2, 3}, 2), {}, [&](const EngineResult& r) {
      first = r;
      e.stop();
      ++done;
    });
    for (int spin = 0; spin < 2000 && done < 1; ++spin) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_EQ(done.load(), 1);
    // Stopped: a request waits until start().
    e.submit(greedy({4, 5}, 2), {}, [&](const EngineResult& r) {
      second = r;
      ++done;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(done.load(), 1);
    e.start();
    for (int spin = 0; spin < 2000 && done < 2; ++spin) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    e.stop();
    EXPECT_EQ(first.finish_reason, "length");
    EXPECT_EQ(second.finish_reason, "length");
    EXPECT_EQ(second.tokens.size(), 2u);
  }
  // Two threads starting an engine that a callback stopped: one worker, no hang (both
  // joined the old worker); stop() then start() in one callback keeps it running.
  {
    Engine e(model);
    e.start();
    std::atomic<int> done{0};
    e.submit(greedy({1, 2}, 1), {}, [&](const EngineResult&) {
      e.stop();
      ++done;
    });
    for (int spin = 0; spin < 2000 && done < 1; ++spin) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::thread a([&] { e.start(); }), b([&] { e.start(); });
    a.join();
    b.join();
    e.submit(greedy({3, 4}, 1), {}, [&](const EngineResult&) {
      e.stop();
      e.start();
      ++done;
    });
    e.submit(greedy({5, 6}, 3), {}, [&](const EngineResult&) { ++done; });
    for (int spin = 0; spin < 2000 && done < 3; ++spin) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(done.load(), 3);
    e.stop();
  }
  // A request refused after others were queued: the engine's destructor reports the queued
  // ones as cancelled into results declared before it (generate_batch's order; its results
  // were destroyed first and then written, which only a sanitizer sees), and generate_batch
  // throws the refusal.
  {
    std::vector<EngineResult> results(3);
    {
      Engine e(model);
      for (int i = 0; i < 3; ++i) e.submit(greedy({1, 2, 3, 4}, 5), {}, [&results, i](const EngineResult& r) { results[i] = r; });
      EXPECT_NE(message([&] { e.submit(greedy({1, 100000}, 3)); }).find("vocabulary"), std::string::npos);
    }
    for (auto& r : results) EXPECT_EQ(r.finish_reason, "cancelled");
    std::vector<EngineRequest> rs(3, greedy({1, 2, 3, 4}, 5));
    rs.push_back(greedy({1, 100000}, 3));
    EXPECT_NE(message([&] { generate_batch(model, rs); }).find("vocabulary"), std::string::npos);
  }
  // A token callback that throws ends its own request with an error, not the others.
  {
    Engine e(model);
    EngineResult thrower, other;
    e.submit(greedy({1, 2, 3}, 5), [](int) -> bool { throw 42; }, [&](const EngineResult& r) { thrower = r; });
    e.submit(greedy({4, 5, 6}, 5), {}, [&](const EngineResult& r) { other = r; });
    e.run_until_idle();
    EXPECT_EQ(thrower.finish_reason.rfind("error", 0), 0u) << thrower.finish_reason;
    EXPECT_EQ(other.finish_reason, "length");
    EXPECT_EQ(other.tokens.size(), 5u);
    EXPECT_EQ(e.stats().free_blocks, e.stats().total_blocks);
  }
  // Nothing to generate: finishes with "length" and no tokens.
  std::vector<EngineResult> none = generate_batch(model, {greedy({1, 2, 3}, 0)});
  EXPECT_TRUE(none[0].tokens.empty());
  EXPECT_EQ(none[0].finish_reason, "length");
}

} // namespace
