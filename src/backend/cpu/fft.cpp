// nuvec: CPU kernel of the FFT family through FFTW's guru64 interface (single precision:
// complex64 and float32). Inputs of another layout or dtype are first copied to a
// row-contiguous buffer of the transform's input type; one plan then covers every batch.
// FFTW's planner is not thread-safe, so planning and destruction hold one mutex; plans are
// made with FFTW_ESTIMATE (no measuring, inputs untouched) and cached by problem.
#include <fftw3.h>

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "backend/cpu/copy.h"
#include "nuvec/allocator.h"
#include "primitives/fft.h"

namespace nuvec {

namespace {

std::mutex& planner_mutex() {
  static std::mutex m;
  return m;
}

// A plan is tied to its problem (sizes, strides, kind) and to the alignment of its arrays;
// fftwf_execute_dft* on new arrays is valid when that alignment matches.
using PlanKey = std::tuple<int, std::vector<int64_t>, int>; // kind, dims, alignment class

std::map<PlanKey, fftwf_plan>& plan_cache() {
  static std::map<PlanKey, fftwf_plan> cache;
  return cache;
}

enum Kind { C2CForward, C2CInverse, R2C, C2R };

// Row-major element strides of a shape.
std::vector<int64_t> row_strides(const Shape& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * shape[i + 1];
  return st;
}

fftwf_plan make_plan(
    Kind kind,
    const std::vector<fftwf_iodim64>& dims,
    const std::vector<fftwf_iodim64>& loops,
    void* in,
    void* out) {
  std::vector<int64_t> key_dims = {static_cast<int64_t>(dims.size())};
  for (auto* v : {&dims, &loops}) {
    for (auto& d : *v) {
      key_dims.push_back(d.n);
      key_dims.push_back(d.is);
      key_dims.push_back(d.os);
    }
  }
  int align = fftwf_alignment_of(static_cast<float*>(in)) * 64 +
      fftwf_alignment_of(static_cast<float*>(out));
  PlanKey key{kind, std::move(key_dims), align};
  std::lock_guard<std::mutex> lock(planner_mutex());
  auto& cache = plan_cache();
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  // c2r may overwrite its (scratch) input, which it prefers; the others must not, since
  // they may read the caller's array in place.
  unsigned flags = FFTW_ESTIMATE | (kind == C2R ? FFTW_DESTROY_INPUT : FFTW_PRESERVE_INPUT);
  int rank = static_cast<int>(dims.size());
  int howmany = static_cast<int>(loops.size());
  fftwf_plan p = nullptr;
  switch (kind) {
    case C2CForward:
    case C2CInverse:
      p = fftwf_plan_guru64_dft(
          rank, dims.data(), howmany, loops.data(), static_cast<fftwf_complex*>(in),
          static_cast<fftwf_complex*>(out), kind == C2CForward ? FFTW_FORWARD : FFTW_BACKWARD, flags);
      break;
    case R2C:
      p = fftwf_plan_guru64_dft_r2c(
          rank, dims.data(), howmany, loops.data(), static_cast<float*>(in),
          static_cast<fftwf_complex*>(out), flags);
      break;
    case C2R:
      p = fftwf_plan_guru64_dft_c2r(
          rank, dims.data(), howmany, loops.data(), static_cast<fftwf_complex*>(in),
          static_cast<float*>(out), flags);
      break;
  }
  if (!p) throw std::runtime_error("[fft] FFTW could not plan the transform.");
  cache.emplace(std::move(key), p);
  return p;
}

void execute(Kind kind, fftwf_plan p, void* in, void* out) {
  switch (kind) {
    case C2CForward:
    case C2CInverse:
      fftwf_execute_dft(p, static_cast<fftwf_complex*>(in), static_cast<fftwf_complex*>(out));
      break;
    case R2C: fftwf_execute_dft_r2c(p, static_cast<float*>(in), static_cast<fftwf_complex*>(out)); break;
    case C2R: fftwf_execute_dft_c2r(p, static_cast<fftwf_complex*>(in), static_cast<float*>(out)); break;
  }
}

} // namespace

void FFT::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  Kind kind = real_ ? (inverse_ ? C2R : R2C) : (inverse_ ? C2CInverse : C2CForward);
  // c2c and r2c plans preserve their input, so a row-contiguous input of the right dtype is
  // read in place; c2r overwrites its input and always gets a scratch copy.
  Dtype want = kind == R2C ? float32 : complex64;
  bool in_place = kind != C2R && in.dtype() == want && in.flags().row_contiguous;
  array buf = in_place ? in : cpu::contiguous_copy(in, want);

  const Shape& ishape = in.shape();
  const Shape& oshape = out.shape();
  auto is = row_strides(ishape), os = row_strides(oshape);
  std::vector<bool> transformed(ishape.size(), false);
  std::vector<fftwf_iodim64> dims, loops;
  // FFTW halves the last of `dims`, so the real axis goes last; its n is the real length.
  double scale = 1;
  for (int a : axes_) {
    transformed[a] = true;
    int64_t n = real_ ? std::max<int64_t>(ishape[a], oshape[a]) : ishape[a];
    if (real_ && a == axes_.back()) n = inverse_ ? oshape[a] : ishape[a];
    dims.push_back({n, is[a], os[a]});
    scale *= static_cast<double>(n);
  }
  for (size_t i = 0; i < ishape.size(); ++i) {
    if (!transformed[i] && ishape[i] != 1) loops.push_back({ishape[i], is[i], os[i]});
  }
  void* src = buf.raw_data();
  void* dst = out.raw_data();
  fftwf_plan p = make_plan(kind, dims, loops, src, dst);
  execute(kind, p, src, dst);
  if (inverse_) {
    float s = static_cast<float>(1.0 / scale);
    float* o = static_cast<float*>(dst);
    size_t count = out.size() * (kind == C2R ? 1 : 2);
    for (size_t i = 0; i < count; ++i) o[i] *= s;
  }
}

} // namespace nuvec
