#pragma once
// The explorer's HTML, CSS and JavaScript (explorer.html), compiled in by CMake, with the marker
// /*PAGE DATA*/ where explorer_html puts the page's JSON.
#include <string>

namespace workbench {
const char* explorer_template();
}
