//===- TextInterfaceTest.cpp - an artifact's tokenizer and chat template --===//
//
// Part of xfmr.
//
// loadTextModel on an artifact directory holding SmolLM2's tokenizer and
// ChatML template (examples/tokenizers/smollm2): prompts and chats encode to
// the ids transformers 5.25 gives (AutoTokenizer: tokenizer(text) and
// apply_chat_template(tokenize=True)), files are checked against the
// manifest, and generation defaults become sampling parameters as
// transformers' generate() reads them.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/TextInterface.h"
#include "xfmr/runtime/Digest.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

using namespace xfmr::rt;
namespace fs = std::filesystem;

namespace {

const std::string kSmolLM2 =
    XFMR_UNIT_INPUTS_DIR "/../../../examples/tokenizers/smollm2";

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// An artifact directory with SmolLM2's text files and the manifest's text
/// section describing them (no model: loadTextModel reads only these).
class TextInterfaceTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = (fs::temp_directory_path() /
           ("xfmr-text-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name()))
              .string();
    fs::remove_all(dir);
    fs::create_directories(dir);
    TextInterface t;
    t.tokenizerFile = kTokenizerFileName;
    t.tokenizerConfigFile = kTokenizerConfigFileName;
    t.chatTemplateFile = kChatTemplateFileName;
    for (const char *name :
         {kTokenizerFileName, kTokenizerConfigFileName, kChatTemplateFileName})
      put(t, name, readAll(kSmolLM2 + "/" + name));
    t.bosToken = "<|im_start|>";
    t.eosToken = "<|im_end|>";
    t.bosId = 1;
    t.eosIds = {2};
    manifest.text = std::move(t);
  }
  void TearDown() override { fs::remove_all(dir); }

  /// Writes `bytes` as the artifact file `name` and records it.
  void put(TextInterface &t, const std::string &name,
           const std::string &bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    t.files[name] =
        FileIntegrity{bytes.size(), sha256Hex(bytes.data(), bytes.size())};
  }

  std::string dir;
  Manifest manifest;
};

nlohmann::json userSays(const std::string &content) {
  return nlohmann::json::array({{{"role", "user"}, {"content", content}}});
}

TEST_F(TextInterfaceTest, EncodesAsTransformers) {
  Expected<TextModel> m = loadTextModel(dir, manifest);
  ASSERT_TRUE(m) << m.error();
  ASSERT_TRUE(m->chatTemplate);
  EXPECT_EQ(encodePrompt(*m, "Hello world"),
            (std::vector<int64_t>{19556, 905}));
  Expected<std::string> text = renderChat(*m, userSays("Hello"), true);
  ASSERT_TRUE(text) << text.error();
  EXPECT_EQ(*text, "<|im_start|>system\nYou are a helpful AI assistant named "
                   "SmolLM, trained by "
                   "Hugging Face<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                   "<|im_start|>assistant\n");
  // The rendered text's special tokens are found as such; none is added.
  Expected<std::vector<int64_t>> ids = encodeChat(*m, userSays("Hello"), true);
  ASSERT_TRUE(ids) << ids.error();
  EXPECT_EQ(*ids, (std::vector<int64_t>{
                      1,     9690,  198,  2683, 359,   253,  5356, 5646,
                      11173, 3365,  3511, 308,  34519, 28,   7018, 411,
                      407,   19712, 8182, 2,    198,   1,    4093, 198,
                      19556, 2,     198,  1,    520,   9531, 198}));
  EXPECT_EQ(decodeText(*m, {1, 9690, 198, 28120, 2}), "system\nhello");
}

// add_bos_token stated: transformers encodes [bos] text.
TEST_F(TextInterfaceTest, AddBosToken) {
  manifest.text->addBosToken = true;
  Expected<TextModel> m = loadTextModel(dir, manifest);
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(encodePrompt(*m, "Hello world"),
            (std::vector<int64_t>{1, 19556, 905}));
  Expected<std::vector<int64_t>> ids = encodeChat(*m, userSays("Hello"), true);
  ASSERT_TRUE(ids) << ids.error();
  EXPECT_EQ(ids->front(), 1); // the template's, not a second one
  EXPECT_EQ(ids->at(1), 9690);
}

TEST_F(TextInterfaceTest, Errors) {
  Manifest none;
  Expected<TextModel> missing = loadTextModel(dir, none);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(),
            dir + " has no tokenizer (compile from a model folder with "
                  "tokenizer.json or pass --tokenizer)");

  // A template changed after compilation, same size: the digest differs.
  std::string source = readAll(dir + "/" + kChatTemplateFileName);
  source[0] = source[0] == 'x' ? 'y' : 'x';
  std::ofstream(dir + "/" + kChatTemplateFileName, std::ios::binary) << source;
  Expected<TextModel> tampered = loadTextModel(dir, manifest);
  ASSERT_FALSE(tampered);
  EXPECT_NE(tampered.error().find("chat_template.jinja: SHA-256 is"),
            std::string::npos)
      << tampered.error();
  // Truncated.
  std::ofstream(dir + "/" + kTokenizerFileName, std::ios::binary) << "{}";
  Expected<TextModel> truncated = loadTextModel(dir, manifest);
  ASSERT_FALSE(truncated);
  EXPECT_NE(truncated.error().find("tokenizer.json: size is 2 bytes"),
            std::string::npos)
      << truncated.error();

  // No template: chats are an error, prompts are not.
  SetUp();
  manifest.text->chatTemplateFile.clear();
  Expected<TextModel> plain = loadTextModel(dir, manifest);
  ASSERT_TRUE(plain) << plain.error();
  Expected<std::vector<int64_t>> chat =
      encodeChat(*plain, userSays("Hi"), true);
  ASSERT_FALSE(chat);
  EXPECT_NE(chat.error().find("has no chat template"), std::string::npos)
      << chat.error();
}

TEST(GenerationDefaultsTest, AsTransformersGenerate) {
  GenerationDefaults d;
  d.temperature = 0.6;
  d.topP = 0.9;
  d.repetitionPenalty = 1.2;
  // do_sample absent: greedy, whatever the temperature.
  SamplingParams greedy = applyGenerationDefaults(d);
  EXPECT_EQ(greedy.temperature, 0);
  EXPECT_EQ(greedy.repetitionPenalty, 1.2);
  d.doSample = true;
  SamplingParams sampled = applyGenerationDefaults(d);
  EXPECT_EQ(sampled.temperature, 0.6);
  EXPECT_EQ(sampled.topP, 0.9);
  EXPECT_EQ(sampled.topK, 50); // transformers' default
  d.temperature.reset();
  EXPECT_EQ(applyGenerationDefaults(d).temperature, 1.0);
  EXPECT_TRUE(validateGenerationDefaults(d));
  d.topP = 0;
  EXPECT_FALSE(validateGenerationDefaults(d));
}

} // namespace
