/* Compiled kernels for the report's hot loops and the recorder's drain (issue 28): the
 * optional C extension profiler.native.compiled (walk_records, at the end, is the recorder's). profiler/report/tally_native.py is its Python side; the numpy
 * code of profiler/report/tally.py is the reference it must match (tests/unit/report/
 * test_tally_native.py compares them) and the fallback when this module is absent.
 *
 * tally_chunk: one chunk of a capture's record frames walked record by record, every sample
 * decoded (every PERF_SAMPLE_* layout: the fields are described by the caller, in
 * records.SAMPLE_FIELDS order), filtered by --cpu and --time, placed among the replayed
 * records (map generation, comm) and counted into distinct rows, with its callchains
 * deduplicated. A capture is untrusted input: every read is checked against the buffer and
 * against its record, as profiler/format/decode/samples.py checks them.
 *
 * Arrays come through the buffer protocol (no numpy headers); results go back as bytes
 * objects that the caller views with numpy.frombuffer. Native byte order only: the caller
 * uses the numpy path for a capture of the other order.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Field kinds of a layout description (tally_native.field_codes must agree). */
enum { K_WORD = 0, K_READ = 1, K_CALLCHAIN = 2, K_RAW = 3, K_BRANCH = 4, K_REGS = 5, K_STACK = 6, K_AUX = 7 };
/* The one-word fields a row is made of. */
enum { C_NONE = 0, C_IP = 1, C_TID = 2, C_TIME = 3, C_CPU = 4, C_PERIOD = 5, C_NCORE = 6 };

#define PERF_RECORD_SAMPLE 9
#define FMT_TOTAL_TIME_ENABLED 1
#define FMT_TOTAL_TIME_RUNNING 2
#define FMT_ID 4
#define FMT_GROUP 8
#define FMT_LOST 16
#define MAX_GROUP 0x10000
#define NCOLS 13

typedef struct {
    int64_t event, pid, tid, cpu, comm, gen, misc, chain;
    uint64_t ip;
} Key;

typedef struct {
    Key key;
    int64_t count;
    uint64_t period, last_time;
    int64_t last_seq;
} Row;

typedef struct {
    int64_t first, nr; /* words of the buffer */
} Chain;

typedef struct {
    const uint64_t *w;
    int64_t nwords;
    /* per event: fields [fstart[e], fstart[e + 1]) of (kind, arg, core) triples */
    const int64_t *fields;
    const int64_t *fstart;
    int64_t nevents;
    /* rows */
    Row *rows;
    int64_t nrows, cap_rows;
    int64_t *row_slots;
    int64_t nslots;
    /* chains */
    Chain *chains;
    int64_t nchains, cap_chains;
    int64_t *chain_slots;
    int64_t nchain_slots;
} State;

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static uint64_t key_hash(const Key *k) {
    /* independent products (no chain of dependent multiplies), then one mix */
    uint64_t h = (uint64_t)k->event * 0x9E3779B97F4A7C15ULL + (uint64_t)k->pid * 0xC2B2AE3D27D4EB4FULL +
                 (uint64_t)k->tid * 0x165667B19E3779F9ULL + (uint64_t)k->cpu * 0xD6E8FEB86659FD93ULL +
                 (uint64_t)k->comm * 0xFF51AFD7ED558CCDULL + (uint64_t)k->gen * 0xC4CEB9FE1A85EC53ULL +
                 (uint64_t)k->misc * 0x94D049BB133111EBULL + (uint64_t)k->chain * 0xBF58476D1CE4E5B9ULL +
                 k->ip * 0x2545F4914F6CDD1DULL;
    return mix64(h);
}

static int key_equal(const Key *a, const Key *b) {
    return a->event == b->event && a->pid == b->pid && a->tid == b->tid && a->cpu == b->cpu &&
           a->comm == b->comm && a->gen == b->gen && a->misc == b->misc && a->chain == b->chain &&
           a->ip == b->ip;
}

static int grow_slots(int64_t **slots, int64_t *nslots, int64_t used, uint64_t (*hash_of)(State *, int64_t),
                      State *st) {
    if ((used + 1) * 2 <= *nslots)
        return 0;
    int64_t n = *nslots ? *nslots * 2 : 1024;
    while ((used + 1) * 2 > n)
        n *= 2;
    int64_t *fresh = malloc((size_t)n * sizeof(int64_t));
    if (!fresh)
        return -1;
    memset(fresh, 0xff, (size_t)n * sizeof(int64_t));
    for (int64_t i = 0; i < used; i++) {
        uint64_t h = hash_of(st, i) & (uint64_t)(n - 1);
        while (fresh[h] >= 0)
            h = (h + 1) & (uint64_t)(n - 1);
        fresh[h] = i;
    }
    free(*slots);
    *slots = fresh;
    *nslots = n;
    return 0;
}

static uint64_t row_hash_at(State *st, int64_t i) { return key_hash(&st->rows[i].key); }

static uint64_t chain_hash(const uint64_t *w, int64_t first, int64_t nr) {
    /* sum of word * an odd multiplier per position (independent products), then one mix */
    uint64_t h = (uint64_t)nr * 0x9E3779B97F4A7C15ULL, k = 0xC2B2AE3D27D4EB4FULL;
    const uint64_t *p = w + first;
    for (int64_t i = 0; i < nr; i++, k += 0x9E3779B97F4A7C16ULL)
        h += p[i] * k;
    return mix64(h);
}

static uint64_t chain_hash_at(State *st, int64_t i) {
    return chain_hash(st->w, st->chains[i].first, st->chains[i].nr);
}

/* The local id (from 1) of the chain at words [first, first + nr): 0 for an empty one. */
static int64_t chain_id(State *st, int64_t first, int64_t nr) {
    if (nr == 0)
        return 0;
    if (grow_slots(&st->chain_slots, &st->nchain_slots, st->nchains, chain_hash_at, st) < 0)
        return -1;
    uint64_t mask = (uint64_t)(st->nchain_slots - 1);
    uint64_t h = chain_hash(st->w, first, nr) & mask;
    for (;;) {
        int64_t at = st->chain_slots[h];
        if (at < 0)
            break;
        Chain *c = &st->chains[at];
        if (c->nr == nr && memcmp(st->w + c->first, st->w + first, (size_t)nr * 8) == 0)
            return at + 1;
        h = (h + 1) & mask;
    }
    if (st->nchains == st->cap_chains) {
        int64_t cap = st->cap_chains ? st->cap_chains * 2 : 256;
        Chain *fresh = realloc(st->chains, (size_t)cap * sizeof(Chain));
        if (!fresh)
            return -1;
        st->chains = fresh;
        st->cap_chains = cap;
    }
    st->chains[st->nchains].first = first;
    st->chains[st->nchains].nr = nr;
    st->chain_slots[h] = st->nchains;
    return ++st->nchains;
}

static int add_row(State *st, const Key *key, uint64_t period, uint64_t time, int64_t seq) {
    if (grow_slots(&st->row_slots, &st->nslots, st->nrows, row_hash_at, st) < 0)
        return -1;
    uint64_t mask = (uint64_t)(st->nslots - 1);
    uint64_t h = key_hash(key) & mask;
    for (;;) {
        int64_t at = st->row_slots[h];
        if (at < 0)
            break;
        Row *r = &st->rows[at];
        if (key_equal(&r->key, key)) {
            r->count += 1;
            r->period += period;
            if (time > r->last_time || (time == r->last_time && seq > r->last_seq)) {
                r->last_time = time;
                r->last_seq = seq;
            }
            return 0;
        }
        h = (h + 1) & mask;
    }
    if (st->nrows == st->cap_rows) {
        int64_t cap = st->cap_rows ? st->cap_rows * 2 : 1024;
        Row *fresh = realloc(st->rows, (size_t)cap * sizeof(Row));
        if (!fresh)
            return -1;
        st->rows = fresh;
        st->cap_rows = cap;
    }
    Row *r = &st->rows[st->nrows];
    r->key = *key;
    r->count = 1;
    r->period = period;
    r->last_time = time;
    r->last_seq = seq;
    st->row_slots[h] = st->nrows++;
    return 0;
}

static int popcount64(uint64_t v) { return __builtin_popcountll(v); }

/* One decoded sample: what a row needs. */
typedef struct {
    int64_t word[C_NCORE]; /* word index of each core field, -1 when absent */
    int64_t chain_first, chain_nr;
    int has_chain;
} Walked;

/* Walks sample fields of event ``ev`` in the record at words [base, end): 1 when every field
 * fits the record (samples.py's _Walk: the same bounds), 0 for a damaged sample. */
static int walk_sample(const State *st, int64_t ev, int64_t base, int64_t end, Walked *out) {
    const uint64_t *w = st->w;
    int64_t cur = base + 1;
    for (int c = 0; c < C_NCORE; c++)
        out->word[c] = -1;
    out->has_chain = 0;
    out->chain_first = out->chain_nr = 0;
    for (int64_t f = st->fstart[ev]; f < st->fstart[ev + 1]; f++) {
        int64_t kind = st->fields[3 * f], arg = st->fields[3 * f + 1], core = st->fields[3 * f + 2];
        int64_t room = end - cur - 1;
        switch (kind) {
        case K_WORD:
            if (core > 0 && core < C_NCORE)
                out->word[core] = cur;
            cur += 1;
            break;
        case K_READ: {
            int64_t times = popcount64((uint64_t)arg & (FMT_TOTAL_TIME_ENABLED | FMT_TOTAL_TIME_RUNNING));
            int64_t per = 1 + !!(arg & FMT_ID) + !!(arg & FMT_LOST);
            if (!(arg & FMT_GROUP)) {
                cur += times + per;
                break;
            }
            if (cur >= end || room < 0)
                return 0;
            int64_t limit = room / per;
            if (limit > MAX_GROUP)
                limit = MAX_GROUP;
            uint64_t nr = w[cur];
            if (nr > (uint64_t)limit)
                return 0;
            cur += 1 + times + (int64_t)nr * per;
            break;
        }
        case K_CALLCHAIN: {
            if (cur >= end || room < 0)
                return 0;
            uint64_t nr = w[cur];
            if (nr > (uint64_t)room)
                return 0;
            out->has_chain = 1;
            out->chain_first = cur + 1;
            out->chain_nr = (int64_t)nr;
            cur += 1 + (int64_t)nr;
            break;
        }
        case K_RAW: {
            if (cur >= end || room < 0)
                return 0;
            uint32_t size;
            memcpy(&size, (const char *)(w + cur), 4); /* the u32 at the field's first byte */
            if ((uint64_t)size > (uint64_t)(room * 8 + 4))
                return 0;
            cur += ((int64_t)size + 4 + 7) / 8;
            break;
        }
        case K_BRANCH: {
            if (cur >= end)
                return 0;
            int64_t r = room - arg;
            if (r < 0)
                return 0;
            uint64_t nr = w[cur];
            if (nr > (uint64_t)(r / 3))
                return 0;
            cur += 1 + arg + 3 * (int64_t)nr;
            break;
        }
        case K_REGS:
            if (cur >= end)
                return 0;
            cur += 1 + (w[cur] != 0 ? arg : 0);
            break;
        case K_STACK:
        case K_AUX: {
            if (cur >= end || room < 0)
                return 0;
            uint64_t n = w[cur];
            if (n > (uint64_t)room * 8)
                return 0;
            cur += 1 + ((int64_t)n + 7) / 8 + (kind == K_STACK && n != 0);
            break;
        }
        default:
            return 0;
        }
        if (cur > end)
            return 0;
    }
    return 1;
}

/* Index of the last entry of sorted (a, b) pairs with (a, b) <= (x, y); -1 if none. */
static int64_t last_le_i64(const int64_t *a, const int64_t *b, int64_t n, int64_t x, int64_t y) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x || (a[mid] == x && b[mid] <= y))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

/* Number of replayed records with (time, seq) < (t, s). */
static int64_t position(const uint64_t *ot, const int64_t *os, int64_t n, uint64_t t, int64_t s) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ot[mid] < t || (ot[mid] == t && os[mid] < s))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The value of entity's latest change at or before pos ((entity, boundary, value) sorted by
 * entity, boundary and log order); ``fallback`` when there is none. */
