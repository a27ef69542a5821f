// tests/unit/report_batch_test.cpp — the batch what-if's parts (report/analyses/batch_*.h): the batch size read
// from a file name or a mark, the fit of each request's size (lines, residuals, parabolas, a site's line for
// requests without a partner), the sizes at a batch, and the search for the largest batch that fits against
// every batch tried one by one. End to end (runs recorded on the stand-in torch): tests/report/test_report_batch.py.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "report/analyses/batch_fit.h"
#include "report/analyses/batch_replay.h"
#include "report/analyses/batch_runs.h"

using namespace gpumemtrace::report;

namespace {
constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

// A run on one device of `total` bytes (all free): the requests (site key, size), each freed at once
// unless `kept`.
struct RunBuilder {
  BatchRun run;
  uint64_t next_addr = 0x10000000;

  RunBuilder(uint64_t batch, uint64_t total) {
    run.batch = batch;
    run.file = "run_b" + std::to_string(batch);
    run.complete = true;
    DeviceInfo info;
    info.device = 0;
    info.total = total;
    info.free = total;
    info.has_free = true;
    run.devices.push_back(info);
  }
  uint64_t request(uint64_t key, uint64_t size) {
    BatchRecord r;
    r.seq = run.records.size() + 1;
    r.t = r.seq * 1000;
    r.addr = next_addr;
    next_addr += 1ull << 36;
    r.size = size;
    r.device = 0;
    r.op = Op::BlockAlloc;
    r.kind = Kind::Block;
    r.api = BatchRecord::TorchAlloc;
    run.records.push_back(r);
    BatchRequest q;
    q.key = key;
    q.size = size;
    q.record = static_cast<uint32_t>(run.records.size() - 1);
    q.site = static_cast<uint32_t>(key % 16);
    while (run.sites.size() <= q.site) run.sites.emplace_back();
    run.requests.push_back(q);
    return r.addr;
  }
  void free(uint64_t addr) {
    BatchRecord r;
    r.seq = run.records.size() + 1;
    r.t = r.seq * 1000;
    r.addr = addr;
    r.device = 0;
    r.op = Op::BlockFree;
    r.kind = Kind::Block;
    r.api = BatchRecord::TorchFreeRequested;
    run.records.push_back(r);
  }
};

// The same program at `batch`: weights of 40 MiB kept; per step an input of 3 MiB * batch, a temporary of
// 5 MiB + 2 MiB * batch freed before an activation of 11 MiB + 2 MiB * batch (which its segment cannot
// hold), everything of the step freed at its end.
BatchRun program(uint64_t batch, uint64_t total, int steps = 2, uint64_t quadratic = 0) {
  RunBuilder b(batch, total);
  b.request(1, 40 * MiB);
  for (int step = 0; step < steps; ++step) {
    const uint64_t x = b.request(2, 3 * MiB * batch);
    const uint64_t t = b.request(3, 5 * MiB + 2 * MiB * batch);
    b.free(t);
    const uint64_t h = b.request(4, 11 * MiB + 2 * MiB * batch + quadratic * batch * batch);
    b.free(h);
    b.free(x);
  }
  return b.run;
}
}  // namespace

TEST(BatchNames, FromTheFileName) {
  EXPECT_EQ(batch_in_name("runs/RUN_B16.jsonl.zst"), 16u);
  EXPECT_EQ(batch_in_name("train_bs32.jsonl"), 32u);
  EXPECT_EQ(batch_in_name("batch-8.pickle"), 8u);
  EXPECT_EQ(batch_in_name("gpt2_batch_size64_seed3.jsonl.zst"), 64u);
  EXPECT_EQ(batch_in_name("b4"), 4u);
  EXPECT_FALSE(batch_in_name("b16/gpumemtrace.python3.1234.jsonl.zst"));  // a directory's name is not the run's
  EXPECT_FALSE(batch_in_name("gpumemtrace.python3.1234.jsonl.zst"));
  EXPECT_FALSE(batch_in_name("web16.jsonl"));      // b inside a word
  EXPECT_FALSE(batch_in_name("run_b8_b16.jsonl"));  // two sizes: neither
  EXPECT_EQ(batch_in_name("run_b8_bs8.jsonl"), 8u);
  EXPECT_FALSE(batch_in_name("run_b0.jsonl"));
}

TEST(BatchNames, FromAMark) {
  EXPECT_EQ(batch_in_mark("batch=16"), 16u);
  EXPECT_EQ(batch_in_mark("batch_size: 32"), 32u);
  EXPECT_EQ(batch_in_mark("BS 8"), 8u);
  EXPECT_FALSE(batch_in_mark("epoch 3"));
  EXPECT_FALSE(batch_in_mark("batch=16 of 20"));
  EXPECT_FALSE(batch_in_mark("batch=0"));
}

TEST(BatchFit, TwoRunsGiveExactLines) {
  const BatchRun a = program(8, GiB), b = program(16, GiB);
  const SizeFits fits = fit_sizes({&a, &b}, 1);
  ASSERT_EQ(fits.requests.size(), b.requests.size());
  EXPECT_EQ(fits.requests[0].kind, RequestFit::Constant);
  EXPECT_EQ(fits.requests[0].a, 40.0 * MiB);
  EXPECT_EQ(fits.requests[1].kind, RequestFit::Scales);
  EXPECT_EQ(fits.requests[1].b, 3.0 * MiB);
  EXPECT_EQ(fits.requests[2].a, 5.0 * MiB);
  EXPECT_FALSE(fits.linearity_checked);
  EXPECT_EQ(fits.not_linear, 0u);
  EXPECT_EQ(std::make_tuple(fits.scales, fits.constant, fits.unmatched), std::make_tuple(uint64_t{6}, uint64_t{1}, uint64_t{0}));
  // At another batch, the sizes of the program at that batch.
  const BatchRun c = program(24, GiB);
  for (size_t i = 0; i < c.requests.size(); ++i) EXPECT_EQ(size_at(fits.requests[i], 24), c.requests[i].size) << i;
}

