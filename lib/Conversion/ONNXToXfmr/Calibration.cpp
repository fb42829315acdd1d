//===- Calibration.cpp - activation statistics: names and files -----------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Conversion/Calibration.h"

#include "dialects/onnx/IR/ONNXOps.h"

#include "llvm/Support/Base64.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>

using namespace mlir;

namespace xfmr {

namespace {
constexpr llvm::StringLiteral kPrefix = "xfmr_calibration.";
constexpr llvm::StringLiteral kStats[] = {"channels", "rows", "gram"};

llvm::json::Array toJSON(const std::vector<float> &v) {
  llvm::json::Array a;
  for (float x : v)
    a.push_back(static_cast<double>(x));
  return a;
}

bool fromJSON(const llvm::json::Object &o, llvm::StringRef key, std::vector<float> &out) {
  const llvm::json::Array *a = o.getArray(key);
  if (!a)
    return false;
  for (const llvm::json::Value &v : *a) {
    std::optional<double> d = v.getAsNumber();
    if (!d || !std::isfinite(*d) || *d < 0)
      return false;
    out.push_back(static_cast<float>(*d));
  }
  return true;
}
} // namespace

const ChannelStats *CalibrationStats::find(int64_t product) const {
  for (const ChannelStats &s : products)
    if (s.product == product)
      return &s;
  return nullptr;
}

std::string calibrationOutputName(int64_t product, llvm::StringRef stat) {
  return (kPrefix + llvm::Twine(product) + "." + stat).str();
}

llvm::StringRef calibrationRowsInputName() { return "xfmr_calibration.rows"; }

bool parseCalibrationOutputName(llvm::StringRef name, int64_t &product, std::string &stat) {
  if (!name.consume_front(kPrefix))
    return false;
  auto [index, rest] = name.split('.');
  if (index.getAsInteger(10, product) || product < 0 || !llvm::is_contained(kStats, rest))
    return false;
  stat = rest.str();
  return true;
}

void forEachProduct(ModuleOp module, llvm::function_ref<void(onnx::MatMulOp, int64_t)> fn) {
  int64_t index = 0;
  module.walk([&](onnx::MatMulOp mm) { fn(mm, index++); });
}

bool writeCalibrationStats(const CalibrationStats &stats, llvm::StringRef path,
                           std::string &error) {
  std::string gramPath = (path + ".gram").str();
  bool grams = llvm::any_of(stats.products, [](const ChannelStats &s) { return !s.gram.empty(); });
  std::unique_ptr<llvm::raw_fd_ostream> gramFile;
  if (grams) {
    std::error_code ec;
    gramFile = std::make_unique<llvm::raw_fd_ostream>(gramPath, ec);
    if (ec) {
      error = "cannot write '" + gramPath + "': " + ec.message();
      return false;
    }
  }
  uint64_t gramOffset = 0;
  llvm::json::Array products;
  for (const ChannelStats &s : stats.products) {
    llvm::json::Object o{{"product", s.product},
                         {"weight", s.weight},
                         {"rows", s.rows},
                         {"max", toJSON(s.maxAbs)},
                         {"mean_abs", toJSON(s.meanAbs)},
                         {"mean_square", toJSON(s.meanSquare)}};
    if (s.sampleRows > 0) {
      o["sample_rows"] = s.sampleRows;
      o["samples"] = llvm::encodeBase64(llvm::ArrayRef<char>(
          reinterpret_cast<const char *>(s.samples.data()), s.samples.size() * sizeof(float)));
    }
    if (!s.gram.empty()) {
      o["gram_offset"] = static_cast<int64_t>(gramOffset);
      gramFile->write(reinterpret_cast<const char *>(s.gram.data()), s.gram.size() * sizeof(float));
      gramOffset += s.gram.size() * sizeof(float);
    }
    products.push_back(std::move(o));
  }
  if (gramFile) {
    gramFile->close();
    if (gramFile->has_error()) {
      error = "cannot write '" + gramPath + "': " + gramFile->error().message();
      gramFile->clear_error();
      return false;
    }
  }
  llvm::json::Object root{{"format", "xfmr-calibration"},
                          {"version", 1},
                          {"source", stats.source},
                          {"tokens", stats.tokens},
                          {"products", std::move(products)}};
  if (grams)
    root["gram_file"] = llvm::sys::path::filename(gramPath).str();
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    error = "cannot write '" + path.str() + "': " + ec.message();
    return false;
  }
  os << llvm::formatv("{0}", llvm::json::Value(std::move(root))) << "\n";
  return true;
}

