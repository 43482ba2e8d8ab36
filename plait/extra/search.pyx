# cython: language_level=3
"""Beam search over the states of a transition system (thinc.extra.search's interface).

A `Beam` keeps `width` states. Compiled code (spaCy's beam parser) fills the beam's score,
validity and cost tables for the live states, then `advance` extends every live state by every
valid class and keeps the `width` best extensions; a finished state competes with its score
averaged over its path instead. `MaxViolation` records where a predicted beam departs furthest
from the gold one, for the beam's training update. The states themselves are opaque: the
callbacks passed to `initialize`, `advance` and `check_done` create, extend and test them.

The exact rules (candidate order, ties, pruning, what is copied where) are those of
../shared/spec/spacy-c-abi.md, 3.3, so that beam training gives the same results as on thinc.
"""
cimport cython
from cpython.exc cimport PyErr_Occurred, PyErr_WriteUnraisable
from cpython.mem cimport PyMem_Calloc, PyMem_Free, PyMem_Malloc
from libc.math cimport INFINITY, exp, expf, log
from libc.string cimport memcpy, memset

from cymem.cymem import Pool


# One extension of a live state: its total score and `parent * nr_class + class`.
cdef struct _Candidate:
    weight_t value
    size_t index


cdef struct _Queue:
    _Candidate* items
    size_t n


cdef inline bint _pops_first(const _Candidate* a, const _Candidate* b) noexcept nogil:
    # Higher value first; among equal values the larger index.
    return a.value > b.value or (a.value == b.value and a.index > b.index)


cdef inline bint _above(const _Candidate* a, const _Candidate* b, bint worst_on_top) noexcept nogil:
    # Whether a belongs above b in a heap of the candidate that pops first (or, with
    # worst_on_top, of the one that pops last).
    return _pops_first(b, a) if worst_on_top else _pops_first(a, b)


cdef inline void _sift_down(_Candidate* heap, size_t n, size_t k, bint worst_on_top) noexcept nogil:
    cdef _Candidate item = heap[k]
    cdef size_t child
    while True:
        child = 2 * k + 1
        if child >= n:
            break
        if child + 1 < n and _above(&heap[child + 1], &heap[child], worst_on_top):
            child += 1
        if not _above(&heap[child], &item, worst_on_top):
            break
        heap[k] = heap[child]
        k = child
    heap[k] = item


cdef void _heapify(_Queue* q) noexcept nogil:
    cdef size_t k = q.n // 2
    while k > 0:
        k -= 1
        _sift_down(q.items, q.n, k, 0)


cdef _Candidate _pop(_Queue* q) noexcept nogil:
    cdef _Candidate top = q.items[0]
    q.n -= 1
    if q.n:
        q.items[0] = q.items[q.n]
        _sift_down(q.items, q.n, 0, 0)
    return top


cdef Py_ssize_t _candidates(Beam self, _Candidate* items, weight_t** scores, int** is_valid) except -1:
    # The extensions of the live states, unordered, less those min_density prunes; their number.
    cdef _State* s
    cdef class_t i, j
    cdef size_t n = 0, kept, k
    cdef double top, floor, d, log_floor
    for i in range(self.size):
        s = &self._states[i]
        if s.is_done:
            # A finished state competes once, its score averaged over its path.
            items[n].value = s.score + s.score / <weight_t>self.t if self.histories[i] else s.score
            items[n].index = i * self.nr_class
            n += 1
        else:
            for j in range(self.nr_class):
                if is_valid[i][j]:
                    items[n].value = s.score + scores[i][j]
                    items[n].index = i * self.nr_class + j
                    n += 1
    if self.min_density == 0.0 or n == 0:
        return <Py_ssize_t>n
    # Drop the candidates whose probability is below min_density times the best one's:
    # exp(value - top) < min_density. The logarithm decides every candidate clear of the
    # boundary by a margin far above exp's rounding; exp itself decides the rest, as before.
    top = items[0].value
    for k in range(1, n):
        if items[k].value > top:
            top = items[k].value
    floor = self.min_density
    log_floor = log(floor) if floor > 0.0 else -INFINITY
    kept = 0
    for k in range(n):
        d = <double>items[k].value - top
        if d >= log_floor + 1e-9 or (not d <= log_floor - 1e-9 and exp(d) >= floor):
            items[kept] = items[k]
            kept += 1
    return <Py_ssize_t>kept


