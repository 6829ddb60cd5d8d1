// The Gated DeltaNet layer of the serving engine (src/lm/layers.h, paged_linear_attention):
// a ragged batch's sequences each carry their conv inputs and recurrent state in a row of two
// state pools, as vLLM's and SGLang's Mamba caches keep one state slot per running request.
// The one-token continuations (the decodes) run together, one causal_conv1d_step and one
// gated_delta_slots over their rows; every other range (a prompt chunk) runs alone, its conv
// over its window and its recurrence from zeros when it starts the sequence. The state pools
// are paged pools with the rows as blocks: fast::paged_write stores conv inputs and a fresh
// range's final state in place; gated_delta_slots updates the recurrent rows it reads.
// copy_pool_row copies one row to another (the engine's prefix-state snapshots).
#include "layers.h"
#include "nuvec/ops.h"
#include "nuvec/transforms.h"

namespace nuvec::lm::detail {

namespace {

// Writes the states of n sequences, values [n · R, H, D] (R positions each, in order), into
// the pool [P, H, R, D] at rows `slots` [n]: position j of row s is the paged slot s · R + j.
array store_rows(const array& pool, const array& slots, const array& rows_nhd) {
  const int R = pool.shape(2);
  const int n = slots.shape(0);
  array at = add(multiply(reshape(slots, {n, 1}), array(R, int32)), reshape(arange(R, int32), {1, R}));
  return fast::paged_write(pool, rows_nhd, reshape(at, {n * R}));
}

} // namespace

array copy_pool_row(const array& pool, int from, int to) {
  const int H = pool.shape(1), R = pool.shape(2), D = pool.shape(3);
  if (R == 0 || from == to) return pool;
  // take allocates the row (a slice, even made contiguous, may stay a view of the pool's
  // buffer, which would keep the write below from updating the pool in place).
  array row = contiguous(transpose(reshape(take(pool, array({from}, int32), 0), {H, R, D}), {1, 0, 2}));
  eval(row); // read before the write below takes the pool's buffer
  return store_rows(pool, array({to}, int32), row);
}

array paged_linear_attention(const ModelConfig& c, const WeightMap& w, int layer, const array& x,
                             const PagedBatch& b, array& conv_pool, array& state_pool) {
  const int T = x.shape(0);
  const int P = conv_pool.shape(0), Km1 = conv_pool.shape(2), C = conv_pool.shape(3);
  const int Hv = state_pool.shape(1), Dv = state_pool.shape(2), Dk = state_pool.shape(3);
  const int singles = b.state_chunks.empty() ? T : b.state_chunks.front().row;
  const array single_slots = slice(b.state_slots, {0}, {singles});
  auto chunk_slot = [&](const PagedBatch::StateChunk& ch) { return slice(b.state_slots, {ch.row}, {ch.row + 1}); };
  const auto& rows = sequence_rows;

  // The conv's last K − 1 inputs of the sequences at `slots`, [n, K − 1, C], and their update.
  auto conv_state = [&](const array& slots) { return take(reshape(conv_pool, {P, Km1, C}), slots, 0); };
  auto store_conv = [&](const array& slots, const array& state) {
    if (Km1 == 0) return; // a kernel of 1 keeps nothing
    conv_pool = store_rows(conv_pool, slots, reshape(state, {slots.shape(0) * Km1, 1, C}));
  };
  // A final recurrent state [n, Hv, Dv, Dk] into the rows `slots`.
  auto store_state = [&](const array& slots, const array& state) {
    state_pool = store_rows(state_pool, slots, reshape(transpose(state, {0, 2, 1, 3}), {slots.shape(0) * Dv, Hv, Dk}));
  };

  DeltaSequenceOps ops;
  ops.conv = [&](const array& mixed, const array& weight) {
    const int K = weight.shape(1);
    std::vector<array> out;
    if (singles > 0) {
      auto [y, state] = fast::causal_conv1d_step(rows(mixed, 0, singles, 1), weight, conv_state(single_slots));
      store_conv(single_slots, state);
      out.push_back(reshape(y, {singles, C}));
    }
    for (const auto& ch : b.state_chunks) {
      array before = ch.fresh ? zeros({1, K - 1, C}, mixed.dtype()) : astype(conv_state(chunk_slot(ch)), mixed.dtype());
      array window = concatenate({before, rows(mixed, ch.row, 1, ch.len)}, 1);
      store_conv(chunk_slot(ch), slice(window, {0, ch.len, 0}, {1, ch.len + K - 1, C}));
      out.push_back(reshape(conv1d(window, weight, 1, 0, 1, C), {ch.len, C}));
    }
    return out.size() == 1 ? out[0] : concatenate(out, 0);
  };
  ops.recurrence = [&](const array& q, const array& k, const array& v, const array& g, const array& beta) {
    std::vector<array> out;
    if (singles > 0) {
      auto part = [&](const array& t) { return rows(t, 0, singles, 1); };
      auto [y, pool] = fast::gated_delta_slots(part(q), part(k), part(v), part(g), part(beta), state_pool, single_slots);
      state_pool = pool;
      out.push_back(reshape(y, {singles, Hv, Dv}));
    }
    for (const auto& ch : b.state_chunks) {
      auto part = [&](const array& t) { return rows(t, ch.row, 1, ch.len); };
      // From zeros (the state is then written) or from the sequence's row (updated there).
      auto [y, state] = ch.fresh
          ? fast::gated_delta(part(q), part(k), part(v), part(g), part(beta), zeros({1, Hv, Dv, Dk}, float32))
          : fast::gated_delta_slots(part(q), part(k), part(v), part(g), part(beta), state_pool, chunk_slot(ch));
      if (ch.fresh) {
        store_state(chunk_slot(ch), state);
      } else {
        state_pool = state;
      }
      out.push_back(reshape(y, {ch.len, Hv, Dv}));
    }
    return out.size() == 1 ? out[0] : concatenate(out, 0);
  };
  return gated_deltanet(c, w, layer, x, ops);
}

} // namespace nuvec::lm::detail