std::optional<CalibrationStats> readCalibrationStats(llvm::StringRef path, std::string &error) {
  auto fail = [&](const llvm::Twine &why) -> std::optional<CalibrationStats> {
    error = (path + ": " + why).str();
    return std::nullopt;
  };
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return fail(buffer.getError().message());
  llvm::Expected<llvm::json::Value> json = llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    return fail(llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  if (!root || root->getString("format") != "xfmr-calibration")
    return fail("not an xfmr calibration file (format 'xfmr-calibration')");
  if (root->getInteger("version") != 1)
    return fail("unsupported version (this xfmr reads version 1)");
  CalibrationStats stats;
  stats.source = root->getString("source").value_or("").str();
  stats.tokens = root->getInteger("tokens").value_or(0);
  const llvm::json::Array *products = root->getArray("products");
  if (!products)
    return fail("no 'products' list");
  // Second moments: raw f32 in the companion file the JSON names (beside it).
  std::unique_ptr<llvm::MemoryBuffer> grams;
  std::string gramPath;
  if (std::optional<llvm::StringRef> name = root->getString("gram_file")) {
    if (name->empty() || llvm::sys::path::filename(*name) != *name)
      return fail("'gram_file' must be a file name (in the same folder)");
    llvm::SmallString<256> p(llvm::sys::path::parent_path(path));
    llvm::sys::path::append(p, *name);
    gramPath = p.str().str();
    auto file = llvm::MemoryBuffer::getFile(gramPath, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
    if (!file)
      return fail("its second moments '" + gramPath + "': " + file.getError().message());
    grams = std::move(*file);
  }
  for (auto [i, v] : llvm::enumerate(*products)) {
    const llvm::json::Object *o = v.getAsObject();
    ChannelStats s;
    std::optional<int64_t> product = o ? o->getInteger("product") : std::nullopt;
    std::optional<int64_t> rows = o ? o->getInteger("rows") : std::nullopt;
    if (!product || *product < 0 || !rows || *rows < 1)
      return fail("products[" + llvm::Twine(i) + "]: needs 'product' >= 0 and 'rows' >= 1");
    s.product = *product;
    s.rows = *rows;
    s.weight = o->getString("weight").value_or("").str();
    if (!fromJSON(*o, "max", s.maxAbs) || !fromJSON(*o, "mean_abs", s.meanAbs) ||
        !fromJSON(*o, "mean_square", s.meanSquare) || s.maxAbs.empty() ||
        s.meanAbs.size() != s.maxAbs.size() || s.meanSquare.size() != s.maxAbs.size())
      return fail("products[" + llvm::Twine(i) +
                  "]: 'max', 'mean_abs' and 'mean_square' must be lists of the same length "
                  "of finite numbers >= 0");
    if (std::optional<int64_t> n = o->getInteger("sample_rows"); n && *n > 0) {
      std::vector<char> bytes;
      std::optional<llvm::StringRef> text = o->getString("samples");
      size_t want = static_cast<size_t>(*n) * s.maxAbs.size() * sizeof(float);
      if (!text || *n > (int64_t(1) << 24) || llvm::decodeBase64(*text, bytes) ||
          bytes.size() != want)
        return fail("products[" + llvm::Twine(i) + "]: 'samples' must be base64 of " +
                    llvm::Twine(*n) + " x K little-endian f32 values");
      s.sampleRows = *n;
      s.samples.resize(static_cast<size_t>(*n) * s.maxAbs.size());
      std::memcpy(s.samples.data(), bytes.data(), bytes.size());
      for (float x : s.samples)
        if (!std::isfinite(x))
          return fail("products[" + llvm::Twine(i) + "]: 'samples' are not all finite");
    }
    if (std::optional<int64_t> offset = o->getInteger("gram_offset")) {
      uint64_t k = s.maxAbs.size(), bytes = k * k * sizeof(float);
      if (!grams || *offset < 0 || *offset % sizeof(float) ||
          static_cast<uint64_t>(*offset) > grams->getBufferSize() ||
          grams->getBufferSize() - *offset < bytes)
        return fail("products[" + llvm::Twine(i) + "]: 'gram_offset' " + llvm::Twine(*offset) +
                    " is not a K x K f32 block of " +
                    (grams ? "'" + gramPath + "'" : std::string("a 'gram_file'")));
      s.gram.resize(k * k);
      std::memcpy(s.gram.data(), grams->getBufferStart() + *offset, bytes);
      for (float x : s.gram)
        if (!std::isfinite(x))
          return fail("products[" + llvm::Twine(i) + "]: its second moments are not all finite");
    }
    if (stats.find(s.product))
      return fail("product " + llvm::Twine(s.product) + " is listed twice");
    stats.products.push_back(std::move(s));
  }
  return stats;
}

} // namespace xfmr
