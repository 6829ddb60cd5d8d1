// nuvec tests: devices and streams (MLX 0.32's rules): ordering consistent with equality,
// device properties (gpu::, cu::, metal::), per-thread default streams, new_stream streams
// tied to their thread, thread-unsafe and thread-local streams, clear_streams and thread
// exit, StreamContext, the scheduler's public functions and the allocator interface.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <set>
#include <string>
#include <thread>

#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;

namespace {

// Runs f on a new thread and waits for it; an exception thrown there is rethrown here.
template <class F>
void on_other_thread(F&& f) {
  std::exception_ptr error;
  std::thread t([&] {
    try {
      f();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) std::rethrow_exception(error);
}

int threads_in_process() {
  int n = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// Waits (up to 5 s) until the process has at most n threads: an exited thread's entry may
// linger briefly after join().
bool settles_at_most(int n) {
  for (int i = 0; i < 500; ++i) {
    if (threads_in_process() <= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

} // namespace

TEST(Device, OrderIsStrictWeakAndConsistentWithEquality) {
  const std::vector<Device> devices{
      Device(Device::cpu, 0), Device(Device::cpu, 3), Device(Device::gpu, 0),
      Device(Device::gpu, 1)};
  const std::vector<Stream> streams{
      Stream(0, Device::cpu), Stream(3, Device::cpu), Stream(0, Device::gpu),
      Stream(1, Device::gpu), Stream(2, Device::gpu)};
  auto check = [](const auto& sorted) {
    for (size_t i = 0; i < sorted.size(); ++i) {
      for (size_t j = 0; j < sorted.size(); ++j) {
        EXPECT_EQ(sorted[i] < sorted[j], i < j) << i << " " << j;
        EXPECT_EQ(sorted[i] == sorted[j], i == j) << i << " " << j;
      }
    }
  };
  check(devices);
  check(streams);
  // Equal keys collapse in a set; distinct ones do not.
  std::set<Stream> set(streams.begin(), streams.end());
  set.insert(Stream(3, Device::cpu));
  EXPECT_EQ(set.size(), streams.size());
  // A device matches its type whatever its index (MLX's operator==(Device, DeviceType)).
  EXPECT_TRUE(Device(Device::gpu, 1) == Device::gpu);
  EXPECT_FALSE(Device(Device::cpu) == Device::gpu);
  EXPECT_NE(Device(Device::gpu, 1), Device(Device::gpu, 0));
}

TEST(Device, AvailabilityAndProperties) {
  EXPECT_TRUE(is_available(Device::cpu));
  EXPECT_FALSE(is_available(Device(Device::cpu, 1)));
  EXPECT_EQ(device_count(Device::cpu), 1);
  EXPECT_EQ(is_available(Device::gpu), gpu::is_available());
  EXPECT_EQ(device_count(Device::gpu), gpu::device_count());
  EXPECT_EQ(std::get<std::string>(device_info(Device::cpu).at("device_name")), "cpu");
  // nuvec has no Metal.
  EXPECT_FALSE(metal::is_available());
  EXPECT_THROW(metal::device_info(), std::runtime_error);
  if (gpu::is_available()) {
    EXPECT_TRUE(cu::is_available());
    auto& info = gpu::device_info(0);
    EXPECT_EQ(&info, &cu::device_info(0));
    EXPECT_FALSE(std::get<std::string>(info.at("device_name")).empty());
    EXPECT_EQ(
        std::get<std::string>(info.at("architecture")),
        "sm_" + std::to_string(std::get<size_t>(info.at("compute_capability_major"))) +
            std::to_string(std::get<size_t>(info.at("compute_capability_minor"))));
    EXPECT_LE(std::get<size_t>(info.at("free_memory")), std::get<size_t>(info.at("total_memory")));
  } else {
    // MLX's answers without a GPU: no devices, an empty property map, errors on use.
    EXPECT_EQ(gpu::device_count(), 0);
    EXPECT_TRUE(device_info(Device::gpu).empty());
    EXPECT_TRUE(gpu::device_info().empty());
    EXPECT_THROW(set_default_device(Device::gpu), std::invalid_argument);
    EXPECT_THROW(default_stream(Device::gpu), std::invalid_argument);
    EXPECT_THROW(new_stream(Device::gpu), std::invalid_argument);
    EXPECT_THROW(add(array(1), array(2), Device::gpu), std::invalid_argument);
  }
}

TEST(Streams, EachThreadHasItsOwnDefaultStream) {
  // On the default device (the GPU when the suite runs with NUVEC_TEST_DEVICE=gpu).
  const Device dev = default_device();
  Stream mine = default_stream(dev);
  EXPECT_EQ(default_stream(dev), mine); // stable within a thread
  size_t before = get_streams().size();
  std::vector<Stream> theirs;
  std::mutex mtx;
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&] {
      Stream s = default_stream(dev);
      EXPECT_EQ(default_stream(dev), s);
      EXPECT_EQ(add(array(1), array(2)).primitive().stream(), s);
      std::lock_guard<std::mutex> lk(mtx);
      theirs.push_back(s);
    });
  }
  for (auto& t : threads) t.join();
  std::set<Stream> distinct(theirs.begin(), theirs.end());
  distinct.insert(mine);
  EXPECT_EQ(distinct.size(), 4u);
  // get_streams keeps every stream made, in order, also those of threads that have ended.
  auto all = get_streams();
  ASSERT_EQ(all.size(), before + 3);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].index, static_cast<int>(i));
  EXPECT_EQ(std::set<Stream>(all.begin() + before, all.end()), std::set<Stream>(theirs.begin(), theirs.end()));
}

TEST(Streams, NewStreamRunsWorkOnlyForItsThread) {
  Stream s = new_stream(Device::cpu);
  array x = sum(arange(10, s), false, s);
  EXPECT_THROW(on_other_thread([&] { eval(x); }), std::runtime_error);
  // The refused graph was left untouched: its own thread evaluates it.
  EXPECT_EQ(x.status(), array::Status::unscheduled);
  EXPECT_EQ(x.item<int>(), 45);
  // Synchronizing it from elsewhere is allowed (no work is submitted).
  on_other_thread([&] { synchronize(s); });
}

TEST(Streams, ThreadUnsafeStreamIsSharedAndSurvivesClearStreams) {
  Stream s = new_thread_unsafe_stream(Device::cpu);
  int here = sum(arange(10, s)).item<int>();
  int there = 0;
  on_other_thread([&] {
    there = sum(arange(10, s)).item<int>();
    clear_streams();
  });
  EXPECT_EQ(here, 45);
  EXPECT_EQ(there, 45);
  EXPECT_EQ(sum(arange(5, s)).item<int>(), 10); // still usable after the other thread cleared
}

TEST(Streams, ThreadLocalStreamIsOneStreamPerThread) {
  ThreadLocalStream tls = new_thread_local_stream(Device::cpu);
  Stream mine = stream_from_thread_local_stream(tls);
  EXPECT_EQ(stream_from_thread_local_stream(tls), mine);
  EXPECT_NE(Stream(mine), Stream(tls));
  array a = arange(10, tls);
  EXPECT_EQ(a.primitive().stream(), mine);
  EXPECT_EQ(to_stream(tls), mine);
  std::vector<Stream> theirs(3, mine);
  std::vector<int> sums(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      array b = arange(10, tls);
      theirs[i] = b.primitive().stream();
      EXPECT_EQ(theirs[i], stream_from_thread_local_stream(tls));
      sums[i] = sum(b).item<int>();
      synchronize(tls);
      clear_streams();
    });
  }
  for (auto& t : threads) t.join();
  std::set<Stream> distinct(theirs.begin(), theirs.end());
  distinct.insert(mine);
  EXPECT_EQ(distinct.size(), 4u);
  for (int v : sums) EXPECT_EQ(v, 45);
  EXPECT_EQ(sum(a).item<int>(), 45);
  // The handle itself is no stream to run work on, and only handles resolve.
  for (auto& s : get_streams()) EXPECT_NE(s, Stream(tls));
  EXPECT_THROW(
      stream_from_thread_local_stream(ThreadLocalStream(mine.index, mine.device)),
      std::invalid_argument);
}

