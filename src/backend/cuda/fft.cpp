// nuvec: FFT on the GPU through cuFFT (single precision, as the CPU's FFTW kernel: complex64
// and float32; the ops have already cast float64 down). cuFFT plans transforms of rank <= 3
// over one batch dimension, while the primitive may list any axes, so the transform is run as
// a sequence of passes, each over a run of <= 3 consecutive axes of a row-contiguous buffer
// (the DFT is separable, so the order of the complex passes does not matter):
// - rfft: one real-to-complex pass over axes.back() (with up to two consecutive transformed
//   axes before it), then complex forward passes over the rest, in place on the output;
// - irfft: complex inverse passes over the other axes on a private copy, then a 1-d
//   complex-to-real pass over axes.back() (NumPy's irfftn order);
// - fft/ifft: the first pass reads the input, the others run in place on the output.
// A pass over axes with elements after them (inner > 1) uses cuFFT's strided layout, looping
// over the outer or the inner index when either is small, else transposes the run to the end
// through cu::copy_elements. Inverses are scaled by 1/N afterwards (cu::scale_in_place), as
// the CPU kernel does. Plans are cached per problem; their work areas come from cu::scratch
// per execution, so plans are shared between streams safely.
#include <cufft.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backend/common/strided.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/scale.h"
#include "primitives/fft.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

// Most cuFFT executions one strided pass may loop over before it transposes instead.
constexpr int64_t kMaxExecs = 16;

// Cached plans beyond this count: idle ones are destroyed (see evict_idle).
constexpr size_t kMaxPlans = 256;

// Most consecutive axes one cuFFT plan transforms.
constexpr int kMaxRank = 3;

enum class Kind { Forward, Inverse, R2C, C2R };

/// cuFFT's name of a result code.
const char* result_name(cufftResult r) {
  switch (r) {
    case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_TYPE: return "CUFFT_INVALID_TYPE";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    case CUFFT_INVALID_DEVICE: return "CUFFT_INVALID_DEVICE";
    case CUFFT_NO_WORKSPACE: return "CUFFT_NO_WORKSPACE";
    case CUFFT_NOT_IMPLEMENTED: return "CUFFT_NOT_IMPLEMENTED";
    case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
    default: return "unknown cuFFT error";
  }
}

/// Throws std::runtime_error "[fft] <call>: <result>" unless r is CUFFT_SUCCESS.
void check_cufft(cufftResult r, const char* what) {
  if (r != CUFFT_SUCCESS) {
    throw std::runtime_error(std::string("[fft] ") + what + ": " + result_name(r));
  }
}
#define NUVEC_CUFFT_CHECK(expr) check_cufft((expr), #expr)

/// One batched cuFFT problem in its advanced layout: batch b's element x of the transform
/// (row-major index over the dims) sits at b * idist + x' * istride, x' being x's row-major
/// index within inembed (likewise for the output).
struct Layout {
  std::vector<long long> n, inembed, onembed; // n: logical (real-signal) lengths
  long long istride, idist, ostride, odist, batch;
};

/// A cuFFT plan and its work-area size. Executions lock `mu` so that setting the stream and
/// the work area and enqueueing the transform happen together.
struct Plan {
  cufftHandle handle{0};
  bool created{false};
  size_t work{0};
  std::mutex mu;
  ~Plan() {
    if (created) cufftDestroy(handle);
  }
};

/// cuFFT's single-precision transform type of a pass kind.
cufftType type_of(Kind kind) {
  switch (kind) {
    case Kind::R2C: return CUFFT_R2C;
    case Kind::C2R: return CUFFT_C2R;
    default: return CUFFT_C2C;
  }
}

using PlanCache = std::map<std::vector<long long>, std::shared_ptr<Plan>>;

