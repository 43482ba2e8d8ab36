# Beam search for transition systems, under thinc.extra.search's binary interface.
#
# spaCy's beam parser and beam NER drive Beam from compiled code: they read and write its fields
# at fixed offsets and call its methods through the vtable (../shared/spec/spacy-c-abi.md, 3.3).
# NOTE: the order and C types of the fields and of the cdef methods below are that interface
# (Beam: 136 bytes, 8 vtable slots; MaxViolation: 104 bytes, 2 slots). Do not reorder them.
from libc.stdint cimport uint64_t

ctypedef uint64_t hash_t
ctypedef uint64_t class_t
ctypedef float weight_t

# The callbacks get the beam's `mem` (a cymem Pool; thinc's header types it as Pool, which is
# the same pointer in C). All are called with the GIL held.
ctypedef int (*trans_func_t)(void* dest, void* src, class_t clas, void* extra_args) except -1
ctypedef void* (*init_func_t)(object mem, int n, void* extra_args) except NULL
ctypedef int (*del_func_t)(object mem, void* state, void* extra_args) except -1
ctypedef int (*finish_func_t)(void* state, void* extra_args) except -1
# 0 is a key like any other (never deduplicated) unless an exception is set.
ctypedef hash_t (*hash_func_t)(void* state, void* extra_args) except? 0


cdef struct _State:
    void* content
    class_t* hist          # unused; part of the layout
    weight_t score
    weight_t loss
    int i
    int t
    bint is_done


cdef class Beam:
    cdef object mem                 # a cymem Pool, handed to the callbacks
    cdef class_t nr_class
    cdef class_t width
    cdef class_t size
    cdef public weight_t min_density
    cdef int t
    cdef readonly bint is_done
    cdef list histories
    cdef list _parent_histories
    cdef weight_t** scores          # (width, nr_class) tables, zeroed after each advance
    cdef int** is_valid
    cdef weight_t** costs
    cdef _State* _parents
    cdef _State* _states
    cdef del_func_t del_func

    # `queue` is search.pyx's candidate heap (thinc passes a C++ priority queue: same slot size).
    cdef int _fill(self, void* queue, weight_t** scores, int** is_valid) except -1

    cdef inline void* at(self, int i) noexcept nogil:
        return self._states[i].content

    cdef int initialize(self, init_func_t init_func, del_func_t del_func, int n,
                        void* extra_args) except -1
    cdef int advance(self, trans_func_t transition_func, hash_func_t hash_func,
                     void* extra_args) except -1
    cdef int check_done(self, finish_func_t finish_func, void* extra_args) except -1

    cdef inline void set_cell(self, int i, int j, weight_t score, int is_valid,
                              weight_t cost) noexcept nogil:
        self.scores[i][j] = score
        self.is_valid[i][j] = is_valid
        self.costs[i][j] = cost

    cdef int set_row(self, int i, const weight_t* scores, const int* is_valid,
                     const weight_t* costs) except -1
    cdef int set_table(self, weight_t** scores, int** is_valid, weight_t** costs) except -1


cdef class MaxViolation:
    cdef object mem                 # unused; part of the layout
    cdef readonly weight_t cost
    cdef readonly weight_t delta
    cdef readonly weight_t p_score
    cdef readonly weight_t g_score
    cdef readonly double Z
    cdef readonly double gZ
    cdef class_t n                  # unused; part of the layout
    cdef readonly list p_hist
    cdef readonly list g_hist
    cdef readonly list p_probs
    cdef readonly list g_probs

    cpdef int check(self, Beam pred, Beam gold) except -1
    cpdef int check_crf(self, Beam pred, Beam gold) except -1
