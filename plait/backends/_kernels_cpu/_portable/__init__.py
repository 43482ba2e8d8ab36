"""The baseline build of plait's vector kernels (SSE2 on x86-64, else the compiler's target)."""
