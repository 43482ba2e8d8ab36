# cython: language_level=3
"""A numpy data allocator (NEP 49) that keeps freed large buffers for the next arrays.

Why: a step of the tagger at width 512 / batch 256 allocates and frees several arrays of
35-46 MB (padded batches, the LSTM's gates and scratch, gradients). glibc maps every block
above 32 MB anew, from pages the kernel zeroes on first touch (15% of such a step in `perf`,
`clear_page_erms`), although the array is then written whole. This allocator keeps freed
blocks of at least `min_bytes` (up to `limit_bytes` in all) and gives them back to the next
request of the same size class, so those pages are written once, by the array's producer.

Every block carries a 64-byte header (its capacity, what kind of block it is, where malloc's
block starts, and a tag) in front of the data, so a free needs nothing from numpy but the
pointer. Blocks below `min_bytes` go straight to malloc/free. Blocks of at least 16 MiB
(PLAIT_MC_MAP_MIN) are anonymous mappings of their own, not part of malloc's heap, and get no
MADV_HUGEPAGE (numpy's allocator asks for it from 4 MB): with huge pages a sparsely written
`numpy.zeros` array, a padded batch, has every 2 MB of it zeroed (`perf`: a quarter of the
tagger's step), with 4 KiB pages only what is written. calloc takes a fresh block, never a kept
one. Kept blocks below 16 MiB come from malloc (a mapping each would spend the process's map
count on every live array), their data moved up to 64 bytes as a mapping's is, and go back into
the cache when freed instead of to malloc: a text CNN at width 64 frees and allocates blocks of
0.1-1 MB every step, and glibc, trimming the top of its heap and mapping such blocks anew, had
the kernel zero 20,000 fresh pages an epoch (bench/README.md). All cache operations hold one
mutex: numpy may free an array's data from any thread.
"""
from cpython.pycapsule cimport PyCapsule_New
from libc.stdint cimport uint64_t

cdef extern from *:
    """
    #define NPY_TARGET_VERSION NPY_2_0_API_VERSION
    #include <numpy/arrayobject.h>
    static PyObject *plait_mc_set_handler(PyObject *capsule) { return PyDataMem_SetHandler(capsule); }
    static PyObject *plait_mc_get_handler(void) { return PyDataMem_GetHandler(); }
    static int plait_mc_import_numpy(void) { import_array1(-1); return 0; }
    """
    object plait_mc_set_handler(object capsule)
    object plait_mc_get_handler()
    int plait_mc_import_numpy() except -1

plait_mc_import_numpy()

