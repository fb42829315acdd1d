//===- CausalLM.h - token files and a causal LM's window inputs -*- C++ -*-===//
//
// Part of xfmr.
//
// What runs a forward artifact over text: perplexity (xfmr-run perplexity)
// and quantization calibration (xfmr-compile --calibration) both read a
// token file and run it as consecutive batch-1 windows.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_CAUSALLM_H
#define XFMR_RUNTIME_CAUSALLM_H

#include "xfmr/runtime/Error.h"
#include "xfmr/runtime/Manifest.h"
#include "xfmr/runtime/Tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace xfmr::rt {

/// The token file at `path` as int64 ids: .npy or .pb, [T] or [1, T], int64
/// or int32. Errors name the file.
Expected<std::vector<int64_t>> readTokenIds(const std::string &path);

/// A forward artifact's inputs for tokens ids[begin, begin + length) as one
/// batch-1 sequence, in manifest order: input_ids, and where the model has
/// them attention_mask (ones) and position_ids (0..length-1), each [1,
/// length], and past keys and values (past_key_values.*, [1, heads, 0,
/// head_dim]: an empty cache); or why the model takes an input this cannot
/// feed.
Expected<std::vector<Tensor>> causalLMInputs(const Manifest &m, const std::vector<int64_t> &ids,
                                             int64_t begin, int64_t length);

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_CAUSALLM_H
