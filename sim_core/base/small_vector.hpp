#pragma once
// A vector of trivially copyable values that keeps its first N elements inside the object.
// Used on hot paths where most lists are short (a transfer's route, the transfers on a link), so
// reading them does not chase a pointer to the heap. Past N it moves to heap storage, which it
// keeps (like std::vector's capacity) until destroyed.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <type_traits>

namespace mlsim {

template <typename T, std::size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector holds trivially copyable values");

 public:
  SmallVector() = default;
  SmallVector(const SmallVector& o) { assign(o.begin(), o.end()); }
  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVector(SmallVector&& o) noexcept { take(o); }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) take(o);
    return *this;
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return heap_ ? heap_.get() : local_; }
  const T* data() const { return heap_ ? heap_.get() : local_; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }
  operator std::span<const T>() const { return {data(), size_}; }  // NOLINT: like a view

  void clear() { size_ = 0; }
  void pop_back() { --size_; }
  void push_back(const T& v) {
    if (size_ == capacity()) grow(2 * capacity());
    data()[size_++] = v;
  }
  void resize(std::size_t n) {
    if (n > capacity()) grow(n);
    size_ = static_cast<std::uint32_t>(n);
  }
  template <typename It>
  void assign(It first, It last) {
    const auto n = static_cast<std::size_t>(std::distance(first, last));
    size_ = 0;
    if (n > capacity()) grow(n);
    std::copy(first, last, data());
    size_ = static_cast<std::uint32_t>(n);
  }

 private:
  std::size_t capacity() const { return heap_ ? heap_capacity_ : N; }
  void grow(std::size_t want) {
    const std::size_t cap = std::max(want, 2 * N);
    auto bigger = std::make_unique<T[]>(cap);
    std::memcpy(bigger.get(), data(), size_ * sizeof(T));
    heap_ = std::move(bigger);
    heap_capacity_ = static_cast<std::uint32_t>(cap);
  }
  void take(SmallVector& o) {
    size_ = o.size_;
    heap_ = std::move(o.heap_);
    heap_capacity_ = o.heap_capacity_;
    if (!heap_) std::memcpy(local_, o.local_, size_ * sizeof(T));
    o.size_ = 0;
  }

  std::uint32_t size_ = 0;
  std::uint32_t heap_capacity_ = 0;
  T local_[N];
  std::unique_ptr<T[]> heap_;
};

}  // namespace mlsim
