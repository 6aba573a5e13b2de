#pragma once
// Training samples as lists of embedding-row keys, one per categorical field. Keys of different
// fields never collide (field in the high bits).
//   - zipf: each field draws its row from a Zipf(alpha) law over `rows` rows (the skew that makes
//     embedding caches work; Herald's recipe, papers.md section 6).
//   - csv: real hashed IDs (Criteo, Avazu samples in shared/data/embedding), one sample per line,
//     the chosen columns as fields, cycled when the file ends. Empty values are skipped.
#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/embcache/lru_cache.hpp"
#include "sim_core/engine/random.hpp"

namespace mlsim::embcache {

using Sample = std::vector<Key>;

inline Key make_key(std::size_t field, std::uint64_t row) {
  return (static_cast<Key>(field) << 40) | row;
}

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual Sample next() = 0;
  // Distinct rows the source can produce (sizes caches by a ratio of it).
  virtual std::uint64_t distinct_rows() const = 0;
  // The row's index in one table of every field's rows, field after field, in
  // [0, distinct_rows()): as Herald's and HET's CTR models hold Criteo's 26 fields in one table
  // (HKUST-SING/herald examples/ctr/models/wdl_criteo.py: 33,762,577 rows), which the PS
  // servers split in contiguous ranges. The default takes the key itself (sources whose keys are
  // such indices already).
  virtual std::uint64_t table_row(Key k) const { return k; }
};

inline std::size_t key_field(Key k) {
  return static_cast<std::size_t>(k >> 40);
}
inline std::uint64_t key_row(Key k) {
  return k & ((Key{1} << 40) - 1);
}

class ZipfSource final : public SampleSource {
 public:
  ZipfSource(std::size_t fields, std::uint64_t rows, double alpha, RandomStream stream);
  Sample next() override;
  std::uint64_t distinct_rows() const override { return fields_ * rows_; }
  std::uint64_t table_row(Key k) const override { return key_field(k) * rows_ + key_row(k); }

 private:
  std::size_t fields_;
  std::uint64_t rows_;
  std::vector<double> cdf_;  // inverse-CDF table, shared by the fields
  RandomStream stream_;
};

class CsvSource final : public SampleSource {
 public:
  // Reads every line now (the shipped samples are small); InputError on a missing file or column.
  CsvSource(const std::filesystem::path& file, const std::vector<std::string>& columns,
            const std::string& where);
  Sample next() override;
  std::uint64_t distinct_rows() const override { return distinct_; }
  std::uint64_t table_row(Key k) const override { return field_offset_[key_field(k)] + key_row(k); }
  std::size_t size() const { return samples_.size(); }

 private:
  std::vector<Sample> samples_;
  std::vector<std::uint64_t> field_offset_;  // rows of the fields before each one
  std::size_t cursor_ = 0;
  std::uint64_t distinct_ = 0;
};

}  // namespace mlsim::embcache
