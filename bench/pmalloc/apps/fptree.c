/* FPTree (Oukid et al., SIGMOD 2016; PMAlloc paper Sec. 8.5): a persistent
 * B+-tree whose leaves live in the persistent heap and whose inner nodes live
 * in DRAM (rebuilt from the leaves at open). Written for nearmem.
 *
 * Leaf: 64 entries (the paper's node size), a bitmap of valid entries, one-byte
 * fingerprints, 8-byte keys and values that point to 128-byte key-value pairs
 * (the paper's setup: 8 B keys, 128 B pairs), the next leaf and the lowest key
 * the leaf may hold. Crash consistency (FPTree's scheme under each allocator's
 * model):
 *  - insert: allocate the pair into the free slot's value pointer, write and
 *    persist it, write key and fingerprint (persisted), then set the bitmap bit
 *    (persisted: the commit);
 *  - delete: clear the bitmap bit (persisted: the commit), then free the pair
 *    through the slot's value pointer (which nulls it);
 *  - split (when a leaf is full): a micro-log in the root area names the leaf
 *    and the split key; the new leaf is allocated into the micro-log's own
 *    pointer, gets the upper half and the old next pointer (persisted), is
 *    linked (old leaf's next, persisted), then the old leaf's bitmap drops the
 *    upper half (the commit) and its copies of the moved value pointers are
 *    cleared; the micro-log is cleared last.
 * Recovery (fp_recover): finish or undo a split from the micro-log; free every
 * pair whose slot has its bitmap bit clear (an insert cut short); reset the leaf
 * locks; rebuild the inner nodes. Nothing leaks under PMAlloc-LOG and PMDK; under
 * PMAlloc-GC the allocator's mark keeps what the leaves point to and this
 * recovery frees the uncommitted pairs.
 * Concurrency: a reader-writer lock over the DRAM inner nodes (readers for
 * inserts, deletes and searches; a split takes it as a writer) and a spinlock
 * per leaf (FPTree uses HTM for the inner nodes; there is none here). Leaves are
 * never merged or removed (FPTree removes empty leaves; with the paper's 50/50
 * mix over a fixed key range they refill).
 *
 * Workload (pa_app "fptree"): keys are scrambled 64-bit values, each thread owns
 * 2*cfg.n of them; every thread inserts cfg.n of its keys (warm-up, untimed),
 * then runs cfg.ops operations: cfg.iters percent searches of a present key,
 * the rest half inserts of an absent key, half deletes of a present key (the
 * paper's mix is 50% inserts / 50% deletes: cfg.iters = 0). Operation = one
 * insert, delete or search. Check: the tree holds exactly the present keys of
 * every thread, each pair intact, leaves in key order. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "pm_apps.h"
#include "pm_apps_crash.h"

#define FP_N 64u        /* entries per leaf */
#define FP_FANOUT 64u   /* children per inner node */
#define FP_KV 128u      /* key-value pair */

typedef struct fp_leaf {
    uint64_t bitmap;
    uint32_t lock; /* volatile state, reset at open */
    uint32_t pad0;
    pa_ptr next;
    uint64_t lowkey; /* every key of this leaf is >= lowkey */
    uint64_t pad1[3];
    uint8_t fp[FP_N];
    uint64_t keys[FP_N];
    pa_ptr vals[FP_N];
} fp_leaf;
_Static_assert(sizeof(fp_leaf) == 64 + 64 + 8 * FP_N + 16 * FP_N, "leaf layout");

typedef struct fp_kv { uint64_t key, w[FP_KV / 8 - 1]; } fp_kv;

typedef struct fp_root {
    pa_ptr head;
    pa_ptr split_leaf; /* micro-log: the leaf being split (a copy of its pointer) */
    pa_ptr split_new;  /* ... the new leaf (the allocation's destination) */
    uint64_t split_key;
    uint64_t magic;
    pa_ptr keys_pres[64]; /* crash workload: nothing (the tree is the state) */
} fp_root;
#define FP_MAGIC 0x46505472656531ull

