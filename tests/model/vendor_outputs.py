"""What the vendors' libraries really printed, verbatim, for the probes' parsers (DESIGN.md, "Machine probes").

Each was read off a machine of this project's CI classes with ``depthprune.model.precision._verbose_output`` (one
64x64 matmul under the library's verbose mode); pointers and timings are as printed. A probe's parser is fed
every one of them on every machine, so the path an AMD CPU takes runs on an Intel CPU too.
"""

#: oneMKL on an Intel Xeon with AMX (2026-12-06), uncapped: the banner names AVX-512
MKL_INTEL_AVX512 = (
    "MKL_VERBOSE oneMKL 2024.0 Update 2 Product build 20240605 for Intel(R) 64 architecture Intel(R) Advanced "
    "Vector Extensions 512 (Intel(R) AVX-512) with support for INT8, BF16, FP16 (limited) instructions, and Intel(R) "
    "Advanced Matrix Extensions (Intel(R) AMX) with INT8 and BF16, Lnx 2.10GHz lp64 gnu_thread\n"
    "MKL_VERBOSE SGEMM(N,N,64,64,64,0x7ffda9db7470,0x56301e9a9b80,64,0x56301e9a9b80,64,0x7ffda9db7490,"
    "0x56301e9da980,64) 4.04ms CNR:OFF Dyn:1 FastMM:1 TID:0  NThr:2\n")
#: the same machine under MKL_ENABLE_INSTRUCTIONS=AVX2
MKL_INTEL_CAPPED_AVX2 = (
    "MKL_VERBOSE oneMKL 2024.0 Update 2 Product build 20240605 for Intel(R) 64 architecture Intel(R) Advanced "
    "Vector Extensions 2 (Intel(R) AVX2) enabled processors, Lnx 2.10GHz lp64 gnu_thread\n"
    "MKL_VERBOSE SGEMM(N,N,64,64,64,0x7ffd2fba0730,0x561f65057b80,64,0x561f65057b80,64,0x7ffd2fba0750,"
    "0x561f65088980,64) 12.01ms CNR:OFF Dyn:1 FastMM:1 TID:0  NThr:2\n")
#: oneMKL on a 2-core AMD EPYC with AVX512-BF16 (issue 59, the banner line whole): it names no ISA
MKL_AMD_EPYC = ("MKL_VERBOSE oneMKL 2024.0 Update 2 Product build 20240605 for Intel(R) 64 architecture Intel(R) "
                "Architecture processors, Lnx 2.60GHz lp64 gnu_thread\n")
#: oneDNN 3.12 on the Intel Xeon with AMX, uncapped (the lines before the matmul's are its banner)
ONEDNN_INTEL_AMX = (
    "onednn_verbose,v1,info,oneDNN v3.12.0 (commit 80afa71049cd69a3df32adcccb623b12cd7baa22)\n"
    "onednn_verbose,v1,info,cpu,runtime:OpenMP,nthr:2\n"
    "onednn_verbose,v1,info,cpu,isa:Intel AVX10.1 and Intel AMX with bfloat16 and 8-bit integer support\n"
    "onednn_verbose,v1,info,gpu,runtime:none\n"
    "onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx10_1_512_amx,undef,src:bf16::blocked:ab::f0 "
    "wei:bf16::blocked:ab::f0 dst:bf16::blocked:ab::f0,attr-scratchpad:user,,64x64:64x64,6.427\n")
#: the same machine under ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 (what an AMD EPYC with AVX512-BF16 dispatches)
ONEDNN_AVX512_BF16 = (
    "onednn_verbose,v1,info,oneDNN v3.12.0 (commit 80afa71049cd69a3df32adcccb623b12cd7baa22)\n"
    "onednn_verbose,v1,info,cpu,runtime:OpenMP,nthr:2\n"
    "onednn_verbose,v1,info,cpu,isa:Intel AVX-512 with Intel DL Boost and bfloat16 support\n"
    "onednn_verbose,v1,info,gpu,runtime:none\n"
    "onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core_bf16,undef,src:bf16::blocked:ab::f0 "
    "wei:bf16::blocked:ab::f0 dst:bf16::blocked:ab::f0,attr-scratchpad:user,,64x64:64x64,0.915039\n")
#: under ONEDNN_MAX_CPU_ISA=AVX2 (an AVX2-only CPU): ATen runs bf16 products itself and oneDNN prints nothing
ONEDNN_AVX2 = ""
