"""C text for the fused op-tree kernels: the shared helpers and the per-op expressions.

Everything here is plain strings; `_fuse.py` assembles one translation unit per pass signature.
The float transcendentals are written out branch-free (selects, bit tricks, polynomials) so the
compiler vectorizes the loops that call them; glibc's scalar expf/logf would not vectorize
without -ffast-math, which would also break numpy's NaN and infinity behaviour. The double
versions call libm (float64 trees are rare in neon and keep libm's accuracy).
"""

PRELUDE = r"""
#include <stdint.h>
#include <math.h>
#include <string.h>
#include <stdlib.h>

#ifdef __FMA__
#define PL_FMAF(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define PL_FMAF(a, b, c) ((a) * (b) + (c))
#endif

static inline float pl_f_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t pl_u_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* e**r for r in [-ln2/2, ln2/2] (a degree-6 minimax fit of the exponential), times 2**n. */
static inline float pl_exp_core(float r, float n) {
    float p = 1.9875691500e-4f;
    p = PL_FMAF(p, r, 1.3981999507e-3f);
    p = PL_FMAF(p, r, 8.3334519073e-3f);
    p = PL_FMAF(p, r, 4.1665795894e-2f);
    p = PL_FMAF(p, r, 1.6666665459e-1f);
    p = PL_FMAF(p, r, 5.0000001201e-1f);
    p = PL_FMAF(p, r * r, r + 1.0f);
    int32_t ni = (int32_t)n;
    int32_t n1 = ni >> 1, n2 = ni - n1;           /* two factors: 2**n may leave the normal range */
    float s1 = pl_f_of((uint32_t)(n1 + 127) << 23);
    float s2 = pl_f_of((uint32_t)(n2 + 127) << 23);
    return p * s1 * s2;
}

static inline float pl_expf(float x) {
    float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
    xc = x != x ? 0.0f : xc;
    float n = __builtin_rintf(xc * 1.44269504088896341f);
    float r = PL_FMAF(n, -0.693359375f, xc);
    r = PL_FMAF(n, 2.12194440e-4f, r);
    float y = pl_exp_core(r, n);
    y = x > 88.72283935546875f ? __builtin_inff() : y;
    y = x < -103.97208404541015625f ? 0.0f : y;
    return x != x ? x : y;
}

static inline float pl_exp2f(float x) {
    float xc = x < -151.0f ? -151.0f : (x > 129.0f ? 129.0f : x);
    xc = x != x ? 0.0f : xc;
    float n = __builtin_rintf(xc);
    float r = (xc - n) * 0.693147180559945309f;
    float y = pl_exp_core(r, n);
    y = x >= 128.0f ? __builtin_inff() : y;
    y = x < -150.0f ? 0.0f : y;
    return x != x ? x : y;
}

static inline float pl_logf(float x) {
    int sub = x < 1.17549435e-38f;                  /* subnormals: scale into the normal range */
    float xs = sub ? x * 8388608.0f : x;
    uint32_t ix = pl_u_of(xs);
    int32_t e = (int32_t)((ix >> 23) & 0xff) - 127 - (sub ? 23 : 0);
    float m = pl_f_of((ix & 0x007fffffu) | 0x3f800000u);
    int big = m > 1.41421356237f;
    m = big ? m * 0.5f : m;
    e = big ? e + 1 : e;
    float f = m - 1.0f;
    float z = f * f;
    float p = 7.0376836292e-2f;
    p = PL_FMAF(p, f, -1.1514610310e-1f);
    p = PL_FMAF(p, f, 1.1676998740e-1f);
    p = PL_FMAF(p, f, -1.2420140846e-1f);
    p = PL_FMAF(p, f, 1.4249322787e-1f);
    p = PL_FMAF(p, f, -1.6668057665e-1f);
    p = PL_FMAF(p, f, 2.0000714765e-1f);
    p = PL_FMAF(p, f, -2.4999993993e-1f);
    p = PL_FMAF(p, f, 3.3333331174e-1f);
    float fe = (float)e;
    float y = f * z * p;
    y = PL_FMAF(fe, -2.12194440e-4f, y);
    y = PL_FMAF(-0.5f, z, y);
    float res = f + y;
    res = PL_FMAF(fe, 0.693359375f, res);
    res = x == 0.0f ? -__builtin_inff() : res;
    res = x < 0.0f ? __builtin_nanf("") : res;
    res = x == __builtin_inff() ? x : res;
    return x != x ? x : res;
}

static inline float pl_log2f(float x) { return pl_logf(x) * 1.44269504088896341f; }

/* tanh(x) = x P(x*x) / Q(x*x) on |x| <= 9 (beyond, tanh rounds to +-1 in float32): a [6/3]
   rational fit of tanh(x)/x made for this file (max relative error 2e-8 in exact arithmetic,
   about 7 float32 ulps evaluated in float32); one division, no exponential. */
static inline float pl_tanhf(float x) {
    float xc = x < -9.0f ? -9.0f : (x > 9.0f ? 9.0f : x);
    float z = xc * xc;
    float p = -8.844546535905394e-14f;
    p = PL_FMAF(p, z, 5.4146201359777787e-11f);
    p = PL_FMAF(p, z, -2.0505267339907386e-08f);
    p = PL_FMAF(p, z, 1.122258033637933e-05f);
    p = PL_FMAF(p, z, 0.003110441466258213f);
    p = PL_FMAF(p, z, 0.1308980457075315f);
    p = PL_FMAF(p, z, 0.9999999944187352f);
    float q = 0.0002555613580325274f;
    q = PL_FMAF(q, z, 0.024520968030980975f);
    q = PL_FMAF(q, z, 0.464231325911056f);
    q = PL_FMAF(q, z, 1.0f);
    return xc * p / q;
}

static inline double pl_log2d(double x) { return log2(x); }

"""

