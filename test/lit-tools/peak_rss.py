#!/usr/bin/env python3
"""peak_rss.py LIMIT_MIB CMD...: runs CMD, prints its peak resident set size
and fails if it exceeded LIMIT_MIB (or if CMD failed)."""
import resource
import subprocess
import sys

limit = int(sys.argv[1])
rc = subprocess.call(sys.argv[2:])
peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
print(f"peak RSS {peak_mib} MiB {'<=' if peak_mib <= limit else '>'} {limit} MiB")
sys.exit(rc if rc else (0 if peak_mib <= limit else 1))
