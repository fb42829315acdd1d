//===- TokenizerFiles.h - a model folder's text interface -------*- C++ -*-===//
//
// Part of xfmr.
//
// What xfmr-compile copies from a model folder (Hugging Face style, or
// onnxruntime-genai's, which ships the same tokenizer files) into an
// artifact so that it can be run on text: tokenizer.json,
// tokenizer_config.json and the chat template as files, and the manifest's
// "text" section (docs/artifact.md, xfmr::rt::TextInterface): special tokens
// and their ids, eos ids, add_bos_token, generation defaults. The runtime
// reads it back through xfmr/runtime/Manifest.h and TextInterface.h.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_TOOLS_XFMR_COMPILE_TOKENIZERFILES_H
#define XFMR_TOOLS_XFMR_COMPILE_TOKENIZERFILES_H

#include "xfmr/runtime/Manifest.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xfmr::compile {

/// The text interface of a model, read and checked, not yet written.
struct TokenizerFiles {
  /// Artifact file name -> contents (tokenizer.json, tokenizer_config.json,
  /// chat_template.jinja).
  std::vector<std::pair<std::string, std::string>> files;
  /// The manifest's "text" section; its `files` are filled when the files
  /// are written.
  rt::TextInterface text;
};

/// Reads the text interface of a model.
///  - `tokenizer`: --tokenizer, a folder with tokenizer.json (and optionally
///    tokenizer_config.json, special_tokens_map.json, chat_template.jinja /
///    .json, generation_config.json) or a tokenizer.json file; "" if not
///    given.
///  - `modelFolder`: the model folder xfmr-compile was given ("" for a
///    model file); the files other than tokenizer.json come from it when
///    `tokenizer` is a file.
///  - `extraEosIds`: eos ids stated elsewhere (genai_config.json).
/// Returns nothing when there is no tokenizer.json to take (only possible
/// without --tokenizer), with the reason in `note`. Errors name the file
/// and the field: a malformed tokenizer_config.json is one error.
/// Warnings (a special token the tokenizer does not know) go to `warn`.
llvm::Expected<std::optional<TokenizerFiles>>
readTokenizerFiles(llvm::StringRef tokenizer, llvm::StringRef modelFolder,
                   llvm::ArrayRef<int64_t> extraEosIds, std::string &note,
                   llvm::function_ref<void(const llvm::Twine &)> warn);

/// Writes the files into the artifact directory being built and records
/// their size and SHA-256 in `files` (the manifest's, by file name).
llvm::Error writeTokenizerFiles(const TokenizerFiles &text, llvm::StringRef dir,
                                std::map<std::string, rt::FileIntegrity> &files);

} // namespace xfmr::compile

#endif // XFMR_TOOLS_XFMR_COMPILE_TOKENIZERFILES_H
