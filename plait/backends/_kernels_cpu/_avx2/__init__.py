"""The AVX2+FMA (x86-64-v3) build of plait's vector kernels; see the parent package."""