typedef struct fp_inner {
    unsigned n; /* keys; children = n + 1 */
    bool leaves; /* children are leaves */
    uint64_t keys[FP_FANOUT - 1];
    void *child[FP_FANOUT];
} fp_inner;

typedef struct fp_tree {
    pa_heap *a;
    fp_root *root;
    fp_inner *top;
    pthread_rwlock_t lock;
    pthread_mutex_t inner_mu; /* inner-node allocation list */
    fp_inner **inners;
    size_t ninner, capinner;
} fp_tree;

static inline uint8_t fp_hash(uint64_t key) { return (uint8_t)(pa_mix64(key) >> 56); }
static inline uint64_t fp_word(uint64_t key, unsigned w) { return (key * 0x9e3779b97f4a7c15ull + w) | 1ull << 63; }

static fp_inner *fp_inner_new(fp_tree *t, bool leaves)
{
    fp_inner *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->leaves = leaves;
    if (t->ninner == t->capinner) {
        size_t c = t->capinner ? t->capinner * 2 : 64;
        fp_inner **v = realloc(t->inners, c * sizeof *v);
        if (!v) { free(n); return NULL; }
        t->inners = v;
        t->capinner = c;
    }
    t->inners[t->ninner++] = n;
    return n;
}

static void fp_inner_free_all(fp_tree *t)
{
    for (size_t i = 0; i < t->ninner; i++) free(t->inners[i]);
    free(t->inners);
    t->inners = NULL;
    t->ninner = t->capinner = 0;
    t->top = NULL;
}

