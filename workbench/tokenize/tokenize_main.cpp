// The engine behind `workbook tokenize`: built once per implementation (tokenize-learner,
// tokenize-reference) with lab 12's code. Exit status: 0 done, 1 a TODO stub was reached, 2 bad
// input (an unreadable file, a broken tokenizer folder, a token id outside the vocabulary).
#include <chrono>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "minimodel/todo.hpp"
#include "minimodel/tokenizer/bpe.hpp"
#include "tokenize/tokenize_options.hpp"
#include "util/files.hpp"
#include "util/text.hpp"

namespace {

using workbench::TokenizeOptions;

int train(const TokenizeOptions& o) {
  const std::string text = workbench::read_file(o.input);
  const auto start = std::chrono::steady_clock::now();
  const minimodel::Bpe bpe = minimodel::train_bpe(text, o.vocab_size, o.special_tokens);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  workbench::write_files_atomically(
      {{o.out / workbench::kVocabFile, minimodel::to_vocab_json(bpe)},
       {o.out / workbench::kMergesFile, minimodel::to_merges_txt(bpe)},
       {o.out / workbench::kSpecialTokensFile, nlohmann::json(o.special_tokens).dump() + "\n"}});
  std::cout << "trained " << bpe.vocab.size() << " tokens (" << bpe.merges.size() << " merges) on "
            << text.size() << " bytes in " << workbench::seconds_text(seconds) << "; wrote "
            << o.out.string() << "/" << workbench::kVocabFile << " and " << workbench::kMergesFile
            << '\n';
  return 0;
}

minimodel::Bpe load(const std::filesystem::path& dir) {
  std::vector<std::string> specials;
  const std::filesystem::path special_file = dir / workbench::kSpecialTokensFile;
  if (!std::filesystem::exists(special_file))
    std::cerr << "tokenize: warning: " << special_file.string()
              << " is missing: no special tokens (\"<|endoftext|>\" is ordinary text)\n";
  if (std::filesystem::exists(special_file)) {
    try {
      specials =
          nlohmann::json::parse(workbench::read_file(special_file)).get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception& e) {
      throw std::invalid_argument(special_file.string() +
                                  " is not a JSON list of strings: " + e.what());
    }
  }
  return minimodel::bpe_from_files(workbench::read_file(dir / workbench::kVocabFile),
                                   workbench::read_file(dir / workbench::kMergesFile), specials);
}

int encode(const TokenizeOptions& o) {
  minimodel::BpeEncoder encoder(load(o.tokenizer));
  bool first = true;
  encoder.encode_stream(std::cin, [&](const std::vector<minimodel::TokenId>& ids) {
    for (const minimodel::TokenId id : ids) {
      std::cout << (first ? "" : " ") << id;
      first = false;
    }
  });
  std::cout << '\n';
  return 0;
}

int decode(const TokenizeOptions& o) {
  const minimodel::BpeEncoder encoder(load(o.tokenizer));
  std::vector<minimodel::TokenId> ids;
  std::string word;
  const auto flush = [&] {
    if (word.empty()) return;
    if (word.size() > 9 || word.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument("'" + word + "' is not a token id");
    ids.push_back(static_cast<minimodel::TokenId>(std::stol(word)));
    word.clear();
  };
  for (char c; std::cin.get(c);) {
    if (c == ' ' || c == ',' || c == '\n' || c == '\t' || c == '\r')
      flush();
    else
      word.push_back(c);
  }
  flush();
  std::cout << encoder.decode(ids);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tokenize: lab 12's byte-level BPE (the engine of `workbook tokenize`)"};
  TokenizeOptions options;
  const workbench::TokenizeCommands commands = workbench::add_tokenize_commands(app, options);
  CLI11_PARSE(app, argc, argv);
  try {
    if (*commands.train) return train(options);
    if (*commands.encode) return encode(options);
    return decode(options);
  } catch (const minimodel::Todo& e) {
    std::cerr << "tokenize: " << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tokenize: " << e.what() << '\n';
    return 2;
  }
}