cdef extern from *:
    """
    #include <stdlib.h>
    #include <string.h>
    #include <stdint.h>
    #include <pthread.h>
    #if defined(__linux__)
    #include <sys/mman.h>
    #endif

    typedef struct {
        void *ctx;
        void* (*malloc) (void *ctx, size_t size);
        void* (*calloc) (void *ctx, size_t nelem, size_t elsize);
        void* (*realloc) (void *ctx, void *ptr, size_t new_size);
        void (*free) (void *ctx, void *ptr, size_t size);
    } plait_mc_allocator;

    typedef struct {
        char name[127];
        uint8_t version;
        plait_mc_allocator allocator;
    } plait_mc_handler;

    #define PLAIT_MC_HEADER 64
    #define PLAIT_MC_TAG 0x706c616974636163ULL   /* "plaitcac" */
    #define PLAIT_MC_SLOTS 128
    /* Kept blocks of at least this are mappings of their own; smaller ones come from malloc. */
    #define PLAIT_MC_MAP_MIN ((uint64_t)16 << 20)
    /* What a block is (the header's `mapped`): malloc's and never kept (below the smallest size
       kept), a mapping of its own, or malloc's and kept when freed. */
    #define PLAIT_MC_PLAIN 0
    #define PLAIT_MC_MAPPED 1
    #define PLAIT_MC_HEAP 2

    /* `origin`: what malloc returned for a PLAIT_MC_HEAP block, which starts at the next 64 bytes. */
    typedef struct { uint64_t tag; uint64_t capacity; uint64_t mapped; char *origin; } plait_mc_head;
    typedef struct { char *base; uint64_t capacity; uint64_t tick; } plait_mc_slot;

    static pthread_mutex_t plait_mc_lock = PTHREAD_MUTEX_INITIALIZER;
    static plait_mc_slot plait_mc_slots[PLAIT_MC_SLOTS];
    static int plait_mc_n = 0;
    static uint64_t plait_mc_tick = 0;
    static uint64_t plait_mc_cached = 0;     /* bytes held in the slots */
    static uint64_t plait_mc_limit = 0;      /* most bytes held; 0: keep nothing */
    static uint64_t plait_mc_min = 1u << 20; /* smallest block kept */
    static uint64_t plait_mc_stats[4];       /* hits, misses, kept, released */
    static uint64_t plait_mc_live = 0;       /* bytes of large blocks handed out and not freed */
    static uint64_t plait_mc_peak = 0;       /* the most plait_mc_live has been (since release) */

    static void plait_mc_atfork_child(void) {
        pthread_mutex_init(&plait_mc_lock, NULL);
    }

    /* The size class of a request: capacities step by an eighth of the power of two below
       them, rounded to 4 KiB, so a block serves requests up to 12.5% smaller than itself. */
    static uint64_t plait_mc_class(uint64_t size) {
        uint64_t p = 1, step, cap;
        while (p <= size / 2) p <<= 1;
        step = p >= 64 ? p / 8 : 8;
        cap = (size + step - 1) / step * step;
        return (cap + 4095) & ~(uint64_t)4095;
    }

    /* Writes the header; `mapped`: PLAIT_MC_PLAIN, PLAIT_MC_MAPPED or PLAIT_MC_HEAP. */
    static void *plait_mc_finish(char *base, uint64_t capacity, int mapped) {
        plait_mc_head *h = (plait_mc_head *)base;
        h->tag = PLAIT_MC_TAG;
        h->capacity = capacity;
        h->mapped = (uint64_t)mapped;
        return base + PLAIT_MC_HEADER;
    }

    /* Large blocks are mappings of their own (never part of malloc's heap, whose trimming
       would hand their pages back and have them zeroed again), page-rounded. */
    static uint64_t plait_mc_mapped(uint64_t capacity) {
        return (capacity + PLAIT_MC_HEADER + 4095) & ~(uint64_t)4095;
    }

    /* A new block that may be kept when freed: a mapping of its own from PLAIT_MC_MAP_MIN,
       malloc's (calloc's when `zeroed`) below, moved up to 64 bytes, as a mapping's data is:
       malloc aligns to 16, and the kernels' 64-byte loads of data that is not aligned to them
       straddle two cache lines each. *kind says which. */
    static char *plait_mc_map(uint64_t capacity, int zeroed, int *kind) {
        if (capacity < PLAIT_MC_MAP_MIN) {
            char *origin = (char *)(zeroed ? calloc(1, capacity + PLAIT_MC_HEADER + 63)
                                           : malloc(capacity + PLAIT_MC_HEADER + 63));
            char *base;
            if (!origin) return NULL;
            base = (char *)(((uintptr_t)origin + 63) & ~(uintptr_t)63);
            ((plait_mc_head *)base)->origin = origin;
            *kind = PLAIT_MC_HEAP;
            return base;
        }
        *kind = PLAIT_MC_MAPPED;
    #if defined(__linux__)
        {
            uint64_t bytes = plait_mc_mapped(capacity);
            void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) return NULL;
            return (char *)p;
        }
    #else
        return (char *)calloc(1, capacity + PLAIT_MC_HEADER);
    #endif
    }

    /* Gives a keepable block back (its header says what it is). */
    static void plait_mc_unmap(char *base, uint64_t capacity) {
    #if defined(__linux__)
        if (((plait_mc_head *)base)->mapped == PLAIT_MC_MAPPED) {
            munmap(base, plait_mc_mapped(capacity));
            return;
        }
    #endif
        (void)capacity;
        free(((plait_mc_head *)base)->mapped == PLAIT_MC_HEAP ? ((plait_mc_head *)base)->origin
                                                             : base);
    }

    /* Takes a kept block of `capacity` or up to a quarter more out of the slots: the one freed
       last, whose lines are the likeliest to be still in the caches. */
    static char *plait_mc_take(uint64_t capacity, uint64_t *got) {
        char *base = NULL;
        int i, best = -1;
        uint64_t most = capacity + capacity / 4;
        pthread_mutex_lock(&plait_mc_lock);
        for (i = 0; i < plait_mc_n; i++) {
            uint64_t c = plait_mc_slots[i].capacity;
            if (c >= capacity && c <= most
                && (best < 0 || plait_mc_slots[i].tick > plait_mc_slots[best].tick))
                best = i;
        }
        if (best >= 0) {
            base = plait_mc_slots[best].base;
            *got = plait_mc_slots[best].capacity;
            plait_mc_cached -= *got;
            plait_mc_slots[best] = plait_mc_slots[--plait_mc_n];
            plait_mc_stats[0]++;
            plait_mc_live += *got;
            if (plait_mc_live > plait_mc_peak) plait_mc_peak = plait_mc_live;
        } else {
            plait_mc_stats[1]++;
        }
        pthread_mutex_unlock(&plait_mc_lock);
        return base;
    }

    /* Takes the block kept longest out of the slots (the lock held; at least one kept). */
    static plait_mc_slot plait_mc_pop_oldest(void) {
        plait_mc_slot out;
        int i, oldest = 0;
        for (i = 1; i < plait_mc_n; i++)
            if (plait_mc_slots[i].tick < plait_mc_slots[oldest].tick) oldest = i;
        out = plait_mc_slots[oldest];
        plait_mc_cached -= out.capacity;
        plait_mc_slots[oldest] = plait_mc_slots[--plait_mc_n];
        return out;
    }

    /* Before a large block is mapped anew: kept blocks (the oldest first) are given back until
       the kept and the live ones together, this one included, are within half again the most
       the live ones have been. Without a bound, blocks of sizes that do not come back (spaCy's
       batches of varying length) were kept on top of the live data and raised the process's
       peak (a spaCy training run: 809 MB against 561 MB without the cache; 533 MB with the
       bound at the live peak itself, 584 MB at half again). The half keeps blocks for sizes
       that recur from step to step: the tagger at width 512 / batch 256 hit 30 of 64 requests
       with the bound at the peak, 46 with it at half again. */
    static void plait_mc_make_room(uint64_t capacity) {
        plait_mc_slot evict[PLAIT_MC_SLOTS];
        int n_evict = 0, i;
        uint64_t room;
        pthread_mutex_lock(&plait_mc_lock);
        plait_mc_live += capacity;
        if (plait_mc_live > plait_mc_peak) plait_mc_peak = plait_mc_live;
        room = plait_mc_peak + plait_mc_peak / 2 - plait_mc_live;
        while (plait_mc_n > 0 && plait_mc_cached > room) evict[n_evict++] = plait_mc_pop_oldest();
        plait_mc_stats[3] += n_evict;
        pthread_mutex_unlock(&plait_mc_lock);
        for (i = 0; i < n_evict; i++) plait_mc_unmap(evict[i].base, evict[i].capacity);
    }

    /* A large block handed out is no longer live (freed, or its mapping failed). */
    static void plait_mc_forget(uint64_t capacity) {
        pthread_mutex_lock(&plait_mc_lock);
        plait_mc_live = plait_mc_live >= capacity ? plait_mc_live - capacity : 0;
        pthread_mutex_unlock(&plait_mc_lock);
    }

    static void *plait_mc_malloc(void *ctx, size_t size) {
        uint64_t capacity, got = 0;
        char *base;
        int kind;
        (void)ctx;
        if (size > (SIZE_MAX >> 2)) return NULL;
        if (size < plait_mc_min || plait_mc_limit == 0) {
            base = (char *)malloc(size + PLAIT_MC_HEADER);
            return base ? plait_mc_finish(base, size, PLAIT_MC_PLAIN) : NULL;
        }
        capacity = plait_mc_class(size);
        base = plait_mc_take(capacity, &got);
        if (base) return plait_mc_finish(base, got, (int)((plait_mc_head *)base)->mapped);
        plait_mc_make_room(capacity);
        base = plait_mc_map(capacity, 0, &kind);
        if (!base) plait_mc_forget(capacity);
        return base ? plait_mc_finish(base, capacity, kind) : NULL;
    }

    static void *plait_mc_calloc(void *ctx, size_t nelem, size_t elsize) {
        size_t size;
        char *base;
        int kind;
        (void)ctx;
        if (elsize && nelem > (SIZE_MAX >> 2) / elsize) return NULL;
        size = nelem * elsize;
        if (size < plait_mc_min || plait_mc_limit == 0) {
            base = (char *)calloc(1, size + PLAIT_MC_HEADER);
            return base ? plait_mc_finish(base, size, PLAIT_MC_PLAIN) : NULL;
        }
        /* A fresh block, never a kept one: a large one's zero pages stay unbacked until written. */
        plait_mc_make_room(plait_mc_class(size));
        base = plait_mc_map(plait_mc_class(size), 1, &kind);
        if (!base) plait_mc_forget(plait_mc_class(size));
        return base ? plait_mc_finish(base, plait_mc_class(size), kind) : NULL;
    }

    /* Keeps a mapped block whose data starts at ptr, or gives it back. */
    static void plait_mc_free(void *ctx, void *ptr, size_t size) {
        char *base;
        plait_mc_slot evict[PLAIT_MC_SLOTS + 1];
        uint64_t capacity;
        int n_evict = 0, i, keep = 0;
        (void)ctx; (void)size;
        if (!ptr) return;
        base = (char *)ptr - PLAIT_MC_HEADER;
        capacity = ((plait_mc_head *)base)->capacity;
        if (((plait_mc_head *)base)->mapped == PLAIT_MC_PLAIN) {
            free(base);
            return;
        }
        pthread_mutex_lock(&plait_mc_lock);
        plait_mc_live = plait_mc_live >= capacity ? plait_mc_live - capacity : 0;
        if (capacity < plait_mc_min || capacity > plait_mc_limit) {
            pthread_mutex_unlock(&plait_mc_lock);
        } else {
            /* Oldest blocks go first until this one fits under the limit and in a slot. */
            while (plait_mc_n > 0 && (plait_mc_cached + capacity > plait_mc_limit
                                      || plait_mc_n == PLAIT_MC_SLOTS))
                evict[n_evict++] = plait_mc_pop_oldest();
            if (plait_mc_cached + capacity <= plait_mc_limit) {
                plait_mc_slots[plait_mc_n].base = base;
                plait_mc_slots[plait_mc_n].capacity = capacity;
                plait_mc_slots[plait_mc_n].tick = ++plait_mc_tick;
                plait_mc_n++;
                plait_mc_cached += capacity;
                plait_mc_stats[2]++;
                keep = 1;
            }
            plait_mc_stats[3] += n_evict;
            pthread_mutex_unlock(&plait_mc_lock);
            for (i = 0; i < n_evict; i++) plait_mc_unmap(evict[i].base, evict[i].capacity);
        }
        if (!keep) plait_mc_unmap(base, capacity);
    }

    static void *plait_mc_realloc(void *ctx, void *ptr, size_t new_size) {
        char *base, *grown;
        uint64_t capacity;
        void *fresh;
        if (!ptr) return plait_mc_malloc(ctx, new_size);
        if (new_size > (SIZE_MAX >> 2)) return NULL;
        base = (char *)ptr - PLAIT_MC_HEADER;
        capacity = ((plait_mc_head *)base)->capacity;
        if (((plait_mc_head *)base)->mapped == PLAIT_MC_PLAIN) {
            if (new_size < plait_mc_min || plait_mc_limit == 0) {
                grown = (char *)realloc(base, new_size + PLAIT_MC_HEADER);
                return grown ? plait_mc_finish(grown, new_size, PLAIT_MC_PLAIN) : NULL;
            }
        } else if (new_size <= capacity && new_size >= capacity / 2) {
            return ptr;
        }
        fresh = plait_mc_malloc(ctx, new_size);
        if (!fresh) return NULL;
        memcpy(fresh, ptr, capacity < new_size ? capacity : new_size);
        plait_mc_free(ctx, ptr, capacity);
        return fresh;
    }

    static plait_mc_handler plait_mc_the_handler = {
        "plait_block_cache", 1,
        {NULL, plait_mc_malloc, plait_mc_calloc, plait_mc_realloc, plait_mc_free}
    };

    static int plait_mc_atfork_done = 0;

    static void plait_mc_configure(uint64_t limit, uint64_t min_bytes) {
        plait_mc_slot evict[PLAIT_MC_SLOTS];
        int n_evict = 0, i;
        pthread_mutex_lock(&plait_mc_lock);
        if (!plait_mc_atfork_done) {
            pthread_atfork(NULL, NULL, plait_mc_atfork_child);
            plait_mc_atfork_done = 1;
        }
        plait_mc_limit = limit;
        plait_mc_min = min_bytes;
        /* Blocks kept under the old settings that the new ones would not keep are released. */
        for (i = 0; i < plait_mc_n; ) {
            if (plait_mc_slots[i].capacity < min_bytes || plait_mc_cached > limit) {
                evict[n_evict++] = plait_mc_slots[i];
                plait_mc_cached -= plait_mc_slots[i].capacity;
                plait_mc_slots[i] = plait_mc_slots[--plait_mc_n];
            } else {
                i++;
            }
        }
        plait_mc_stats[3] += n_evict;
        pthread_mutex_unlock(&plait_mc_lock);
        for (i = 0; i < n_evict; i++) plait_mc_unmap(evict[i].base, evict[i].capacity);
    }

    static uint64_t plait_mc_release(void) {
        plait_mc_slot evict[PLAIT_MC_SLOTS];
        int n_evict, i;
        uint64_t freed;
        pthread_mutex_lock(&plait_mc_lock);
        n_evict = plait_mc_n;
        freed = plait_mc_cached;
        for (i = 0; i < n_evict; i++) evict[i] = plait_mc_slots[i];
        plait_mc_n = 0;
        plait_mc_cached = 0;
        plait_mc_peak = plait_mc_live;
        plait_mc_stats[3] += n_evict;
        pthread_mutex_unlock(&plait_mc_lock);
        for (i = 0; i < n_evict; i++) plait_mc_unmap(evict[i].base, evict[i].capacity);
        return freed;
    }

    static void plait_mc_read_stats(uint64_t *out) {
        pthread_mutex_lock(&plait_mc_lock);
        out[0] = plait_mc_stats[0]; out[1] = plait_mc_stats[1];
        out[2] = plait_mc_stats[2]; out[3] = plait_mc_stats[3];
        out[4] = plait_mc_cached; out[5] = (uint64_t)plait_mc_n;
        out[6] = plait_mc_limit; out[7] = plait_mc_min;
        out[8] = plait_mc_live; out[9] = plait_mc_peak;
        pthread_mutex_unlock(&plait_mc_lock);
    }

    static void *plait_mc_handler_address(void) { return &plait_mc_the_handler; }
    static uint64_t plait_mc_size_class(uint64_t size) { return plait_mc_class(size); }
    """
    void plait_mc_configure(uint64_t limit, uint64_t min_bytes) nogil
    uint64_t plait_mc_release() nogil
    void plait_mc_read_stats(uint64_t* out) nogil
    void* plait_mc_handler_address() nogil
    uint64_t plait_mc_size_class(uint64_t size) nogil
    int PLAIT_MC_SLOTS
    int PLAIT_MC_HEADER