TEST(Streams, ClearStreamsEndsTheThreadsStreams) {
  on_other_thread([] {
    Stream d = default_stream(Device::cpu);
    Stream s = new_stream(Device::cpu);
    EXPECT_EQ(sum(arange(4, s)).item<int>(), 6);
    array later = add(array(1), array(2)); // recorded on d, not evaluated yet
    clear_streams();
    EXPECT_NE(default_stream(Device::cpu), d); // a fresh default stream
    EXPECT_THROW(eval(arange(3, s)), std::runtime_error);
    // Work recorded on a cleared default stream still runs.
    EXPECT_EQ(later.item<int>(), 3);
    clear_streams();
  });
}

TEST(Streams, DefaultStreamWorkMayBeEvaluatedOnAnotherThread) {
  // A graph built lazily on a thread that has ended (and cleared its streams on exit) is
  // evaluated here: nuvec allows this where MLX 0.32 throws.
  array x = array(0);
  on_other_thread([&] { x = multiply(arange(5), array(2)); });
  EXPECT_EQ(sum(x).item<int>(), 20);
}

TEST(Streams, ExitingThreadStopsItsStreamWorkers) {
  eval(add(array(1), array(1))); // this thread's default worker is running
  const int before = threads_in_process();
  on_other_thread([before] {
    Stream s = new_stream(Device::cpu);
    eval(arange(3, s));
    eval(arange(3)); // the thread's default stream
    EXPECT_GE(threads_in_process(), before + 3); // this thread and two workers
  });
  EXPECT_TRUE(settles_at_most(before)) << threads_in_process() << " threads, " << before
                                       << " before";
}

