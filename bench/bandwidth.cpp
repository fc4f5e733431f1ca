// This machine's read bandwidth from L1, L2, L3 and DRAM, measured: the
// roofline bound of bench/run_all.py divides the bytes a workload must move
// by the bandwidth of the level its working set fits in.
//
//   build/release/bench/kiln_bench_bandwidth [--threads N]
//     ->  l1_bytes 49152 ...  l1_read_gbs 180.2 ... dram_read_gbs 11.9
//
// Each level is read from an array sized to sit well inside it (half of L1,
// half of L2, a share of L3 past L2, and 8 x L3 for DRAM), with AVX2 loads
// into 8 independent accumulators so that the loads, not an add chain, set
// the pace. A run reads the array enough times to take ~20 ms; the best of 7
// runs is printed (the one least disturbed by the machine). With --threads N,
// N threads each read their own array at once (L1 and L2 are per core, the
// L3 share is divided among them) and the sum of their rates is printed.
// Cache sizes come from /sys/devices/system/cpu/cpu0/cache, else sysconf,
// else 32 KiB / 1 MiB / 32 MiB.
#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

struct CacheSizes {
  int64_t l1 = 32 << 10, l2 = 1 << 20, l3 = 32 << 20;
};

// "48K", "2048K", "32M" as /sys writes them -> bytes; 0 when unreadable.
int64_t parse_size(const std::string& text) {
  char* end = nullptr;
  int64_t value = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str()) return 0;
  if (*end == 'K') return value << 10;
  if (*end == 'M') return value << 20;
  return value;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Level `level`'s data (or unified) cache size from sysfs; 0 when absent.
int64_t sysfs_cache_size(int level) {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    const std::string type = read_line(dir + "/type");
    if (type.empty()) break;
    if (read_line(dir + "/level") == std::to_string(level) && type != "Instruction")
      return parse_size(read_line(dir + "/size"));
  }
  return 0;
}

CacheSizes detect_cache_sizes() {
  CacheSizes sizes;
  const int names[] = {_SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE};
  int64_t* fields[] = {&sizes.l1, &sizes.l2, &sizes.l3};
  // sysfs first: under a hypervisor it holds what the guest was given, while
  // sysconf may decode the host's CPUID (256 MiB of L3 for a 32 MiB slice).
  for (int level = 1; level <= 3; ++level) {
    int64_t size = sysfs_cache_size(level);
    if (size <= 0) size = sysconf(names[level - 1]);
    if (size > 0) *fields[level - 1] = size;
  }
  return sizes;
}

// Reads floats[0, n) `passes` times; returns a sum so nothing is dropped.
// n is a multiple of 64 (8 vectors of 8 lanes per iteration).
float read_passes(const float* data, int64_t n, int64_t passes) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (int64_t pass = 0; pass < passes; ++pass) {
    for (int64_t i = 0; i < n; i += 64) {
      a0 = _mm256_add_ps(a0, _mm256_load_ps(data + i));
      a1 = _mm256_add_ps(a1, _mm256_load_ps(data + i + 8));
      a2 = _mm256_add_ps(a2, _mm256_load_ps(data + i + 16));
      a3 = _mm256_add_ps(a3, _mm256_load_ps(data + i + 24));
      a4 = _mm256_add_ps(a4, _mm256_load_ps(data + i + 32));
      a5 = _mm256_add_ps(a5, _mm256_load_ps(data + i + 40));
      a6 = _mm256_add_ps(a6, _mm256_load_ps(data + i + 48));
      a7 = _mm256_add_ps(a7, _mm256_load_ps(data + i + 56));
    }
    // Keeps the compiler from merging passes over the same data.
    asm volatile(""
                 : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7));
  }
  __m256 total = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                               _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, total);
  float sum = 0;
  for (float v : lanes)
    sum += v;
  return sum;
}

struct AlignedFloats {
  explicit AlignedFloats(int64_t n)
      : data(static_cast<float*>(std::aligned_alloc(64, size_t(n) * sizeof(float)))), n(n) {
    // Touch every page and give the sum small, finite values.
    for (int64_t i = 0; i < n; ++i)
      data[i] = float(i % 7) * 1e-3f;
  }
  ~AlignedFloats() { std::free(data); }
  AlignedFloats(const AlignedFloats&) = delete;
  AlignedFloats& operator=(const AlignedFloats&) = delete;
  float* data;
  int64_t n;
};

// GB/s of `threads` threads each reading its own array of `bytes` bytes at
// the same time: the best of 7 runs of the sum of their rates.
double read_bandwidth(int64_t bytes, int threads, float* sink) {
  const int64_t n = std::max<int64_t>(64, bytes / int64_t(sizeof(float)) / 64 * 64);
  std::vector<std::unique_ptr<AlignedFloats>> arrays;
  for (int t = 0; t < threads; ++t)
    arrays.push_back(std::make_unique<AlignedFloats>(n));
  // Passes for ~20 ms at a first guess of 20 GB/s per thread, at least 1.
  const int64_t passes = std::max<int64_t>(1, int64_t(0.02 * 20e9 / (double(n) * 4)));
  std::vector<double> seconds(static_cast<size_t>(threads));
  std::vector<float> sums(static_cast<size_t>(threads));
  std::barrier start(threads);
  double best = 0;
  for (int rep = 0; rep < 8; ++rep) {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        start.arrive_and_wait();
        auto t0 = std::chrono::steady_clock::now();
        sums[size_t(t)] += read_passes(arrays[size_t(t)]->data, n, passes);
        seconds[size_t(t)] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      });
    }
    for (auto& w : workers)
      w.join();
    if (rep == 0) continue;  // warm-up: loads the caches, lets the clock rise
    double rate = 0;
    for (int t = 0; t < threads; ++t)
      rate += double(n) * 4 * double(passes) / seconds[size_t(t)] * 1e-9;
    best = std::max(best, rate);
  }
  for (float sum : sums)
    *sink += sum;
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::max(1, std::atoi(argv[++i]));
      continue;
    }
    std::fprintf(stderr, "usage: %s [--threads N]\n", argv[0]);
    return 2;
  }
  const CacheSizes caches = detect_cache_sizes();
  // Per thread: L1 and L2 are private; the L3 share stays past this core's
  // L2 so that it does not measure L2 again.
  const int64_t l3_share = std::max(caches.l3 / 2 / threads, 2 * caches.l2);
  const struct {
    const char* name;
    int64_t cache_bytes, array_bytes;
  } levels[] = {{"l1", caches.l1, caches.l1 / 2},
                {"l2", caches.l2, caches.l2 / 2},
                {"l3", caches.l3, std::min(l3_share, caches.l3 * 3 / 4)},
                {"dram", 0, std::max<int64_t>(8 * caches.l3, 256 << 20) / threads}};
  float sink = 0;
  std::printf("threads %d\n", threads);
  for (const auto& level : levels) {
    if (level.cache_bytes > 0)
      std::printf("%s_bytes %lld\n", level.name, (long long)level.cache_bytes);
    std::printf("%s_array_bytes %lld\n", level.name, (long long)level.array_bytes);
    std::printf("%s_read_gbs %.1f\n", level.name,
                read_bandwidth(level.array_bytes, threads, &sink));
    std::fflush(stdout);
  }
  // Never true (the values are small and positive); it keeps `sink` alive.
  if (sink < 0) std::printf("unexpected sink %g\n", double(sink));
  return 0;
}
