#pragma once
// What several verbs print alike: a lab's heading and status, a failed build, the result of a
// lab's tests with the block to revisit, and the next step.
#include <cstddef>
#include <string>
#include <vector>

#include "runner/learner_tests.hpp"
#include "runner/workspace.hpp"

namespace workbook {

std::string heading(const Lab& lab);                            ///< "lab 00 — Attention by hand"
std::string status_text(const Context& ctx, LabStatus status);  ///< coloured status_name
void print_build_error(const Context& ctx, const BuildResult& build);
/// The first of `build`'s warnings in lab `lab`'s learner files or its prerequisites' (never in a
/// header or the workbench), with their number and the build's log, in two indented lines; nothing
/// if there is none. A compiler cache replays a saved compile's warnings with the paths of the
/// checkout it compiled in: a learner file's path in another checkout counts as the file's.
void print_learner_warnings(const Context& ctx, const Lab& lab, const BuildResult& build);
std::string next_step(const Lab& lab, const LabResult& result);

/// Prints lab `lab`'s result the way `check` does; returns kSuccess if done, kNotDone otherwise.
int print_check(const Context& ctx, const Lab& lab, const LabResult& result);

/// The first lab that is not done, or nullptr if every lab is, with its result.
const Lab* current_lab(const Context& ctx, LabResult* result);

/// `text` padded with spaces to `width` columns (UTF-8 aware, so "—" takes one column).
std::string pad(const std::string& text, std::size_t width);

/// The width of the title column: the longest title, plus a space.
std::size_t title_width(const std::vector<Lab>& labs);

}  // namespace workbook
