// report/analyses/ledger.h — live bytes per call stack at one level (CUDA allocations or caching
// allocator blocks) of one device, with the peak and its culprits, and each stack's high-water
// history for the growth analysis.
//
// Memory: one Site per stack that ever held memory here; never per event.
// Peak culprits are copied lazily: a new peak only marks the snapshot pending, and the copy is
// taken just before live bytes first go down again (or at a mark, a reset, the end). So a run of
// allocations that each set a new peak costs one copy, not one per allocation.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "report/analyses/site.h"

namespace gpumemtrace::report {

// Splits the run (by seq) into kWindows equal windows without knowing its length in advance:
// windows start one event wide and double (folding pairs of windows) whenever the run outgrows
// them. The growth analysis asks "in how many windows did this stack set a new high?".
class GrowthWindows {
 public:
  static constexpr uint32_t kWindows = 32;
  // The window of `seq`; sets *widened when the windows had to double first (then every
  // ledger must fold_windows() before using the returned index).
  uint32_t window_of(uint64_t seq, bool* widened);
  // Windows the run has used so far (1..kWindows).
  uint32_t used(uint64_t last_seq) const;

 private:
  bool started_ = false;
  uint64_t origin_ = 0;
  uint32_t width_log2_ = 0;  // windows are 2^width_log2_ seqs wide
};

struct StackCount {
  SiteId site = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
};

class Ledger {
 public:
  // A rise is a new high that the site kept memory for: the least it held since its previous high
  // (its floor) is above the floor before that. Memory kept every iteration raises the floor with
  // each high; a buffer allocated a little larger each time and freed in between sets new highs
  // from the same floor, and they are not rises.
  struct Site {
    uint64_t bytes = 0;       // live now
    uint64_t count = 0;       // live allocations now
    uint64_t high = 0;        // highest live bytes so far
    uint64_t first_high = 0;  // live bytes when it first held memory
    uint64_t rises = 0;       // highs that were rises (the first high counts as one)
    uint32_t windows = 0;     // bit i: it rose in growth window i
    uint64_t floor = 0;       // the least it held since its last high
    uint64_t last_floor = 0;  // `floor` as it was at that high
    uint64_t first_time_ns = 0;      // when it first held memory
    uint64_t last_rise_time_ns = 0;  // when `high` last went up
    // The passes (passes.h: forward passes, backward passes, optimizer steps) its rises fell in, and
    // that of its last rise; 0: it never rose in one (its role has no phase, or the level none).
    uint32_t passes = 0;
    uint64_t last_pass = 0;
    bool holds_blocks = false;  // blocks landed in its memory: a caching allocator's segments
  };
  struct Snapshot {
    uint64_t bytes = 0;
    uint64_t seq = 0;
    uint64_t time_ns = 0;
    std::string phase;
    std::vector<StackCount> culprits;  // largest first, at most kMaxCulprits
    uint64_t other_bytes = 0;
  };

  // `pass`: the pass (passes.h) the allocation falls in, 0 for none.
  void add(SiteId site, uint64_t bytes, uint64_t seq, uint64_t time_ns, uint32_t window, uint64_t pass = 0);
  // Live bytes only, no history (highs, rises, peak): memory whose time is unknown (a capped
  // trace's live set at the end).
  void add_live(SiteId site, uint64_t bytes);
  // Blocks landed in memory this site allocated (Site::holds_blocks).
  void note_holds_blocks(SiteId site) {
    if (Site* s = find_site(site, false)) s->holds_blocks = true;
  }
  // Memory the trace starts with (a PyTorch snapshot's state before its history): live, and part
  // of the peak, but a baseline for growth, not a rise: the site's first high, and the level's first floor.
  void add_initial(SiteId site, uint64_t bytes, uint64_t seq, uint64_t time_ns);
  // A pending peak snapshot is taken first (in `phase`): live bytes are about to go down. `window`:
  // the growth window of the event (that of the last add() when not given).
  void remove(SiteId site, uint64_t bytes, const std::string& phase, uint32_t window = kSameWindow);
  static constexpr uint32_t kSameWindow = ~0u;
  // Drops every live byte (device reset), after taking a pending snapshot as remove() does.
  void clear_live(const std::string& phase);

  bool snapshot_pending() const { return snapshot_pending_; }
  void take_snapshot(const std::string& phase);
  void fold_windows();

  uint64_t live() const { return live_; }
  // Whether the level's total grew over the run: the least it held in a growth window (its floor,
  // what stays once each window's temporaries are gone) rose from window to window by the rule a
  // site's highs follow (growth.h). *rise: the highest floor less the first window's.
  bool floor_grows(uint32_t windows_used, uint64_t* rise) const;
  uint64_t peak() const { return peak_.bytes; }
  const Snapshot& peak_snapshot() const { return peak_; }
  // The n largest live stacks now; *other gets the bytes of the rest.
  std::vector<StackCount> top(size_t n, uint64_t* other) const;
  const std::unordered_map<SiteId, Site>& sites() const { return sites_; }

 private:
  // sites_[id], through last_: an event's site is most often the previous event's. Creates it when
  // `create`, else nullptr when it is not there.
  Site* find_site(SiteId id, bool create);
  // After `site` gained bytes: a new high, and whether it was a rise (see Site).
  static void note_high(Site& site, uint64_t time_ns, uint32_t window, uint64_t pass);
  static void note_baseline(Site& site, uint64_t time_ns);
  void note_peak(uint64_t seq, uint64_t time_ns);
  void enter_window(uint32_t window);

  std::unordered_map<SiteId, Site> sites_;
  // The site of the last add or remove. Elements of an unordered_map never move and sites are never
  // erased, so the pointer stays valid; a copied ledger starts without it (it would point into the
  // original's map).
  struct LastSite {
    SiteId id = 0;
    Site* site = nullptr;
    LastSite() = default;
    LastSite(const LastSite&) {}
    LastSite& operator=(const LastSite&) {
      site = nullptr;
      return *this;
    }
  };
  LastSite last_;
  // The least live bytes in each growth window (kNoFloor: not reached yet), and the window of the last
  // change; windows without a change hold what was live when they began.
  static constexpr uint64_t kNoFloor = ~uint64_t{0};
  std::array<uint64_t, GrowthWindows::kWindows> floors_ = make_floors();
  uint32_t window_ = 0;
  static std::array<uint64_t, GrowthWindows::kWindows> make_floors() {
    std::array<uint64_t, GrowthWindows::kWindows> floors;
    floors.fill(kNoFloor);
    return floors;
  }
  uint64_t live_ = 0;
  Snapshot peak_;
  bool snapshot_pending_ = false;
};

}  // namespace gpumemtrace::report