static int64_t lookup(const int64_t *log, int64_t n, int64_t entity, int64_t pos, int64_t fallback,
                      const int64_t *ent, const int64_t *bound) {
    int64_t at = last_le_i64(ent, bound, n, entity, pos);
    if (at >= 0 && ent[at] == entity)
        return log[at];
    return fallback;
}

typedef struct {
    Py_buffer b;
    int held;
} Buf;

static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* The stack field at ``q`` of a FLAG_STACKS frame's second part (``len`` bytes): where its
 * data starts, its size and dyn_size (0 without data); where the next one starts, or -1 when
 * it is not a whole field (splitstacks.field_spans_python is the reference). */
static int64_t next_field(const uint8_t *f, int64_t len, int64_t q, int64_t *data, uint64_t *size, uint64_t *dyn) {
    uint64_t sz = load64(f + q);
    if (sz % 8 || sz > (uint64_t)len)
        return -1;
    int64_t length = sz ? 16 + (int64_t)sz : 8;
    if (q + length > len)
        return -1;
    *data = q + 8, *size = sz, *dyn = sz ? load64(f + q + 8 + sz) : 0;
    return q + length;
}

/* The record at ``pos`` of ``end`` bytes of whole native-order kernel records: its type, and
 * where the next one starts; -1 when its header does not fit (or, ``strict``, its size is not
 * a multiple of 8). */
static int64_t next_record(const uint8_t *buf, int64_t end, int64_t pos, int strict, uint32_t *type) {
    uint16_t size;
    if (pos + 8 > end)
        return -1;
    memcpy(type, buf + pos, 4);
    memcpy(&size, buf + pos + 6, 2);
    if (size < 8 || pos + size > end || (strict && size & 7))
        return -1;
    return pos + size;
}

static int get_buf(PyObject *o, Buf *out, Py_ssize_t item, const char *what) {
    if (PyObject_GetBuffer(o, &out->b, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    out->held = 1;
    if (item > 1 && out->b.len % item) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a whole number of %zd-byte items", what, out->b.len,
                     item);
        return -1;
    }
    return 0;
}

static void release(Buf *bufs, int n) {
    for (int i = 0; i < n; i++)
        if (bufs[i].held)
            PyBuffer_Release(&bufs[i].b);
}

enum {
    B_VIEW, B_FSTART, B_FLEN, B_FCPU, B_FIELDS, B_FIELDSTART, B_IDS, B_IDEV, B_CPUS, B_TIMES, B_OTIME, B_OSEQ,
    B_GEN, B_COMM, B_N
};

static PyObject *tally_chunk(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[B_N];
    long long seq0, id_word, default_event, callchains, cpu_limit, keep_cpu;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOLLLLLL", &objs[B_VIEW], &objs[B_FSTART], &objs[B_FLEN],
                          &objs[B_FCPU], &objs[B_FIELDS], &objs[B_FIELDSTART], &objs[B_IDS], &objs[B_IDEV],
                          &objs[B_CPUS], &objs[B_TIMES], &objs[B_OTIME], &objs[B_OSEQ], &objs[B_GEN],
                          &objs[B_COMM], &seq0, &id_word, &default_event, &callchains, &cpu_limit, &keep_cpu))
        return NULL;
    static const Py_ssize_t items[B_N] = {1, 8, 8, 8, 8, 8, 8, 8, 8, 16, 8, 8, 24, 24};
    static const char *names[B_N] = {"view", "frame starts", "frame lengths", "frame cpus", "fields",
                                     "field starts", "ids", "id events", "cpus", "time ranges",
                                     "other times", "other seqs", "gen log", "comm log"};
    Buf bufs[B_N];
    memset(bufs, 0, sizeof(bufs));
    for (int i = 0; i < B_N; i++)
        if (get_buf(objs[i], &bufs[i], items[i], names[i]) < 0) {
            release(bufs, B_N);
            return NULL;
        }
    State st;
    memset(&st, 0, sizeof(st));
    st.w = (const uint64_t *)bufs[B_VIEW].b.buf;
    st.nwords = bufs[B_VIEW].b.len / 8;
    st.fields = (const int64_t *)bufs[B_FIELDS].b.buf;
    st.fstart = (const int64_t *)bufs[B_FIELDSTART].b.buf;
    st.nevents = bufs[B_FIELDSTART].b.len / 8 - 1;
    const int64_t *fstart = (const int64_t *)bufs[B_FSTART].b.buf;
    const int64_t *flen = (const int64_t *)bufs[B_FLEN].b.buf;
    const int64_t *fcpu = (const int64_t *)bufs[B_FCPU].b.buf;
    int64_t nframes = bufs[B_FSTART].b.len / 8;
    const uint64_t *ids = (const uint64_t *)bufs[B_IDS].b.buf;
    const int64_t *id_ev = (const int64_t *)bufs[B_IDEV].b.buf;
    int64_t nids = bufs[B_IDS].b.len / 8;
    const int64_t *cpus = (const int64_t *)bufs[B_CPUS].b.buf;
    int64_t ncpus = bufs[B_CPUS].b.len / 8;
    const uint64_t *times = (const uint64_t *)bufs[B_TIMES].b.buf;
    int64_t ntimes = bufs[B_TIMES].b.len / 16;
    const uint64_t *otime = (const uint64_t *)bufs[B_OTIME].b.buf;
    const int64_t *oseq = (const int64_t *)bufs[B_OSEQ].b.buf;
    int64_t nothers = bufs[B_OTIME].b.len / 8;
    /* logs: three columns (entity, boundary, value), each n long */
    int64_t ngen = bufs[B_GEN].b.len / 24, ncomm = bufs[B_COMM].b.len / 24;
    const int64_t *gen_e = (const int64_t *)bufs[B_GEN].b.buf, *gen_b = gen_e + ngen, *gen_v = gen_b + ngen;
    const int64_t *comm_e = (const int64_t *)bufs[B_COMM].b.buf, *comm_b = comm_e + ncomm,
                  *comm_v = comm_b + ncomm;

    PyObject *result = NULL;
    int64_t *recorded = NULL, *present = NULL;
    const char *bad = NULL;
    if (st.nevents < 1 || bufs[B_FLEN].b.len != bufs[B_FSTART].b.len || bufs[B_FCPU].b.len != bufs[B_FSTART].b.len ||
        bufs[B_IDEV].b.len != bufs[B_IDS].b.len || bufs[B_OSEQ].b.len != bufs[B_OTIME].b.len ||
        default_event < 0 || default_event >= st.nevents)
        bad = "inconsistent arguments";
    for (int64_t e = 0; !bad && e < st.nevents; e++)
        if (st.fstart[e] < 0 || st.fstart[e] > st.fstart[e + 1] || st.fstart[e + 1] * 3 * 8 > bufs[B_FIELDS].b.len)
            bad = "inconsistent field starts";
    for (int64_t i = 0; !bad && i < nids; i++)
        if (id_ev[i] < 0 || id_ev[i] >= st.nevents)
            bad = "inconsistent id events";
    if (bad) {
        PyErr_SetString(PyExc_ValueError, bad);
        release(bufs, B_N);
        return NULL;
    }
    recorded = calloc((size_t)st.nevents, sizeof(int64_t));
    present = calloc((size_t)st.nevents, sizeof(int64_t));
    if (!recorded || !present) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t damaged = 0, seq = seq0;
    uint64_t first_time = 0;
    int any_sample = 0;
    int cpu_known = 0, unsupported = 0;
    int64_t last_at = -1, last_pid = 0, last_tid = 0, last_gen = 0, last_comm = 0;
    unsigned __int128 total = 0;
    int oom = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t fi = 0; fi < nframes && !oom && !unsupported; fi++) {
        int64_t start = fstart[fi], len = flen[fi];
        if (start < 0 || len < 0 || start % 8 || start > st.nwords * 8 || len > st.nwords * 8 - start) {
            unsupported = 1;
            break;
        }
        int64_t whole = len - len % 8, pos = 0;
        while (pos + 8 <= whole) {
            int64_t base = (start + pos) / 8;
            uint64_t head = st.w[base];
            int64_t size = (int64_t)(head >> 48);
            if (size < 8 || size & 7 || pos + size > whole)
                break;
            pos += size;
            int64_t rseq = seq++;
            if ((uint32_t)head != PERF_RECORD_SAMPLE)
                continue;
            int64_t ev = default_event;
            if (id_word >= 0) {
                /* a record too short to hold its id (damaged: it fails its walk) is event 0's,
                 * as samples.py reads it */
                uint64_t ident = base + id_word < base + size / 8 ? st.w[base + id_word] : 0;
                int64_t lo = 0, hi = nids; /* ids sorted */
                while (lo < hi) {
                    int64_t mid = lo + (hi - lo) / 2;
                    if (ids[mid] < ident)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                ev = (base + id_word < base + size / 8 && lo < nids && ids[lo] == ident) ? id_ev[lo] : 0;
            }
            present[ev]++;
            Walked wk;
            int64_t end = base + size / 8;
            if (!walk_sample(&st, ev, base, end, &wk)) {
                damaged++;
                continue;
            }
            uint64_t ip = wk.word[C_IP] >= 0 ? st.w[wk.word[C_IP]] : 0;
            uint64_t time = wk.word[C_TIME] >= 0 ? st.w[wk.word[C_TIME]] : 0;
            uint64_t period = wk.word[C_PERIOD] >= 0 ? st.w[wk.word[C_PERIOD]] : 1;
            int64_t pid = 0, tid = 0, cpu;
            if (wk.word[C_TID] >= 0) {
                uint64_t v = st.w[wk.word[C_TID]];
                pid = (int32_t)(uint32_t)v;
                tid = (int32_t)(uint32_t)(v >> 32);
            }
            if (wk.word[C_CPU] >= 0) {
                cpu = (int32_t)(uint32_t)st.w[wk.word[C_CPU]];
            } else if (fcpu[fi] < cpu_limit) {
                cpu = fcpu[fi];
                cpu_known = 1;
            } else {
                cpu = -1;
            }
            recorded[ev]++;
            total += period;
            if (!any_sample || time < first_time)
                first_time = time;
            any_sample = 1;
            /* --cpu, --time */
            if (ncpus) {
                int in = 0;
                for (int64_t k = 0; k < ncpus && !in; k++)
                    in = cpus[k] == cpu;
                if (!in)
                    continue;
            }
            if (ntimes) {
                int in = 0;
                for (int64_t k = 0; k < ntimes && !in; k++)
                    in = time >= times[2 * k] && time <= times[2 * k + 1];
                if (!in)
                    continue;
            }
            /* the last sample's position still holds when no replayed record lies between
             * them (the usual case: records are few); else a binary search */
            int64_t at = last_at;
            if (!(at >= 0 && (at == 0 || otime[at - 1] < time || (otime[at - 1] == time && oseq[at - 1] < rseq)) &&
                  (at == nothers || otime[at] > time || (otime[at] == time && oseq[at] >= rseq))))
                at = position(otime, oseq, nothers, time, rseq);
            Key key;
            key.event = ev;
            key.pid = pid;
            key.tid = tid;
            key.cpu = keep_cpu ? cpu : 0;
            if (at == last_at && pid == last_pid && tid == last_tid) { /* same thread, same records before it */
                key.gen = last_gen;
                key.comm = last_comm;
            } else {
                key.gen = lookup(gen_v, ngen, pid, at, 0, gen_e, gen_b);
                key.comm = lookup(comm_v, ncomm, tid, at, -1, comm_e, comm_b);
                if (key.comm < 0)
                    key.comm = lookup(comm_v, ncomm, pid, at, -1, comm_e, comm_b);
                last_at = at;
                last_pid = pid;
                last_tid = tid;
                last_gen = key.gen;
                last_comm = key.comm;
            }
            key.misc = (int64_t)((head >> 32) & 0xffff);
            key.chain = 0;
            if (callchains && wk.has_chain) {
                key.chain = chain_id(&st, wk.chain_first, wk.chain_nr);
                if (key.chain < 0) {
                    oom = 1;
                    break;
                }
            }
            key.ip = key.chain == 0 ? ip : 0;
            if (add_row(&st, &key, period, time, rseq) < 0) {
                oom = 1;
                break;
            }
        }
        if (unsupported)
            break;
    }
    Py_END_ALLOW_THREADS
    if (oom) {
        PyErr_NoMemory();
        goto done;
    }
    if (unsupported == 1) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    {
        int64_t n = st.nrows;
        PyObject *rows = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n * NCOLS * 8));
        PyObject *cstart = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)((st.nchains + 2) * 8));
        int64_t nwords_out = 0;
        for (int64_t c = 0; c < st.nchains; c++)
            nwords_out += st.chains[c].nr;
        PyObject *cwords = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(nwords_out * 8));
        PyObject *rec = PyBytes_FromStringAndSize((const char *)recorded, (Py_ssize_t)(st.nevents * 8));
        PyObject *pres = PyBytes_FromStringAndSize((const char *)present, (Py_ssize_t)(st.nevents * 8));
        int ok = rows && cstart && cwords && rec && pres;
        if (ok) {
            int64_t *col = (int64_t *)PyByteArray_AS_STRING(rows);
            for (int64_t i = 0; i < n; i++) {
                const Row *r = &st.rows[i];
                col[0 * n + i] = r->key.event;
                col[1 * n + i] = r->key.pid;
                col[2 * n + i] = r->key.tid;
                col[3 * n + i] = r->key.cpu;
                col[4 * n + i] = r->key.comm;
                col[5 * n + i] = r->key.gen;
                col[6 * n + i] = r->key.misc;
                col[7 * n + i] = r->key.chain;
                col[8 * n + i] = (int64_t)r->key.ip;
                col[9 * n + i] = r->count;
                col[10 * n + i] = (int64_t)r->period;
                col[11 * n + i] = (int64_t)r->last_time;
                col[12 * n + i] = r->last_seq;
            }
            int64_t *cs = (int64_t *)PyByteArray_AS_STRING(cstart);
            uint64_t *cw = (uint64_t *)PyByteArray_AS_STRING(cwords);
            cs[0] = cs[1] = 0; /* chain 0: the empty chain */
            int64_t k = 0;
            for (int64_t c = 0; c < st.nchains; c++) {
                memcpy(cw + k, st.w + st.chains[c].first, (size_t)st.chains[c].nr * 8);
                k += st.chains[c].nr;
                cs[c + 2] = k;
            }
        }
        if (ok)
            result = Py_BuildValue("(NNNNNLiKiKK)", rows, cstart, cwords, rec, pres, (long long)damaged, any_sample,
                                   (unsigned long long)first_time, cpu_known, (unsigned long long)(total >> 64),
                                   (unsigned long long)total);
        else {
            Py_XDECREF(rows);
            Py_XDECREF(cstart);
            Py_XDECREF(cwords);
            Py_XDECREF(rec);
            Py_XDECREF(pres);
        }
    }