#: The capsule numpy.core.multiarray's handler API takes (name "mem_handler", as NEP 49 asks).
handler = PyCapsule_New(plait_mc_handler_address(), b"mem_handler", NULL)
SLOTS = PLAIT_MC_SLOTS
HEADER = PLAIT_MC_HEADER


def set_handler(capsule):
    """Make `capsule` numpy's data allocator in the current context; returns the one it replaces."""
    return plait_mc_set_handler(capsule)


def get_handler():
    """numpy's data allocator in the current context (a capsule)."""
    return plait_mc_get_handler()


def configure(uint64_t limit_bytes, uint64_t min_bytes):
    """Keep freed blocks of at least min_bytes, up to limit_bytes in all (0: keep none).
    Blocks already kept that the new settings would not keep are freed."""
    if min_bytes < 4096:
        raise ValueError(f"memcache.configure: min_bytes must be at least 4096, got {min_bytes}")
    plait_mc_configure(limit_bytes, min_bytes)


def release() -> int:
    """Free every kept block now; returns the bytes given back. The most the live blocks have
    been, which bounds what is kept, starts again from what is live now."""
    return plait_mc_release()


def stats() -> dict:
    """Counters since the process started: hits, misses (large requests served fresh), kept,
    released, and the bytes and blocks held now, the limit and the smallest size kept, the bytes
    of large blocks in use and the most they have been since the last release()."""
    cdef uint64_t out[10]
    plait_mc_read_stats(out)
    return dict(hits=out[0], misses=out[1], kept=out[2], released=out[3], cached_bytes=out[4],
                cached_blocks=out[5], limit_bytes=out[6], min_bytes=out[7], live_bytes=out[8],
                peak_live_bytes=out[9])


def size_class(uint64_t size) -> int:
    """The capacity a large request of `size` bytes is given (for tests)."""
    return plait_mc_size_class(size)
