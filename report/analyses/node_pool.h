// report/analyses/node_pool.h — a memory resource for the node-based containers of live holdings
// (std::pmr::map / unordered_map), whose nodes are created and destroyed on nearly every event.
//
// A node is taken from a free list of its size class and given back to it, so the common path never
// calls malloc/free (std::pmr::unsynchronized_pool_resource does the same but measured slower than
// malloc on this path). Memory: slabs for the most nodes live at once, kept until the pool is
// destroyed; requests larger than a node (hash tables' bucket arrays) go to the default resource.
// Single-threaded.
#pragma once

#include <cstddef>
#include <memory>
#include <memory_resource>
#include <vector>

namespace gpumemtrace::report {

class NodePool : public std::pmr::memory_resource {
 public:
  NodePool() = default;
  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;

 private:
  static constexpr size_t kGrain = alignof(std::max_align_t);  // every node is aligned to this
  static constexpr size_t kMaxNode = 256;                       // larger requests: the default resource
  static constexpr size_t kSlabBytes = size_t{64} << 10;
  struct FreeNode {
    FreeNode* next;
  };

  static bool pooled(size_t bytes, size_t alignment) { return bytes > 0 && bytes <= kMaxNode && alignment <= kGrain; }
  static size_t size_class(size_t bytes) { return (bytes + kGrain - 1) / kGrain; }  // 1..kMaxNode/kGrain for pooled sizes

  void* do_allocate(size_t bytes, size_t alignment) override {
    if (!pooled(bytes, alignment)) return std::pmr::get_default_resource()->allocate(bytes, alignment);
    const size_t size = size_class(bytes);
    if (FreeNode* node = free_[size]) {
      free_[size] = node->next;
      return node;
    }
    const size_t node_bytes = size * kGrain;
    if (slab_left_ < node_bytes) {
      slabs_.push_back(std::make_unique<std::max_align_t[]>(kSlabBytes / sizeof(std::max_align_t)));
      slab_next_ = reinterpret_cast<char*>(slabs_.back().get());
      slab_left_ = kSlabBytes;
    }
    void* node = slab_next_;
    slab_next_ += node_bytes;
    slab_left_ -= node_bytes;
    return node;
  }

  void do_deallocate(void* p, size_t bytes, size_t alignment) override {
    if (!pooled(bytes, alignment)) return std::pmr::get_default_resource()->deallocate(p, bytes, alignment);
    const size_t size = size_class(bytes);
    free_[size] = new (p) FreeNode{free_[size]};
  }

  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

  FreeNode* free_[kMaxNode / kGrain + 1] = {};
  std::vector<std::unique_ptr<std::max_align_t[]>> slabs_;
  char* slab_next_ = nullptr;
  size_t slab_left_ = 0;
};

}  // namespace gpumemtrace::report