done:
    free(recorded);
    free(present);
    free(st.rows);
    free(st.row_slots);
    free(st.chains);
    free(st.chain_slots);
    release(bufs, B_N);
    return result;
}

/* scan_chunk(view, frame_start, frame_len, time_word) -> (stops, samples, others, types, times)
 * The first pass over a chunk: every frame's records walked (stops: where each frame's good
 * part ends; samples: its sample records), the non-sample records as (file offset, number in
 * the chunk's file order, frame) triples (others),
 * the records counted by type (256 counts, the last one every type >= 255) and the earliest
 * and latest sample time at word ``time_word`` (-1: none) as (any, min, max). */
static PyObject *scan_chunk(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ov, *os_, *ol;
    long long time_word;
    if (!PyArg_ParseTuple(args, "OOOL", &ov, &os_, &ol, &time_word))
        return NULL;
    Buf bufs[3];
    memset(bufs, 0, sizeof(bufs));
    if (get_buf(ov, &bufs[0], 1, "view") < 0 || get_buf(os_, &bufs[1], 8, "frame starts") < 0 ||
        get_buf(ol, &bufs[2], 8, "frame lengths") < 0) {
        release(bufs, 3);
        return NULL;
    }
    const uint64_t *w = (const uint64_t *)bufs[0].b.buf;
    int64_t nwords = bufs[0].b.len / 8;
    const int64_t *fstart = (const int64_t *)bufs[1].b.buf, *flen = (const int64_t *)bufs[2].b.buf;
    int64_t nframes = bufs[1].b.len / 8;
    if (bufs[2].b.len != bufs[1].b.len) {
        PyErr_SetString(PyExc_ValueError, "inconsistent arguments");
        release(bufs, 3);
        return NULL;
    }
    PyObject *stops = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(nframes * 8));
    PyObject *samples = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(nframes * 8));
    PyObject *types = PyByteArray_FromStringAndSize(NULL, 256 * 8);
    int64_t *others = NULL, nothers = 0, cap = 0, seq = 0;
    int bad = 0, any = 0;
    uint64_t tmin = 0, tmax = 0;
    if (!stops || !samples || !types)
        goto fail;
    int64_t *st = (int64_t *)PyByteArray_AS_STRING(stops), *ns = (int64_t *)PyByteArray_AS_STRING(samples);
    int64_t *ty = (int64_t *)PyByteArray_AS_STRING(types);
    memset(ty, 0, 256 * 8);
    Py_BEGIN_ALLOW_THREADS
    for (int64_t fi = 0; fi < nframes && !bad; fi++) {
        int64_t start = fstart[fi], len = flen[fi];
        if (start < 0 || len < 0 || start % 8 || start > nwords * 8 || len > nwords * 8 - start) {
            bad = 1;
            break;
        }
        int64_t whole = len - len % 8, pos = 0, n = 0;
        while (pos + 8 <= whole) {
            int64_t base = (start + pos) / 8;
            uint64_t head = w[base];
            int64_t size = (int64_t)(head >> 48);
            if (size < 8 || size & 7 || pos + size > whole)
                break;
            uint32_t type = (uint32_t)head;
            ty[type < 255 ? type : 255]++;
            if (type == PERF_RECORD_SAMPLE) {
                n++;
                if (time_word >= 0 && size > 8 * time_word) {
                    uint64_t t = w[base + time_word];
                    if (!any || t < tmin)
                        tmin = t;
                    if (!any || t > tmax)
                        tmax = t;
                    any = 1;
                }
            } else {
                if (nothers == cap) {
                    int64_t c = cap ? cap * 2 : 1024;
                    int64_t *fresh = realloc(others, (size_t)c * 3 * 8);
                    if (!fresh) {
                        bad = 2;
                        break;
                    }
                    others = fresh;
                    cap = c;
                }
                others[3 * nothers] = start + pos;
                others[3 * nothers + 1] = seq;
                others[3 * nothers + 2] = fi;
                nothers++;
            }
            seq++;
            pos += size;
        }
        st[fi] = pos;
        ns[fi] = n;
    }
    Py_END_ALLOW_THREADS
    if (bad == 2) {
        PyErr_NoMemory();
        goto fail;
    }
    if (bad) {
        free(others);
        Py_DECREF(stops);
        Py_DECREF(samples);
        Py_DECREF(types);
        release(bufs, 3);
        Py_RETURN_NONE;
    }
    PyObject *oth = PyByteArray_FromStringAndSize(others ? (const char *)others : "", (Py_ssize_t)(nothers * 3 * 8));
    free(others);
    release(bufs, 3);
    if (!oth) {
        Py_DECREF(stops);
        Py_DECREF(samples);
        Py_DECREF(types);
        return NULL;
    }
    return Py_BuildValue("(NNNN(iKK))", stops, samples, oth, types, any, (unsigned long long)tmin,
                         (unsigned long long)tmax);
fail:
    free(others);
    Py_XDECREF(stops);
    Py_XDECREF(samples);
    Py_XDECREF(types);
    release(bufs, 3);
    return NULL;
}

/* unwind_step: one depth of profiler/unwind/unwinder.py's DWARF unwinder for every active
 * sample (its _step after the rule lookup, which stays in numpy): CFA, saved registers and
 * the return address read from each sample's stack copy, the reason to stop. The constants
 * are table.py's and unwinder.py's (unwind_native checks them). Registers are updated in
 * place; every value is computed from the sample's registers before the step. */
enum { CFA_REG_ = 1, CFA_DEREF_ = 2, CFA_PLT_ = 3 };
enum { R_SAME = 0, R_AT_CFA = 2, R_VAL_CFA = 3, R_AT_REG = 4 };
enum { LOC_NO_MAP_ = 1, LOC_NO_CFI_ = 2, LOC_FP_ = 3 };
enum { W_END = 0, W_NO_MAP = 1, W_NO_CFI = 2, W_SHORT = 3, W_UNSUPPORTED = 4, W_NO_PROGRESS = 5, W_ACTIVE = 255 };
#define MAX_COLUMNS 128

/* The u64 at ``addr`` in a stack copy of ``size`` bytes at ``offset`` in ``buf`` holding the
 * memory from ``sp0`` up (unwinder.read_words); 0 and not inside when it is not all there. */
static uint64_t read_word(const uint8_t *buf, int64_t buflen, int64_t offset, int64_t size, uint64_t sp0,
                          uint64_t addr, int *inside) {
    int64_t rel = (int64_t)(addr - sp0);
    if (rel < 0 || rel > size - 8 || buflen == 0 || offset < 0 || offset + rel < 0 || offset + rel > buflen - 8) {
        *inside = 0;
        return 0;
    }
    uint64_t v;
    memcpy(&v, buf + offset + rel, 8); /* little-endian machines only: the caller checks */
    *inside = 1;
    return v;
}

/* The rule tables of unwinder.CombinedTables, for step_one. */
typedef struct {
    const uint8_t *cfa_kind, *rule_kind, *flags;
    const int64_t *cfa_reg, *cfa_off, *rule_arg, *rule_reg;
    const uint64_t *plt;
    int64_t nrows, fp_index, t, ra_col, sp_col, ra_is_register;
    uint64_t ra_mask;
} Rules;

/* One frame of one sample (unwinder._step_numpy for one row): ``reg``/``val`` (t columns) and
 * ``*pc``, ``*after_signal`` updated in place; the reason to stop (W_ACTIVE: it goes on). */
