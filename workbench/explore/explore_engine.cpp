#include "explore/explore_engine.hpp"

#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "util/engine_main.hpp"
#include "util/files.hpp"

namespace workbench {

namespace {

[[noreturn]] void reject(const std::string& message) { throw std::invalid_argument(message); }

constexpr std::uintmax_t kMaxTextBytes = 1 << 20;

}  // namespace

std::string explore_text(const ExploreOptions& o) {
  std::string text = o.text;
  const std::string what = o.has_text_file ? "--text-file " + o.text_file.string() : "--text";
  if (o.has_text_file) {
    std::error_code error;
    const auto status = std::filesystem::status(o.text_file, error);
    if (!std::filesystem::exists(status)) reject(what + ": no such file");
    if (!std::filesystem::is_regular_file(status))
      reject(what + ": it is " + file_type_name(status.type()) + ", not a regular file");
    if (std::filesystem::file_size(o.text_file) > kMaxTextBytes)
      reject(what + ": larger than 1 MiB; the model reads only its context anyway");
    try {
      text = read_file(o.text_file);
    } catch (const std::runtime_error& e) {
      reject(what + ": " + e.what());
    }
  }
  if (text.empty()) reject(what + " holds no text");
  std::size_t bad = 0;
  if (!valid_utf8(text, &bad))
    reject(what + ": not valid UTF-8 (byte " + std::to_string(bad) + ")");
  return text;
}

void note_cut(const std::string& cut, PageData& page) {
  std::cerr << "workbook explore: " << cut << '\n';
  page.notes.push_back(cut);
}

void write_explorer_page(const ExploreOptions& o, const PageData& page) {
  const nlohmann::json data = page_json(page);
  std::filesystem::path json_path = o.out;
  json_path.replace_extension(".json");
  check_replaceable(o.out);
  if (o.out.extension() != ".html")
    reject("--out " + o.out.string() + ": give a name ending in .html");
  write_files_atomically({{o.out, explorer_html(page)}, {json_path, data.dump(1) + "\n"}});
  std::cout << "wrote " << o.out.string() << "\n  and its data " << json_path.string() << '\n';
}

int explore_engine_main(int argc, char** argv, const std::string& description,
                        const std::string& impl,
                        const std::function<int(const ExploreOptions&)>& explore) {
  CLI::App app{description};
  ExploreOptions options;
  add_explore_options(app, options, true);
  app.get_option("--checkpoint")->required();
  return engine_main(app, argc, argv, {"workbook explore", impl, ""},
                     [&] { return explore(options); });
}

}  // namespace workbench
