// check-artifacts DIR: proves that a verify program's artifacts in DIR are complete and valid:
// manifest.json parses and has every documented key, each listed artifact exists, each PNG decodes,
// an explore.json (the attention explorer's page data) reads back as `workbook explore NN` reads
// it, and verify_output.txt reports that every check passed. Exit 0 if so, 1 with one line per
// defect.
#include <cairo.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "explore/page_data.hpp"

namespace fs = std::filesystem;

namespace {

std::vector<std::string> defects_in(const fs::path& dir) {
  std::vector<std::string> defects;
  std::ifstream manifest_file(dir / "manifest.json");
  if (!manifest_file) return {"no manifest.json"};
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(manifest_file);
  } catch (const std::exception& e) {
    return {std::string("manifest.json is not valid JSON: ") + e.what()};
  }
  for (const char* key : {"experiment", "implementation", "date", "seed", "git_sha", "git_dirty",
                          "versions", "hardware", "config", "results_summary", "artifacts"})
    if (!manifest.contains(key))
      defects.push_back(std::string("manifest.json lacks \"") + key + "\"");
  for (const char* key :
       {"compiler", "cxx_standard", "xtensor", "xtensor_blas", "blas", "cmake", "build_type"})
    if (!manifest.value("versions", nlohmann::json::object()).contains(key))
      defects.push_back(std::string("manifest.json lacks versions.") + key);
  for (const char* key : {"cpu_model", "cores", "ram_bytes"})
    if (!manifest.value("hardware", nlohmann::json::object()).contains(key))
      defects.push_back(std::string("manifest.json lacks hardware.") + key);
  if (!manifest.value("results_summary", nlohmann::json::object()).value("passed", false))
    defects.push_back("results_summary.passed is not true");

  for (const auto& name : manifest.value("artifacts", nlohmann::json::array())) {
    const fs::path path = dir / name.get<std::string>();
    if (!fs::exists(path)) {
      defects.push_back(path.filename().string() + " is listed but missing");
    } else if (path.extension() == ".png") {
      cairo_surface_t* png = cairo_image_surface_create_from_png(path.c_str());
      const bool ok = cairo_surface_status(png) == CAIRO_STATUS_SUCCESS &&
                      cairo_image_surface_get_width(png) > 100 &&
                      cairo_image_surface_get_height(png) > 100;
      cairo_surface_destroy(png);
      if (!ok) defects.push_back(path.filename().string() + " does not decode as a PNG figure");
    } else if (path.filename() == "explore.json") {
      try {
        std::ifstream page(path);
        workbench::page_from_json(nlohmann::json::parse(page));
      } catch (const std::exception& e) {
        defects.push_back("explore.json is not the explorer's page data: " + std::string(e.what()));
      }
    }
  }
  std::ifstream output_file(dir / "verify_output.txt");
  std::stringstream output;
  output << output_file.rdbuf();
  if (output.str().find("checks passed") == std::string::npos)
    defects.push_back("verify_output.txt does not say that all checks passed");
  return defects;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: check-artifacts DIR\n";
    return 2;
  }
  const auto defects = defects_in(argv[1]);
  for (const auto& defect : defects) std::cerr << argv[1] << ": " << defect << '\n';
  if (defects.empty()) std::cout << argv[1] << ": artifacts complete and valid\n";
  return defects.empty() ? 0 : 1;
}
