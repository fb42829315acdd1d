"""An xfmr-serve process for the scripts that test and load it
(check-serve.py, bench-serve.py): started on a free port, its stderr kept."""

import os
import re
import signal
import subprocess
import threading


class ServeProcess:
    def __init__(self, build, artifact, extra=(), launcher=()):
        """`launcher`: a command prefix, e.g. mpirun's for a parallel artifact."""
        cmd = list(launcher) + [os.path.join(build, "bin", "xfmr-serve"), artifact, "--port",
                                "0", "--seed", "0"] + list(extra)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"http://([^:]+):(\d+)", line)
        if not m:
            raise SystemExit("xfmr-serve did not start: %r %s" % (line, self.proc.stderr.read()))
        self.host, self.port = m.group(1), int(m.group(2))
        self.base = "http://%s:%d" % (self.host, self.port)
        self.stderr_lines = []
        threading.Thread(target=lambda: self.stderr_lines.extend(self.proc.stderr),
                         daemon=True).start()

    def rss_mib(self, field="VmHWM"):
        """The server's peak (VmHWM) or current (VmRSS) resident memory."""
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self, timeout=60):
        """SIGTERM; the exit status, or "timeout" (then killed)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return "timeout"
