"""Which summation orders torch uses on this CPU, found by a probe, and torch's recorded outputs.

A few of npoptim's cross-checks demand bit-level agreement with torch where torch's result
depends on the order in which its CPU kernels add: LBFGS's float64 ``dot`` (MKL ``ddot``) and
``sum`` (ATen ``cascade_sum``), and Muon's bfloat16 matrix products above 16*16*16
multiply-adds (oneDNN). MKL, ATen and oneDNN pick their kernels by CPU, so the order, and with
it torch's last bits, differ from one machine to another; npoptim emulates one fixed order
(its results, and so the golden files, are the same on every machine).

Machine kinds are named by what torch reports (``torch.backends.cpu.get_cpu_capability()``)
and by a probe: torch's results on fixed vectors and matrices (:func:`probe_inputs`), compared
bit for bit with npoptim's emulation. Where they agree, the tests compare with torch bit for
bit (or to 1e-12); where they do not, they hold npoptim to torch's own sensitivity to the
order, measured in the same test, and say so. The probe's inputs are made with exact
arithmetic (random integers times exact powers of two), so they are the same bits on every
machine. A second probe, :func:`half_lanes`, measures the width of torch's 16-bit
elementwise vector loop (npoptim.precision's ``torch_cpu_lanes``); 32 with torch 2.13's
AVX2 and AVX-512 kernels alike, measured.

``tests/data/torch_cpu_records.json`` keeps torch's outputs for the probe inputs and for a
few short runs as recorded on each kind of CPU met so far, so that each emulated order is
checked against the real torch on every machine, torch installed or not. A record whose
probe outputs were made from older inputs (:data:`PROBE_INPUTS`) keeps its runs, which are
still compared, and its outputs, which are not. ``python tests/record_torch_cpu.py`` adds
(or refreshes) the record of the machine it runs on, with the :data:`DISPATCH_SETTINGS` set:
one machine can run other kinds' kernels, e.g. ``MKL_CBWR=COMPATIBLE`` makes MKL's ``ddot``
on an Intel CPU add in the order it uses on AMD ones.
"""
import hashlib
import json
import os
import platform

import numpy as np

RECORDS = os.path.join(os.path.dirname(__file__), "data", "torch_cpu_records.json")

DOT_LENGTHS = (2, 7, 8, 9, 16, 17, 31, 42, 100, 257, 1000, 4095)
SUM_LENGTHS = (3, 4, 8, 9, 16, 33, 42, 100, 257, 1000, 4096, 5000)
MATMUL_SHAPES = ((17, 17, 17), (20, 30, 20), (64, 64, 64), (40, 512, 40))  # (m, k, n): oneDNN


#: Which probe inputs a record's probe outputs belong to: they are compared with npoptim's
#: only if made from the same inputs. "exact-1": :func:`probe_inputs` below, the same bits on
#: every machine. Records from before it ("np.exp") were made with inputs whose magnitudes
#: came from ``np.exp``, which NumPy computes differently on AVX-512 and other CPUs.
PROBE_INPUTS = "exact-1"


def signed_values(rng, shape):
    """Values in (-1, 1) with 53 random bits each: random integers scaled by 2**-53 (exact
    arithmetic only, so the same bits on every machine)."""
    return np.ldexp(rng.integers(-2 ** 53 + 1, 2 ** 53, shape).astype(np.float64), -53)


def spread_values(rng, n, octaves=20):
    """:func:`signed_values` times an exact power of two 2**e, e uniform in [-octaves,
    octaves]: magnitudes over 12 orders (octaves=20), so that any change of the order in
    which they are added shows in the last bits."""
    return np.ldexp(signed_values(rng, n), rng.integers(-octaves, octaves + 1, n))


def probe_inputs():
    """The probe: float64 vectors for ``dot`` and ``sum`` (magnitudes over twelve orders) and
    float32 matrices for the bfloat16 products (both sides round them to bfloat16 first), all
    from a fixed seed and exact arithmetic (:data:`PROBE_INPUTS`)."""
    rng = np.random.default_rng(20261201)
    dots = [(spread_values(rng, n), signed_values(rng, n)) for n in DOT_LENGTHS]
    sums = [spread_values(rng, n) for n in SUM_LENGTHS]

    def cancelling(m, k, n):
        # each column of b holds +2**22 and -2**22: a float32 accumulator that meets one of
        # them drops low bits of what it adds meanwhile, so the small result shows, even
        # after rounding to bfloat16, which products were added while the big ones were in
        a = np.where(rng.random((m, k)) < 0.5, 1.0, signed_values(rng, (m, k)))
        b = signed_values(rng, (k, n))
        for j in range(n):
            big = rng.choice(k, 2, replace=False)
            b[big, j] = (2.0 ** 22, -2.0 ** 22)
        return a.astype(np.float32), b.astype(np.float32)

    matmuls = [cancelling(m, k, n) for m, k, n in MATMUL_SHAPES]
    return dots, sums, matmuls


