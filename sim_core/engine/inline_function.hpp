#pragma once
// A move-only callable with inline storage, so that scheduling an event does not allocate when
// its capture is small (the common case: a pointer and an id or two). Larger callables fall back
// to one heap allocation owned by a unique_ptr.
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace mlsim {

template <typename Signature, std::size_t Capacity = 48>
class InlineFunction;

template <typename R, typename... Args, std::size_t Capacity>
class InlineFunction<R(Args...), Capacity> {
 public:
  InlineFunction() = default;
  InlineFunction(std::nullptr_t) {}

  template <typename F, typename D = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<D, InlineFunction> &&
                                        std::is_invocable_r_v<R, D&, Args...>>>
  InlineFunction(F&& f) {  // NOLINT: implicit like std::function
    if constexpr (fits_inline<D>()) {
      ::new (static_cast<void*>(&storage_)) D(std::forward<F>(f));
      ops_ = &inline_ops<D>;
    } else {
      using Boxed = std::unique_ptr<D>;
      ::new (static_cast<void*>(&storage_)) Boxed(std::make_unique<D>(std::forward<F>(f)));
      ops_ = &boxed_ops<D>;
    }
  }

  InlineFunction(InlineFunction&& o) noexcept : ops_(o.ops_) {
    if (ops_) {
      move_from(o);
      o.ops_ = nullptr;
    }
  }
  InlineFunction& operator=(InlineFunction&& o) noexcept {
    if (this != &o) {
      reset();
      ops_ = o.ops_;
      if (ops_) {
        move_from(o);
        o.ops_ = nullptr;
      }
    }
    return *this;
  }
  InlineFunction(const InlineFunction&) = delete;
  InlineFunction& operator=(const InlineFunction&) = delete;
  ~InlineFunction() { reset(); }

  void reset() {
    if (ops_) {
      if (!ops_->trivial) ops_->destroy(&storage_);
      ops_ = nullptr;
    }
  }
  explicit operator bool() const { return ops_ != nullptr; }
  R operator()(Args... args) { return ops_->invoke(&storage_, std::forward<Args>(args)...); }

 private:
  struct Ops {
    R (*invoke)(void*, Args&&...);
    void (*move)(void* dst, void* src);  // move-constructs into dst and destroys src
    void (*destroy)(void*);
    // Stored inline and trivially copyable (a lambda capturing pointers and ids): moved with a
    // plain copy of the storage and never destroyed, with no indirect call. Hot paths (event
    // scheduling, network transfers) move such callables several times each.
    bool trivial = false;
  };

  void move_from(InlineFunction& o) noexcept {
    if (ops_->trivial) {
      std::memcpy(&storage_, &o.storage_, Capacity);
    } else {
      ops_->move(&storage_, &o.storage_);
    }
  }

  template <typename D>
  static constexpr bool fits_inline() {
    return sizeof(D) <= Capacity && alignof(D) <= kStorageAlign &&
           std::is_nothrow_move_constructible_v<D>;
  }

  template <typename D>
  static constexpr Ops inline_ops{
      [](void* p, Args&&... a) -> R { return (*static_cast<D*>(p))(std::forward<Args>(a)...); },
      [](void* dst, void* src) {
        ::new (dst) D(std::move(*static_cast<D*>(src)));
        static_cast<D*>(src)->~D();
      },
      [](void* p) { static_cast<D*>(p)->~D(); },
      (std::is_trivially_copyable_v<D> && std::is_trivially_destructible_v<D>)};

  template <typename D>
  static constexpr Ops boxed_ops{
      [](void* p, Args&&... a) -> R {
        return (**static_cast<std::unique_ptr<D>*>(p))(std::forward<Args>(a)...);
      },
      [](void* dst, void* src) {
        auto* s = static_cast<std::unique_ptr<D>*>(src);
        ::new (dst) std::unique_ptr<D>(std::move(*s));
        s->~unique_ptr<D>();
      },
      [](void* p) { static_cast<std::unique_ptr<D>*>(p)->~unique_ptr<D>(); }};

  // Word alignment, not max_align_t's 16: it keeps the object at Capacity + 8 bytes, so the
  // engine's slot (a callback and a sequence number) fills exactly one 64-byte cache line.
  // Captures needing more (long double, __int128) are boxed.
  static constexpr std::size_t kStorageAlign = alignof(void*);
  alignas(kStorageAlign) std::byte storage_[Capacity];
  const Ops* ops_ = nullptr;
};

}  // namespace mlsim
