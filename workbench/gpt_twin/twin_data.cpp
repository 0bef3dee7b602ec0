#include "gpt_twin/twin_data.hpp"

#include <cblas.h>  // OpenBLAS's own: openblas_set_num_threads

#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>

#include <xtensor/xadapt.hpp>
#include <xtensor/xnpy.hpp>

#include "corpus/kjv_corpus.hpp"
#include "util/files.hpp"

namespace gpt_twin {
namespace {

const std::vector<std::string> kSpecial = {std::string(workbench::kEndOfText)};
constexpr std::size_t kVocabSize = 2048;  // lab 12's verify program's vocabulary

}  // namespace

KjvTokens kjv_tokens(const std::filesystem::path& tokenizer_dir, std::size_t max_bytes) {
  workbench::KjvCorpus corpus = workbench::kjv_corpus();
  const auto vocab_path = tokenizer_dir / "vocab.json", merges_path = tokenizer_dir / "merges.txt";
  minimodel::Bpe bpe;
  if (std::filesystem::exists(vocab_path) && std::filesystem::exists(merges_path)) {
    bpe = minimodel::bpe_from_files(workbench::read_file(vocab_path),
                                    workbench::read_file(merges_path), kSpecial);
  } else {
    bpe = minimodel::train_bpe(corpus.train, kVocabSize, kSpecial);
    std::filesystem::create_directories(tokenizer_dir);
    workbench::write_file_atomically(vocab_path, minimodel::to_vocab_json(bpe));
    workbench::write_file_atomically(merges_path, minimodel::to_merges_txt(bpe));
  }
  if (max_bytes > 0) {
    // Cut at a line's end, so that no verse is split inside a pre-token.
    for (std::string* text : {&corpus.train, &corpus.validation})
      if (text->size() > max_bytes) text->resize(text->rfind('\n', max_bytes) + 1);
  }
  minimodel::BpeEncoder encoder(bpe);
  KjvTokens tokens{encoder.encode(corpus.train), encoder.encode(corpus.validation), {}};
  for (std::size_t id = 0; id < encoder.bpe().vocab.size(); ++id)
    tokens.token_bytes.push_back(encoder.decode_bytes({minimodel::TokenId(id)}).size());
  return tokens;
}

void save_tensors(const std::filesystem::path& dir, const minimodel::GptParams<float>& params) {
  std::filesystem::create_directories(dir);
  for (const auto& tensor : minimodel::parameter_tensors(params)) {
    const auto view = xt::adapt(tensor.data, tensor.size(), xt::no_ownership(), tensor.shape);
    xt::dump_npy((dir / (tensor.name + ".npy")).string(), view);
  }
}

void save_floats(const std::filesystem::path& path, const std::vector<float>& values) {
  xt::dump_npy(path.string(), xt::adapt(values, {values.size()}));
}

void save_windows(const std::filesystem::path& path,
                  const std::vector<std::vector<minimodel::TokenId>>& windows) {
  const std::size_t width = windows.empty() ? 0 : windows[0].size();
  xt::xtensor<std::int32_t, 2> all({windows.size(), width});
  for (std::size_t i = 0; i < windows.size(); ++i) {
    if (windows[i].size() != width)
      throw std::invalid_argument("save_windows: window " + std::to_string(i) + " has " +
                                  std::to_string(windows[i].size()) + " tokens, not " +
                                  std::to_string(width));
    for (std::size_t j = 0; j < width; ++j) all(i, j) = std::int32_t(windows[i][j]);
  }
  xt::dump_npy(path.string(), all);
}

void save_stream(const std::filesystem::path& path, const std::vector<minimodel::TokenId>& tokens) {
  std::vector<std::int32_t> ids(tokens.begin(), tokens.end());
  xt::dump_npy(path.string(), xt::adapt(ids, {ids.size()}));
}

std::vector<std::vector<minimodel::TokenId>> batch_windows(const minimodel::GptBatch& batch) {
  const std::size_t B = batch.inputs.shape(0), T = batch.inputs.shape(1);
  std::vector<std::vector<minimodel::TokenId>> windows(B);
  for (std::size_t b = 0; b < B; ++b) {
    for (std::size_t t = 0; t < T; ++t) windows[b].push_back(batch.inputs(b, t));
    windows[b].push_back(batch.targets(b, T - 1));
  }
  return windows;
}

nlohmann::json describe_run(const minimodel::GptParams<float>& params, std::size_t batch,
                            std::size_t context, const minimodel::TrainOptions& train,
                            const minimodel::AdamWOptions& adamw) {
  const minimodel::GptConfig& c = params.config;
  nlohmann::json run = {{"config",
                         {{"vocab", c.vocab},
                          {"max_len", c.max_len},
                          {"d_model", c.d_model},
                          {"n_heads", c.n_heads},
                          {"n_layers", c.n_layers}}},
                        {"batch", batch},
                        {"context", context},
                        {"parameters", minimodel::parameter_count(params)},
                        {"optimizer",
                         {{"lr_max", train.schedule.lr_max},
                          {"lr_min", train.schedule.lr_min},
                          {"warmup", train.schedule.warmup},
                          {"max_steps", train.schedule.max_steps},
                          {"beta1", adamw.beta1},
                          {"beta2", adamw.beta2},
                          {"eps", adamw.eps},
                          {"weight_decay", adamw.weight_decay},
                          {"max_norm", train.max_grad_norm}}}};
  for (const auto& tensor : minimodel::parameter_tensors(params)) {
    run["tensors"].push_back(tensor.name);
    if (tensor.decay) run["decayed"].push_back(tensor.name);
  }
  return run;
}

RunShape run_shape(bool quick) {
  if (!quick) return {minimodel::GptConfig{}, 16};
  minimodel::GptConfig small;
  small.max_len = 32;
  small.d_model = 32;
  small.n_heads = 2;
  small.n_layers = 2;
  return {small, 4};
}

void set_threads(int threads) { openblas_set_num_threads(threads); }

}  // namespace gpt_twin