static uint8_t step_one(const Rules *tb, const uint8_t *buf, int64_t buflen, int64_t offset, int64_t size,
                        uint64_t sp0, uint64_t *pc, uint64_t *reg, uint8_t *val, uint8_t *after_signal,
                        int64_t row, int8_t kind, int okv) {
    const int64_t t = tb->t;
    uint64_t old[MAX_COLUMNS];
    uint8_t old_ok[MAX_COLUMNS];
    memcpy(old, reg, (size_t)t * 8);
    memcpy(old_ok, val, (size_t)t);
    int fp = kind == LOC_FP_, no_map = kind == LOC_NO_MAP_;
    int no_cfi = !no_map && !fp && (kind == LOC_NO_CFI_ || !okv);
    int64_t r = fp ? tb->fp_index : row;
    if (r < 0 || r >= tb->nrows)
        r = tb->fp_index, no_cfi = !no_map; /* a row the lookup never gives: no CFI */
    int ck = tb->cfa_kind[r];
    int64_t creg = tb->cfa_reg[r];
    int signal = (tb->flags[r] & 1) != 0;
    int unsupported = (ck != CFA_REG_ && ck != CFA_DEREF_ && ck != CFA_PLT_) || creg < 0 || creg >= t;
    int64_t base_col = creg > 0 && creg < t ? creg : 0;
    int base_ok = old_ok[base_col] && !unsupported;
    uint64_t cfa = old[base_col] + (uint64_t)tb->cfa_off[r];
    if (ck == CFA_PLT_ && (*pc & 15) >= tb->plt[r])
        cfa += 8;
    if (ck == CFA_DEREF_) {
        int inside;
        cfa = read_word(buf, buflen, offset, size, sp0, cfa, &inside);
        base_ok &= inside;
    }
    int ra_short = 0;
    const uint8_t *kinds = tb->rule_kind + r * t;
    for (int64_t c = 0; c < t; c++) {
        int k = kinds[c];
        if (k == R_SAME)
            continue;
        uint64_t arg = (uint64_t)tb->rule_arg[r * t + c];
        int64_t src = tb->rule_reg[r * t + c];
        src = src > 0 && src < t ? src : 0;
        int at_reg = k == R_AT_REG;
        uint64_t where = (at_reg ? old[src] : cfa) + arg;
        int src_ok = at_reg ? old_ok[src] : base_ok;
        int in_memory = at_reg || k == R_AT_CFA;
        int inside;
        uint64_t value = read_word(buf, buflen, offset, size, sp0, where, &inside);
        if (c == tb->ra_col && in_memory && !inside && src_ok)
            ra_short = 1;
        reg[c] = in_memory ? value : where;
        val[c] = in_memory ? (uint8_t)(inside && src_ok) : (uint8_t)(k == R_VAL_CFA && src_ok);
    }
    const int64_t sp_col = tb->sp_col, ra_col = tb->ra_col;
    uint64_t old_sp = old[sp_col];
    if (kinds[sp_col] == R_SAME) {
        reg[sp_col] = cfa;
        val[sp_col] = (uint8_t)base_ok;
    }
    uint64_t ra = reg[ra_col] & tb->ra_mask;
    int ra_ok = val[ra_col];
    uint8_t w;
    if (no_map)
        w = W_NO_MAP;
    else if (no_cfi)
        w = W_NO_CFI;
    else if (unsupported || (!base_ok && ck == CFA_REG_))
        w = W_UNSUPPORTED;
    else if (!base_ok || ra_short)
        w = W_SHORT;
    else if (!ra_ok || ra == 0)
        w = W_END;
    else if (!val[sp_col] || (reg[sp_col] <= old_sp && !signal))
        w = W_NO_PROGRESS;
    else
        w = W_ACTIVE;
    if (!tb->ra_is_register)
        val[ra_col] = 0;
    *pc = ra;
    *after_signal = (uint8_t)signal;
    return w;
}

/* Checks the rule-table buffers b[first .. first + 8] (cfa_kind, cfa_reg, cfa_off, plt,
 * rule_kind, rule_arg, rule_reg, flags) against each other and fills ``tb``; 0 when they do
 * not fit. */
static int rules_from(Rules *tb, const Buf *b, long long fp_index, long long t, long long ra_col, long long sp_col,
                      unsigned long long ra_mask, long long ra_is_register) {
    int64_t nrows = b[0].b.len;
    if (t <= 0 || t > MAX_COLUMNS || ra_col < 0 || ra_col >= t || sp_col < 0 || sp_col >= t || fp_index < 0 ||
        fp_index >= nrows)
        return 0;
    if (b[1].b.len != nrows * 8 || b[2].b.len != nrows * 8 || b[3].b.len != nrows * 8 || b[4].b.len != nrows * t ||
        b[5].b.len != nrows * t * 8 || b[6].b.len != nrows * t * 8 || b[7].b.len != nrows)
        return 0;
    tb->cfa_kind = b[0].b.buf;
    tb->cfa_reg = b[1].b.buf;
    tb->cfa_off = b[2].b.buf;
    tb->plt = b[3].b.buf;
    tb->rule_kind = b[4].b.buf;
    tb->rule_arg = b[5].b.buf;
    tb->rule_reg = b[6].b.buf;
    tb->flags = b[7].b.buf;
    tb->nrows = nrows;
    tb->fp_index = fp_index;
    tb->t = t;
    tb->ra_col = ra_col;
    tb->sp_col = sp_col;
    tb->ra_mask = ra_mask;
    tb->ra_is_register = ra_is_register;
    return 1;
}

/* Takes the buffers of ``objs`` (``items``: each one's item size; ``writable``: a bit per
 * buffer); 0 with the exception set when one is not a contiguous buffer of that item size. */
static int take_buffers(PyObject **objs, Buf *b, int n, const Py_ssize_t *items, uint64_t writable,
                        const char *what) {
    memset(b, 0, sizeof(Buf) * (size_t)n);
    for (int i = 0; i < n; i++) {
        int flags = writable >> i & 1 ? PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE : PyBUF_C_CONTIGUOUS;
        if (PyObject_GetBuffer(objs[i], &b[i].b, flags) < 0) {
            release(b, n);
            return 0;
        }
        b[i].held = 1;
        if (b[i].b.len % items[i]) {
            PyErr_Format(PyExc_ValueError, "%s: an array of the wrong item size", what);
            release(b, n);
            return 0;
        }
    }
    return 1;
}

enum { U_BUF, U_OFFSET, U_SIZE, U_SP0, U_PC, U_REGS, U_VALID, U_SIGNAL, U_ROW, U_KIND, U_OK, U_CFA_KIND,
       U_CFA_REG, U_CFA_OFF, U_PLT, U_RULE_KIND, U_RULE_ARG, U_RULE_REG, U_FLAGS, U_N };

static PyObject *unwind_step(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[U_N];
    long long fp_index, t, ra_col, sp_col, ra_is_register;
    unsigned long long ra_mask;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOOOOOLLLLKL", &objs[U_BUF], &objs[U_OFFSET], &objs[U_SIZE],
                          &objs[U_SP0], &objs[U_PC], &objs[U_REGS], &objs[U_VALID], &objs[U_SIGNAL], &objs[U_ROW],
                          &objs[U_KIND], &objs[U_OK], &objs[U_CFA_KIND], &objs[U_CFA_REG], &objs[U_CFA_OFF],
                          &objs[U_PLT], &objs[U_RULE_KIND], &objs[U_RULE_ARG], &objs[U_RULE_REG], &objs[U_FLAGS],
                          &fp_index, &t, &ra_col, &sp_col, &ra_mask, &ra_is_register))
        return NULL;
    static const Py_ssize_t items[U_N] = {1, 8, 8, 8, 8, 8, 1, 1, 8, 1, 1, 1, 8, 8, 8, 1, 8, 8, 1};
    Buf b[U_N];
    uint64_t writable = 1u << U_PC | 1u << U_REGS | 1u << U_VALID | 1u << U_SIGNAL;
    if (!take_buffers(objs, b, U_N, items, writable, "unwind_step"))
        return NULL;
    Rules tb;
    int64_t m = b[U_PC].b.len / 8;
    int bad = !rules_from(&tb, b + U_CFA_KIND, fp_index, t, ra_col, sp_col, ra_mask, ra_is_register);
    bad |= b[U_OFFSET].b.len != m * 8 || b[U_SIZE].b.len != m * 8 || b[U_SP0].b.len != m * 8 ||
           b[U_REGS].b.len != m * t * 8 || b[U_VALID].b.len != m * t || b[U_SIGNAL].b.len != m ||
           b[U_ROW].b.len != m * 8 || b[U_KIND].b.len != m || b[U_OK].b.len != m;
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "unwind_step: inconsistent arguments");
        release(b, U_N);
        return NULL;
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)m);
    if (!out) {
        release(b, U_N);
        return NULL;
    }
    uint8_t *why = (uint8_t *)PyByteArray_AS_STRING(out);
    const uint8_t *buf = b[U_BUF].b.buf;
    int64_t buflen = b[U_BUF].b.len;
    const int64_t *offset = b[U_OFFSET].b.buf, *size = b[U_SIZE].b.buf, *row_of = b[U_ROW].b.buf;
    const uint64_t *sp0 = b[U_SP0].b.buf;
    uint64_t *pcs = b[U_PC].b.buf, *regs = b[U_REGS].b.buf;
    uint8_t *valid = b[U_VALID].b.buf, *after_signal = b[U_SIGNAL].b.buf;
    const int8_t *kind = b[U_KIND].b.buf;
    const uint8_t *okv = b[U_OK].b.buf;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < m; i++)
        why[i] = step_one(&tb, buf, buflen, offset[i], size[i], sp0[i], pcs + i, regs + i * t, valid + i * t,
                          after_signal + i, row_of[i], kind[i], okv[i]);
    Py_END_ALLOW_THREADS
    release(b, U_N);
    return out;
}

/* The last index of sorted ``a`` whose value is at most ``x`` (numpy's searchsorted(a, x,
 * "right") - 1), or -1. */
static inline int64_t last_at_most(const uint64_t *a, int64_t n, uint64_t x) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] <= x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

/* report/unwind_samples.SnapshotCodeMap's arrays (its locate, for one sample's map rank). */
typedef struct {
    const uint64_t *key, *end, *part_key, *part_end, *part_bias, *jit_key, *jit_end;
    const int64_t *dso, *slot_of_dso, *part_slot, *jit_slot;
    const int8_t *kind_of_dso;
    int64_t nkey, ndso, npart, njit;
    const uint64_t *tkey; /* CombinedTables.key */
    int64_t ntkey;
} Maps;

#define USER_LIMIT_ ((uint64_t)1 << 48)
#define LOW48 (((uint64_t)1 << 48) - 1)
#define KEY_SHIFT_ 40
enum { LOC_TABLE_ = 0, W_MAX_DEPTH = 6, W_NO_REGS = 7 };

/* SnapshotCodeMap.locate then CombinedTables.rows for one (sample, pc): the rule row (kept
 * in range) and whether it is one, and the LOC_* kind. */
static void locate_one(const Maps *mp, uint64_t rank_bits, uint64_t jit_bits, uint64_t pc, int64_t *row_out,
                       int *ok_out, int8_t *kind_out) {
    int64_t slot = -1;
    uint64_t addr = 0;
    int8_t kind = LOC_NO_MAP_;
    if (mp->nkey) {
        int user = pc < USER_LIMIT_;
        uint64_t key = rank_bits | (user ? pc : 0);
        int64_t i = last_at_most(mp->key, mp->nkey, key);
        int64_t safe = i > 0 ? i : 0;
        int hit = user && i >= 0 && (mp->key[safe] ^ rank_bits) < USER_LIMIT_ && pc < mp->end[safe];
        if (hit) {
            int64_t d = mp->dso[safe] > 0 ? mp->dso[safe] : 0;
            kind = mp->kind_of_dso[d];
            slot = mp->slot_of_dso[d];
        }
        if (kind == LOC_TABLE_) {
            int inside = 0;
            if (mp->npart) {
                int64_t j = last_at_most(mp->part_key, mp->npart, key);
                int64_t sj = j > 0 ? j : 0;
                inside = j >= 0 && (mp->part_key[sj] ^ rank_bits) < USER_LIMIT_ && pc < mp->part_end[sj];
                if (inside) {
                    addr = pc + mp->part_bias[sj];
                    slot = mp->part_slot[sj];
                }
            }
            if (!inside)
                kind = LOC_NO_CFI_;
        }
        if ((kind == LOC_FP_ || kind == LOC_NO_MAP_) && mp->njit) {
            uint64_t jkey = jit_bits | (pc < USER_LIMIT_ ? pc : 0);
            int64_t j = last_at_most(mp->jit_key, mp->njit, jkey);
            int64_t sj = j > 0 ? j : 0;
            if (j >= 0 && (mp->jit_key[sj] ^ jit_bits) < USER_LIMIT_ && pc < mp->jit_end[sj] && pc < USER_LIMIT_) {
                slot = mp->jit_slot[sj];
                addr = pc - (mp->jit_key[sj] & LOW48);
                kind = LOC_TABLE_;
            }
        }
    }
    *kind_out = kind;
    if (!mp->ntkey) {
        *row_out = 0;
        *ok_out = 0;
        return;
    }
    uint64_t tk = ((uint64_t)slot << KEY_SHIFT_) | addr;
    int64_t row = last_at_most(mp->tkey, mp->ntkey, tk);
    *row_out = row > 0 ? row : 0;
    *ok_out = row >= 0 && slot >= 0 && addr < ((uint64_t)1 << KEY_SHIFT_) &&
              (mp->tkey[*row_out] >> KEY_SHIFT_) == (uint64_t)slot;
}