# ----------------------------------------------------------------- npoptim's emulated orders
def emulated_outputs():
    """npoptim's results for the probe inputs, as ``{"dot": [...], "sum": [...],
    "bf16_matmul": [...]}`` (floats as hex strings, matrices as lists of them)."""
    from npoptim.kernels.torch_order import dot, torch_sum
    from npoptim.kernels.bfloat16 import round_to_bfloat16, to_bfloat16
    from npoptim.optim.muon import bf16_matmul_float32
    dots, sums, matmuls = probe_inputs()
    return {
        "dot": [float(dot(x, y)).hex() for x, y in dots],
        "sum": [float(torch_sum(x)).hex() for x in sums],
        "bf16_matmul": [_hex_matrix(round_to_bfloat16(
            bf16_matmul_float32(to_bfloat16(a), to_bfloat16(b)))) for a, b in matmuls],
    }


def torch_outputs():
    """torch's results for the probe inputs on this machine (torch must be installed)."""
    import torch
    dots, sums, matmuls = probe_inputs()
    with torch.no_grad():
        return {
            "dot": [float(torch.dot(torch.tensor(x), torch.tensor(y))).hex() for x, y in dots],
            "sum": [float(torch.tensor(x).sum()).hex() for x in sums],
            "bf16_matmul": [_hex_matrix((torch.tensor(a).bfloat16() @ torch.tensor(b).bfloat16())
                                        .float().numpy()) for a, b in matmuls],
        }


def _hex_matrix(m):
    return [float(v).hex() for v in np.asarray(m, np.float64).reshape(-1)]


def signature(outputs, part):
    """A short name for the order one part of the outputs shows (``dot``, ``sum`` or
    ``bf16_matmul``): the first 10 hex digits of a SHA-256 of those outputs."""
    return hashlib.sha256(json.dumps(outputs[part]).encode()).hexdigest()[:10]


# --------------------------------------------------------------------------- this machine
#: the settings that change which kernels NumPy, torch, MKL and oneDNN pick (a record keeps
#: those set when it was made: with them one machine runs other kinds' code paths)
DISPATCH_SETTINGS = ("NPY_DISABLE_CPU_FEATURES", "ATEN_CPU_CAPABILITY", "MKL_CBWR",
                     "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")