TEST(Streams, StreamKeepsItsOrderWhileItsThreadClearsIt) {
  // Thread t clears its default stream while a task on it is still blocked; work this thread
  // then submits to that stream goes to a new worker, which must wait for the old one.
  auto gate = std::make_shared<std::promise<void>>();
  std::shared_future<void> open = gate->get_future().share();
  std::promise<Stream> made;
  std::promise<void> clearing;
  std::string order;
  std::mutex mtx;
  std::thread t([&] {
    Stream d = default_stream(Device::cpu);
    scheduler::enqueue(d, [&, open] {
      open.wait();
      std::lock_guard<std::mutex> lk(mtx);
      order += 'A';
    });
    made.set_value(d);
    clearing.set_value();
    clear_streams(); // returns once A has run
  });
  Stream d = made.get_future().get();
  clearing.get_future().wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto b = std::make_shared<std::promise<void>>();
  auto b_done = b->get_future();
  scheduler::enqueue(d, [&, b] {
    {
      std::lock_guard<std::mutex> lk(mtx);
      order += 'B';
    }
    b->set_value();
  });
  EXPECT_EQ(b_done.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  gate->set_value();
  t.join();
  ASSERT_EQ(b_done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(order, "AB");
}

TEST(Streams, StreamContextSetsAndRestores) {
  const Device device = default_device();
  Stream cpu_default = default_stream(Device::cpu);
  Stream s = new_stream(Device::cpu);
  {
    StreamContext ctx(s);
    EXPECT_EQ(default_device(), Device(Device::cpu));
    EXPECT_EQ(default_stream(Device::cpu), s);
    EXPECT_EQ(exp(array(1.0f)).primitive().stream(), s);
  }
  EXPECT_EQ(default_device(), device);
  EXPECT_EQ(default_stream(Device::cpu), cpu_default);
  // Restored when the scope is left by an exception.
  try {
    StreamContext ctx(s);
    throw std::logic_error("leaving");
  } catch (const std::logic_error&) {
  }
  EXPECT_EQ(default_device(), device);
  EXPECT_EQ(default_stream(Device::cpu), cpu_default);
  // A device means its default stream.
  {
    StreamContext ctx(Device::cpu);
    EXPECT_EQ(default_stream(Device::cpu), cpu_default);
    EXPECT_EQ(default_device(), Device(Device::cpu));
  }
  EXPECT_THROW(StreamContext ctx{StreamOrDevice{}}, std::runtime_error);
  if (!is_available(Device::gpu)) {
    EXPECT_THROW(StreamContext ctx(Device::gpu), std::invalid_argument);
    EXPECT_EQ(default_device(), device);
  }
}

TEST(Streams, DerivativeGraphsStayOnThePrimalStream) {
  // MLX's "stream placement": with the default stream blocked, the whole vjp and jvp of a
  // function on another stream must run there (it would hang otherwise).
  Stream blocked = default_stream(Device::cpu);
  Stream s = new_stream(Device::cpu);
  auto release = std::make_shared<std::promise<void>>();
  std::shared_future<void> gate = release->get_future().share();
  scheduler::enqueue(blocked, [gate] { gate.wait(); });
  auto f = [&s](array a) { return multiply(a, add(a, a, s), s); };
  array x = full({8}, 3.0f, s);
  auto [out, dvjp] = vjp(f, x, ones({8}, float32, s));
  auto [out2, djvp] = jvp(f, x, ones({8}, float32, s));
  auto check_on_s = [&](const array& a) {
    std::vector<array> stack{a};
    while (!stack.empty()) {
      array b = stack.back();
      stack.pop_back();
      if (!b.has_primitive()) continue;
      EXPECT_EQ(b.primitive().stream(), s) << b.primitive().name();
      for (auto& in : b.inputs()) stack.push_back(in);
    }
  };
  check_on_s(dvjp);
  check_on_s(djvp);
  auto done = std::async(std::launch::async, [&] { eval(out, dvjp, out2, djvp); });
  bool finished = done.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  release->set_value();
  done.wait();
  ASSERT_TRUE(finished);
  // d/da a * 2a = 4a = 12 per element.
  EXPECT_EQ(sum(dvjp).item<float>(), 96.0f);
  EXPECT_EQ(sum(djvp).item<float>(), 96.0f);
}

TEST(Scheduler, StreamsRunConcurrentlyAndInOrder) {
  Stream s1 = new_stream(Device::cpu), s2 = new_stream(Device::cpu);
  std::vector<int> order;
  std::mutex mtx;
  auto go = std::make_shared<std::promise<void>>();
  std::shared_future<void> ready = go->get_future().share();
  auto finished = std::make_shared<std::promise<void>>();
  auto all_done = finished->get_future();
  // s2 waits for s1's task: no deadlock since the streams have their own workers.
  scheduler::enqueue(s2, [ready] { ready.wait(); });
  for (int i = 0; i < 5; ++i) {
    scheduler::enqueue(s2, [&, i] {
      std::lock_guard<std::mutex> lk(mtx);
      order.push_back(i);
    });
  }
  scheduler::enqueue(s2, [finished] { finished->set_value(); });
  scheduler::enqueue(s1, [go] { go->set_value(); });
  ASSERT_EQ(all_done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(scheduler::n_active_tasks(), 0);
  EXPECT_THROW(scheduler::enqueue(Stream(1 << 30, Device::cpu), [] {}), std::invalid_argument);
}

TEST(Allocator, ReusedBlockKeepsItsCapacity) {
  if (!nuvec::testing::kCachingAllocator) GTEST_SKIP() << "the allocator does not cache under AddressSanitizer";
  size_t old = set_cache_limit(1 << 20);
  clear_cache();
  auto big = allocator::malloc(8192);
  EXPECT_GE(allocator::allocator().size(big), 8192u);
  allocator::free(big);
  size_t cached = get_cache_memory();
  EXPECT_GE(cached, 8192u);
  auto small = allocator::malloc(6000); // fits the cached block, which is < 2x the request
  EXPECT_EQ(small.ptr(), big.ptr());
  EXPECT_EQ(allocator::allocator().size(small), allocator::size(big));
  EXPECT_EQ(get_cache_memory(), cached - allocator::size(small));
  auto tiny = allocator::malloc(100); // nothing cached within 2x: a new block
  EXPECT_LT(allocator::size(tiny), 8192u);
  allocator::free(small);
  allocator::free(tiny);
  EXPECT_EQ(allocator::allocator().make_buffer(&old, sizeof(old)).ptr(), nullptr);
  clear_cache();
  EXPECT_EQ(get_cache_memory(), 0u);
  set_cache_limit(old);
}

TEST(Allocator, ClearCacheWaitsForQueuedKernels) {
  Stream s = new_stream(Device::cpu);
  auto release = std::make_shared<std::promise<void>>();
  std::shared_future<void> gate = release->get_future().share();
  auto started = std::make_shared<std::promise<void>>();
  auto running = started->get_future();
  scheduler::enqueue(s, [gate, started] {
    started->set_value();
    gate.wait();
  });
  running.wait();
  auto cleared = std::async(std::launch::async, [] { clear_cache(); });
  EXPECT_EQ(cleared.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  release->set_value();
  EXPECT_EQ(cleared.wait_for(std::chrono::seconds(10)), std::future_status::ready);
}
