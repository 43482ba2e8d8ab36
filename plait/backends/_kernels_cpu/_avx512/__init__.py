"""The AVX-512 (x86-64-v4) build of plait's vector kernels; see the parent package."""