# The counter-based random stream of rand and stochastic binarize, shared by the C pass and the
# CUDA kernels (plait.neon._fuse_cuda), so both draw the same numbers for one seed: splitmix64's
# finalizer over (seed, element index), so values depend on the element only, never on the thread
# or block that computes it. {q}: the function qualifiers, {u64}: the 64-bit unsigned type.
RNG_TEMPLATE = r"""
{q} {u64} pl_mix({u64} z) {{
    z ^= z >> 30; z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27; z *= 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return z;
}}
{q} float pl_randf({u64} seed, {u64} idx) {{
    return (float)(pl_mix(seed + idx * 0x9e3779b97f4a7c15ULL) >> 40) * 5.9604644775390625e-08f;
}}
{q} double pl_randd({u64} seed, {u64} idx) {{
    return (double)(pl_mix(seed + idx * 0x9e3779b97f4a7c15ULL) >> 11) * 1.1102230246251565e-16;
}}
"""


def rng_source(qualifiers: str, u64: str) -> str:
    """The random stream's C source with these function qualifiers and 64-bit type."""
    return RNG_TEMPLATE.format(q=qualifiers, u64=u64)


PRELUDE += rng_source("static inline", "uint64_t")


# Per compute type: the names the op expressions use.
TYPE_MACROS = {
    "float": r"""
typedef float T;
#define PL_EXP(x) pl_expf(x)
#define PL_EXP2(x) pl_exp2f(x)
#define PL_LOG(x) pl_logf(x)
#define PL_LOG2(x) pl_log2f(x)
#define PL_TANH(x) pl_tanhf(x)
#define PL_SQRT(x) __builtin_sqrtf(x)
#define PL_ABS(x) __builtin_fabsf(x)
#define PL_RINT(x) __builtin_rintf(x)
#define PL_POW(x, y) powf((x), (y))
#define PL_RAND(s, i) pl_randf((s), (i))
#define PL_SAFE_MIN 1.9287498479639178e-22f
#define PL_INV_LN2 1.44269504088896341f
""",
    "double": r"""
typedef double T;
#define PL_EXP(x) exp(x)
#define PL_EXP2(x) exp2(x)
#define PL_LOG(x) log(x)
#define PL_LOG2(x) pl_log2d(x)
#define PL_TANH(x) tanh(x)
#define PL_SQRT(x) __builtin_sqrt(x)
#define PL_ABS(x) __builtin_fabs(x)
#define PL_RINT(x) __builtin_rint(x)
#define PL_POW(x, y) pow((x), (y))
#define PL_RAND(s, i) pl_randd((s), (i))
#define PL_SAFE_MIN 1.9287498479639178e-22
#define PL_INV_LN2 1.4426950408889634
""",
}