enum { A_BUF, A_OFFSET, A_SIZE, A_SP0, A_PC, A_REGS, A_VALID, A_RANK, A_JIT_RANK, A_KEY, A_END, A_DSO,
       A_KIND_OF_DSO, A_SLOT_OF_DSO, A_PART_KEY, A_PART_END, A_PART_SLOT, A_PART_BIAS, A_JIT_KEY, A_JIT_END,
       A_JIT_SLOT, A_TKEY, A_CFA_KIND, A_CFA_REG, A_CFA_OFF, A_PLT, A_RULE_KIND, A_RULE_ARG, A_RULE_REG,
       A_FLAGS, A_N };

/* The arguments unwind_all and unwind_frames share, parsed and checked: 30 buffers (A_*), then
 * fp_index, columns, ra, sp, ra_mask, ra_is_register, max_depth; ``extra``: one more object
 * after them (NULL: none). A_OFFSET and A_SIZE are per sample unless ``per_sample_spans`` is 0
 * (the caller checks them). Fills ``b`` (released on failure), the rules and the maps; 0 with
 * the exception set when they do not fit together. */
static int unwind_args(PyObject *args, Buf *b, Rules *tb, Maps *mp, int64_t *n_out, int64_t *max_depth_out,
                       PyObject **extra, int per_sample_spans, const char *what) {
    PyObject *objs[A_N];
    long long fp_index, t, ra_col, sp_col, ra_is_register, max_depth;
    unsigned long long ra_mask;
    const char *format = extra ? "OOOOOOOOOOOOOOOOOOOOOOOOOOOOOOLLLLKLLO" : "OOOOOOOOOOOOOOOOOOOOOOOOOOOOOOLLLLKLL";
    if (!PyArg_ParseTuple(args, format, &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5], &objs[6],
                          &objs[7], &objs[8], &objs[9], &objs[10], &objs[11], &objs[12], &objs[13], &objs[14],
                          &objs[15], &objs[16], &objs[17], &objs[18], &objs[19], &objs[20], &objs[21], &objs[22],
                          &objs[23], &objs[24], &objs[25], &objs[26], &objs[27], &objs[28], &objs[29], &fp_index,
                          &t, &ra_col, &sp_col, &ra_mask, &ra_is_register, &max_depth, extra))
        return 0;
    static const Py_ssize_t items[A_N] = {1, 8, 8, 8, 8, 8, 1, 8, 8, 8, 8, 8, 1, 8, 8,
                                          8, 8, 8, 8, 8, 8, 8, 1, 8, 8, 8, 1, 8, 8, 1};
    if (!take_buffers(objs, b, A_N, items, 0, what))
        return 0;
    int64_t n = b[A_PC].b.len / 8;
    int bad = !rules_from(tb, b + A_CFA_KIND, fp_index, t, ra_col, sp_col, ra_mask, ra_is_register);
    bad |= b[A_SP0].b.len != n * 8 || b[A_REGS].b.len != n * t * 8 || b[A_VALID].b.len != n * t ||
           b[A_RANK].b.len != n * 8;
    bad |= per_sample_spans && (b[A_OFFSET].b.len != n * 8 || b[A_SIZE].b.len != n * 8);
    *mp = (Maps){
        .key = b[A_KEY].b.buf, .end = b[A_END].b.buf, .part_key = b[A_PART_KEY].b.buf,
        .part_end = b[A_PART_END].b.buf, .part_bias = b[A_PART_BIAS].b.buf, .jit_key = b[A_JIT_KEY].b.buf,
        .jit_end = b[A_JIT_END].b.buf, .dso = b[A_DSO].b.buf, .slot_of_dso = b[A_SLOT_OF_DSO].b.buf,
        .part_slot = b[A_PART_SLOT].b.buf, .jit_slot = b[A_JIT_SLOT].b.buf, .kind_of_dso = b[A_KIND_OF_DSO].b.buf,
        .nkey = b[A_KEY].b.len / 8, .ndso = b[A_KIND_OF_DSO].b.len, .npart = b[A_PART_KEY].b.len / 8,
        .njit = b[A_JIT_KEY].b.len / 8, .tkey = b[A_TKEY].b.buf, .ntkey = b[A_TKEY].b.len / 8};
    bad |= b[A_END].b.len != mp->nkey * 8 || b[A_DSO].b.len != mp->nkey * 8 ||
           b[A_SLOT_OF_DSO].b.len != mp->ndso * 8 || b[A_PART_END].b.len != mp->npart * 8 ||
           b[A_PART_SLOT].b.len != mp->npart * 8 || b[A_PART_BIAS].b.len != mp->npart * 8 ||
           b[A_JIT_END].b.len != mp->njit * 8 || b[A_JIT_SLOT].b.len != mp->njit * 8 ||
           (mp->njit && b[A_JIT_RANK].b.len != n * 8) || mp->ntkey + 1 > tb->nrows || max_depth < 0;
    for (int64_t i = 0; !bad && i < mp->nkey; i++)
        bad |= mp->dso[i] >= mp->ndso || (mp->dso[i] < 0 && mp->ndso == 0);
    if (bad) {
        PyErr_Format(PyExc_ValueError, "%s: inconsistent arguments", what);
        release(b, A_N);
        return 0;
    }
    *n_out = n;
    *max_depth_out = max_depth;
    return 1;
}

/* One remembered locate_one: a (map rank, JIT rank, pc) and what it gave. */
typedef struct {
    uint64_t pc, rank_bits, jit_bits;
    int64_t row;
    int32_t ok;
    int8_t kind, used;
} Located;

#define MEMO_SLOTS 4096 /* a power of two: samples of one call repeat a few hundred return addresses */

/* The frames found so far (pcs), grown as samples are unwound; and the call's memo of
 * locate_one (NULL: none), direct-mapped by a hash of its key. The maps and rules are the
 * call's, so a memo lives for one call. */
typedef struct {
    uint64_t *pcs;
    size_t cap, used;
    int nomem;
    Located *memo;
} Found;

static void locate_memo(Located *memo, const Maps *mp, uint64_t rank_bits, uint64_t jit_bits, uint64_t pc,
                        int64_t *row, int *ok, int8_t *kind) {
    Located *e = &memo[mix64(pc ^ mix64(rank_bits ^ (jit_bits >> 1))) & (MEMO_SLOTS - 1)];
    if (!e->used || e->pc != pc || e->rank_bits != rank_bits || e->jit_bits != jit_bits) {
        locate_one(mp, rank_bits, jit_bits, pc, &e->row, ok, &e->kind);
        e->pc = pc, e->rank_bits = rank_bits, e->jit_bits = jit_bits, e->ok = *ok, e->used = 1;
    }
    *row = e->row;
    *ok = e->ok;
    *kind = e->kind;
}

/* Sample ``i`` of the arguments unwound to its end from its stack copy (``size`` bytes at
 * ``offset`` in ``buf``), its frames appended to ``out``: the reason it stopped. */
static uint8_t unwind_one(const Rules *tb, const Maps *mp, const Buf *b, int64_t i, const uint8_t *buf,
                          int64_t buflen, int64_t offset, int64_t size, int64_t max_depth, Found *out) {
    const int64_t t = tb->t;
    const uint64_t *rank = b[A_RANK].b.buf, *jit_rank = b[A_JIT_RANK].b.buf;
    uint64_t reg[MAX_COLUMNS], pc = ((const uint64_t *)b[A_PC].b.buf)[i];
    uint64_t sp0 = ((const uint64_t *)b[A_SP0].b.buf)[i];
    uint8_t val[MAX_COLUMNS], after_signal = 0, why = W_ACTIVE;
    memcpy(reg, (const uint64_t *)b[A_REGS].b.buf + i * t, (size_t)t * 8);
    memcpy(val, (const uint8_t *)b[A_VALID].b.buf + i * t, (size_t)t);
    uint64_t rank_bits = rank[i] << 48, jit_bits = mp->njit ? jit_rank[i] << 48 : 0;
    for (int64_t depth = 0; depth < max_depth; depth++) {
        if (out->used == out->cap) {
            uint64_t *grown = realloc(out->pcs, out->cap * 2 * 8);
            if (!grown) {
                out->nomem = 1;
                break;
            }
            out->pcs = grown;
            out->cap *= 2;
        }
        out->pcs[out->used++] = pc;
        if (depth == max_depth - 1) {
            why = W_MAX_DEPTH;
            break;
        }
        /* a return address is the instruction after the call: look up the call itself */
        uint64_t lookup = depth > 0 && !after_signal && pc > 0 ? pc - 1 : pc;
        int64_t row;
        int ok;
        int8_t kind;
        if (out->memo)
            locate_memo(out->memo, mp, rank_bits, jit_bits, lookup, &row, &ok, &kind);
        else
            locate_one(mp, rank_bits, jit_bits, lookup, &row, &ok, &kind);
        ok = ok && tb->cfa_kind[row] != 0; /* CFA_NONE: a gap no FDE covers */
        why = step_one(tb, buf, buflen, offset, size, sp0, &pc, reg, val, &after_signal, row, kind, ok);
        if (why != W_ACTIVE)
            break;
    }
    return why;
}

/* (start, pcs, reason) from what was found for ``n`` samples; NULL with the exception set. */
static PyObject *unwound(Found *found, PyObject *start_obj, PyObject *reason_obj, PyObject *more) {
    PyObject *out = found->nomem ? NULL : PyBytes_FromStringAndSize((const char *)found->pcs,
                                                                     (Py_ssize_t)(found->used * 8));
    free(found->pcs);
    free(found->memo);
    if (!out) {
        Py_DECREF(start_obj);
        Py_DECREF(reason_obj);
        Py_XDECREF(more);
        return found->nomem ? PyErr_NoMemory() : NULL;
    }
    if (more)
        return Py_BuildValue("(NNNN)", start_obj, out, reason_obj, more);
    return Py_BuildValue("(NNN)", start_obj, out, reason_obj);
}

/* unwind_all: unwinder.unwind for every sample, one sample at a time to its end (the numpy
 * unwinder goes a depth at a time over all samples; it is the reference): the rule lookup
 * (SnapshotCodeMap.locate, CombinedTables.rows) and the step. Returns (start, pcs, reason):
 * sample i's frames are pcs[start[i]:start[i + 1]] (int64 start, u64 pcs as bytes). */
static PyObject *unwind_all(PyObject *self, PyObject *args) {
    (void)self;
    Buf b[A_N];
    Rules tb;
    Maps mp;
    int64_t n, max_depth;
    if (!unwind_args(args, b, &tb, &mp, &n, &max_depth, NULL, 1, "unwind_all"))
        return NULL;
    PyObject *start_obj = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)((n + 1) * 8));
    PyObject *reason_obj = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n > 0 ? n : 1));
    Found found = {.cap = (size_t)(n > 0 ? n : 1) * 16, .memo = calloc(MEMO_SLOTS, sizeof(Located))};
    found.pcs = malloc(found.cap * 8);
    if (!start_obj || !reason_obj || !found.pcs) {
        Py_XDECREF(start_obj);
        Py_XDECREF(reason_obj);
        free(found.pcs), free(found.memo);
        release(b, A_N);
        return PyErr_NoMemory();
    }
    int64_t *start = (int64_t *)PyByteArray_AS_STRING(start_obj);
    uint8_t *reason = (uint8_t *)PyByteArray_AS_STRING(reason_obj);
    const int64_t *offset = b[A_OFFSET].b.buf, *size = b[A_SIZE].b.buf;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < n && !found.nomem; i++) {
        start[i] = (int64_t)found.used;
        reason[i] = unwind_one(&tb, &mp, b, i, b[A_BUF].b.buf, b[A_BUF].b.len, offset[i], size[i], max_depth, &found);
    }
    start[n] = (int64_t)found.used;
    Py_END_ALLOW_THREADS
    release(b, A_N);
    if (PyByteArray_Resize(reason_obj, (Py_ssize_t)n) < 0)
        found.nomem = 1;
    return unwound(&found, start_obj, reason_obj, NULL);
}

