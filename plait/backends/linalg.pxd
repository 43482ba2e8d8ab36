# Float32 vector helpers for Cython code, under thinc.backends.linalg's binary interface.
#
# spaCy's parser cimports Vec and VecVec and compiles its own copies of the inline helpers; at
# import it checks the four types' sizes and that Vec, VecVec and Mat carry a vtable capsule
# (../shared/spec/spacy-c-abi.md, 3.2). The helpers below are static inline methods, so Cython
# gives each class a vtable with one slot per helper, in the order declared here: keep it.
from libc.math cimport expf, powf, sqrtf
from libc.stdint cimport int32_t
from libc.string cimport memcpy, memset

ctypedef float weight_t


cdef class Matrix:
    # NOTE: the field order fixes the layout spaCy's header expects (40 bytes).
    cdef readonly object mem
    cdef weight_t* data
    cdef readonly int32_t nr_row
    cdef readonly int32_t nr_col


cdef class Vec:
    # The index of the first largest score. NOTE: with two classes a tie gives 1, as in thinc.
    @staticmethod
    cdef inline int arg_max(const weight_t* scores, const int n_classes) noexcept nogil:
        cdef int i, best = 0
        if n_classes == 2:
            return 0 if scores[0] > scores[1] else 1
        for i in range(1, n_classes):
            if scores[i] > scores[best]:
                best = i
        return best

    @staticmethod
    cdef inline weight_t max(const weight_t* x, int32_t nr) noexcept nogil:
        cdef int32_t i
        cdef weight_t top
        if nr <= 0:
            return 0
        top = x[0]
        for i in range(1, nr):
            if x[i] > top:
                top = x[i]
        return top

    @staticmethod
    cdef inline weight_t sum(const weight_t* vec, int32_t nr) noexcept nogil:
        cdef int32_t i
        cdef weight_t total = 0
        for i in range(nr):
            total += vec[i]
        return total

    @staticmethod
    cdef inline weight_t norm(const weight_t* vec, int32_t nr) noexcept nogil:
        cdef int32_t i
        cdef weight_t total = 0
        for i in range(nr):
            total += vec[i] * vec[i]
        return sqrtf(total)

    @staticmethod
    cdef inline void add(weight_t* output, const weight_t* x, weight_t inc, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            output[i] = x[i] + inc

    @staticmethod
    cdef inline void add_i(weight_t* vec, weight_t inc, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            vec[i] += inc

    @staticmethod
    cdef inline void mul(weight_t* output, const weight_t* vec, weight_t scal, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            output[i] = vec[i] * scal

    @staticmethod
    cdef inline void mul_i(weight_t* vec, weight_t scal, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            vec[i] *= scal

    @staticmethod
    cdef inline void pow(weight_t* output, const weight_t* vec, weight_t scal, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            output[i] = powf(vec[i], scal)

    @staticmethod
    cdef inline void pow_i(weight_t* vec, const weight_t scal, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            vec[i] = powf(vec[i], scal)

    @staticmethod
    cdef inline void div(weight_t* output, const weight_t* vec, weight_t scal, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            output[i] = vec[i] / scal

    @staticmethod
    cdef inline void div_i(weight_t* vec, const weight_t scal, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            vec[i] /= scal

    @staticmethod
    cdef inline void exp(weight_t* output, const weight_t* vec, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            output[i] = expf(vec[i])

    @staticmethod
    cdef inline void exp_i(weight_t* vec, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            vec[i] = expf(vec[i])

    @staticmethod
    cdef inline void reciprocal_i(weight_t* vec, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            vec[i] = 1.0 / vec[i]

    @staticmethod
    cdef inline weight_t mean(const weight_t* X, int32_t nr_dim) noexcept nogil:
        return Vec.sum(X, nr_dim) / nr_dim

    # Population variance, accumulated in double by Welford's update (stable for long rows).
    @staticmethod
    cdef inline weight_t variance(const weight_t* X, int32_t nr_dim) noexcept nogil:
        cdef double m = 0.0, m2 = 0.0, delta
        cdef int32_t i
        if nr_dim <= 0:
            return 0
        for i in range(nr_dim):
            delta = X[i] - m
            m += delta / (i + 1)
            m2 += delta * (X[i] - m)
        return <weight_t>(m2 / nr_dim)


cdef class VecVec:
    # output = x + scale * y
    @staticmethod
    cdef inline void add(weight_t* output, const weight_t* x, const weight_t* y,
                         weight_t scale, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            output[i] = x[i] + scale * y[i]

    # x += scale * y
    @staticmethod
    cdef inline void add_i(weight_t* x, const weight_t* y, weight_t scale, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            x[i] += scale * y[i]

    # x += scale * y[b] for each of the nr_batch rows y[b] (nr each) of y
    @staticmethod
    cdef inline void batch_add_i(weight_t* x, const weight_t* y, weight_t scale,
                                 int32_t nr, int32_t nr_batch) noexcept nogil:
        cdef int32_t b
        for b in range(nr_batch):
            VecVec.add_i(x, &y[<Py_ssize_t>b * nr], scale, nr)

    # output = x + y ** power
    @staticmethod
    cdef inline void add_pow(weight_t* output, const weight_t* x, const weight_t* y,
                             weight_t power, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            output[i] = x[i] + powf(y[i], power)

    @staticmethod
    cdef inline void add_pow_i(weight_t* x, const weight_t* y, weight_t power, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            x[i] += powf(y[i], power)

    @staticmethod
    cdef inline void mul(weight_t* output, const weight_t* x, const weight_t* y, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            output[i] = x[i] * y[i]

    @staticmethod
    cdef inline void mul_i(weight_t* x, const weight_t* y, int32_t nr) noexcept nogil:
        cdef int32_t i
        for i in range(nr):
            x[i] *= y[i]

    @staticmethod
    cdef inline weight_t dot(const weight_t* x, const weight_t* y, int32_t nr) noexcept nogil:
        cdef int32_t i
        cdef weight_t total = 0
        for i in range(nr):
            total += x[i] * y[i]
        return total

    # The index of the first largest score among the valid classes, -1 if none is valid.
    @staticmethod
    cdef inline int arg_max_if_true(const weight_t* scores, const int* is_valid,
                                    const int n_classes) noexcept nogil:
        cdef int i, best = -1
        for i in range(n_classes):
            if is_valid[i] and (best < 0 or scores[i] > scores[best]):
                best = i
        return best

    # The index of the first largest score among the zero-cost classes, -1 if none costs 0.
    @staticmethod
    cdef inline int arg_max_if_zero(const weight_t* scores, const weight_t* costs,
                                    const int n_classes) noexcept nogil:
        cdef int i, best = -1
        for i in range(n_classes):
            if costs[i] == 0 and (best < 0 or scores[i] > scores[best]):
                best = i
        return best


cdef class Mat:
    # Ex[j] = mean over the nr_row rows of column j of the row-major (nr_row, nr_col) mat
    @staticmethod
    cdef inline void mean_row(weight_t* Ex, const weight_t* mat, int32_t nr_row, int32_t nr_col) noexcept nogil:
        cdef int32_t i
        memset(Ex, 0, sizeof(weight_t) * nr_col)
        for i in range(nr_row):
            VecVec.add_i(Ex, &mat[<Py_ssize_t>i * nr_col], 1.0, nr_col)
        if nr_row > 0:
            Vec.div_i(Ex, <weight_t>nr_row, nr_col)

    # Vx[j] = variance of column j around Ex[j], plus eps (corrected two-pass sum)
    @staticmethod
    cdef inline void var_row(weight_t* Vx, const weight_t* mat, const weight_t* Ex,
                             int32_t nr_row, int32_t nr_col, weight_t eps) noexcept nogil:
        cdef int32_t i, j
        cdef weight_t d, total, total2
        if nr_row == 0 or nr_col == 0:
            return
        for j in range(nr_col):
            total = 0
            total2 = 0
            for i in range(nr_row):
                d = mat[<Py_ssize_t>i * nr_col + j] - Ex[j]
                total += d
                total2 += d * d
            Vx[j] = (total2 - total * total / nr_row) / nr_row + eps