/// Destroys the cached plans of `device` that no evaluation holds. Their earlier executions
/// may still be queued, so the device is synchronised first (rare: only when the cache is
/// full). A plan nobody holds cannot be picked up meanwhile: that needs the cache's lock.
void evict_idle(PlanCache& cache, int device) {
  NUVEC_CUDA_CHECK(cudaDeviceSynchronize());
  for (auto it = cache.begin(); it != cache.end();) {
    if (it->first[0] == device && it->second.use_count() == 1) {
      it = cache.erase(it);
    } else {
      ++it;
    }
  }
}

/// The cached plan of (current device, kind, layout), made on first use.
std::shared_ptr<Plan> get_plan(Kind kind, const Layout& l) {
  int device = 0;
  NUVEC_CUDA_CHECK(cudaGetDevice(&device));
  const int rank = static_cast<int>(l.n.size());
  std::vector<long long> key = {device, static_cast<long long>(type_of(kind)), rank};
  for (auto* v : {&l.n, &l.inembed, &l.onembed}) key.insert(key.end(), v->begin(), v->end());
  key.insert(key.end(), {l.istride, l.idist, l.ostride, l.odist, l.batch});
  static std::mutex mu;
  static PlanCache cache;
  // Held while planning too: plans are made rarely, and one plan per problem is enough.
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (cache.size() >= kMaxPlans) evict_idle(cache, device);
  auto plan = std::make_shared<Plan>();
  NUVEC_CUFFT_CHECK(cufftCreate(&plan->handle));
  plan->created = true;
  // The work area is supplied per execution (cu::scratch), never owned by the plan.
  NUVEC_CUFFT_CHECK(cufftSetAutoAllocation(plan->handle, 0));
  std::vector<long long> n = l.n, ie = l.inembed, oe = l.onembed; // cuFFT takes non-const
  NUVEC_CUFFT_CHECK(cufftMakePlanMany64(
      plan->handle, rank, n.data(), ie.data(), l.istride, l.idist, oe.data(), l.ostride,
      l.odist, type_of(kind), l.batch, &plan->work));
  cache.emplace(std::move(key), plan);
  return plan;
}

/// Enqueues one execution of `plan` on cu::stream(): src -> dst (equal for in place).
void execute(Kind kind, Plan& plan, const void* src, void* dst) {
  void* work = plan.work > 0 ? cu::scratch(plan.work) : nullptr;
  std::lock_guard<std::mutex> lock(plan.mu);
  NUVEC_CUFFT_CHECK(cufftSetStream(plan.handle, cu::stream()));
  NUVEC_CUFFT_CHECK(cufftSetWorkArea(plan.handle, work));
  void* in = const_cast<void*>(src); // read only, except by c2r on our private copies
  switch (kind) {
    case Kind::Forward:
    case Kind::Inverse:
      NUVEC_CUFFT_CHECK(cufftExecC2C(
          plan.handle, static_cast<cufftComplex*>(in), static_cast<cufftComplex*>(dst),
          kind == Kind::Forward ? CUFFT_FORWARD : CUFFT_INVERSE));
      break;
    case Kind::R2C:
      NUVEC_CUFFT_CHECK(cufftExecR2C(
          plan.handle, static_cast<cufftReal*>(in), static_cast<cufftComplex*>(dst)));
      break;
    case Kind::C2R:
      NUVEC_CUFFT_CHECK(cufftExecC2R(
          plan.handle, static_cast<cufftComplex*>(in), static_cast<cufftReal*>(dst)));
      break;
  }
}

/// The product of s[from..to).
int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

/// cuFFT requires its pointers aligned to cufftComplex (8 bytes) in every transform kind.
bool aligned8(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 8 == 0;
}