/* libzstd, opened at the first unwind_frames (the Python zstandard package keeps its own copy
 * to itself): the few functions of its stable API that inflate one frame. */
typedef struct {
    void *(*create)(void);
    size_t (*free_ctx)(void *);
    size_t (*decompress)(void *, void *, size_t, const void *, size_t);
    unsigned (*is_error)(size_t);
    unsigned long long (*content_size)(const void *, size_t);
    size_t (*frame_size)(const void *, size_t);
    int state; /* 0: not tried yet, 1: opened, -1: not there */
} Zstd;

static Zstd zstd_lib;

static int open_zstd(void) {
    if (zstd_lib.state)
        return zstd_lib.state > 0;
    void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    zstd_lib.state = -1;
    if (!h)
        return 0;
    *(void **)&zstd_lib.create = dlsym(h, "ZSTD_createDCtx");
    *(void **)&zstd_lib.free_ctx = dlsym(h, "ZSTD_freeDCtx");
    *(void **)&zstd_lib.decompress = dlsym(h, "ZSTD_decompressDCtx");
    *(void **)&zstd_lib.is_error = dlsym(h, "ZSTD_isError");
    *(void **)&zstd_lib.content_size = dlsym(h, "ZSTD_getFrameContentSize");
    *(void **)&zstd_lib.frame_size = dlsym(h, "ZSTD_findFrameCompressedSize");
    if (!zstd_lib.create || !zstd_lib.free_ctx || !zstd_lib.decompress || !zstd_lib.is_error ||
        !zstd_lib.content_size || !zstd_lib.frame_size)
        return 0;
    zstd_lib.state = 1;
    return 1;
}

/* One zstd frame (``src``, exactly ``n`` bytes) that declares ``want`` bytes, inflated into
 * ``dst``: 1, or 0 when it is not whole, declares another size or does not inflate to it. */
static int inflate_exactly(void *dctx, uint8_t *dst, int64_t want, const uint8_t *src, int64_t n) {
    size_t whole = zstd_lib.frame_size(src, (size_t)n);
    if (zstd_lib.is_error(whole) || whole != (size_t)n)
        return 0;
    if (zstd_lib.content_size(src, (size_t)n) != (unsigned long long)want)
        return 0;
    size_t got = zstd_lib.decompress(dctx, dst, (size_t)want, src, (size_t)n);
    return !zstd_lib.is_error(got) && got == (size_t)want;
}

enum { F_START, F_LENGTH, F_SIZE, F_FIRST, F_COUNT, F_N }; /* unwind_frames' frame table */
enum { FRAME_OK = 0, FRAME_DAMAGED = 1 };

/* One frame's stack fields (inflated: ``len`` bytes) matched to the SAMPLE records of its
 * lean records (``len_rec`` bytes at ``rec`` in the image): the k-th SAMPLE gets the k-th
 * field. ``pos``/``data``/``size``: per SAMPLE, its offset in the frame's records, where its
 * copy starts in ``fields`` and its length (dyn_size, at most size); the count, or -1 when the
 * fields are not whole fields or not one per SAMPLE (splitstacks.field_spans and
 * sample_offsets are the reference). The arrays hold ``cap`` entries: -2 when that is too few. */
static int64_t match_fields(const uint8_t *fields, int64_t len, const uint8_t *rec, int64_t len_rec, int64_t *pos,
                            int64_t *data, int64_t *size, int64_t cap) {
    int64_t q = 0, k = 0;
    if (len % 8)
        return -1;
    while (q + 8 <= len) {
        uint64_t sz, dyn;
        if (k == cap)
            return -2;
        q = next_field(fields, len, q, &data[k], &sz, &dyn);
        if (q < 0)
            return -1;
        size[k++] = (int64_t)(dyn < sz ? dyn : sz);
    }
    int64_t at = 0, m = 0;
    for (;;) {
        uint32_t type;
        int64_t next = next_record(rec, len_rec, at, 0, &type);
        if (next < 0)
            break;
        if (type == PERF_RECORD_SAMPLE) {
            if (m == k)
                return -1;
            pos[m++] = at;
        }
        at = next;
    }
    return m == k ? k : -1;
}

/* unwind_frames(image, rec, frames, sp0, pc, regs, valid, <unwind_all's maps and rules>,
 *               fields) -> (start, pcs, reason, status) or None (no libzstd)
 * unwind_all for the samples of a batch of FLAG_STACKS frames read lean, each frame's stack
 * fields inflated into one buffer and its samples unwound from it at once, while it is in the
 * CPU's cache (report/unwind_samples._unwind_apart; its numpy path, _inflate_fields then
 * unwind_all, is the reference). ``frames``: per frame (start and length of its lean records in
 * ``image``, the size its fields declare, its first sample and how many): the samples are
 * grouped by frame and, within one, in file order; ``rec``: each sample's record offset in the
 * image; ``fields``: per frame, its compressed fields. A sample whose record has no copy stops
 * with no frame (NO_REGS, 7), and so do the samples of a frame that does not inflate or whose
 * fields do not fit its samples: ``status`` (a byte per frame) says FRAME_DAMAGED for those. */
static PyObject *unwind_frames(PyObject *self, PyObject *args) {
    (void)self;
    Buf b[A_N];
    Rules tb;
    Maps mp;
    int64_t n, max_depth;
    PyObject *fields_obj;
    if (!unwind_args(args, b, &tb, &mp, &n, &max_depth, &fields_obj, 0, "unwind_frames"))
        return NULL;
    int64_t nf = b[A_SIZE].b.len / (F_N * 8);
    const int64_t *fr = b[A_SIZE].b.buf, *rec = b[A_OFFSET].b.buf;
    int64_t image_len = b[A_BUF].b.len, biggest = 8, most = 1, covered = 0;
    int bad = b[A_SIZE].b.len != nf * F_N * 8 || b[A_OFFSET].b.len != n * 8 || !PyTuple_Check(fields_obj) ||
              PyTuple_GET_SIZE(fields_obj) != nf;
    for (int64_t f = 0; !bad && f < nf; f++) {
        const int64_t *e = fr + f * F_N;
        bad |= e[F_START] < 0 || e[F_LENGTH] < 0 || e[F_START] > image_len - e[F_LENGTH] || e[F_SIZE] < 0 ||
               e[F_FIRST] != covered || e[F_COUNT] < 0 || e[F_COUNT] > n - covered;
        covered += bad ? 0 : e[F_COUNT];
        biggest = e[F_SIZE] > biggest ? e[F_SIZE] : biggest;
        most = e[F_LENGTH] / 8 + 1 > most ? e[F_LENGTH] / 8 + 1 : most;
    }
    if (bad || covered != n) {
        PyErr_SetString(PyExc_ValueError, "unwind_frames: inconsistent arguments");
        release(b, A_N);
        return NULL;
    }
    if (!open_zstd()) {
        release(b, A_N);
        Py_RETURN_NONE;
    }
    Buf *fb = calloc((size_t)(nf > 0 ? nf : 1), sizeof(Buf));
    for (int64_t f = 0; fb && f < nf; f++) {
        if (get_buf(PyTuple_GET_ITEM(fields_obj, f), &fb[f], 1, "fields") < 0) {
            release(fb, (int)f + 1);
            free(fb);
            release(b, A_N);
            return NULL;
        }
    }
    PyObject *start_obj = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)((n + 1) * 8));
    PyObject *reason_obj = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n > 0 ? n : 1));
    PyObject *status_obj = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(nf > 0 ? nf : 1));
    Found found = {.cap = (size_t)(n > 0 ? n : 1) * 16, .memo = calloc(MEMO_SLOTS, sizeof(Located))};
    found.pcs = malloc(found.cap * 8);
    uint8_t *room = malloc((size_t)biggest);
    int64_t *pos = malloc((size_t)most * 8), *data = malloc((size_t)most * 8), *size = malloc((size_t)most * 8);
    void *dctx = zstd_lib.create();
    if (!fb || !start_obj || !reason_obj || !status_obj || !found.pcs || !room || !pos || !data || !size || !dctx) {
        Py_XDECREF(start_obj);
        Py_XDECREF(reason_obj);
        Py_XDECREF(status_obj);
        free(found.pcs), free(found.memo), free(room), free(pos), free(data), free(size);
        if (dctx)
            zstd_lib.free_ctx(dctx);
        if (fb)
            release(fb, (int)nf);
        free(fb);
        release(b, A_N);
        return PyErr_NoMemory();
    }
    int64_t *start = (int64_t *)PyByteArray_AS_STRING(start_obj);
    uint8_t *reason = (uint8_t *)PyByteArray_AS_STRING(reason_obj);
    uint8_t *status = (uint8_t *)PyByteArray_AS_STRING(status_obj);
    const uint8_t *image = b[A_BUF].b.buf;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t f = 0; f < nf && !found.nomem; f++) {
        const int64_t *e = fr + f * F_N;
        int64_t k = -1;
        if (inflate_exactly(dctx, room, e[F_SIZE], fb[f].b.buf, fb[f].b.len))
            k = match_fields(room, e[F_SIZE], image + e[F_START], e[F_LENGTH], pos, data, size, most);
        status[f] = k < 0 ? FRAME_DAMAGED : FRAME_OK;
        int64_t j = 0; /* the frame's SAMPLE records and its samples, both in file order */
        for (int64_t i = e[F_FIRST]; i < e[F_FIRST] + e[F_COUNT] && !found.nomem; i++) {
            int64_t want = rec[i] - e[F_START];
            while (j < k && pos[j] < want)
                j++;
            start[i] = (int64_t)found.used;
            reason[i] = W_NO_REGS;
            if (j < k && pos[j] == want && size[j] > 0)
                reason[i] = unwind_one(&tb, &mp, b, i, room, e[F_SIZE], data[j], size[j], max_depth, &found);
        }
    }
    start[n] = (int64_t)found.used;
    zstd_lib.free_ctx(dctx);
    Py_END_ALLOW_THREADS
    free(room), free(pos), free(data), free(size);
    release(fb, (int)nf);
    free(fb);
    release(b, A_N);
    if (PyByteArray_Resize(reason_obj, (Py_ssize_t)n) < 0 || PyByteArray_Resize(status_obj, (Py_ssize_t)nf) < 0)
        found.nomem = 1;
    return unwound(&found, start_obj, reason_obj, status_obj);
}

/* inflate_parts(parts, table, dst) -> status, or None without libzstd
 * zstd frames inflated into one buffer in one call (tally_native.FrameStream.view_of, a chunk's
 * compressed frames; codec.zstd_decompress_into, one frame at a time, is the reference):
 * ``parts`` a tuple of buffers, each one zstd frame; ``table`` per part (int64) where it goes in
 * ``dst`` and the size it declares. ``status`` has a byte per part: FRAME_DAMAGED for one that
 * is not whole, declares another size or does not inflate to it. */
static PyObject *inflate_parts(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[2], *parts;
    Buf b[2];
    static const Py_ssize_t items[2] = {8, 1};
    if (!PyArg_ParseTuple(args, "O!OO:inflate_parts", &PyTuple_Type, &parts, &objs[0], &objs[1]))
        return NULL;
    if (!take_buffers(objs, b, 2, items, 1u << 1, "inflate_parts"))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(parts);
    const int64_t *t = b[0].b.buf;
    int64_t dst_len = b[1].b.len;
    int bad = b[0].b.len != (Py_ssize_t)(n * 16);
    for (Py_ssize_t i = 0; !bad && i < n; i++)
        bad |= t[2 * i] < 0 || t[2 * i + 1] < 0 || t[2 * i] > dst_len - t[2 * i + 1];
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "inflate_parts: a part outside the buffer");
        release(b, 2);
        return NULL;
    }
    if (!open_zstd()) {
        release(b, 2);
        Py_RETURN_NONE;
    }
    Buf *pb = calloc((size_t)(n > 0 ? n : 1), sizeof(Buf));
    PyObject *status_obj = pb ? PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n > 0 ? n : 1)) : NULL;
    void *dctx = status_obj ? zstd_lib.create() : NULL;
    if (!dctx) {
        Py_XDECREF(status_obj);
        free(pb);
        release(b, 2);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (get_buf(PyTuple_GET_ITEM(parts, i), &pb[i], 1, "parts") < 0) {
            release(pb, (int)i + 1);
            free(pb);
            zstd_lib.free_ctx(dctx);
            Py_DECREF(status_obj);
            release(b, 2);
            return NULL;
        }
    }
    uint8_t *status = (uint8_t *)PyByteArray_AS_STRING(status_obj);
    uint8_t *dst = b[1].b.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++)
        status[i] = inflate_exactly(dctx, dst + t[2 * i], t[2 * i + 1], pb[i].b.buf, pb[i].b.len) ? FRAME_OK
                                                                                                : FRAME_DAMAGED;
    zstd_lib.free_ctx(dctx);
    Py_END_ALLOW_THREADS
    release(pb, (int)n);
    free(pb);
    release(b, 2);
    if (PyByteArray_Resize(status_obj, n) < 0) {
        Py_DECREF(status_obj);
        return NULL;
    }
    return status_obj;
}

