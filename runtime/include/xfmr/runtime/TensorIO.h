//===- TensorIO.h - tensors from and to .npy and .pb files ------*- C++ -*-===//
//
// Part of xfmr.
//
// Reads model inputs and reference outputs from NumPy .npy files and ONNX
// TensorProto .pb files (the format of ONNX's test_data_set_N), and writes
// tensors as .npy. Files come from someone else: every reader validates the
// whole file before it allocates anything the file does not back, and every
// failure is one message that names the file and says why.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_TENSORIO_H
#define XFMR_RUNTIME_TENSORIO_H

#include "xfmr/runtime/Error.h"
#include "xfmr/runtime/Tensor.h"

#include <string>
#include <string_view>

namespace xfmr::rt {

/// Largest .npy header dictionary accepted (NumPy's own max_header_size);
/// a header for the supported dtypes at kMaxRank takes under 1 KiB.
inline constexpr size_t kMaxNpyHeaderBytes = 10000;

/// Reads a C-order .npy file of format version 1.0, 2.0 or 3.0 whose dtype
/// is one of the DTypes with byte order '<' or '|'. NumPy has no bfloat16:
/// the opaque 2-byte '<V2' that np.save writes for an ml_dtypes.bfloat16
/// array reads as bf16. Bool bytes other than 0 read as true (1). Rejects
/// Fortran order, big-endian and object or structured dtypes, a header over
/// kMaxNpyHeaderBytes, a shape whose element count overflows or exceeds
/// kMaxRank dims, and data whose size differs from the file's.
Expected<Tensor> readNpy(const std::string &path);
/// Parses the bytes of a .npy file; `displayName` prefixes errors.
Expected<Tensor> parseNpy(std::string_view bytes,
                          const std::string &displayName);

/// Writes `tensor` as a format 1.0 .npy file, byte for byte what np.save
/// writes (2.0 only if the header would not fit 1.0). bf16 is written as
/// '<V2' (see readNpy). Atomic: the data goes to a temporary file in the
/// same directory that is renamed over `path`, so `path` is never
/// half-written and no temporary file is left behind.
Status writeNpy(const std::string &path, const Tensor &tensor);
/// The bytes writeNpy writes.
std::string serializeNpy(const Tensor &tensor);

/// Reads one ONNX TensorProto from a .pb file. Takes its data from raw_data
/// or from the typed field of its data type (float_data, int32_data, ...)
/// with the importer's checks: a supported data type, no negative dims, no
/// element count overflow, raw_data exactly numel x element size, exactly
/// numel typed values that fit the type, not both raw and typed data, no
/// external data or segments. The tensor's name is the proto's.
Expected<Tensor> readTensorProto(const std::string &path);
/// Parses a serialized TensorProto; `displayName` prefixes errors.
Expected<Tensor> parseTensorProto(std::string_view bytes,
                                  const std::string &displayName);

/// readNpy for a path ending in .npy, readTensorProto for .pb (any case).
Expected<Tensor> readTensor(const std::string &path);

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_TENSORIO_H