/// One pass: the transform `kind` over the consecutive axes [a0, a1] of the row-contiguous
/// src (shape ishape) into the row-contiguous dst (shape oshape; it differs from ishape only
/// in a1 for the real kinds, whose logical length is ishape[a1] for r2c and oshape[a1] for
/// c2r). src == dst runs in place (complex kinds only). src and dst are 8-byte aligned.
void run_pass(
    Kind kind, int a0, int a1, const Shape& ishape, const Shape& oshape, const void* src, void* dst) {
  const int nd = static_cast<int>(ishape.size());
  const int64_t ies = kind == Kind::R2C ? 4 : 8, oes = kind == Kind::C2R ? 4 : 8;
  Layout l{};
  for (int a = a0; a <= a1; ++a) {
    l.n.push_back(kind == Kind::C2R ? oshape[a] : ishape[a]);
    l.inembed.push_back(ishape[a]);
    l.onembed.push_back(oshape[a]);
  }
  const int64_t in_block = product(ishape, a0, a1 + 1), out_block = product(oshape, a0, a1 + 1);
  const int64_t outer = product(ishape, 0, a0), inner = product(ishape, a1 + 1, nd);
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  if (inner == 1) {
    // Dense blocks, one after the other: a single batched execution.
    l.istride = l.ostride = 1;
    l.idist = in_block;
    l.odist = out_block;
    l.batch = outer;
    execute(kind, *get_plan(kind, l), src, dst);
    return;
  }
  // Strided: element x of a transform is x * inner apart. Offsets of each execution must
  // keep cuFFT's 8-byte alignment (odd float offsets would break it).
  const bool loop_outer_ok = outer <= kMaxExecs &&
      (outer == 1 || ((in_block * inner * ies) % 8 == 0 && (out_block * inner * oes) % 8 == 0));
  const bool loop_inner_ok = inner <= kMaxExecs && ies == 8 && oes == 8;
  if (loop_outer_ok && (outer <= inner || !loop_inner_ok)) {
    // One execution per outer index, batched over the inner index (distance 1).
    l.istride = l.ostride = inner;
    l.idist = l.odist = 1;
    l.batch = inner;
    auto plan = get_plan(kind, l);
    for (int64_t o = 0; o < outer; ++o) {
      execute(kind, *plan, s + o * in_block * inner * ies, d + o * out_block * inner * oes);
    }
    return;
  }
  if (loop_inner_ok) {
    // One execution per inner index, batched over the outer index.
    l.istride = l.ostride = inner;
    l.idist = in_block * inner;
    l.odist = out_block * inner;
    l.batch = outer;
    auto plan = get_plan(kind, l);
    for (int64_t i = 0; i < inner; ++i) execute(kind, *plan, s + i * ies, d + i * oes);
    return;
  }
  // Both large: transpose the run's axes to the end, transform densely, transpose back.
  std::vector<int> perm;
  for (int a = 0; a < nd; ++a) {
    if (a < a0 || a > a1) perm.push_back(a);
  }
  for (int a = a0; a <= a1; ++a) perm.push_back(a);
  Shape pin(nd), pout(nd);
  Strides src_strides(nd), dst_strides(nd);
  Strides irs = row_strides(ishape), ors = row_strides(oshape);
  for (int p = 0; p < nd; ++p) {
    pin[p] = ishape[perm[p]];
    pout[p] = oshape[perm[p]];
    src_strides[p] = irs[perm[p]];
    dst_strides[p] = ors[perm[p]];
  }
  const Dtype idt = kind == Kind::R2C ? float32 : complex64;
  const Dtype odt = kind == Kind::C2R ? float32 : complex64;
  const int64_t total_in = product(pin, 0, nd), total_out = product(pout, 0, nd);
  void* tin = cu::scratch(static_cast<size_t>(total_in * ies));
  void* tout = (kind == Kind::Forward || kind == Kind::Inverse)
      ? tin
      : cu::scratch(static_cast<size_t>(total_out * oes));
  cu::copy_elements(src, idt, src_strides, tin, idt, row_strides(pin), pin);
  const int r0 = nd - (a1 - a0 + 1);
  run_pass(kind, r0, nd - 1, pin, pout, tin, tout);
  cu::copy_elements(tout, odt, row_strides(pout), dst, odt, dst_strides, pout);
}