static inline unsigned fp_child_idx(const fp_inner *n, uint64_t key)
{
    unsigned lo = 0, hi = n->n; /* first key > key */
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (n->keys[mid] <= key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static fp_leaf *fp_find_leaf(const fp_tree *t, uint64_t key, fp_inner **path, unsigned *pidx, unsigned *depth)
{
    fp_inner *n = t->top;
    unsigned d = 0;
    for (;;) {
        unsigned i = fp_child_idx(n, key);
        if (path) { path[d] = n; pidx[d] = i; }
        d++;
        if (n->leaves) {
            if (depth) *depth = d;
            return n->child[i];
        }
        n = n->child[i];
    }
}

static inline void fp_lock(fp_leaf *l)
{
    while (__atomic_exchange_n(&l->lock, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&l->lock, __ATOMIC_RELAXED)) sched_yield();
}
static inline void fp_unlock(fp_leaf *l) { __atomic_store_n(&l->lock, 0, __ATOMIC_RELEASE); }

static int fp_slot_of(const fp_leaf *l, uint64_t key)
{
    uint8_t h = fp_hash(key);
    for (uint64_t m = l->bitmap; m; m &= m - 1) {
        unsigned i = (unsigned)__builtin_ctzll(m);
        if (l->fp[i] == h && l->keys[i] == key) return (int)i;
    }
    return -1;
}

/* Build the inner nodes over the leaf chain (open, recovery). */
static int fp_rebuild(fp_tree *t)
{
    fp_inner_free_all(t);
    size_t nl = 0, cap = 1024;
    fp_leaf **leaves = malloc(cap * sizeof *leaves);
    if (!leaves) return -1;
    for (pa_ptr p = t->root->head; !pa_isnull(t->a, p);) {
        fp_leaf *l = pa_get(t->a, p);
        if (nl == cap) {
            fp_leaf **v = realloc(leaves, 2 * cap * sizeof *v);
            if (!v) { free(leaves); return -1; }
            leaves = v;
            cap *= 2;
        }
        leaves[nl++] = l;
        p = l->next;
    }
    /* one level at a time, nodes filled to 3/4 so that splits do not cascade at once */
    const unsigned fill = FP_FANOUT * 3 / 4;
    void **cur = (void **)leaves;
    uint64_t *lows = malloc(nl * sizeof *lows);
    if (!lows) { free(leaves); return -1; }
    for (size_t i = 0; i < nl; i++) lows[i] = leaves[i]->lowkey;
    size_t n = nl;
    bool leaf_level = true;
    int rc = 0;
    for (;;) {
        size_t nn = (n + fill - 1) / fill;
        void **up = malloc((nn ? nn : 1) * sizeof *up);
        uint64_t *uplows = malloc((nn ? nn : 1) * sizeof *uplows);
        if (!up || !uplows) { free(up); free(uplows); rc = -1; break; }
        for (size_t k = 0; k < nn; k++) {
            fp_inner *in = fp_inner_new(t, leaf_level);
            if (!in) { rc = -1; break; }
            size_t b = k * fill, e = b + fill < n ? b + fill : n;
            for (size_t i = b; i < e; i++) {
                in->child[i - b] = cur[i];
                if (i > b) in->keys[i - b - 1] = lows[i];
            }
            in->n = (unsigned)(e - b - 1);
            up[k] = in;
            uplows[k] = lows[b];
        }
        if (cur != (void **)leaves) free(cur);
        free(lows);
        cur = up;
        lows = uplows;
        n = nn;
        leaf_level = false;
        if (rc || n == 1) break;
    }
    if (!rc) t->top = cur[0];
    if (cur != (void **)leaves) free(cur);
    free(lows);
    free(leaves);
    return rc;
}

/* Insert separator `key` -> `right` after path[d-1]'s child pidx[d-1] (write lock held). */
static int fp_insert_sep(fp_tree *t, fp_inner **path, unsigned *pidx, unsigned d, uint64_t key, void *right)
{
    while (d > 0) {
        fp_inner *n = path[d - 1];
        unsigned i = pidx[d - 1];
        if (n->n + 1 < FP_FANOUT) {
            memmove(&n->keys[i + 1], &n->keys[i], (n->n - i) * sizeof n->keys[0]);
            memmove(&n->child[i + 2], &n->child[i + 1], (n->n - i) * sizeof n->child[0]);
            n->keys[i] = key;
            n->child[i + 1] = right;
            n->n++;
            return 0;
        }
        /* split n: gather n's keys and children plus the new pair, halve */
        uint64_t ks[FP_FANOUT];
        void *cs[FP_FANOUT + 1];
        unsigned nk = 0, nc = 0;
        for (unsigned j = 0; j <= n->n; j++) {
            cs[nc++] = n->child[j];
            if (j == i) { ks[nk++] = key; cs[nc++] = right; }
            if (j < n->n) ks[nk++] = n->keys[j];
        }
        fp_inner *r = fp_inner_new(t, n->leaves);
        if (!r) return -1;
        unsigned half = nk / 2; /* ks[half] moves up */
        n->n = half;
        for (unsigned j = 0; j < half; j++) n->keys[j] = ks[j];
        for (unsigned j = 0; j <= half; j++) n->child[j] = cs[j];
        r->n = nk - half - 1;
        for (unsigned j = 0; j < r->n; j++) r->keys[j] = ks[half + 1 + j];
        for (unsigned j = 0; j <= r->n; j++) r->child[j] = cs[half + 1 + j];
        key = ks[half];
        right = r;
        d--;
    }
    fp_inner *top = fp_inner_new(t, false);
    if (!top) return -1;
    top->n = 1;
    top->keys[0] = key;
    top->child[0] = t->top;
    top->child[1] = right;
    t->top = top;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Split the full leaf holding `key` (write lock held). */
static int fp_split(fp_tree *t, uint64_t key)
{
    fp_inner *path[32];
    unsigned pidx[32], d;
    fp_leaf *l = fp_find_leaf(t, key, path, pidx, &d);
    if (l->bitmap != ~0ull) return 0; /* someone split it first */
    pa_heap *a = t->a;
    fp_root *root = t->root;
    uint64_t ks[FP_N];
    for (unsigned i = 0; i < FP_N; i++) ks[i] = l->keys[i];
    qsort(ks, FP_N, sizeof ks[0], cmp_u64);
    uint64_t sk = ks[FP_N / 2];
    root->split_leaf = pa_ptr_of(a, l);
    root->split_key = sk;
    pa_persist(a, &root->split_leaf, sizeof root->split_leaf + sizeof root->split_new + sizeof root->split_key);
    if (pa_alloc(a, sizeof(fp_leaf), &root->split_new)) return -1;
    fp_leaf *nl = pa_get(a, root->split_new);
    memset(nl, 0, sizeof *nl);
    uint64_t moved = 0;
    unsigned k = 0;
    for (unsigned i = 0; i < FP_N; i++)
        if (l->keys[i] >= sk) {
            nl->fp[k] = l->fp[i];
            nl->keys[k] = l->keys[i];
            nl->vals[k] = l->vals[i];
            k++;
            moved |= 1ull << i;
        }
    nl->bitmap = k == 64 ? ~0ull : (1ull << k) - 1;
    nl->next = l->next;
    nl->lowkey = sk;
    pa_persist(a, nl, sizeof *nl);
    l->next = root->split_new;
    pa_persist(a, &l->next, sizeof l->next);
    l->bitmap &= ~moved; /* the commit */
    pa_persist(a, &l->bitmap, sizeof l->bitmap);
    pa_ptr zero;
    memset(&zero, 0, sizeof zero);
    for (unsigned i = 0; i < FP_N; i++) /* malloc_to destinations once: cleared through pa_set_ptr */
        if (moved >> i & 1) pa_set_ptr(a, &l->vals[i], zero, false);
    pa_drain(a);
    pa_set_ptr(a, &root->split_new, zero, true);
    memset(&root->split_leaf, 0, sizeof root->split_leaf);
    pa_persist(a, &root->split_leaf, sizeof root->split_leaf);
    return fp_insert_sep(t, path, pidx, d, sk, nl);
}

/* 1 inserted, 0 present already, -1 error. */
static int fp_insert(fp_tree *t, uint64_t key)
{
    pa_heap *a = t->a;
    for (;;) {
        pthread_rwlock_rdlock(&t->lock);
        fp_leaf *l = fp_find_leaf(t, key, NULL, NULL, NULL);
        fp_lock(l);
        if (fp_slot_of(l, key) >= 0) {
            fp_unlock(l);
            pthread_rwlock_unlock(&t->lock);
            return 0;
        }
        if (l->bitmap != ~0ull) {
            unsigned i = (unsigned)__builtin_ctzll(~l->bitmap);
            int rc = pa_alloc(a, FP_KV, &l->vals[i]);
            if (!rc) {
                fp_kv *kv = pa_get(a, l->vals[i]);
                kv->key = key;
                for (unsigned w = 0; w < FP_KV / 8 - 1; w++) kv->w[w] = fp_word(key, w);
                pa_persist(a, kv, FP_KV);
                l->keys[i] = key;
                l->fp[i] = fp_hash(key);
                pa_flush(a, &l->keys[i], sizeof l->keys[i]);
                pa_flush(a, &l->fp[i], 1);
                pa_drain(a);
                l->bitmap |= 1ull << i;
                pa_persist(a, &l->bitmap, sizeof l->bitmap);
            }
            fp_unlock(l);
            pthread_rwlock_unlock(&t->lock);
            return rc ? -1 : 1;
        }
        fp_unlock(l);
        pthread_rwlock_unlock(&t->lock);
        pthread_rwlock_wrlock(&t->lock);
        int rc = fp_split(t, key);
        pthread_rwlock_unlock(&t->lock);
        if (rc) return -1;
    }
}

/* 1 deleted, 0 absent, -1 error. */
static int fp_delete(fp_tree *t, uint64_t key)
{
    pthread_rwlock_rdlock(&t->lock);
    fp_leaf *l = fp_find_leaf(t, key, NULL, NULL, NULL);
    fp_lock(l);
    int i = fp_slot_of(l, key), rc = 0;
    if (i >= 0) {
        l->bitmap &= ~(1ull << i);
        pa_persist(t->a, &l->bitmap, sizeof l->bitmap);
        rc = pa_free(t->a, &l->vals[i]) ? -1 : 1;
    }
    fp_unlock(l);
    pthread_rwlock_unlock(&t->lock);
    return rc;
}

/* 1 found intact, 0 absent, -1 damaged. */
static int fp_search(fp_tree *t, uint64_t key)
{
    pthread_rwlock_rdlock(&t->lock);
    fp_leaf *l = fp_find_leaf(t, key, NULL, NULL, NULL);
    fp_lock(l);
    int i = fp_slot_of(l, key), rc = 0;
    if (i >= 0) {
        const fp_kv *kv = pa_get(t->a, l->vals[i]);
        rc = kv && kv->key == key && kv->w[FP_KV / 8 - 2] == fp_word(key, FP_KV / 8 - 2) ? 1 : -1;
    }
    fp_unlock(l);
    pthread_rwlock_unlock(&t->lock);
    return rc;
}

static void fp_tree_free(fp_tree *t)
{
    if (!t) return;
    fp_inner_free_all(t);
    pthread_rwlock_destroy(&t->lock);
    free(t);
}

static fp_tree *fp_tree_new(pa_heap *a)
{
    fp_tree *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->a = a;
    t->root = a->root;
    pthread_rwlock_init(&t->lock, NULL);
    return t;
}

/* A new tree: one empty leaf. */
static int fp_create(fp_tree *t)
{
    fp_root *root = t->root;
    if (pa_alloc(t->a, sizeof(fp_leaf), &root->head)) return -1;
    fp_leaf *l = pa_get(t->a, root->head);
    memset(l, 0, sizeof *l);
    pa_persist(t->a, l, sizeof *l);
    root->magic = FP_MAGIC;
    pa_persist(t->a, &root->magic, sizeof root->magic);
    return fp_rebuild(t);
}

/* After an open: finish or undo a split, free uncommitted pairs, reset the locks,
 * rebuild the inner nodes. Returns the number of pairs freed, -1 on error. */
static long fp_recover(fp_tree *t, char *msg, size_t cap)
{
    pa_heap *a = t->a;
    fp_root *root = t->root;
    long freed = 0;
    if (root->magic != FP_MAGIC) {
        if (!pa_isnull(a, root->head)) { snprintf(msg, cap, "tree head without magic"); return -1; }
        return fp_create(t) ? -1 : 0; /* crashed while being created */
    }
    if (!pa_isnull(a, root->split_leaf)) {
        fp_leaf *l = pa_get(a, root->split_leaf);
        if (!l) { snprintf(msg, cap, "split micro-log names no leaf"); return -1; }
        if (!pa_isnull(a, root->split_new)) {
            fp_leaf *nl = pa_get(a, root->split_new);
            if (pa_get(a, l->next) != nl) {
                if (pa_free(a, &root->split_new)) { snprintf(msg, cap, "split undo: free failed"); return -1; }
            } else {
                /* linked: the new leaf owns the keys >= split_key */
                for (unsigned i = 0; i < FP_N; i++)
                    if ((l->bitmap >> i & 1) && l->keys[i] >= root->split_key) l->bitmap &= ~(1ull << i);
                pa_persist(a, &l->bitmap, sizeof l->bitmap);
            }
        }
        /* a split runs alone: the old leaf's uncommitted slots are the moved copies */
        pa_ptr zero;
        memset(&zero, 0, sizeof zero);
        for (unsigned i = 0; i < FP_N; i++)
            if (!(l->bitmap >> i & 1) && !pa_isnull(a, l->vals[i])) pa_set_ptr(a, &l->vals[i], zero, false);
        pa_drain(a);
        if (!pa_isnull(a, root->split_new)) pa_set_ptr(a, &root->split_new, zero, true);
        memset(&root->split_leaf, 0, sizeof root->split_leaf);
        pa_persist(a, &root->split_leaf, sizeof root->split_leaf);
    } else if (!pa_isnull(a, root->split_new)) {
        /* the log was being cleared: the split had completed */
        pa_ptr zero;
        memset(&zero, 0, sizeof zero);
        pa_set_ptr(a, &root->split_new, zero, true);
    }
    for (pa_ptr p = root->head; !pa_isnull(a, p);) {
        fp_leaf *l = pa_get(a, p);
        l->lock = 0;
        for (unsigned i = 0; i < FP_N; i++)
            if (!(l->bitmap >> i & 1) && !pa_isnull(a, l->vals[i])) {
                if (pa_free(a, &l->vals[i])) { snprintf(msg, cap, "freeing an uncommitted pair failed"); return -1; }
                freed++;
            }
        p = l->next;
    }
    if (fp_rebuild(t)) { snprintf(msg, cap, "rebuild: out of memory"); return -1; }
    return freed;
}

/* ---- the benchmark ---- */

typedef struct fp_thr { uint64_t *pres, *abs_, npres, nabs; } fp_thr;
typedef struct fp_state { fp_tree *t; fp_thr th[64]; } fp_state;

static size_t fp_pool(const pa_cfg *c)
{
    /* per live pair: the 128 B pair (+ allocator rounding) and ~1/40 of a 1664 B leaf */
    uint64_t live = (uint64_t)c->threads * (c->n + c->ops / 4 + 64);
    return (((size_t)64 << 20) + (size_t)(live * 320)) & ~(size_t)0xfffff;
}

static inline uint64_t fp_key(unsigned tid, uint64_t k) { return pa_mix64((k << 8) | tid); }

static int fp_init(pa_ctx *x)
{
    if (x->c->threads > 64) return pa_fail(x, "at most 64 threads");
    fp_state *s = calloc(1, sizeof *s);
    if (!s) return pa_fail(x, "out of memory");
    x->st = s;
    if (!(s->t = fp_tree_new(x->a)) || fp_create(s->t)) return pa_fail(x, "tree creation failed");
    uint64_t K = 2 * (x->c->n ? x->c->n : 1);
    for (unsigned t = 0; t < x->c->threads; t++) {
        s->th[t].pres = malloc(K * sizeof(uint64_t));
        s->th[t].abs_ = malloc(K * sizeof(uint64_t));
        if (!s->th[t].pres || !s->th[t].abs_) return pa_fail(x, "out of memory");
    }
    return 0;
}

static int fp_work(pa_ctx *x, unsigned tid, uint64_t *ops)
{
    fp_state *s = x->st;
    fp_thr *m = &s->th[tid];
    uint64_t n = x->c->n, K = 2 * (n ? n : 1), done = 0;
    unsigned search_pct = (unsigned)x->c->iters;
    nm_rng r;
    pa_rng(x, tid, &r);
    m->npres = 0;
    m->nabs = K;
    for (uint64_t i = 0; i < K; i++) m->abs_[i] = i;
    for (uint64_t q = 0; q < n + x->c->ops; q++) {
        if (q == n) pa_timed_begin(x);
        if (q >= n && m->npres && nm_rng_below(&r, 100) < search_pct) {
            uint64_t k = m->pres[nm_rng_below(&r, m->npres)];
            if (fp_search(s->t, fp_key(tid, k)) != 1) return pa_fail(x, "search: key %llu of thread %u lost or damaged", (unsigned long long)k, tid);
            done++;
            continue;
        }
        bool ins = q < n ? true : (nm_rng_u64(&r) & 1) ? m->nabs > 0 : m->npres == 0;
        if (ins) {
            uint64_t j = nm_rng_below(&r, m->nabs), k = m->abs_[j];
            m->abs_[j] = m->abs_[--m->nabs];
            int rc = fp_insert(s->t, fp_key(tid, k));
            if (rc != 1) return pa_fail(x, rc ? "insert: allocation failed" : "insert: key already present");
            m->pres[m->npres++] = k;
        } else {
            uint64_t j = nm_rng_below(&r, m->npres), k = m->pres[j];
            m->pres[j] = m->pres[--m->npres];
            int rc = fp_delete(s->t, fp_key(tid, k));
            if (rc != 1) return pa_fail(x, rc ? "delete: free failed" : "delete: key absent");
            m->abs_[m->nabs++] = k;
        }
        if (q >= n) done++;
    }
    if (x->c->ops == 0) pa_timed_begin(x);
    *ops = done;
    return 0;
}

/* Structure check: leaves in key order, every valid entry's pair allocated and
 * intact, no pair behind a clear bit, micro-log clear. Counts entries. */
static int fp_check_tree(pa_heap *a, const fp_root *root, uint64_t *entries, uint64_t *leaves, char *msg, size_t cap)
{
    *entries = *leaves = 0;
    if (!pa_isnull(a, root->split_leaf) || !pa_isnull(a, root->split_new)) { snprintf(msg, cap, "split micro-log not clear"); return -1; }
    uint64_t prevlow = 0;
    for (pa_ptr p = root->head; !pa_isnull(a, p);) {
        const fp_leaf *l = pa_get(a, p);
        if (!l || pa_usable(a, l) < sizeof *l) { snprintf(msg, cap, "leaf %llu is not an allocated leaf", (unsigned long long)*leaves); return -1; }
        if (*leaves && l->lowkey <= prevlow) { snprintf(msg, cap, "leaf %llu: low keys out of order", (unsigned long long)*leaves); return -1; }
        const fp_leaf *nx = pa_isnull(a, l->next) ? NULL : pa_get(a, l->next);
        for (unsigned i = 0; i < FP_N; i++) {
            if (!(l->bitmap >> i & 1)) {
                if (!pa_isnull(a, l->vals[i])) { snprintf(msg, cap, "leaf %llu slot %u: pair behind a clear bit", (unsigned long long)*leaves, i); return -1; }
                continue;
            }
            uint64_t key = l->keys[i];
            if (key < l->lowkey || (nx && key >= nx->lowkey)) { snprintf(msg, cap, "leaf %llu: key outside its range", (unsigned long long)*leaves); return -1; }
            if (l->fp[i] != fp_hash(key)) { snprintf(msg, cap, "leaf %llu slot %u: wrong fingerprint", (unsigned long long)*leaves, i); return -1; }
            for (unsigned j = i + 1; j < FP_N; j++)
                if ((l->bitmap >> j & 1) && l->keys[j] == key) { snprintf(msg, cap, "duplicate key in a leaf"); return -1; }
            const fp_kv *kv = pa_get(a, l->vals[i]);
            if (!kv || pa_usable(a, kv) < FP_KV) { snprintf(msg, cap, "leaf %llu slot %u: pair not allocated", (unsigned long long)*leaves, i); return -1; }
            if (kv->key != key) { snprintf(msg, cap, "pair holds the wrong key"); return -1; }
            for (unsigned w = 0; w < FP_KV / 8 - 1; w++)
                if (kv->w[w] != fp_word(key, w)) { snprintf(msg, cap, "pair damaged"); return -1; }
            (*entries)++;
        }
        prevlow = l->lowkey;
        (*leaves)++;
        p = l->next;
    }
    return 0;
}

static int fp_verify(pa_ctx *x)
{
    fp_state *s = x->st;
    uint64_t total = 0, entries, leaves;
    for (unsigned t = 0; t < x->c->threads; t++) {
        total += s->th[t].npres;
        for (uint64_t i = 0; i < s->th[t].npres; i++)
            if (fp_search(s->t, fp_key(t, s->th[t].pres[i])) != 1) return pa_fail(x, "key of thread %u missing or damaged", t);
    }
    if (fp_check_tree(x->a, s->t->root, &entries, &leaves, x->msg, sizeof x->msg)) return -1;
    if (entries != total) return pa_fail(x, "%llu entries in the tree, %llu expected", (unsigned long long)entries, (unsigned long long)total);
    return 0;
}

static void fp_fini(pa_ctx *x)
{
    fp_state *s = x->st;
    if (!s) return;
    fp_tree_free(s->t);
    for (unsigned t = 0; t < 64; t++) {
        free(s->th[t].pres);
        free(s->th[t].abs_);
    }
    free(s);
}

const pa_app pa_app_fptree = {"fptree", "insert, delete or search", true, fp_pool, fp_init, fp_work, fp_verify, fp_fini};

/* ---- crash checking (pm_apps_crash.h) ----
 * The persistent tree is the whole state: a restarted process rebuilds its
 * key sets from it. Keys come from a universe of 2 * cfg_n per thread. */

typedef struct fp_cstate { fp_tree *t; uint64_t universe; } fp_cstate;

static void *fpc_open(pa_heap *a, uint64_t universe, int *recovered, char *msg, size_t cap)
{
    fp_cstate *c = calloc(1, sizeof *c);
    if (!c || !(c->t = fp_tree_new(a))) { free(c); snprintf(msg, cap, "out of memory"); return NULL; }
    c->universe = universe;
    long r = fp_recover(c->t, msg, cap);
    if (r < 0) { fp_tree_free(c->t); free(c); return NULL; }
    *recovered = (int)r;
    return c;
}

static int fpc_step(void *st, unsigned tid, nm_rng *r, char *msg, size_t cap)
{
    fp_cstate *c = st;
    uint64_t key = fp_key(tid, nm_rng_below(r, c->universe));
    unsigned what = (unsigned)nm_rng_below(r, 100);
    int rc;
    if (what < 10) rc = fp_search(c->t, key) < 0 ? -1 : 0;
    else if (what < 60) rc = fp_insert(c->t, key) < 0 ? -1 : 0;
    else rc = fp_delete(c->t, key) < 0 ? -1 : 0;
    if (rc) snprintf(msg, cap, "fptree operation failed (%u)", what);
    return rc;
}

typedef struct fp_reach { pa_heap *a; const void **v; size_t n, cap; } fp_reach;

static int fp_reach_add(fp_reach *r, const void *p)
{
    if (r->n == r->cap) {
        size_t c = r->cap ? r->cap * 2 : 1024;
        const void **v = realloc(r->v, c * sizeof *v);
        if (!v) return -1;
        r->v = v;
        r->cap = c;
    }
    r->v[r->n++] = p;
    return 0;
}

static int fpc_reachable(void *st, const void ***objs, size_t *n, char *msg, size_t cap)
{
    fp_cstate *c = st;
    pa_heap *a = c->t->a;
    uint64_t entries, leaves;
    if (fp_check_tree(a, c->t->root, &entries, &leaves, msg, cap)) return -1;
    fp_reach r = {a, NULL, 0, 0};
    for (pa_ptr p = c->t->root->head; !pa_isnull(a, p);) {
        const fp_leaf *l = pa_get(a, p);
        if (fp_reach_add(&r, l)) goto oom;
        for (unsigned i = 0; i < FP_N; i++)
            if (l->bitmap >> i & 1 && fp_reach_add(&r, pa_get(a, l->vals[i]))) goto oom;
        p = l->next;
    }
    *objs = r.v;
    *n = r.n;
    return 0;
oom:
    free(r.v);
    snprintf(msg, cap, "out of memory");
    return -1;
}

static void fpc_close(void *st)
{
    fp_cstate *c = st;
    if (c) fp_tree_free(c->t);
    free(c);
}

const pa_crash_app pa_crash_fptree = {"fptree", fpc_open, fpc_step, fpc_reachable, fpc_close};
