#include "models/embcache/sample_source.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "sim_core/base/error.hpp"
#include "sim_core/base/input_file.hpp"
#include "sim_core/base/text_fields.hpp"

namespace mlsim::embcache {

ZipfSource::ZipfSource(std::size_t fields, std::uint64_t rows, double alpha, RandomStream stream)
    : fields_(fields), rows_(rows), cdf_(rows), stream_(std::move(stream)) {
  double sum = 0;
  for (std::uint64_t r = 0; r < rows; ++r) {
    sum += 1.0 / std::pow(static_cast<double>(r + 1), alpha);
    cdf_[r] = sum;
  }
  for (double& c : cdf_) c /= sum;
}

Sample ZipfSource::next() {
  Sample s;
  s.reserve(fields_);
  for (std::size_t f = 0; f < fields_; ++f) {
    const double u = stream_.uniform();
    const auto row =
        static_cast<std::uint64_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
    s.push_back(make_key(f, std::min(row, rows_ - 1)));
  }
  return s;
}

CsvSource::CsvSource(const std::filesystem::path& file, const std::vector<std::string>& columns,
                     const std::string& where) {
  std::ifstream in = open_input_file(file, where, "sample file");
  std::string line;
  if (!std::getline(in, line)) throw InputError(where, file.string() + " is empty");
  const std::vector<std::string> header = split_csv_line(line);
  std::vector<std::size_t> index;
  for (const std::string& c : columns) {
    auto it = std::find(header.begin(), header.end(), c);
    if (it == header.end())
      throw InputError(where, "column \"" + c + "\" is not in the header of " + file.string());
    index.push_back(static_cast<std::size_t>(it - header.begin()));
  }
  std::vector<std::unordered_map<std::string, std::uint64_t>> ids(columns.size());
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = split_csv_line(line);
    Sample s;
    for (std::size_t f = 0; f < index.size(); ++f) {
      if (index[f] >= cells.size() || cells[index[f]].empty()) continue;
      auto [it, fresh] = ids[f].try_emplace(cells[index[f]], ids[f].size());
      if (fresh) ++distinct_;
      s.push_back(make_key(f, it->second));
    }
    samples_.push_back(std::move(s));
  }
  if (samples_.empty()) throw InputError(where, file.string() + " has no samples");
  std::uint64_t offset = 0;
  for (const auto& field : ids) {
    field_offset_.push_back(offset);
    offset += field.size();
  }
}

Sample CsvSource::next() {
  Sample s = samples_[cursor_];
  cursor_ = (cursor_ + 1) % samples_.size();
  return s;
}

}  // namespace mlsim::embcache