cdef Py_ssize_t _select_best(const _Candidate* items, size_t n, _Candidate* best,
                             size_t k) noexcept nogil:
    """The k candidates that pop first, into best[:k] in pop order; their number, or -1 for a NaN.

    One pass with a k-heap instead of a heap of all n: a beam keeps 8-32 of hundreds.
    """
    cdef size_t m = 0, j, child, end
    cdef _Candidate item
    for j in range(n):
        item = items[j]
        if item.value != item.value:
            return -1  # the heap's order with a NaN is the reference; let it decide
        if m < k:
            # Sift up: the worse of parent and item goes up.
            child = m
            m += 1
            while child > 0 and _pops_first(&best[(child - 1) // 2], &item):
                best[child] = best[(child - 1) // 2]
                child = (child - 1) // 2
            best[child] = item
        elif _pops_first(&item, &best[0]):
            best[0] = item
            _sift_down(best, m, 0, 1)
    # Heap sort: the worst goes to the end, so best[0] pops first.
    end = m
    while end > 1:
        end -= 1
        item = best[0]
        best[0] = best[end]
        best[end] = item
        _sift_down(best, end, 0, 1)
    return <Py_ssize_t>m


ctypedef int (*_del_noexc_t)(object mem, void* state, void* extra_args) noexcept


@cython.no_gc_clear  # `mem` must still be there when __dealloc__ hands it to del_func
cdef class Beam:
    """A beam of `width` states of a transition system with `nr_class` classes (actions)."""

    def __init__(self, class_t nr_class, class_t width, weight_t min_density=0.0):
        if nr_class == 0 or width == 0:
            raise ValueError(f"Beam: nr_class and width must be >= 1, got nr_class={nr_class}, width={width}.")
        if self._states != NULL:
            raise TypeError("Beam.__init__: this beam is already set up; create a new Beam.")
        self.nr_class = nr_class
        self.width = width
        self.min_density = min_density
        self.size = 1
        self.t = 0
        self.is_done = 0
        self.mem = Pool()
        self.histories = [[] for _ in range(width)]
        self._parent_histories = [[] for _ in range(width)]
        self.del_func = NULL
        self._states = <_State*>PyMem_Calloc(width, sizeof(_State))
        self._parents = <_State*>PyMem_Calloc(width, sizeof(_State))
        self.scores = <weight_t**>PyMem_Calloc(width, sizeof(weight_t*))
        self.is_valid = <int**>PyMem_Calloc(width, sizeof(int*))
        self.costs = <weight_t**>PyMem_Calloc(width, sizeof(weight_t*))
        if not (self._states and self._parents and self.scores and self.is_valid and self.costs):
            raise MemoryError(f"Beam: could not allocate a beam of width {width}.")
        # Each table is one zeroed block; the row pointers index into it.
        cdef weight_t* score_block = <weight_t*>PyMem_Calloc(width * nr_class, sizeof(weight_t))
        cdef int* valid_block = <int*>PyMem_Calloc(width * nr_class, sizeof(int))
        cdef weight_t* cost_block = <weight_t*>PyMem_Calloc(width * nr_class, sizeof(weight_t))
        if score_block == NULL or valid_block == NULL or cost_block == NULL:
            PyMem_Free(score_block)
            PyMem_Free(valid_block)
            PyMem_Free(cost_block)
            raise MemoryError(f"Beam: could not allocate ({width}, {nr_class}) score tables.")
        cdef class_t i
        for i in range(width):
            self.scores[i] = &score_block[i * nr_class]
            self.is_valid[i] = &valid_block[i * nr_class]
            self.costs[i] = &cost_block[i * nr_class]

    def __dealloc__(self):
        _release_states(self)
        if self.scores != NULL:
            PyMem_Free(self.scores[0])
            PyMem_Free(self.is_valid[0])
            PyMem_Free(self.costs[0])
        PyMem_Free(self.scores)
        PyMem_Free(self.is_valid)
        PyMem_Free(self.costs)
        PyMem_Free(self._states)
        PyMem_Free(self._parents)

    def __len__(self):
        return self.size

    @property
    def score(self):
        """The score of the best state."""
        return self._states[0].score

    @property
    def min_score(self):
        """The score of the worst live state."""
        return self._states[self.size - 1].score

    @property
    def loss(self):
        """The loss (summed costs) of the best state."""
        return self._states[0].loss

    @property
    def probs(self):
        """Softmax of the live states' scores."""
        return _softmax([self._states[i].score for i in range(self.size)])

    @property
    def scores(self):
        """The scores of the live states, best first."""
        return [self._states[i].score for i in range(self.size)]

    @property
    def histories(self):
        """For each of the `width` slots, the classes that led to its state (live: the first len(beam))."""
        return self.histories

    cdef int set_row(self, int i, const weight_t* scores, const int* is_valid,
                     const weight_t* costs) except -1:
        memcpy(self.scores[i], scores, sizeof(weight_t) * self.nr_class)
        memcpy(self.is_valid[i], is_valid, sizeof(int) * self.nr_class)
        memcpy(self.costs[i], costs, sizeof(weight_t) * self.nr_class)
        return 0

    cdef int set_table(self, weight_t** scores, int** is_valid, weight_t** costs) except -1:
        cdef class_t i
        for i in range(self.width):
            self.set_row(i, scores[i], is_valid[i], costs[i])
        return 0

    cdef int initialize(self, init_func_t init_func, del_func_t del_func, int n,
                        void* extra_args) except -1:
        # A second initialize first hands the first one's states back.
        _release_states(self)
        # Stored first, so that states made before a failing init_func are still released.
        self.del_func = del_func
        cdef class_t i
        for i in range(self.width):
            self._states[i].content = init_func(self.mem, n, extra_args)
            self._parents[i].content = init_func(self.mem, n, extra_args)
        return 0

    cdef int check_done(self, finish_func_t finish_func, void* extra_args) except -1:
        cdef class_t i
        cdef bint all_done = 1
        for i in range(self.size):
            if not self._states[i].is_done:
                self._states[i].is_done = finish_func(self._states[i].content, extra_args)
        for i in range(self.size):
            if not self._states[i].is_done:
                all_done = 0
                break
        self.is_done = all_done
        return 0

    cdef int _fill(self, void* queue, weight_t** scores, int** is_valid) except -1:
        # The extensions of the live states into `queue` (room for size * nr_class), as a heap.
        cdef _Queue* q = <_Queue*>queue
        q.n = _candidates(self, q.items, scores, is_valid)
        _heapify(q)
        return 0

    cdef int advance(self, trans_func_t transition_func, hash_func_t hash_func,
                     void* extra_args) except -1:
        cdef _Queue q
        q.n = 0
        q.items = <_Candidate*>PyMem_Malloc((self.size * self.nr_class + 1 + self.width) * sizeof(_Candidate))
        cdef hash_t* seen = <hash_t*>PyMem_Malloc(self.width * sizeof(hash_t))
        if q.items == NULL or seen == NULL:
            PyMem_Free(q.items)
            PyMem_Free(seen)
            raise MemoryError("Beam.advance: could not allocate the candidate queue.")
        try:
            _extend(self, &q, transition_func, hash_func, extra_args, seen)
        finally:
            PyMem_Free(q.items)
            PyMem_Free(seen)
        memset(self.scores[0], 0, sizeof(weight_t) * self.width * self.nr_class)
        memset(self.is_valid[0], 0, sizeof(int) * self.width * self.nr_class)
        memset(self.costs[0], 0, sizeof(weight_t) * self.width * self.nr_class)
        self.t += 1
        return 0


cdef void _release_states(Beam self) noexcept:
    # Every content that initialize made goes to del_func exactly once, errors or not.
    cdef _del_noexc_t release = <_del_noexc_t>self.del_func
    cdef class_t i
    cdef _State* arrays[2]
    cdef int k
    if release == NULL or self._states == NULL:
        return
    arrays[0] = self._states
    arrays[1] = self._parents
    for i in range(self.width):
        for k in range(2):
            if arrays[k][i].content != NULL:
                if release(self.mem, arrays[k][i].content, NULL) == -1 and PyErr_Occurred():
                    PyErr_WriteUnraisable(self)
                arrays[k][i].content = NULL



cdef int _extend(Beam self, _Queue* q, trans_func_t transition_func, hash_func_t hash_func,
             void* extra_args, hash_t* seen) except -1:
    # The k best candidates in pop order first: a beam keeps `width` of size * nr_class. Only
    # when duplicates or finished states use them up do the rest come off a heap of all of them.
    cdef _Candidate* ranked = q.items + self.size * self.nr_class + 1
    q.n = <size_t>_candidates(self, q.items, self.scores, self.is_valid)
    cdef Py_ssize_t n_ranked = _select_best(q.items, q.n, ranked, self.width) if q.n else 0
    cdef size_t taken = 0
    cdef bint heaped = n_ranked < 0
    if heaped:
        _heapify(q)
    if q.n == 0:
        # Left as it was: nothing to extend.
        raise ValueError(
            f"Beam.advance: no state can be extended at step {self.t} (no class is valid for any "
            f"live state). Mark at least one class valid, or stop once check_done says so."
        )
    # The live states become the parents; the old parents' slots take the new states.
    self._states, self._parents = self._parents, self._states
    self.histories, self._parent_histories = self._parent_histories, self.histories
    cdef class_t i = 0, p, clas
    cdef size_t n_seen = 0, k
    cdef _Candidate best
    cdef _State* parent
    cdef _State* state
    cdef _State moved
    cdef hash_t key
    cdef bint duplicate
    while i < self.width:
        if not heaped:
            if taken < <size_t>n_ranked:
                best = ranked[taken]
                taken += 1
            elif <size_t>n_ranked < q.n:
                _heapify(q)
                for k in range(taken):
                    _pop(q)
                heaped = 1
                continue
            else:
                break
        elif q.n:
            best = _pop(q)
        else:
            break
        p = best.index // self.nr_class
        clas = best.index % self.nr_class
        parent = &self._parents[p]
        if parent.is_done:
            # A finished state moves over whole; the parent slot takes the displaced one.
            moved = parent[0]
            parent[0] = self._states[i]
            self._states[i] = moved
            parent.i = moved.i
            parent.t = moved.t
            parent.is_done = moved.t
            self._states[i].score = best.value
            self.histories[i] = list(self._parent_histories[p])
            i += 1
            continue
        state = &self._states[i]
        transition_func(state.content, parent.content, clas, extra_args)
        key = hash_func(state.content, extra_args) if hash_func != NULL else 0
        duplicate = 0
        if key > 1:  # keys 0 and 1 are never deduplicated
            for k in range(n_seen):
                if seen[k] == key:
                    duplicate = 1
                    break
            if not duplicate:
                seen[n_seen] = key
                n_seen += 1
        if duplicate:
            continue
        # NOTE: is_done of the slot is left as it was, as thinc does.
        state.score = best.value
        state.loss = parent.loss + self.costs[p][clas]
        self.histories[i] = list(self._parent_histories[p])
        self.histories[i].append(clas)
        i += 1
    self.size = i
    return 0


cdef class MaxViolation:
    """The largest violation seen so far between a predicted beam and its gold beam."""

    def __init__(self):
        self.cost = 0
        self.delta = -1
        self.p_score = 0
        self.g_score = 0
        self.Z = 0
        self.gZ = 0
        self.p_hist = []
        self.g_hist = []
        self.p_probs = []
        self.g_probs = []

    cpdef int check(self, Beam pred, Beam gold) except -1:
        """Keep the best states of pred and gold if pred's is wrong and violates more than before."""
        _both_beams("check", pred, gold)
        cdef _State* p = &pred._states[0]
        cdef _State* g = &gold._states[0]
        cdef weight_t d = p.score - g.score
        cdef class_t i
        if not (p.loss >= 1 and (self.cost == 0 or d > self.delta)):
            return 0
        self.cost = p.loss
        self.delta = d
        self.p_hist = list(pred.histories[0])
        self.g_hist = list(gold.histories[0])
        self.p_score = p.score
        self.g_score = g.score
        # Normalisers of the wrong predicted states plus the gold ones, and of the gold ones.
        # NOTE: exp in float32 and sums in double, as thinc's C++ build computes them.
        self.Z = 1e-10
        self.gZ = 1e-10
        for i in range(pred.size):
            if pred._states[i].loss > 0:
                self.Z += expf(pred._states[i].score)
        for i in range(gold.size):
            if gold._states[i].loss == 0:
                self.Z += expf(gold._states[i].score)
                self.gZ += expf(gold._states[i].score)
        return 0

    cpdef int check_crf(self, Beam pred, Beam gold) except -1:
        """Record the gradients of a CRF-style beam loss if pred is wrong and violates more than before.

        p_probs are the model's probabilities of pred's wrong states; g_probs, for the correct
        ones (pred's states that reach no gold history, then gold's), the model's probability
        minus the share the gold distribution gives them.
        """
        _both_beams("check_crf", pred, gold)
        d = pred.score - gold.score
        if not (pred.loss > 0 and (self.cost == 0 or d > self.delta)):
            return 0
        gold_histories = {tuple(gold.histories[i]) for i in range(gold.size)}
        p_hist, p_scores, g_hist, g_scores = [], [], [], []
        cdef class_t i
        for i in range(pred.size):
            history = pred.histories[i]
            if pred._states[i].loss > 0:
                p_scores.append(pred._states[i].score)
                p_hist.append(list(history))
            elif pred._states[i].loss <= 0 and tuple(history) not in gold_histories:
                # A correct analysis the gold beam missed (non-monotonic moves): keep it.
                g_scores.append(pred._states[i].score)
                g_hist.append(list(history))
        for i in range(gold.size):
            if gold._states[i].loss == 0:
                g_scores.append(gold._states[i].score)
                g_hist.append(list(gold.histories[i]))
        joint = _softmax(p_scores + g_scores)
        gold_only = _softmax(g_scores)
        self.cost = pred.loss
        self.delta = d
        self.p_hist = p_hist
        self.g_hist = g_hist
        self.p_probs = joint[:len(p_scores)]
        self.g_probs = [x - y for x, y in zip(joint[len(p_scores):], gold_only)]
        return 0


cdef int _both_beams(str method, Beam pred, Beam gold) except -1:
    if pred is None or gold is None:
        raise TypeError(f"MaxViolation.{method}: pred and gold must be Beams, got {type(pred).__name__} and {type(gold).__name__}.")
    if pred._states == NULL or gold._states == NULL:
        raise ValueError(f"MaxViolation.{method}: a beam was never set up (Beam.__init__ did not run).")
    return 0


def _softmax(nums):
    """Softmax of a list of scores, max subtracted first; None entries stay None; [] -> []."""
    present = [x for x in nums if x is not None]
    if not present:
        return list(nums)
    top = max(present)
    exps = [None if x is None else exp(x - top) for x in nums]
    total = sum([e for e in exps if e is not None])
    return [None if e is None else e / total for e in exps]
