"""Does the kernel fingerprint follow a grid cell's bits under every cap, and is it stable? (issue 59, item 2)

For each cap of :data:`CAPS` (the three libraries' ISA caps, alone and together), each thread count and each
repeat, a fresh process computes this machine's fingerprint (:func:`depthprune.model.kernel_identity.fingerprint`)
and one grid cell's calibration bits: a shipped tiny model's dense loss and its 16 singles (the prior every
searcher starts from), in float32 and in bf16, hashed bit for bit. It then prints, per cap and thread count,
whether the repeats agreed, and against the uncapped run at the same thread count whether the cell's bits and
the fingerprint changed. The fingerprint holds where every change of a cell's bits comes with a change of its
dtype's fingerprint; a changed fingerprint over unchanged bits costs a cell a band where the exact check would
have held, never a wrong verdict. A cap that changes nothing on this CPU (MKL's, on an AMD EPYC) shows as such;
a class this machine is not (AMX on an AMD CPU) is not measured here.

    python tools/fingerprint_caps.py [--model tiny-llama3] [--objective ppl] [--repeats 3] [--threads 1 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from depthprune.model.precision import CAP_VARIABLES

#: name -> environment: each library's cap alone, the oneDNN cap without AMX, and the three together (an
#: AVX2-only CPU emulated)
CAPS: dict[str, dict[str, str]] = {
    "uncapped": {},
    "oneDNN AVX512_CORE_BF16": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"},
    "oneDNN AVX2": {"ONEDNN_MAX_CPU_ISA": "AVX2"},
    "MKL AVX2": {"MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "ATen avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "all three AVX2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
}

_RUN = """
import hashlib, json, sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
from depthprune.model.kernel_identity import fingerprint
from depthprune.recipe import Session
t = time.perf_counter()
out = {"fingerprint": fingerprint()}
out["fingerprint_seconds"] = time.perf_counter() - t
for dtype in ("float32", "bfloat16"):
    session = Session.open(sys.argv[2], device="cpu", dtype=dtype)
    try:
        calib = session.calibrate(sys.argv[3])
        losses = [calib.dense_loss, *calib.prior]
        out[dtype] = hashlib.sha256(json.dumps([float(x).hex() for x in losses]).encode()).hexdigest()[:16]
    except Exception as err:
        out[dtype] = f"error: {type(err).__name__}: {err}"
    finally:
        session.close()
print(json.dumps(out))
"""


def run(cap: dict[str, str], threads: int, model: str, objective: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CAP_VARIABLES}
    done = subprocess.run([sys.executable, "-c", _RUN, str(threads), model, objective], env={**env, **cap},
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="tiny-llama3")
    parser.add_argument("--objective", default="ppl")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--cap", choices=list(CAPS), action="append", help="only these caps (and uncapped)")
    args = parser.parse_args()
    caps = {k: v for k, v in CAPS.items() if not args.cap or k in args.cap or k == "uncapped"}
    start = time.perf_counter()
    runs = {(name, t): [run(cap, t, args.model, args.objective) for _ in range(args.repeats)]
            for t in args.threads for name, cap in caps.items()}
    print(f"{args.model} {args.objective}: dense loss and 16 singles per dtype, {args.repeats} processes per row")
    print(f"{'cap':<26} thr  repeats  fp float32        cell fp32 vs uncapped  fp bf16           cell bf16 vs uncapped"
          "  fingerprint s")
    holds = True
    for (name, t), rs in runs.items():
        differ = sorted({k for r in rs for k in r if k != "fingerprint_seconds" and r[k] != rs[0][k]})
        agree = not differ
        base = runs["uncapped", t][0]
        r = rs[0]
        cols = []
        for dtype in ("float32", "bfloat16"):
            bits, fp = r[dtype] != base[dtype], r["fingerprint"][dtype] != base["fingerprint"][dtype]
            holds &= fp or not bits
            cols.append(f"{r['fingerprint'][dtype]}  bits {'changed' if bits else 'same   '}, fp "
                        f"{'changed' if fp else 'same   '}")
        seconds = max(x["fingerprint_seconds"] for x in rs)
        print(f"{name:<26} {t:>3}  {'agree' if agree else 'DIFFER':<7}  {cols[0]}  {cols[1]}  {seconds:.2f}"
              + ("" if agree else f"  (differ: {', '.join(differ)}: {[r[differ[0]] for r in rs]})"))
    print(f"every change of a cell's bits changed its dtype's fingerprint: {'yes' if holds else 'NO'} "
          f"({time.perf_counter() - start:.0f} s)")
    return 0 if holds else 1


if __name__ == "__main__":
    raise SystemExit(main())