# Unary ops: {a} is the operand's variable. numpy semantics (neon's CPU backend evaluated with
# numpy): comparisons give 1.0/0.0, minimum/maximum and the reductions propagate NaN.
UNARY = {
    "neg": "-{a}",
    "abs": "PL_ABS({a})",
    "sgn": "({a} > (T)0 ? (T)1 : ({a} < (T)0 ? (T)-1 : {a}))",
    "sqrt": "PL_SQRT({a})",
    "sqr": "{a} * {a}",
    "exp": "PL_EXP({a})",
    "log": "PL_LOG({a})",
    "safelog": "PL_LOG({a} > PL_SAFE_MIN ? {a} : ({a} != {a} ? {a} : PL_SAFE_MIN))",
    "exp2": "PL_EXP2({a})",
    "log2": "PL_LOG2({a})",
    "sig": "(T)1 / ((T)1 + PL_EXP(-{a}))",
    "sig2": "(T)1 / ((T)1 + PL_EXP2(-{a}))",
    "tanh": "PL_TANH({a})",
    "tanh2": "(PL_EXP2((T)2 * {a}) - (T)1) / (PL_EXP2((T)2 * {a}) + (T)1)",
    "rint": "PL_RINT({a})",
    "finite": "(T)(({a} - {a}) == (T)0)",
    "binarize_d": "({a} >= (T)0 ? (T)1 : (T)-1)",
    # pow with a constant exponent the signature names (the value itself is never baked in
    # for other exponents): numpy's np.power gives the same within float rounding.
    "pow@2": "{a} * {a}",
    "pow@3": "{a} * {a} * {a}",
    "pow@1": "{a}",
    "pow@0": "(T)1",
    "pow@-1": "(T)1 / {a}",
    "pow@-2": "(T)1 / ({a} * {a})",
    "pow@0.5": "PL_SQRT({a})",
    "pow@-0.5": "(T)1 / PL_SQRT({a})",
}

BINARY = {
    "add": "{a} + {b}",
    "sub": "{a} - {b}",
    "mul": "{a} * {b}",
    "div": "{a} / {b}",
    "eq": "(T)({a} == {b})",
    "ne": "(T)({a} != {b})",
    "lt": "(T)({a} < {b})",
    "le": "(T)({a} <= {b})",
    "gt": "(T)({a} > {b})",
    "ge": "(T)({a} >= {b})",
    "pow": "PL_POW({a}, {b})",
    "minimum": "({a} != {a} ? {a} : ({a} < {b} ? {a} : {b}))",
    "maximum": "({a} != {a} ? {a} : ({a} > {b} ? {a} : {b}))",
    # neon's shift: by the power of two nearest |b| with b's sign (value=True), or by 2**b.
    "shift_v": "{a} * ((({b} > (T)0) ? (T)1 : (({b} < (T)0) ? (T)-1 : {b})) * "
               "PL_EXP2(PL_RINT(PL_LOG(PL_ABS({b}) > PL_SAFE_MIN ? PL_ABS({b}) : "
               "(PL_ABS({b}) != PL_ABS({b}) ? PL_ABS({b}) : PL_SAFE_MIN)) * PL_INV_LN2)))",
    "shift_e": "{a} * PL_EXP2({b})",
}

# Stochastic binarize draws one uniform per element: {r} is that draw.
STOCHASTIC_BINARIZE = (
    "({r} <= ((({a} + (T)1) / (T)2) < (T)0 ? (T)0 : ((({a} + (T)1) / (T)2) > (T)1 ? (T)1 : "
    "(({a} + (T)1) / (T)2))) ? (T)1 : (T)-1)"
)

REDUCTIONS = ("sum", "max", "min", "argmax", "argmin")


def emit_expression(expr, lines, load, rand_at) -> str:
    """Append C statements computing op-tree `expr` at one element; returns the result's name.

    The one expression emitter of the C pass (plait.neon._fuse) and the CUDA kernels
    (plait.neon._fuse_cuda): nodes have `kind` ("leaf"/"tmp", "const", "rand" or an op node with
    `op` and `kids`) and constants `ref`; `load(node)` is the C expression of a leaf's value at the
    element, `rand_at(node)` the PL_RAND(...) call of a rand node (or of binarize's draw).
    """
    counter = [0]

    def new() -> str:
        counter[0] += 1
        return f"v{counter[0] - 1}"

    def emit(n) -> str:
        if n.kind == "const":
            return f"c{n.ref}"
        if n.kind in ("leaf", "tmp", "rand"):
            v = new()
            lines.append(f"const T {v} = {rand_at(n) if n.kind == 'rand' else load(n)};")
            return v
        args = [emit(k) for k in n.kids]
        v = new()
        if n.op == "binarize_s":
            r = new()
            lines.append(f"const T {r} = {rand_at(n)};")
            text = STOCHASTIC_BINARIZE.format(a=args[0], r=r)
        elif len(args) == 2:
            text = BINARY[n.op].format(a=args[0], b=args[1])
        else:
            text = UNARY[n.op].format(a=args[0])
        lines.append(f"const T {v} = {text};")
        return v

    return emit(expr)
