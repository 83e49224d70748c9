// The host side of the one filler (fill.h): the same value() as the device kernel, on every core.
// Compiled with -ffp-contract=off (CMakeLists.txt), which is what makes its bits the device's.
#include <algorithm>
#include <thread>
#include <vector>

#include "device/fill.h"

namespace kevo_device {

void fill_host(void* p, int32_t dtype, int64_t n, int kind, double a, double b, uint64_t seed, unsigned threads) {
    auto part = [&](int64_t from, int64_t to) {
        for (int64_t i = from; i < to; ++i) store_from_double(p, dtype, i, value(seed, static_cast<uint64_t>(i), kind, a, b));
    };
    if (threads == 0) threads = std::max(1u, std::min(64u, std::thread::hardware_concurrency()));
    if (n < (int64_t{1} << 16) || threads == 1) return part(0, n);
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(part, n * t / threads, n * (t + 1) / threads);
    for (auto& th : pool) th.join();
}

}  // namespace kevo_device