/* ---- The recorder's drain: a walk over the record headers of a ring buffer's bytes ---- */

#define PERF_RECORD_LOST 2
#define PERF_RECORD_LOST_SAMPLES 13
#define PERF_RECORD_MISC_CPUMODE_MASK 7
#define PERF_RECORD_MISC_KERNEL 1
#define PERF_CONTEXT_MAX ((uint64_t)-4095)

typedef struct {
    uint64_t *slot; /* 0: empty (no kernel address is 0: they are at or above the floor) */
    size_t mask, used;
    uint64_t *list; /* the distinct words, in the order first seen */
    size_t n;
} WordSet;

static int wordset_add(WordSet *s, uint64_t w) {
    if (2 * (s->used + 1) > s->mask + 1) { /* keep the table at most half full */
        size_t cap = (s->mask + 1) * 2;
        uint64_t *slot = calloc(cap, 8), *list = realloc(s->list, cap / 2 * 8);
        if (!slot || !list) {
            free(slot);
            if (list)
                s->list = list;
            return -1;
        }
        s->list = list;
        for (size_t i = 0; i <= s->mask; i++) {
            uint64_t v = s->slot[i];
            if (!v)
                continue;
            size_t j = (size_t)((v * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
            while (slot[j])
                j = (j + 1) & (cap - 1);
            slot[j] = v;
        }
        free(s->slot);
        s->slot = slot;
        s->mask = cap - 1;
    }
    size_t j = (size_t)((w * 0x9E3779B97F4A7C15ull) >> 20) & s->mask;
    while (s->slot[j]) {
        if (s->slot[j] == w)
            return 0;
        j = (j + 1) & s->mask;
    }
    s->slot[j] = w;
    s->used++;
    s->list[s->n++] = w;
    return 0;
}

static int add_kernel_words(WordSet *set, const uint8_t *p, int64_t nwords, uint64_t floor) {
    for (int64_t i = 0; i < nwords; i++) {
        uint64_t v = load64(p + 8 * i);
        if (v >= floor && v < PERF_CONTEXT_MAX && wordset_add(set, v) < 0)
            return -1;
    }
    return 0;
}

/* walk_records(buf, kernel_floor, ip_offset, chain_offset, all_words, keep_mask)
 *   -> (stop, counts, lost, kept, kernel_words)
 * profiler/record/session.py StreamStats.scan in C (the Python walk is the reference and the
 * fallback): the whole records of ``buf`` (native byte order) walked until a header that does
 * not fit; ``counts`` {type: records}; ``lost``: the LOST and LOST_SAMPLES records' counts;
 * ``kept``: (type, misc, offset, size) of every record whose type's bit is set in
 * ``keep_mask`` (types below 64), for the caller to read; ``kernel_words``: with a floor, the
 * distinct words in [floor, PERF_CONTEXT_MAX) of the kernel-mode samples' ip and callchain
 * (at ``ip_offset`` / ``chain_offset`` in the record, -1: absent), or of their every word when
 * ``all_words``, as native u64 bytes. */
static PyObject *walk_records(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ob;
    unsigned long long floor, keep_mask;
    long long ip_off, chain_off;
    int all_words;
    if (!PyArg_ParseTuple(args, "OKLLpK", &ob, &floor, &ip_off, &chain_off, &all_words, &keep_mask))
        return NULL;
    Buf b;
    memset(&b, 0, sizeof(b));
    if (get_buf(ob, &b, 1, "buffer") < 0) {
        release(&b, 1);
        return NULL;
    }
    const uint8_t *buf = (const uint8_t *)b.b.buf;
    int64_t end = b.b.len, pos = 0;
    int64_t counts[256];
    memset(counts, 0, sizeof(counts));
    int64_t *kept = NULL;
    size_t nkept = 0, capkept = 0, nodd = 0, capodd = 0;
    uint32_t *odd = NULL;
    unsigned long long lost = 0;
    int oom = 0;
    WordSet set = {calloc(1024, 8), 1023, 0, malloc(512 * 8), 0};
    if (!set.slot || !set.list)
        oom = 1;
    Py_BEGIN_ALLOW_THREADS
    while (!oom && pos + 8 <= end) {
        uint32_t type;
        uint16_t misc, size;
        memcpy(&type, buf + pos, 4);
        memcpy(&misc, buf + pos + 4, 2);
        memcpy(&size, buf + pos + 6, 2);
        if (size < 8 || pos + size > end)
            break;
        const uint8_t *rec = buf + pos;
        if (type == PERF_RECORD_SAMPLE && floor && (misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL) {
            if (all_words) {
                oom = add_kernel_words(&set, rec + 8, (size - 8) / 8, floor) < 0;
            } else {
                if (ip_off >= 0 && ip_off <= size - 8)
                    oom = add_kernel_words(&set, rec + ip_off, 1, floor) < 0;
                if (!oom && chain_off >= 0 && chain_off <= size - 8) {
                    uint64_t nr = load64(rec + chain_off);
                    uint64_t room = (uint64_t)(size - chain_off - 8) / 8;
                    oom = add_kernel_words(&set, rec + chain_off + 8, (int64_t)(nr < room ? nr : room), floor) < 0;
                }
            }
        } else if (type == PERF_RECORD_LOST && size >= 24) {
            lost += load64(rec + 16);
        } else if (type == PERF_RECORD_LOST_SAMPLES && size >= 16) {
            lost += load64(rec + 8);
        }
        if (type < 64 && (keep_mask >> type) & 1) {
            if (nkept == capkept) {
                capkept = capkept ? 2 * capkept : 64;
                int64_t *grown = realloc(kept, capkept * 4 * 8);
                if (!grown) {
                    oom = 1;
                    break;
                }
                kept = grown;
            }
            int64_t *k = kept + 4 * nkept++;
            k[0] = type, k[1] = misc, k[2] = pos, k[3] = size;
        }
        if (type < 256) {
            counts[type]++;
        } else { /* no kernel writes one: kept one by one, counted below */
            if (nodd == capodd) {
                capodd = capodd ? 2 * capodd : 16;
                uint32_t *grown = realloc(odd, capodd * 4);
                if (!grown) {
                    oom = 1;
                    break;
                }
                odd = grown;
            }
            odd[nodd++] = type;
        }
        pos += size;
    }
    Py_END_ALLOW_THREADS
    release(&b, 1);
    PyObject *out = NULL, *cd = NULL, *kl = NULL, *words = NULL;
    if (oom) {
        PyErr_NoMemory();
        goto done;
    }
    if (!(cd = PyDict_New()) || !(kl = PyList_New((Py_ssize_t)nkept)))
        goto done;
    for (int t = 0; t < 256; t++) {
        if (!counts[t])
            continue;
        PyObject *key = PyLong_FromLong(t), *val = PyLong_FromLongLong(counts[t]);
        int err = !key || !val || PyDict_SetItem(cd, key, val) < 0;
        Py_XDECREF(key);
        Py_XDECREF(val);
        if (err)
            goto done;
    }
    for (size_t i = 0; i < nodd; i++) {
        PyObject *key = PyLong_FromUnsignedLong(odd[i]), *had = NULL, *val = NULL;
        int err = !key;
        if (!err) {
            had = PyDict_GetItemWithError(cd, key);
            err = !had && PyErr_Occurred();
        }
        if (!err)
            err = !(val = PyLong_FromLongLong(had ? PyLong_AsLongLong(had) + 1 : 1)) || PyDict_SetItem(cd, key, val) < 0;
        Py_XDECREF(key);
        Py_XDECREF(val);
        if (err)
            goto done;
    }
    for (size_t i = 0; i < nkept; i++) {
        PyObject *t = Py_BuildValue("(LLLL)", (long long)kept[4 * i], (long long)kept[4 * i + 1],
                                    (long long)kept[4 * i + 2], (long long)kept[4 * i + 3]);
        if (!t)
            goto done;
        PyList_SET_ITEM(kl, (Py_ssize_t)i, t);
    }
    if (!(words = PyBytes_FromStringAndSize((const char *)set.list, (Py_ssize_t)(set.n * 8))))
        goto done;
    out = Py_BuildValue("(LOKOO)", (long long)pos, cd, lost, kl, words);
done:
    Py_XDECREF(cd);
    Py_XDECREF(kl);
    Py_XDECREF(words);
    free(kept);
    free(odd);
    free(set.slot);
    free(set.list);
    return out;
}

/* The word index of a SAMPLE record's stack field (its u64 size) in a record of ``words``
 * words: after the ``fixed`` words, the callchain (``callchain``: nr, then nr words) and the
 * user registers (``nregs`` >= 0: abi, then nregs words when abi is not 0); -1 when the record
 * ends first (splitstacks.py: _stack_word is the reference). */
static int64_t stack_word(const uint8_t *rec, int64_t words, int64_t fixed, int64_t callchain, int64_t nregs) {
    int64_t cur = fixed;
    if (callchain) {
        if (cur >= words)
            return -1;
        uint64_t nr = load64(rec + 8 * cur);
        if (nr >= (uint64_t)words)
            return -1;
        cur += 1 + (int64_t)nr;
    }
    if (nregs >= 0) {
        if (cur >= words)
            return -1;
        cur += 1 + (load64(rec + 8 * cur) ? nregs : 0);
    }
    return cur < words ? cur : -1;
}

/* join_stacks(lean, fields, fixed_words, callchain, nregs, out) -> the joined length written into
 * the writable buffer ``out`` (at least len(lean) + len(fields) bytes: a reader reuses one), or
 * None: the SAMPLE records of ``lean`` with their stack fields (one u64 0 each)
 * replaced by the next whole field of ``fields`` (u64 size, and with size > 0 the data and u64
 * dyn_size), headers resized; None when the two do not fit together.
 * profiler/format/splitstacks.py: join_stacks_python is the reference. */
static PyObject *join_stacks(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ol, *of, *oo;
    long long fixed, callchain, nregs;
    if (!PyArg_ParseTuple(args, "OOLLLO", &ol, &of, &fixed, &callchain, &nregs, &oo))
        return NULL;
    Buf bufs[2];
    memset(bufs, 0, sizeof(bufs));
    if (get_buf(ol, &bufs[0], 1, "lean") < 0 || get_buf(of, &bufs[1], 1, "fields") < 0) {
        release(bufs, 2);
        return NULL;
    }
    const uint8_t *lean = (const uint8_t *)bufs[0].b.buf, *fields = (const uint8_t *)bufs[1].b.buf;
    int64_t end = bufs[0].b.len, flen = bufs[1].b.len;
    int bad = end % 8 || flen % 8 || fixed < 1;
    Py_buffer ob;
    if (PyObject_GetBuffer(oo, &ob, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        release(bufs, 2);
        return NULL;
    }
    if (ob.len < end + flen) {
        PyBuffer_Release(&ob);
        release(bufs, 2);
        PyErr_SetString(PyExc_ValueError, "join_stacks: the output buffer is too small");
        return NULL;
    }
    uint8_t *dst = (uint8_t *)ob.buf;
    int64_t pos = 0, q = 0, o = 0;
    if (!bad) {
        Py_BEGIN_ALLOW_THREADS
        while (pos + 8 <= end) {
            uint32_t type;
            uint16_t size;
            memcpy(&type, lean + pos, 4);
            memcpy(&size, lean + pos + 6, 2);
            if (size < 8 || size % 8 || pos + size > end)
                break;
            if (type != PERF_RECORD_SAMPLE) {
                memcpy(dst + o, lean + pos, size);
                o += size, pos += size;
                continue;
            }
            int64_t cur = stack_word(lean + pos, size / 8, fixed, callchain, nregs);
            if (cur < 0 || load64(lean + pos + 8 * cur) != 0 || q + 8 > flen) { bad = 1; break; }
            uint64_t stack = load64(fields + q);
            if (stack % 8 || stack > (uint64_t)flen) { bad = 1; break; }
            int64_t length = stack ? 16 + (int64_t)stack : 8;
            int64_t joined = size - 8 + length;
            if (q + length > flen || joined > 0xFFFF) { bad = 1; break; }
            memcpy(dst + o, lean + pos, (size_t)(8 * cur));
            uint16_t nsize = (uint16_t)joined;
            memcpy(dst + o + 6, &nsize, 2);
            memcpy(dst + o + 8 * cur, fields + q, (size_t)length);
            memcpy(dst + o + 8 * cur + length, lean + pos + 8 * cur + 8, (size_t)(size - 8 * cur - 8));
            o += joined, q += length, pos += size;
        }
        Py_END_ALLOW_THREADS
    }
    release(bufs, 2);
    PyBuffer_Release(&ob);
    if (bad || pos != end || q != flen)
        Py_RETURN_NONE;
    return PyLong_FromLongLong((long long)o);
}

/* split_stacks(records, fixed_words, callchain, nregs) -> (lean, fields) or None: the recorder's
 * side of join_stacks (each SAMPLE's stack field moved to ``fields``, one u64 0 left in its
 * place, its header resized); None when a record does not parse or the walk stops short.
 * profiler/format/splitstacks.py: split_stacks_python is the reference. */
static PyObject *split_stacks(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ob;
    long long fixed, callchain, nregs;
    if (!PyArg_ParseTuple(args, "OLLL", &ob, &fixed, &callchain, &nregs))
        return NULL;
    Buf b;
    memset(&b, 0, sizeof(b));
    if (get_buf(ob, &b, 1, "records") < 0) {
        release(&b, 1);
        return NULL;
    }
    const uint8_t *in = (const uint8_t *)b.b.buf;
    int64_t end = b.b.len, pos = 0, lo = 0, fo = 0;
    PyObject *lean = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)end + 8);
    PyObject *fields = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)end + 8);
    int bad = !lean || !fields || end % 8 || fixed < 1;
    if (!bad) {
        uint8_t *l = (uint8_t *)PyBytes_AS_STRING(lean), *f = (uint8_t *)PyBytes_AS_STRING(fields);
        Py_BEGIN_ALLOW_THREADS
        while (pos + 8 <= end) {
            uint32_t type;
            uint16_t size;
            memcpy(&type, in + pos, 4);
            memcpy(&size, in + pos + 6, 2);
            if (size < 8 || size % 8 || pos + size > end) { bad = 1; break; }
            if (type != PERF_RECORD_SAMPLE) {
                memcpy(l + lo, in + pos, size);
                lo += size, pos += size;
                continue;
            }
            int64_t cur = stack_word(in + pos, size / 8, fixed, callchain, nregs);
            if (cur < 0) { bad = 1; break; }
            uint64_t stack = load64(in + pos + 8 * cur);
            if (stack > (uint64_t)size) { bad = 1; break; }
            int64_t length = stack ? 16 + (int64_t)stack : 8;
            if (8 * cur + length > size) { bad = 1; break; }
            memcpy(l + lo, in + pos, (size_t)(8 * cur));
            uint16_t nsize = (uint16_t)(size - length + 8);
            memcpy(l + lo + 6, &nsize, 2);
            memset(l + lo + 8 * cur, 0, 8);
            memcpy(l + lo + 8 * cur + 8, in + pos + 8 * cur + length, (size_t)(size - 8 * cur - length));
            memcpy(f + fo, in + pos + 8 * cur, (size_t)length);
            lo += nsize, fo += length, pos += size;
        }
        Py_END_ALLOW_THREADS
    }
    release(&b, 1);
    if (bad || pos != end) {
        Py_XDECREF(lean);
        Py_XDECREF(fields);
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    if (_PyBytes_Resize(&lean, (Py_ssize_t)lo) < 0) {
        Py_DECREF(fields);
        return NULL;
    }
    if (_PyBytes_Resize(&fields, (Py_ssize_t)fo) < 0) {
        Py_DECREF(lean);
        return NULL;
    }
    return Py_BuildValue("(NN)", lean, fields);
}

/* field_spans(fields) -> bytes of int64 triples (data offset, size, dyn_size), one per stack
 * field of a FLAG_STACKS frame's second part, or None when the part is not whole fields.
 * profiler/format/splitstacks.py: field_spans_python is the reference. */
static PyObject *field_spans(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *of;
    if (!PyArg_ParseTuple(args, "O", &of))
        return NULL;
    Buf b;
    memset(&b, 0, sizeof(b));
    if (get_buf(of, &b, 1, "fields") < 0) {
        release(&b, 1);
        return NULL;
    }
    const uint8_t *f = (const uint8_t *)b.b.buf;
    int64_t len = b.b.len, q = 0, n = 0, cap = 1024;
    int64_t *out = malloc((size_t)cap * 3 * 8);
    int bad = out == NULL || len % 8;
    while (!bad && q + 8 <= len) {
        int64_t data;
        uint64_t size, dyn;
        q = next_field(f, len, q, &data, &size, &dyn);
        if (q < 0) { bad = 1; break; }
        if (n == cap) {
            cap *= 2;
            int64_t *grown = realloc(out, (size_t)cap * 3 * 8);
            if (!grown) { bad = 1; break; }
            out = grown;
        }
        out[3 * n] = data, out[3 * n + 1] = (int64_t)size, out[3 * n + 2] = (int64_t)dyn;
        n++;
    }
    release(&b, 1);
    PyObject *res = NULL;
    if (!bad && q == len)
        res = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)(n * 3 * 8));
    free(out);
    if (res == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return res;
}

