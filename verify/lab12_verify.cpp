// Lab 12 verify, in the order of the blocks: one verse's and an adversarial text's pre-tokens
// (Block A); a vocabulary of kVocabSize tokens trained on the King James Bible's training books,
// its time, its peak heap and its longest tokens, the pre-token counts, and the same training to
// kCurveVocabSize whose first merges must be the same ones (Block B); bytes per token on the
// training and the validation books, the round trips (of the adversarial text too), the streaming
// encoder against the whole-text one, the encode rate, the compression against the vocabulary
// size (compression_vs_vocab.png) and one verse split into its tokens (verse_tokens.png)
// (Block C). The tokenizer is saved as vocab.json and merges.txt and read back. Times and rates go
// into the manifest's "measurements"; none is checked.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "corpus/kjv_corpus.hpp"
#include "figures/line_plot.hpp"
#include "figures/token_strip.hpp"
#include "lab_setup.hpp"
#include "minimodel/tokenizer/bpe.hpp"
#include "util/files.hpp"
#include "util/heap_meter.hpp"
#include "util/text.hpp"

using minimodel::Bpe;
using minimodel::BpeEncoder;
using minimodel::TokenId;
using workbench::format_number;

namespace {

// The vocabulary: 256 bytes, 1791 merges and <|endoftext|>. At 2048 a token holds 3.6 bytes of
// the training books, against 2.4 at 512, 3.1 at 1024 and 4.0 at 4096 (compression_vs_vocab.png):
// the doubling from 1024 buys 18 %, the next one 11 %, while the embedding and unembedding of the
// model that reads the tokens grow with V (2 · V · d_model weights). The training books hold
// 13,543 distinct pre-tokens (about 12,000 words): 2048 tokens cover the frequent ones whole.
constexpr std::size_t kVocabSize = 2048;
// The compression curve comes from a second training, whose first merges must be the first's. An
// unoptimised build (CI's sanitizer run, at -O0) trains and encodes about ten times slower, so
// there the curve stops at kVocabSize and has four points; the manifest says which.
#ifdef __OPTIMIZE__
constexpr bool kOptimised = true;
constexpr std::size_t kCurveVocabSize = 4096;
const std::vector<std::size_t> kCurveSizes = {257, 320, 512, 768, 1024, 1536, 2048, 3072, 4096};
#else
constexpr bool kOptimised = false;
constexpr std::size_t kCurveVocabSize = kVocabSize;
const std::vector<std::size_t> kCurveSizes = {257, 512, 1024, 2048};
#endif
const std::vector<std::string> kSpecial = {std::string(workbench::kEndOfText)};
// The verse of the figure, from the validation books (Ruth 1:16).
constexpr const char* kVerseStart = "And Ruth said, Intreat me not";
// For `workbook diff`, which sees no failing test: what the verse lacks. Bytes that are not UTF-8
// (a lone continuation byte, a cut 3-byte character at the end), a special token inside a word,
// emoji, runs of spaces and newlines, a contraction and digits.
const std::string kAdversarial =
    "ok\xff\xfe then \x80 and in<|endoftext|>word, emoji \xf0\x9f\x98\x80\xf0\x9f\x98\x80 "
    "x   spaced\n\n\n\nthey'll 12345  \n \xe2\x82";

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A token as the figure and the printout show it: spaces and newlines visible, invalid bytes as
// "\xNN" (workbench::displayable, as every tool shows a token).
std::string visible(const std::string& bytes) {
  return workbench::displayable(bytes, workbench::Whitespace::visible);
}

// The tokenizer with the first n_merges merges of `bpe` (and its special tokens): by greedy
// training, the one trained to 256 + n_merges + specials tokens.
Bpe first_merges(const Bpe& bpe, std::size_t n_merges) {
  Bpe smaller;
  smaller.vocab.assign(bpe.vocab.begin(), bpe.vocab.begin() + std::ptrdiff_t(256 + n_merges));
  smaller.merges.assign(bpe.merges.begin(), bpe.merges.begin() + std::ptrdiff_t(n_merges));
  smaller.special_tokens = bpe.special_tokens;
  smaller.vocab.insert(smaller.vocab.end(), bpe.special_tokens.begin(), bpe.special_tokens.end());
  return smaller;
}

}  // namespace

