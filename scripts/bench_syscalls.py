"""System-call counts of a server over one benchmark run (scripts/bench).

Issue 31 asks for requests per fdatasync under `appendfsync always` for
both servers. `strace -c -f -p PID` counts them but stops the server at
every system call it makes (ptrace cannot filter an attached process), so
the throughput it measures is not the row's. `perf stat` on the kernel's
syscall tracepoints counts the same calls without stopping anything:

    perf stat -x, -D -1 --control fifo:CTL,ACK \
        -e syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync -p PID

`-p` attaches to every thread the process has (both servers start their
fsync threads at startup); `-D -1` starts the counters disabled and the
control FIFO enables them just before the run and disables them just after,
with perf's acknowledgement each time, so the count covers the run and
nothing else.

When perf is missing or the kernel refuses the tracepoints (no root, no
tracefs), `SyscallCount.start` raises `CountError` with perf's own words:
the caller reports that instead of a figure.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time

# The calls counted: a server's durable syncs (Redis's redis_fsync is
# fdatasync on Linux; hozon's sync_data is fdatasync too).
SYNC_CALLS = ("fdatasync", "fsync")


class CountError(Exception):
    """perf could not count (missing, refused, or it exited)."""


def available():
    """Whether perf is on PATH (the counts need it)."""
    return shutil.which("perf") is not None


class SyscallCount:
    """Counts `calls` made by process `pid` between `start()` and `stop()`."""

    def __init__(self, pid, calls=SYNC_CALLS, timeout=10.0):
        self.pid = pid
        self.calls = calls
        self.timeout = timeout
        self.proc = None
        self.dir = None
        self.ctl = None
        self.ack = None

    def _command(self, word):
        self.ctl.write(word + "\n")
        self.ctl.flush()
        # perf writes "ack\n" with its C string's NUL after it: the NUL
        # leads the next reply.
        line = self.ack.readline()
        if line.strip("\x00 \n") != "ack":
            raise CountError(f"perf did not acknowledge {word!r}, said {line!r} ({self._stderr()})")

    def _stderr(self):
        if self.proc is None:
            return ""
        try:
            _, err = self.proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return " ".join(err.split())[-300:]

    def start(self):
        perf = shutil.which("perf")
        if perf is None:
            raise CountError("perf not found (apt-get install linux-perf)")
        self.dir = tempfile.mkdtemp(prefix="hozon-bench-perf-")
        ctl = os.path.join(self.dir, "ctl")
        ack = os.path.join(self.dir, "ack")
        os.mkfifo(ctl)
        os.mkfifo(ack)
        events = ",".join(f"syscalls:sys_enter_{c}" for c in self.calls)
        self.proc = subprocess.Popen(
            [perf, "stat", "-x", ",", "-D", "-1", "--control", f"fifo:{ctl},{ack}",
             "-e", events, "-p", str(self.pid)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        # Opening a FIFO blocks until perf opens its end; perf exiting
        # first (a refused tracepoint) would leave us blocked, so the
        # opens are non-blocking polls with perf's exit checked between.
        self.ctl = self._open_fifo(ctl, os.O_WRONLY)
        self.ack = self._open_fifo(ack, os.O_RDONLY)
        self._command("enable")
        return self

    def _open_fifo(self, path, flags):
        deadline = time.monotonic() + self.timeout
        while True:
            if self.proc.poll() is not None:
                raise CountError(f"perf exited with status {self.proc.returncode}: "
                                 f"{self._stderr()}")
            try:
                fd = os.open(path, flags | os.O_NONBLOCK)
            except OSError:  # ENXIO: no reader yet on a write-only open
                fd = None
            if fd is not None:
                os.set_blocking(fd, True)
                return os.fdopen(fd, "w" if flags == os.O_WRONLY else "r")
            if time.monotonic() > deadline:
                raise CountError("perf did not open its control FIFO")
            time.sleep(0.01)

    def stop(self):
        """Disables the counters and returns {call: count}."""
        try:
            self._command("disable")
            # perf prints the counts when interrupted, as after Ctrl-C.
            self.proc.send_signal(signal.SIGINT)
            try:
                _, err = self.proc.communicate(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                _, err = self.proc.communicate()
            counts = parse(err, self.calls)
            if counts is None:
                raise CountError(f"no counts in perf's output: {' '.join(err.split())[-300:]}")
            return counts
        finally:
            self.close()

    def close(self):
        for f in (self.ctl, self.ack):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
        self.ctl = self.ack = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def parse(text, calls):
    """perf stat -x, output -> {call: count}; None unless every call is there.

    Each counter line is `value,unit,event,...`; a counter perf could not
    read says `<not counted>` or `<not supported>` and gives no figure."""
    counts = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 3:
            continue
        event = fields[2].strip()
        for call in calls:
            if event == f"syscalls:sys_enter_{call}":
                try:
                    counts[call] = int(float(fields[0]))
                except ValueError:
                    return None
    return counts if len(counts) == len(calls) else None