/* sample_offsets(records) -> bytes of int64: where each SAMPLE record of ``records`` (whole
 * native-order kernel records) starts, up to the first record that is not whole. */
/* Where the records of ``buf`` (whole native-order kernel records) start: every one
 * (``samples_only`` 0: the decoder's views.record_offsets, whose sequential walk in Python is
 * the reference) or the SAMPLE records only; and where the walk stopped (a header that does
 * not fit, or one whose size is not a multiple of 8 when ``strict``). */
static PyObject *offsets_of(PyObject *ob, int samples_only, int strict, int64_t *stop) {
    Buf b;
    memset(&b, 0, sizeof(b));
    if (get_buf(ob, &b, 1, "records") < 0) {
        release(&b, 1);
        return NULL;
    }
    const uint8_t *buf = (const uint8_t *)b.b.buf;
    int64_t end = b.b.len, pos = 0, n = 0;
    PyObject *res = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((end / 8 + 1) * 8));
    if (!res) {
        release(&b, 1);
        return NULL;
    }
    int64_t *out = (int64_t *)PyBytes_AS_STRING(res);
    for (;;) {
        uint32_t type;
        int64_t next = next_record(buf, end, pos, strict, &type);
        if (next < 0)
            break;
        if (!samples_only || type == PERF_RECORD_SAMPLE)
            out[n++] = pos;
        pos = next;
    }
    release(&b, 1);
    *stop = pos;
    if (_PyBytes_Resize(&res, (Py_ssize_t)(n * 8)) < 0)
        return NULL;
    return res;
}

static PyObject *sample_offsets(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ob;
    int64_t stop;
    if (!PyArg_ParseTuple(args, "O", &ob))
        return NULL;
    return offsets_of(ob, 1, 0, &stop);
}

static PyObject *record_offsets(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ob;
    int64_t stop;
    if (!PyArg_ParseTuple(args, "O", &ob))
        return NULL;
    PyObject *offs = offsets_of(ob, 0, 1, &stop);
    return offs ? Py_BuildValue("(NL)", offs, (long long)stop) : NULL;
}

static PyMethodDef methods[] = {
    {"unwind_step", unwind_step, METH_VARARGS,
     "unwind_step(buf, offset, size, sp0, pc, regs, valid, after_signal, row, kind, ok, cfa_kind, cfa_reg, "
     "cfa_off, plt, rule_kind, rule_arg, rule_reg, flags, fp_index, columns, ra, sp, ra_mask, ra_is_register) "
     "-> why: see profiler/unwind/unwinder.py"},
    {"unwind_all", unwind_all, METH_VARARGS,
     "unwind_all(buf, offset, size, sp0, pc, regs, valid, rank, jit_rank, key, end, dso, kind_of_dso, "
     "slot_of_dso, part_key, part_end, part_slot, part_bias, jit_key, jit_end, jit_slot, table_key, cfa_kind, "
     "cfa_reg, cfa_off, plt, rule_kind, rule_arg, rule_reg, flags, fp_index, columns, ra, sp, ra_mask, "
     "ra_is_register, max_depth) -> (start, pcs, reason): see profiler/unwind/unwinder.py"},
    {"inflate_parts", inflate_parts, METH_VARARGS,
     "inflate_parts(parts, table, dst) -> status per part, or None without libzstd"},
    {"unwind_frames", unwind_frames, METH_VARARGS,
     "unwind_frames(image, rec, frames, sp0, pc, regs, valid, <unwind_all's maps and rules>, fields) -> "
     "(start, pcs, reason, status) or None: see profiler/report/unwind_samples.py"},
    {"scan_chunk", scan_chunk, METH_VARARGS,
     "scan_chunk(view, frame_start, frame_len, time_word) -> (stops, samples, others, types, (any, tmin, tmax)) "
     "or None: see profiler/report/tally_native.py"},
    {"tally_chunk", tally_chunk, METH_VARARGS,
     "tally_chunk(view, frame_start, frame_len, frame_cpu, fields, field_start, ids, id_event, cpus, "
     "time_ranges, other_time, other_seq, gen_log, comm_log, seq0, id_word, default_event, callchains, "
     "cpu_limit, keep_cpu) -> (rows, chain_start, chain_words, recorded, present, damaged, any_sample, "
     "first_time, cpu_known, period_total_high, period_total_low) or None: see profiler/report/tally_native.py"},
    {"join_stacks", join_stacks, METH_VARARGS,
     "join_stacks(lean, fields, fixed_words, callchain, nregs, out) -> length written into out, or None: "
     "see profiler/format/splitstacks.py"},
    {"split_stacks", split_stacks, METH_VARARGS,
     "split_stacks(records, fixed_words, callchain, nregs) -> (lean, fields) or None: see profiler/format/splitstacks.py"},
    {"field_spans", field_spans, METH_VARARGS,
     "field_spans(fields) -> int64 (data offset, size, dyn_size) triples or None: see profiler/format/splitstacks.py"},
    {"record_offsets", record_offsets, METH_VARARGS,
     "record_offsets(records) -> (int64 offsets as bytes, where the walk stopped): see "
     "profiler/format/decode/views.py"},
    {"sample_offsets", sample_offsets, METH_VARARGS,
     "sample_offsets(records) -> int64 offsets of the SAMPLE records: see profiler/format/splitstacks.py"},
    {"walk_records", walk_records, METH_VARARGS,
     "walk_records(buf, kernel_floor, ip_offset, chain_offset, all_words, keep_mask) -> (stop, counts, lost, "
     "kept, kernel_words): see profiler/record/session.py"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "compiled", "The report's compiled kernels (issue 28).",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_compiled(void) { return PyModule_Create(&module); }
