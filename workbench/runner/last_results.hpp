#pragma once
// What each lab's learner tests gave the last time they ran in full, kept with the verbs' state
// (load_state) beside a fingerprint of what they ran on, so that `workbook` with no verb and
// `workbook hint` answer without building: a result whose fingerprint still matches is what the
// tests would say again.
//   {"results": {"03": {"fingerprint": "…", "when": "…", "status": "in progress", …}}}
#include <optional>
#include <string>
#include <vector>

#include "runner/learner_tests.hpp"

namespace workbook {

/// A digest of everything lab `lab`'s learner tests depend on that a learner or an update
/// changes: its learner files and its prerequisites', its test file, the registry, include/ and
/// tests/support/.
std::string fingerprint(const Workspace& ws, const std::vector<Lab>& labs, const Lab& lab);

/// Keeps `result`, a run of all of lab `lab`'s tests on the files `fingerprint` was taken of.
void remember_result(const Workspace& ws, const Lab& lab, const std::string& fingerprint,
                     const LabResult& result);

struct RecalledResult {
  LabResult result;  ///< status, counts, each failure's test and summary, a build's first error
  std::string when;  ///< UTC time of the run, "2026-11-25 21:03"
};

/// Lab `lab`'s last full result, if nothing it ran on has changed since.
std::optional<RecalledResult> recall_result(const Workspace& ws, const std::vector<Lab>& labs,
                                            const Lab& lab);

/// True if lab `lab`'s learner files are the pristine stubs (pristine_ref's), as handed out.
bool untouched(const Workspace& ws, const Lab& lab);

}  // namespace workbook