/// Splits the sorted axes marked in `take` into runs of <= kMaxRank consecutive axes.
std::vector<std::pair<int, int>> consecutive_runs(const std::vector<bool>& take) {
  std::vector<std::pair<int, int>> runs;
  const int nd = static_cast<int>(take.size());
  for (int a = 0; a < nd;) {
    if (!take[a]) {
      ++a;
      continue;
    }
    int b = a;
    while (b + 1 < nd && take[b + 1] && b + 1 - a < kMaxRank) ++b;
    runs.emplace_back(a, b);
    a = b + 1;
  }
  return runs;
}

} // namespace

/// The transform of FFT::eval_cpu on the GPU (see the file comment for the passes).
void FFT::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  void* po = cu::alloc_output(out);
  if (out.size() == 0) return;
  const Kind kind = real_ ? (inverse_ ? Kind::C2R : Kind::R2C)
                          : (inverse_ ? Kind::Inverse : Kind::Forward);
  const Shape& ishape = in.shape();
  const Shape& oshape = out.shape();
  const int nd = static_cast<int>(ishape.size());

  // The transform's input as a row-contiguous buffer of its type: the input itself when it
  // already is one (c2c and r2c leave their input untouched), else a private copy (always
  // for c2r, which overwrites its input, and which our inverse passes update in place).
  const Dtype want = kind == Kind::R2C ? float32 : complex64;
  const void* src = nullptr;
  if (kind != Kind::C2R && in.dtype() == want && in.flags().row_contiguous) {
    src = cu::device_ptr(in);
    if (!aligned8(src)) src = nullptr;
  }
  void* own = nullptr;
  if (src == nullptr) {
    own = cu::scratch(in.size() * size_of(want));
    cu::copy_elements(
        cu::device_ptr(in), in.dtype(), in.strides(), own, want, row_strides(ishape), ishape);
    src = own;
  }

  if (axes_.empty()) {
    // No axes: the identity (the ops never record this, but the rules could).
    NUVEC_CUDA_CHECK(cudaMemcpyAsync(po, src, out.nbytes(), cudaMemcpyDeviceToDevice, cu::stream()));
    return;
  }

  std::vector<bool> take(nd, false);
  for (int a : axes_) take[a] = true;
  if (kind == Kind::Forward || kind == Kind::Inverse) {
    auto runs = consecutive_runs(take);
    for (size_t i = 0; i < runs.size(); ++i) {
      run_pass(kind, runs[i].first, runs[i].second, ishape, ishape, i == 0 ? src : po, po);
    }
  } else if (kind == Kind::R2C) {
    // The real pass: axes.back(), with up to kMaxRank - 1 transformed axes just before it.
    const int hi = axes_.back();
    int lo = hi;
    while (lo - 1 >= 0 && take[lo - 1] && hi - lo + 1 < kMaxRank) --lo;
    for (int a = lo; a <= hi; ++a) take[a] = false;
    run_pass(Kind::R2C, lo, hi, ishape, oshape, src, po);
    for (auto [a0, a1] : consecutive_runs(take)) {
      run_pass(Kind::Forward, a0, a1, oshape, oshape, po, po);
    }
  } else {
    // C2R: `own` is our copy, free to be transformed in place and overwritten.
    const int r = axes_.back();
    take[r] = false;
    for (auto [a0, a1] : consecutive_runs(take)) {
      run_pass(Kind::Inverse, a0, a1, ishape, ishape, own, own);
    }
    run_pass(Kind::C2R, r, r, ishape, oshape, own, po);
  }

  if (inverse_) {
    // N: the product of the transformed (real-signal) lengths, as the CPU kernel.
    double n = 1;
    for (int a : axes_) {
      n *= (real_ && a == axes_.back()) ? static_cast<double>(oshape[a])
                                        : static_cast<double>(ishape[a]);
    }
    cu::scale_in_place(po, out.dtype(), static_cast<int64_t>(out.size()), 1.0 / n);
  }
}

} // namespace nuvec
