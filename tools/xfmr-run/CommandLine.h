//===- CommandLine.h - option parsing shared by xfmr-run subcommands ------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_TOOLS_XFMR_RUN_COMMANDLINE_H
#define XFMR_TOOLS_XFMR_RUN_COMMANDLINE_H

#include <string>

namespace xfmr::run {

/// Splits option argv[i] given as "--name=value" or "--name value" (then
/// advancing i past the value) into `name` and `value`; false when the value
/// is missing.
inline bool splitOption(int argc, char **argv, int &i, std::string &name, std::string &value) {
  std::string arg = argv[i];
  if (size_t eq = arg.find('='); eq != std::string::npos) {
    name = arg.substr(0, eq);
    value = arg.substr(eq + 1);
    return true;
  }
  name = arg;
  if (i + 1 >= argc)
    return false;
  value = argv[++i];
  return true;
}

} // namespace xfmr::run

#endif // XFMR_TOOLS_XFMR_RUN_COMMANDLINE_H