TEST(BatchFit, ThreeRunsMeasureTheResidualAndFollowTheCurve) {
  const uint64_t q = 64 * 1024;
  const BatchRun a = program(8, GiB, 2, q), b = program(16, GiB, 2, q), c = program(32, GiB, 2, q);
  const SizeFits fits = fit_sizes({&a, &b, &c}, 2);
  EXPECT_TRUE(fits.linearity_checked);
  EXPECT_EQ(fits.not_linear, 2u);  // the activation of each step
  const RequestFit& h = fits.requests[3];
  EXPECT_GT(h.residual, 0);
  // The parabola through three points is the curve itself; the range holds the size at 48.
  const BatchRun d = program(48, GiB, 2, q);
  EXPECT_EQ(size_at(h, 48, 1, 8, 32), d.requests[3].size);
  EXPECT_LT(size_at(h, 48, -1, 8, 32), size_at(h, 48, 0, 8, 32));
  EXPECT_LT(size_at(h, 48, 0, 8, 32), d.requests[3].size);
  // Straight lines have no range.
  EXPECT_EQ(size_at(fits.requests[1], 48, -1, 8, 32), size_at(fits.requests[1], 48, 1, 8, 32));
}

TEST(BatchFit, RequestsWithoutAPartnerTakeTheirSiteLine) {
  const BatchRun shorter = program(8, GiB, 2), longer = program(16, GiB, 3);
  const SizeFits fits = fit_sizes({&shorter, &longer}, 1);
  EXPECT_EQ(fits.by_site, 3u);  // the third step's three requests
  EXPECT_EQ(fits.unmatched, 0u);
  EXPECT_EQ(size_at(fits.requests[8], 24), 5 * MiB + 2 * MiB * 24);
  // A site the other run never used keeps its size.
  BatchRun odd = program(16, GiB, 2);
  odd.requests[3].key = 99;
  const SizeFits kept = fit_sizes({&shorter, &odd}, 1);
  EXPECT_EQ(kept.unmatched, 1u);
  EXPECT_EQ(size_at(kept.requests[3], 64), odd.requests[3].size);
}

TEST(BatchFit, OneRunScalesItsActivationsOnly) {
  BatchRun run = program(16, GiB);
  for (BatchRequest& r : run.requests) r.role = r.key == 1 ? Role::Parameters : Role::Activations;
  const SizeFits fits = fit_by_roles(run);
  EXPECT_TRUE(fits.by_roles);
  EXPECT_EQ(size_at(fits.requests[0], 32), 40 * MiB);
  EXPECT_EQ(size_at(fits.requests[1], 32), 2 * run.requests[1].size);
}

// The search finds the largest batch that fits: every batch below it fits, it does, the next does not.
TEST(BatchSearch, TheLargestBatchIsTheOneEveryBatchTriedSays) {
  const BatchRun a = program(8, GiB), b = program(16, GiB);
  const SizeFits fits = fit_sizes({&a, &b}, 1);
  BatchReplayOptions options;
  BatchSizes sizes{&fits};
  const MaxBatchSearch found = find_max_batch(b, sizes, options, 16);
  ASSERT_FALSE(found.unbounded);
  ASSERT_GT(found.largest, 16u);
  EXPECT_EQ(found.failing, found.largest + 1);
  EXPECT_LE(found.replays, 20u);
  for (uint64_t batch = 1; batch <= found.largest + 8; ++batch) {
    sizes.batch = static_cast<double>(batch);
    EXPECT_EQ(replay_fits(replay_at(b, sizes, options)), batch <= found.largest) << batch;
  }
  // A margin kept free lowers it; nothing that scales makes it unbounded.
  options.keep_free[0] = {200 * MiB, 0};
  EXPECT_LT(find_max_batch(b, sizes, options, 16).largest, found.largest);
  RunBuilder fixed(4, GiB);
  fixed.request(1, 10 * MiB);
  const SizeFits none = fit_by_roles(fixed.run);
  EXPECT_TRUE(find_max_batch(fixed.run, BatchSizes{&none}, BatchReplayOptions{}, 4).unbounded);
}

TEST(BatchSearch, NotEvenOneFits) {
  const BatchRun a = program(8, 48 * MiB), b = program(16, 48 * MiB);  // weights and a 20 MiB segment do not fit
  const SizeFits fits = fit_sizes({&a, &b}, 1);
  const MaxBatchSearch found = find_max_batch(b, BatchSizes{&fits}, BatchReplayOptions{}, 16);
  EXPECT_EQ(found.largest, 0u);
  EXPECT_EQ(found.failing, 1u);
}

// A replay ends at the first request refused: the program would have raised there.
TEST(BatchReplay, EndsAtTheFirstRefusal) {
  const BatchRun run = program(16, 100 * MiB);
  std::vector<gpumemtrace::report::allocator_model::DeviceReplay> replays = replay_at(run, BatchSizes{}, BatchReplayOptions{});
  const FirstRefusal first = first_refusal(replays);
  ASSERT_TRUE(first.any);
  EXPECT_EQ(first.record, run.requests[2].record);  // 40 + 48 MiB held: the 37 MiB temporary does not fit
  EXPECT_EQ(replays[0].requests, 3u);
  BatchReplayOptions whole;
  whole.stop_at_refusal = false;
  EXPECT_EQ(replay_at(run, BatchSizes{}, whole)[0].requests, run.requests.size());
}
