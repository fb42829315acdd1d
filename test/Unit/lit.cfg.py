# -*- Python -*-
# The GoogleTest unit tests (XfmrRuntimeTests, ...). check-xfmr runs them as a
# nested suite: lit finds build/test/Unit/lit.site.cfg.py while walking the
# main suite and runs every test of every *Tests executable in that directory.
import os

import lit.formats

config.name = "XFMR-Unit"
config.suffixes = []
config.test_format = lit.formats.GoogleTest(".", "Tests")

if hasattr(config, "xfmr_unit_test_dir"):
    config.test_exec_root = config.xfmr_unit_test_dir
else:
    # Reached through the source tree of a build that has no
    # test/Unit/lit.site.cfg.py: there is no executable to run.
    config.test_exec_root = os.path.dirname(__file__)
config.test_source_root = config.test_exec_root

# The runtime owns all of its memory (no MLIR context caches): unlike the
# main suite, keep LeakSanitizer on.
config.environment["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0"
config.environment["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
