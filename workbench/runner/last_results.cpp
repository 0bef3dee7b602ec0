#include "runner/last_results.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>

#include <nlohmann/json.hpp>

#include "util/files.hpp"
#include "util/text.hpp"

namespace fs = std::filesystem;

namespace workbook {
namespace {

// The files under `folder` (relative to the repository), sorted, so that the digest is stable.
std::vector<std::string> files_under(const Workspace& ws, const std::string& folder) {
  std::vector<std::string> files;
  std::error_code error;
  for (fs::recursive_directory_iterator it(ws.repo / folder, error), end; !error && it != end;
       it.increment(error))
    if (it->is_regular_file()) files.push_back(ws.relative(it->path()));
  std::sort(files.begin(), files.end());
  return files;
}

nlohmann::json failures_json(const std::vector<TestFailure>& failures) {
  nlohmann::json list = nlohmann::json::array();
  for (const TestFailure& f : failures) list.push_back({{"test", f.test}, {"summary", f.summary}});
  return list;
}

}  // namespace

std::string fingerprint(const Workspace& ws, const std::vector<Lab>& labs, const Lab& lab) {
  std::vector<std::string> files = lab.learner_files;
  for (const std::string& number : lab.prerequisites)
    if (const Lab* prerequisite = find_lab(labs, number))
      files.insert(files.end(), prerequisite->learner_files.begin(),
                   prerequisite->learner_files.end());
  files.push_back(lab.tests);
  files.push_back("labs/labs.json");
  for (const char* folder : {"include", "tests/support"})
    for (const std::string& file : files_under(ws, folder)) files.push_back(file);
  std::string contents;
  for (const std::string& file : files) {
    std::error_code missing;
    contents += file + '\0' +
                (fs::is_regular_file(ws.repo / file, missing) ? workbench::read_file(ws.repo / file)
                                                              : std::string("(missing)")) +
                '\0';
  }
  char digest[32];
  std::snprintf(digest, sizeof digest, "%016zx", std::hash<std::string>{}(contents));
  return digest;
}

void remember_result(const Workspace& ws, const Lab& lab, const std::string& fingerprint,
                     const LabResult& result) {
  update_state(ws, [&](nlohmann::json& state) {
    state["results"][lab.number] = {{"fingerprint", fingerprint},
                                    {"when", workbench::utc_now("%Y-%m-%d %H:%M UTC")},
                                    {"status", status_name(result.status)},
                                    {"passed", result.passed},
                                    {"total", result.total},
                                    {"failures", failures_json(result.failures)},
                                    {"problem", result.problem},
                                    {"first_error", result.build.first_error},
                                    {"log", result.build.log.string()}};
  });
}

std::optional<RecalledResult> recall_result(const Workspace& ws, const std::vector<Lab>& labs,
                                            const Lab& lab) {
  const nlohmann::json state = load_state(ws);
  const auto results = state.find("results");
  if (results == state.end() || !results->is_object() || !results->contains(lab.number))
    return std::nullopt;
  const nlohmann::json& saved = (*results)[lab.number];
  try {
    if (saved.at("fingerprint").get<std::string>() != fingerprint(ws, labs, lab))
      return std::nullopt;
    RecalledResult recalled;
    LabResult& result = recalled.result;
    const std::string status = saved.at("status");
    for (const LabStatus s :
         {LabStatus::done, LabStatus::in_progress, LabStatus::todo, LabStatus::build_error})
      if (status_name(s) == status) result.status = s;
    result.passed = saved.at("passed");
    result.total = saved.at("total");
    for (const auto& f : saved.at("failures"))
      result.failures.push_back({f.at("test"), f.at("summary"), {f.at("summary")}});
    result.problem = saved.at("problem");
    result.build.ok = result.status != LabStatus::build_error;
    result.build.first_error = saved.at("first_error");
    result.build.log = saved.at("log").get<std::string>();
    recalled.when = saved.at("when");
    return recalled;
  } catch (const nlohmann::json::exception&) {  // damaged by hand: as if never run
    return std::nullopt;
  }
}

bool untouched(const Workspace& ws, const Lab& lab) {
  std::vector<std::string> args = {"-C",      ws.repo.string(),      "diff",
                                   "--quiet", pristine_ref(ws.repo), "--"};
  args.insert(args.end(), lab.learner_files.begin(), lab.learner_files.end());
  return run_tool("git", args).ok;
}

}  // namespace workbook
