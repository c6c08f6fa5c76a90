/* KV (suite pmalloc-kv's store, here under the applications' rules): a
 * persistent hash index with one bucket (a persistent pointer) per key of a
 * fixed key universe, twice the live set, holding 128-byte key-value pairs
 * (key + 120 B value, written and persisted by the application). Each thread
 * owns its key range: cfg.n pairs of warm-up (untimed), then cfg.ops
 * operations, 50% inserts of an absent key (allocate into the bucket, write,
 * persist) and 50% deletes of a present key (check it, free from the bucket).
 * Operation = one insert or delete. Check: afterwards every bucket of every
 * thread holds exactly its present keys, each with its value intact. */
#include <string.h>

#include "pm_apps.h"

#define KV_SIZE 128u

typedef struct kv_root { pa_ptr buckets[64]; } kv_root;
typedef struct kv_thr { uint64_t *pres, *abs_, npres, nabs; } kv_thr;
typedef struct kv_state { kv_thr t[64]; } kv_state;

static size_t kv_pool(const pa_cfg *c)
{
    uint64_t per = 2 * c->n * sizeof(pa_ptr) + c->n * 2 * 192;
    return (((size_t)64 << 20) + (size_t)c->threads * per) & ~(size_t)0xfffff;
}

static int kv_init(pa_ctx *x)
{
    if (x->c->threads > 64) return pa_fail(x, "at most 64 threads");
    kv_root *root = x->a->root;
    kv_state *s = calloc(1, sizeof *s);
    if (!s) return pa_fail(x, "out of memory");
    x->st = s;
    uint64_t K = 2 * (x->c->n ? x->c->n : 1);
    for (unsigned t = 0; t < x->c->threads; t++) {
        if (pa_alloc(x->a, K * sizeof(pa_ptr), &root->buckets[t])) return pa_fail(x, "bucket array allocation failed");
        void *b = pa_get(x->a, root->buckets[t]);
        memset(b, 0, K * sizeof(pa_ptr));
        pa_persist(x->a, b, K * sizeof(pa_ptr));
        s->t[t].pres = malloc(K * sizeof(uint64_t));
        s->t[t].abs_ = malloc(K * sizeof(uint64_t));
        if (!s->t[t].pres || !s->t[t].abs_) return pa_fail(x, "out of memory");
    }
    return 0;
}

/* Keys are scrambled, values never look like heap offsets (top bit set). */
static inline uint64_t kv_key(unsigned tid, uint64_t k) { return pa_mix64((k << 8) | tid); }
static inline uint64_t kv_word(uint64_t key, unsigned w) { return (key * 0x9e3779b97f4a7c15ull + w) | 1ull << 63; }

static int kv_work(pa_ctx *x, unsigned tid, uint64_t *ops)
{
    kv_root *root = x->a->root;
    kv_thr *s = &((kv_state *)x->st)->t[tid];
    pa_ptr *bk = pa_get(x->a, root->buckets[tid]);
    uint64_t n = x->c->n, K = 2 * (n ? n : 1), done = 0;
    nm_rng r;
    pa_rng(x, tid, &r);
    s->npres = 0;
    s->nabs = K;
    for (uint64_t i = 0; i < K; i++) s->abs_[i] = i;
    for (uint64_t q = 0; q < n + x->c->ops; q++) {
        if (q == n) pa_timed_begin(x);
        bool ins = q < n ? true : (nm_rng_u64(&r) & 1) ? s->nabs > 0 : s->npres == 0;
        if (ins) {
            uint64_t j = nm_rng_below(&r, s->nabs), k = s->abs_[j];
            s->abs_[j] = s->abs_[--s->nabs];
            if (pa_alloc(x->a, KV_SIZE, &bk[k])) return pa_fail(x, "insert: allocation failed");
            uint64_t *kv = pa_get(x->a, bk[k]), key = kv_key(tid, k);
            kv[0] = key;
            for (unsigned w = 1; w < KV_SIZE / 8; w++) kv[w] = kv_word(key, w);
            pa_persist(x->a, kv, KV_SIZE);
            s->pres[s->npres++] = k;
        } else {
            uint64_t j = nm_rng_below(&r, s->npres), k = s->pres[j];
            s->pres[j] = s->pres[--s->npres];
            const uint64_t *kv = pa_get(x->a, bk[k]);
            if (!kv || kv[0] != kv_key(tid, k)) return pa_fail(x, "delete: key %llu lost", (unsigned long long)k);
            if (pa_free(x->a, &bk[k])) return pa_fail(x, "delete: free failed");
            s->abs_[s->nabs++] = k;
        }
        if (q >= n) done++;
    }
    if (x->c->ops == 0) pa_timed_begin(x);
    *ops = done;
    return 0;
}

static int kv_verify(pa_ctx *x)
{
    kv_root *root = x->a->root;
    kv_state *s = x->st;
    uint64_t K = 2 * (x->c->n ? x->c->n : 1);
    for (unsigned t = 0; t < x->c->threads; t++) {
        pa_ptr *bk = pa_get(x->a, root->buckets[t]);
        uint64_t found = 0;
        for (uint64_t k = 0; k < K; k++) {
            if (pa_isnull(x->a, bk[k])) continue;
            found++;
            const uint64_t *kv = pa_get(x->a, bk[k]), key = kv_key(t, k);
            if (kv[0] != key) return pa_fail(x, "thread %u: bucket %llu holds the wrong key", t, (unsigned long long)k);
            for (unsigned w = 1; w < KV_SIZE / 8; w++)
                if (kv[w] != kv_word(key, w)) return pa_fail(x, "thread %u: value of key %llu damaged", t, (unsigned long long)k);
        }
        if (found != s->t[t].npres)
            return pa_fail(x, "thread %u: %llu pairs stored, %llu expected", t, (unsigned long long)found,
                           (unsigned long long)s->t[t].npres);
    }
    return 0;
}

static void kv_fini(pa_ctx *x)
{
    kv_state *s = x->st;
    if (!s) return;
    for (unsigned t = 0; t < 64; t++) {
        free(s->t[t].pres);
        free(s->t[t].abs_);
    }
    free(s);
}

const pa_app pa_app_kv = {"kv", "insert or delete", true, kv_pool, kv_init, kv_work, kv_verify, kv_fini};
