"""An independent, slow reading of a Kineto trace that follows docs/metrics.md literally:
stdlib json, exact decimal timestamps, plain Python loops; it imports nothing from
pytest_gpuprof, so the metric tests compare the package with a second implementation."""

import gzip
import json
from decimal import Decimal
from pathlib import Path

SYNC_NAMES = {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize"}
COPY_WORDS = {"htod": "HtoD", "dtoh": "DtoH", "dtod": "DtoD", "ptop": "PtoP"}


def ns(value) -> int:
    return int(Decimal(str(value)) * 1000)


def longest_pauses(calls, steps):
    """docs/metrics.md's ``host_gap_us`` in ns, by a sweep: per step [start, end], the longest
    time in [previous step's end (this step's start for the first), end] in which none of
    ``calls`` ([start, end] pairs) ran; a call of no length ends a pause too."""
    out = []
    for i, (start, end) in enumerate(steps):
        free_from = steps[i - 1][1] if i else start
        longest = 0
        for s, e in sorted(calls):
            if s > free_from:
                longest = max(longest, min(s, end) - free_from)
            free_from = max(free_from, e)
        out.append(max(longest, end - free_from))
    return out


class Naive:
    """An independent, slow reading of a Kineto trace that follows docs/metrics.md literally."""

    def __init__(self, path: Path):
        with gzip.open(path, "rt") as fh:
            doc = json.load(fh, parse_float=Decimal)
        events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        self.steps = sorted(
            (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
            for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
        )
        launch = {
            e["args"]["correlation"]: ns(e["ts"])
            for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
        }
        self.runtime = [
            (e["name"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
            for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
        ]
        # the launching threads: those whose calls launched a kernel, memcpy or memset
        launched = {e["args"]["correlation"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")}
        calls = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
        threads = {e["tid"] for e in calls if e["args"]["correlation"] in launched}
        self.launching_calls = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in calls if e["tid"] in threads]

        def gpu(cat):
            rows = []
            for e in events:
                if e.get("cat") == cat:
                    step = self.step_of(launch.get(e["args"]["correlation"]))
                    rows.append((e["name"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["args"].get("bytes"), step))
            return rows

        self.all_kernels, self.all_copies = gpu("kernel"), gpu("gpu_memcpy")
        self.kernels = [k for k in self.all_kernels if k[4] is not None]
        self.copies = [c for c in self.all_copies if c[4] is not None]
        self.sets = [m for m in gpu("gpu_memset") if m[4] is not None]
        ends = [r[2] for r in self.kernels + self.copies + self.sets]
        self.w = (self.steps[0][0], max([self.steps[-1][1]] + ends))

    def step_of(self, t):
        if t is None:
            return None
        for i, (s, e) in enumerate(self.steps):
            if s <= t <= e:
                return i
        return None

    @staticmethod
    def union(intervals, lo, hi):
        merged = []
        for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals):
            if e <= s:
                continue
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        return merged

    def width(self):
        return self.w[1] - self.w[0]

    def metrics(self):
        """The scalar metrics of docs/metrics.md, read the slow way: totals in us, ratios unrounded."""
        width = self.width()
        busy = self.union([(s, e) for _, s, e, _, _ in self.all_kernels], *self.w)
        copy_busy = self.union([(s, e) for _, s, e, _, _ in self.all_copies], *self.w)
        segments = self.union([(s, e) for _, s, e, _, _ in self.all_kernels], float("-inf"), float("inf"))
        copy_total = sum(e - s for _, s, e, _, _ in self.copies)
        overlapped = sum(max(0, min(e, ke) - max(s, ks)) for _, s, e, _, _ in self.copies for ks, ke in segments)
        syncs = [(s, e) for n, s, e in self.runtime if n in SYNC_NAMES and self.step_of(s) is not None]
        out = {
            "step_count": len(self.steps),
            "kernel_count": len(self.kernels),
            "kernel_time_us": sum(e - s for _, s, e, _, _ in self.kernels) / 1000,
            "memset_count": len(self.sets),
            "gpu_utilization": sum(e - s for s, e in busy) / width,
            "copy_utilization": sum(e - s for s, e in copy_busy) / width,
            "overlap_efficiency": overlapped / copy_total if copy_total else None,
            "sync_count": len(syncs),
            "sync_wait_fraction": sum(e - s for s, e in syncs) / width,
            "window_us": width / 1000,
        }
        for kind, word in COPY_WORDS.items():
            rows = [c for c in self.copies if c[0].split()[1] == word]
            out[f"memcpy_{kind}_count"] = len(rows)
            out[f"memcpy_{kind}_bytes"] = sum(c[3] for c in rows)
            out[f"memcpy_{kind}_time_us"] = sum(e - s for _, s, e, _, _ in rows) / 1000
        return out


    def step_slices(self):
        """docs/metrics.md's slices: e_i the later of step i's CPU end and the end of its own
        last kernel, copy or set, kept non-decreasing; slice i is [e_(i-1), e_i), e_(-1) = W0."""
        out, previous = [], self.w[0]
        for i, (_, cpu_end) in enumerate(self.steps):
            own = [r[2] for r in self.kernels + self.copies + self.sets if r[4] == i]
            end = max([cpu_end, previous] + own)
            out.append((previous, end))
            previous = end
        return out

    def host_gaps(self):
        """Per step, the longest pause of the launching threads, in ns."""
        return longest_pauses(self.launching_calls, self.steps)

    def per_step_gpu_utilization(self):
        """Per slice: |union of all kernel intervals within it| / its length."""
        kernels = [(s, e) for _, s, e, _, _ in self.all_kernels]
        return [sum(e - s for s, e in self.union(kernels, lo, hi)) / (hi - lo) if hi > lo else 0.0
                for lo, hi in self.step_slices()]

    def launch_readings(self):
        """docs/metrics.md's per-step ``launch_call_us`` in ns: per step, of the durations of
        the kernel-launch calls (cudaLaunchKernel*, cuLaunchKernel*, *CooperativeKernel) whose
        start lies in it, sorted, the one at index floor(0.25 * (n - 1)); None without one."""
        names = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
                 "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel")
        out = []
        for start, end in self.steps:
            durations = sorted(e - s for name, s, e in self.runtime
                               if name.split("_v")[0] in names and start <= s <= end)
            out.append(durations[(len(durations) - 1) // 4] if durations else None)
        return out

    def bandwidths(self, peak_gbps=None):
        """docs/metrics.md's ``memcpy_<kind>_gbps`` (bytes over nanoseconds of the kind's
        attributed copies; None when it moved nothing) and ``pcie_utilization`` (the busier of
        host-to-device and device-to-host bytes over peak x |W|), whole-window and per step
        (over the step slices), unrounded."""
        def kind_rows(kind, step=None):
            return [c for c in self.copies if c[0].split()[1] == COPY_WORDS[kind] and (step is None or c[4] == step)]

        def gbps(rows):
            nbytes, dur = sum(c[3] for c in rows), sum(e - s for _, s, e, _, _ in rows)
            return nbytes / dur if nbytes and dur else None

        def busier(step=None):
            return max(sum(c[3] for c in kind_rows(k, step)) for k in ("htod", "dtoh"))

        total = {f"memcpy_{k}_gbps": gbps(kind_rows(k)) for k in COPY_WORDS}
        steps = {f"memcpy_{k}_gbps": [gbps(kind_rows(k, i)) for i in range(len(self.steps))] for k in COPY_WORDS}
        if peak_gbps:
            total["pcie_utilization"] = busier() / (peak_gbps * self.width())
            steps["pcie_utilization"] = [busier(i) / (peak_gbps * (hi - lo))
                                         for i, (lo, hi) in enumerate(self.step_slices())]
        return total, steps

