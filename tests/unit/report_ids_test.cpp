// tests/unit/report_ids_test.cpp — the typed trace ids (report/reader/ids.h) and the SiteId packing
// of report/analyses/site.h that carries a StackId.
#include <gtest/gtest.h>

#include <type_traits>
#include <unordered_set>

#include "report/analyses/site.h"
#include "report/reader/ids.h"

using namespace gpumemtrace::report;

static_assert(!std::is_convertible_v<uint32_t, StackId>, "an integer becomes an id only explicitly");
static_assert(!std::is_convertible_v<StackId, FrameId>, "a stack id is not a frame id");
static_assert(!std::is_convertible_v<FrameId, ModuleId>, "a frame id is not a module id");
static_assert(!std::is_convertible_v<StackId, uint32_t>, "an id is not an integer");

TEST(TraceIds, ZeroIsNoneAndIdsCompareByValue) {
  EXPECT_FALSE(StackId());
  EXPECT_FALSE(ModuleId(0));
  EXPECT_TRUE(FrameId(7));
  EXPECT_EQ(StackId(3), StackId(3));
  EXPECT_NE(StackId(3), StackId(4));
  EXPECT_LT(StackId(3), StackId(4));
  std::unordered_set<StackId> seen = {StackId(1), StackId(2), StackId(1)};
  EXPECT_EQ(seen.size(), 2u);
}

TEST(SiteId, PacksTheStackAndHowItWasAttributed) {
  const SiteId plain = make_site(StackId(42));
  EXPECT_EQ(plain, 42u);
  EXPECT_EQ(site_stack(plain), StackId(42));
  EXPECT_EQ(site_attribution(plain), Attribution::None);
  const SiteId backward = make_site(StackId(0xffffffffu), Attribution::Backward);
  EXPECT_NE(backward, make_site(StackId(0xffffffffu)));
  EXPECT_EQ(site_stack(backward), StackId(0xffffffffu));
  EXPECT_EQ(site_attribution(backward), Attribution::Backward);
  const SiteId frameless = make_site(StackId(), Attribution::NoFrames);
  EXPECT_FALSE(site_stack(frameless));
  EXPECT_EQ(site_attribution(frameless), Attribution::NoFrames);
}