int main(int argc, char** argv) {
  const nlohmann::json config = {
      {"corpus",
       {{"source", "Debian's bible-kjv: bible -f Genesis1:1-Revelation22:21"},
        {"format", "one verse a line, a line <|endoftext|> after each book"},
        {"validation_books", std::vector<std::string>(workbench::kKjvValidationBooks.begin(),
                                                      workbench::kKjvValidationBooks.end())}}},
      {"vocab_size", kVocabSize},
      {"curve_vocab_size", kCurveVocabSize},
      {"curve_sizes", kCurveSizes},
      {"optimised_build", kOptimised},
      {"special_tokens", kSpecial}};
  return lab_setup::run(argc, argv, lab_setup::kSeed, config, [&](workbench::VerifyRun& run) {
    workbench::KjvCorpus corpus;
    try {
      corpus = workbench::kjv_corpus();
    } catch (const workbench::KjvMissing& e) {
      run.check("the King James Bible is installed", false, 0, e.what());
      return;
    }
    const std::size_t verse_at = corpus.validation.find(kVerseStart);
    const std::string verse =
        corpus.validation.substr(verse_at, corpus.validation.find('\n', verse_at) - verse_at);
    run.print("Corpus: " + std::to_string(corpus.train.size()) + " bytes of training books, " +
              std::to_string(corpus.validation.size()) + " of validation books.");

    // ---- Block A: pre-tokens ----
    run.print();
    run.print("Check 1 (Block A). Ruth 1:16 in pre-tokens: each space joins the word after it.");
    std::string line = " ";
    std::size_t joined = 0;
    const std::vector<std::string_view> pretokens = minimodel::pretokenize(verse);
    xt::xarray<float> pretoken_lengths = xt::zeros<float>({pretokens.size()});
    for (std::size_t i = 0; i < pretokens.size(); ++i) {
      line += " [" + visible(std::string(pretokens[i])) + "]";
      joined += pretokens[i].size();
      pretoken_lengths(i) = float(pretokens[i].size());
    }
    run.record("verse_pretoken_lengths", pretoken_lengths, 0.0, "A");
    run.print(line);
    run.check("the pre-tokens concatenate to the verse", joined == verse.size(), double(joined),
              std::to_string(joined) + " of " + std::to_string(verse.size()) + " bytes");
    // An adversarial text's pieces: a special token as minus its length, each pre-token of the
    // text between as its length.
    line = "  an adversarial text:";
    std::vector<float> adversarial_lengths;
    for (const minimodel::TextPiece& piece :
         minimodel::split_on_special_tokens(kAdversarial, kSpecial)) {
      if (piece.special) {
        line += " <" + std::string(piece.text) + ">";
        adversarial_lengths.push_back(-float(piece.text.size()));
        continue;
      }
      for (std::string_view pretoken : minimodel::pretokenize(piece.text)) {
        line += " [" + visible(std::string(pretoken)) + "]";
        adversarial_lengths.push_back(float(pretoken.size()));
      }
    }
    run.print(line);
    xt::xarray<float> adversarial_record = xt::zeros<float>({adversarial_lengths.size()});
    for (std::size_t i = 0; i < adversarial_lengths.size(); ++i)
      adversarial_record(i) = adversarial_lengths[i];
    run.record("adversarial_pretoken_lengths", adversarial_record, 0.0, "A");

    // ---- Block B: training ----
    run.print();
    run.print("Check 2 (Block B). Train " + std::to_string(kVocabSize) +
              " tokens on the training books.");
    Bpe bpe;
    auto start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
    const std::size_t train_heap = workbench::peak_extra_heap_bytes(
        [&] { bpe = minimodel::train_bpe(corpus.train, kVocabSize, kSpecial); });
    const double train_seconds = seconds_since(start);
    const double train_cpu_seconds = double(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    run.print("  trained in " + format_number("%.2f", train_seconds) + " s (CPU " +
              format_number("%.2f", train_cpu_seconds) + " s), peak heap " +
              format_number("%.1f", double(train_heap) / 1e6) + " MB (" +
              format_number("%.1f", double(train_heap) / double(corpus.train.size())) +
              " times the text)");
    run.check(
        "the vocabulary has " + std::to_string(kVocabSize) + " tokens, the last the special one",
        bpe.vocab.size() == kVocabSize && bpe.vocab.back() == kSpecial[0], double(bpe.vocab.size()),
        std::to_string(bpe.merges.size()) + " merges");
    // For `workbook diff`: the first merges as the ids of their two parts (exact: training is
    // deterministic), and the verse's tokens.
    const std::size_t n_recorded = std::min<std::size_t>(64, bpe.merges.size());
    xt::xarray<float> merge_parts = xt::zeros<float>({n_recorded, std::size_t{2}});
    {
      std::map<std::string, std::size_t> id_of;
      for (std::size_t id = 0; id < bpe.vocab.size(); ++id) id_of.emplace(bpe.vocab[id], id);
      for (std::size_t i = 0; i < n_recorded; ++i) {
        merge_parts(i, 0) = float(id_of[bpe.merges[i].first]);
        merge_parts(i, 1) = float(id_of[bpe.merges[i].second]);
      }
    }
    run.record("first_merges", merge_parts, 0.0, "B");
    BpeEncoder encoder(bpe);
    const std::vector<TokenId> verse_ids = encoder.encode(verse);
    xt::xarray<float> verse_record = xt::zeros<float>({verse_ids.size()});
    for (std::size_t i = 0; i < verse_ids.size(); ++i) verse_record(i) = float(verse_ids[i]);
    run.record("verse_tokens", verse_record, 0.0, "C");
    // The adversarial text's tokens, and the text decode gives back from them (its invalid UTF-8
    // replaced).
    const std::vector<TokenId> adversarial_ids = encoder.encode(kAdversarial);
    xt::xarray<float> adversarial_tokens = xt::zeros<float>({adversarial_ids.size()});
    for (std::size_t i = 0; i < adversarial_ids.size(); ++i)
      adversarial_tokens(i) = float(adversarial_ids[i]);
    run.record("adversarial_tokens", adversarial_tokens, 0.0, "C");
    const std::string decoded = encoder.decode(adversarial_ids);
    xt::xarray<float> decoded_record = xt::zeros<float>({decoded.size()});
    for (std::size_t i = 0; i < decoded.size(); ++i)
      decoded_record(i) = float(static_cast<unsigned char>(decoded[i]));
    run.record("adversarial_decoded_text", decoded_record, 0.0, "C");
    if (run.comparing()) return;  // workbook diff: what follows is timings and a second training

    std::int64_t n_pretokens = 0;
    const auto pretoken_counts = minimodel::count_pretokens(corpus.train, kSpecial);
    for (const auto& [pretoken, count] : pretoken_counts) n_pretokens += count;
    run.print("  the training books: " + std::to_string(n_pretokens) + " pre-tokens, " +
              std::to_string(pretoken_counts.size()) + " distinct (count_pretokens)");

    std::vector<std::size_t> by_length(bpe.vocab.size() - kSpecial.size());
    for (std::size_t i = 0; i < by_length.size(); ++i) by_length[i] = i;
    std::stable_sort(by_length.begin(), by_length.end(), [&](std::size_t a, std::size_t b) {
      return bpe.vocab[a].size() > bpe.vocab[b].size();
    });
    line = "  longest tokens:";
    nlohmann::json longest = nlohmann::json::array();
    for (std::size_t i = 0; i < 10 && i < by_length.size(); ++i) {
      line += " [" + visible(bpe.vocab[by_length[i]]) + "]";
      longest.push_back(bpe.vocab[by_length[i]]);
    }
    run.print(line);
    line = "  first merges:";
    for (std::size_t i = 0; i < 10 && i < bpe.merges.size(); ++i)
      line += " [" + visible(bpe.merges[i].first) + "|" + visible(bpe.merges[i].second) + "]";
    run.print(line);

    start = std::chrono::steady_clock::now();
    const Bpe big = minimodel::train_bpe(corpus.train, kCurveVocabSize, kSpecial);
    const double big_seconds = seconds_since(start);
    const bool prefix = big.merges.size() >= bpe.merges.size() &&
                        std::equal(bpe.merges.begin(), bpe.merges.end(), big.merges.begin());
    run.check("training to " + std::to_string(kCurveVocabSize) + " tokens (" +
                  format_number("%.2f", big_seconds) + " s) begins with the same merges",
              prefix, double(big.merges.size()),
              "greedy merges: a larger vocabulary extends a smaller one");

    const std::string vocab_json = minimodel::to_vocab_json(bpe);
    const std::string merges_txt = minimodel::to_merges_txt(bpe);
    workbench::write_file_atomically(run.artifact("vocab.json"), vocab_json);
    workbench::write_file_atomically(run.artifact("merges.txt"), merges_txt);
    const Bpe loaded = minimodel::bpe_from_files(vocab_json, merges_txt, kSpecial);
    run.check("vocab.json and merges.txt read back to the same tokenizer",
              loaded.vocab == bpe.vocab && loaded.merges == bpe.merges, 0, "GPT-2's formats");

    // ---- Block C: encoding and decoding ----
    run.print();
    run.print("Check 3 (Block C). Encode both parts, decode them back.");
    start = std::chrono::steady_clock::now();
    const std::clock_t encode_cpu_start = std::clock();
    const std::vector<TokenId> train_ids = encoder.encode(corpus.train);
    const double encode_seconds = seconds_since(start);
    const double encode_cpu_seconds = double(std::clock() - encode_cpu_start) / CLOCKS_PER_SEC;
    const std::vector<TokenId> validation_ids = encoder.encode(corpus.validation);
    const double train_bpt = double(corpus.train.size()) / double(train_ids.size());
    const double validation_bpt = double(corpus.validation.size()) / double(validation_ids.size());
    const double rate = double(corpus.train.size()) / 1e6 / encode_seconds;
    const double cpu_rate = double(corpus.train.size()) / 1e6 / encode_cpu_seconds;
    run.print("  bytes per token: training books " + format_number("%.3f", train_bpt) +
              ", validation books " + format_number("%.3f", validation_bpt) + "; encoded at " +
              format_number("%.1f", rate) + " MB/s (" + format_number("%.1f", cpu_rate) +
              " MB per CPU second), the cache filling from empty");
    run.check("decode(encode(x)) == x on the training books",
              encoder.decode(train_ids) == corpus.train, double(train_ids.size()),
              std::to_string(train_ids.size()) + " tokens");
    run.check("decode(encode(x)) == x on the validation books",
              encoder.decode(validation_ids) == corpus.validation, double(validation_ids.size()),
              std::to_string(validation_ids.size()) + " tokens");
    run.check("decode_bytes(encode(x)) == x on the adversarial text",
              encoder.decode_bytes(adversarial_ids) == kAdversarial, double(adversarial_ids.size()),
              std::to_string(adversarial_ids.size()) + " tokens");
    // Held-out books compress a little worse: some of their names and words were never seen
    // (measured: 3.3 % fewer bytes per token at 2048). A tenth means the split leaks or is skewed.
    run.check("the validation books take at most 10% fewer bytes per token than the training books",
              validation_bpt > train_bpt / 1.1, validation_bpt / train_bpt,
              "validation / training = " + format_number("%.3f", validation_bpt / train_bpt));
    std::istringstream stream(corpus.train);
    std::size_t streamed = 0;  // counted, not kept: the heap is the encoder's own
    BpeEncoder stream_encoder(bpe);
    const std::size_t stream_heap = workbench::peak_extra_heap_bytes([&] {
      stream_encoder.encode_stream(
          stream, [&](const std::vector<TokenId>& ids) { streamed += ids.size(); },
          std::size_t{1} << 16);
    });
    BpeEncoder check_encoder(bpe);
    std::istringstream again(corpus.train);
    std::vector<TokenId> streamed_ids;
    check_encoder.encode_stream(
        again,
        [&](const std::vector<TokenId>& ids) {
          streamed_ids.insert(streamed_ids.end(), ids.begin(), ids.end());
        },
        std::size_t{1} << 16);
    run.check("encode_stream in 64 KiB chunks gives encode's tokens",
              streamed_ids == train_ids && streamed == train_ids.size(), double(stream_heap),
              "peak heap while streaming " + format_number("%.1f", double(stream_heap) / 1e6) +
                  " MB (the tokens not kept; the pre-token cache is most of it)");
    run.measure("tokenizer", {{"vocab_size", kVocabSize},
                              {"train_seconds", train_seconds},
                              {"train_cpu_seconds", train_cpu_seconds},
                              {"train_peak_heap_bytes", train_heap},
                              {"pretokens", n_pretokens},
                              {"distinct_pretokens", pretoken_counts.size()},
                              {"curve_train_seconds", big_seconds},
                              {"bytes_per_token_train", train_bpt},
                              {"bytes_per_token_validation", validation_bpt},
                              {"encode_mb_per_s", rate},
                              {"encode_mb_per_cpu_s", cpu_rate},
                              {"stream_peak_heap_bytes", stream_heap},
                              {"longest_tokens", longest}});

    // Compression against vocabulary size: the first merges of the larger training.
    if (!kOptimised)
      run.print("  (an unoptimised build: the curve stops at " + std::to_string(kCurveVocabSize) +
                " tokens, with " + std::to_string(kCurveSizes.size()) + " points)");
    nlohmann::json curve = nlohmann::json::array();
    workbench::LineSeries train_series{{}, {}, "training books"},
        validation_series{{}, {}, "validation books"};
    for (const std::size_t size : kCurveSizes) {
      if (size - 1 > 256 + big.merges.size()) break;
      BpeEncoder sized(first_merges(big, size - 1 - 256));
      const double t = double(corpus.train.size()) / double(sized.encode(corpus.train).size());
      const double v =
          double(corpus.validation.size()) / double(sized.encode(corpus.validation).size());
      train_series.x.push_back(double(size));
      train_series.y.push_back(t);
      validation_series.x.push_back(double(size));
      validation_series.y.push_back(v);
      curve.push_back({{"vocab_size", size}, {"train", t}, {"validation", v}});
      run.print("  vocabulary " + std::to_string(size) + ": " + format_number("%.3f", t) + " / " +
                format_number("%.3f", v) + " bytes per token (training / validation)");
    }
    run.measure("compression_vs_vocab", curve);
    workbench::LinePlot plot;
    plot.title = "Lab 12: compression against vocabulary size (King James Bible)";
    plot.x_label = "vocabulary size (256 bytes + merges + <|endoftext|>; the first point is 257)";
    plot.y_label = "bytes per token";
    plot.log_x = true;
    plot.series = {train_series, validation_series};
    workbench::render_line_plot(run.artifact("compression_vs_vocab.png"), plot);

    workbench::TokenStrip strip;
    strip.title = "Lab 12: Ruth 1:16 in " + std::to_string(verse_ids.size()) + " tokens";
    strip.caption = std::to_string(verse.size()) + " bytes; vocabulary of " +
                    std::to_string(kVocabSize) +
                    " trained on the other books; ids under the tokens";
    for (const TokenId id : verse_ids)
      strip.tokens.push_back({visible(encoder.decode_bytes({id})), std::to_string(id)});
    workbench::render_token_strip(run.artifact("verse_tokens.png"), strip);
  });
}
