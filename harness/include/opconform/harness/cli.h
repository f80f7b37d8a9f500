// The opconform command line: `opconform_main({"check", "--library", "x.so"})` is what the
// program does with those arguments (tests call it in-process; main() passes argv). Returns the
// exit status: 0 success, 1 a result the --fail-on list names (or a regression for report diff),
// 2 a usage error, 3 an error that stopped the command before it could report.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace opconform::harness {

int opconform_main(const std::vector<std::string>& args);

// A repro line split as a shell would for the quoting opconform writes ('...', "...", \, $'...').
std::vector<std::string> split_command_line(const std::string& line);

// A repro line as a person copies it: "repro: opconform check ...", "Repro: `opconform ...`" (the
// Markdown report) or the bare line; returns the bare line.
std::string repro_line_as_printed(std::string_view text);

}  // namespace opconform::harness