def cpu_description():
    """CPU model, its vector flags, torch's reported capability (None without torch), and
    the :data:`DISPATCH_SETTINGS` set in the environment."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model in ("", platform.machine()):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    vector = sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "sse4")))
    try:
        import torch
        capability = torch.backends.cpu.get_cpu_capability()
    except ImportError:
        capability = None
    settings = {name: os.environ[name] for name in DISPATCH_SETTINGS if name in os.environ}
    return {"model": model, "vector_flags": vector, "torch_capability": capability,
            "settings": settings}


_PROBE = None


def probe():
    """Which of npoptim's emulated orders torch uses here: ``{"dot": bool, "sum": bool,
    "bf16_matmul": bool, "capability": str}``, computed once per process (torch needed)."""
    global _PROBE
    if _PROBE is None:
        ours, theirs = emulated_outputs(), torch_outputs()
        _PROBE = {part: ours[part] == theirs[part] for part in ours}
        _PROBE["capability"] = cpu_description()["torch_capability"]
    return _PROBE


def lbfgs_order_is_torchs():
    """True where torch's float64 ``dot`` and ``sum`` add in the order npoptim's LBFGS does."""
    found = probe()
    return found["dot"] and found["sum"]


HALF_LENGTHS = (2, 7, 15, 16, 17, 31, 42, 63, 64, 65, 100, 129, 300, 1000)


def half_reduction_order_is_torchs():
    """True where torch's CPU ``dot`` and ``sum`` of bfloat16 and float16 vectors add in the
    order ``npoptim.precision.lbfgs`` emulates (ATen's AVX2 float32 kernels; its LBFGS), on
    vectors whose products span 2**40, so that another order shows after rounding to 16 bits."""
    import torch
    from npoptim.precision.lbfgs import dot16, sum16
    rng = np.random.default_rng(20261202)
    for dtype in (torch.bfloat16, torch.float16):
        big = 2.0 ** (12 if dtype == torch.float16 else 20)
        for n in HALF_LENGTHS:
            x = rng.standard_normal(n)
            x[rng.random(n) < 0.2] = big
            x = torch.tensor(x * np.sign(rng.standard_normal(n))).to(dtype)
            y = torch.tensor(rng.standard_normal(n)).to(dtype)
            wide = [v.float().numpy() for v in (x, y)]
            if (float(x.dot(y)) != float(torch.tensor(float(dot16(*wide))).to(dtype))
                    or float(x.sum()) != float(torch.tensor(float(sum16(wide[0]))).to(dtype))):
                return False
    return True


#: the widths :func:`half_lanes` tells apart (16-bit lanes of a vector loop iteration)
LANE_CANDIDATES = (1, 2, 4, 8, 16, 32, 64, 128)
_HALF_LANES = {}


def half_lanes():
    """The width of torch's 16-bit elementwise vector loop here, measured on torch itself:
    the ``torch_cpu_lanes`` of npoptim.precision (its scalar remainder is the last
    ``n % lanes`` elements of a tensor of ``n``), or None where no width explains what torch
    does (``ATEN_CPU_CAPABILITY=default``: every element takes the scalar code).

    The probe is ``a.add(b, alpha=alpha)`` on bfloat16 and float16 tensors of every length
    from 1 to 256, with alpha = b = 1 + u and a = -(1 + 2u), u the format's half ulp of 1
    (2**-7, 2**-10): the vector loop computes ``fma(alpha, b, a) = u*u`` in float32 and
    rounds that (nonzero) to the format, the scalar code rounds the product ``1 + 2u + u*u``
    to ``1 + 2u`` first and gets 0. So each element shows which code it went through; the
    width is the one for which the zeros are exactly the last ``n % lanes`` elements, for
    every ``n`` and both formats. Computed once per process (torch needed)."""
    if "lanes" not in _HALF_LANES:
        import torch
        found = set()
        for dtype, u in ((torch.bfloat16, 2.0 ** -7), (torch.float16, 2.0 ** -10)):
            scalar_tails = []
            for n in range(1, 2 * LANE_CANDIDATES[-1] + 1):
                a = torch.full((n,), -(1 + 2 * u), dtype=dtype)
                b = torch.full((n,), 1 + u, dtype=dtype)
                scalar_tails.append((a.add(b, alpha=1 + u) == 0).numpy())
            found.add(lanes_explaining(scalar_tails))
        _HALF_LANES["lanes"] = found.pop() if len(found) == 1 else None
    return _HALF_LANES["lanes"]


def lanes_explaining(scalar_tails):
    """The width in :data:`LANE_CANDIDATES` for which, in each boolean mask of
    ``scalar_tails`` (element ``n - 1`` the mask of a tensor of ``n``: True where the scalar
    code computed), exactly the last ``n % lanes`` elements are True; None if there is none."""
    return next((lanes for lanes in LANE_CANDIDATES
                 if all(np.array_equal(tail, np.arange(n) >= n - n % lanes)
                        for n, tail in enumerate(scalar_tails, 1))), None)


def describe_probe():
    """One line for logs and skip reasons."""
    found, cpu = probe(), cpu_description()
    parts = ", ".join(f"{part} {'emulated' if found[part] else 'differs'}"
                      for part in ("dot", "sum", "bf16_matmul"))
    return (f"{cpu['model']}, torch capability {cpu['torch_capability']}: {parts}, "
            f"16-bit lanes {half_lanes()}")


# ------------------------------------------------------------------------------ records
def load_records():
    """The recorded kinds: a list of ``{"kind", "cpu", "torch", "date", "note",
    "probe_inputs", "probe", "half_lanes", "runs"}`` (``half_lanes``: :func:`half_lanes`,
    None where it was not recorded)."""
    with open(RECORDS) as f:
        return json.load(f)["kinds"]


def probe_is_current(kind):
    """Whether a record's probe outputs were made from today's :func:`probe_inputs` (only
    then are they compared with npoptim's; its LBFGS runs are compared either way)."""
    return kind["probe_inputs"] == PROBE_INPUTS


def kind_name(outputs, capability):
    """How a record names a machine kind: torch's capability and the probe's signatures."""
    return (f"{capability}/dot-{signature(outputs, 'dot')}/sum-{signature(outputs, 'sum')}"
            f"/bf16-{signature(outputs, 'bf16_matmul')}")


if __name__ == "__main__":  # what .ci/run prints at the top of its log
    cpu = cpu_description()
    print(f"CPU: {cpu['model']}")
    print(f"vector flags: {' '.join(cpu['vector_flags'])}")
    print(f"torch capability: {cpu['torch_capability']}")
    if cpu["settings"]:
        print("dispatch settings: " + " ".join(f"{k}={v!r}" for k, v in cpu["settings"].items()))
    if cpu["torch_capability"] is not None:
        print(f"summation-order probe: {describe_probe()}")
        ours = torch_outputs()
        names = [k["kind"] for k in load_records() if probe_is_current(k)]
        here = kind_name(ours, cpu["torch_capability"])
        print(f"machine kind {here}: {'recorded' if here in names else 'not recorded yet'}")
