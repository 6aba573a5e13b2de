#pragma once
// Sift and erase for array heaps (d-ary, min at index 0) whose items must know their place: an
// indexed heap keeps an id -> position table, the flow backend's route classes keep each member's
// position in its flow. `place(i, item)` stores `item` at index i and records the position; it is
// the only way these functions write, so the caller's bookkeeping never goes stale.
// `less(a, b)` orders the items; equal items keep no particular order.
#include <cstddef>

namespace mlsim::heap {

template <std::size_t Arity, typename Items, typename Less, typename Place>
void sift_up(Items& items, std::size_t i, Less less, Place place) {
  const auto item = items[i];
  while (i > 0) {
    const std::size_t parent = (i - 1) / Arity;
    if (!less(item, items[parent])) break;
    place(i, items[parent]);
    i = parent;
  }
  place(i, item);
}

template <std::size_t Arity, typename Items, typename Less, typename Place>
void sift_down(Items& items, std::size_t i, Less less, Place place) {
  const auto item = items[i];
  const std::size_t n = items.size();
  for (;;) {
    const std::size_t first = Arity * i + 1;
    if (first >= n) break;
    const std::size_t end = first + Arity < n ? first + Arity : n;
    std::size_t best = first;
    for (std::size_t c = first + 1; c < end; ++c)
      if (less(items[c], items[best])) best = c;
    if (!less(items[best], item)) break;
    place(i, items[best]);
    i = best;
  }
  place(i, item);
}

// Removes the item at index i: the last item takes its place and moves up or down.
template <std::size_t Arity, typename Items, typename Less, typename Place>
void erase_at(Items& items, std::size_t i, Less less, Place place) {
  const auto last = items.back();
  items.pop_back();
  if (i == items.size()) return;  // it was the last item
  const bool smaller = less(last, items[i]);
  place(i, last);
  if (smaller) {
    sift_up<Arity>(items, i, less, place);
  } else {
    sift_down<Arity>(items, i, less, place);
  }
}

}  // namespace mlsim::heap
