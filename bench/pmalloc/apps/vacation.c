/* Vacation (STAMP; PMAlloc paper Sec. 8.6): a travel reservation system whose
 * database (cars, flights, rooms, customers) is four red-black trees in the
 * persistent heap. Written for nearmem after STAMP's description and defaults.
 *
 * Objects (each its own allocation, as in STAMP): tree nodes (key, color,
 * left/right/parent, value pointer: 80 B), reservations (id, used, free, total,
 * price: 40 B), customers (id, list pointer), a customer's reservation list
 * (head, size) and per reserved item a list node and a reservation info (type,
 * id, price).
 * Clients (STAMP's client.c): per transaction, with -n 5 queries, -q 90% of the
 * relations queried, -u 80% user transactions:
 *  - make reservation (80%): query up to 5 random (type, id) items, keep the
 *    most expensive available one per type, add the customer if absent, reserve
 *    those items for it (used++, free--, a list node + info in its list);
 *  - delete customer (10%): if present, cancel all its reservations, remove and
 *    free it, its list and infos;
 *  - update tables (10%): up to 5 random items, each added to (+100 seats,
 *    created if absent) or removed from (-100, deleted when its total reaches 0).
 * Each transaction runs under our undo log (pa_tx_*: the same code for every
 * allocator; allocations inside it go into log slots, frees are deferred to
 * the commit) and under one database lock (STAMP runs it under transactional
 * memory; there is no HTM here and a software TM would measure the TM: the
 * 2-thread runs contend on the database, as a lock-based port would).
 * cfg.n = relations (16,384 in the paper), cfg.ops = transactions per thread.
 * Operation = one transaction. Init (untimed) fills the four tables.
 * Check (after the run, and after every crash): red-black invariants and parent
 * links of every tree, every reservation used + free = total >= 0 and used = the
 * number of reservation infos that name it, every customer's list sorted
 * without duplicates and naming existing items; the transaction logs idle. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "pm_apps.h"
#include "pm_apps_crash.h"

enum { VC_CAR = 0, VC_FLIGHT = 1, VC_ROOM = 2, VC_CUSTOMER = 3, VC_NTABLES = 4 };
enum { VC_RED = 0, VC_BLACK = 1 };

typedef struct vc_node { uint64_t key, color; pa_ptr left, right, parent, val; } vc_node;
typedef struct vc_res { uint64_t id, used, free, total, price; } vc_res;
typedef struct vc_cust { uint64_t id; pa_ptr list; } vc_cust;
typedef struct vc_list { pa_ptr head; uint64_t size; } vc_list;
typedef struct vc_lnode { pa_ptr data, next; } vc_lnode;
typedef struct vc_info { uint64_t type, id, price; } vc_info;
typedef struct vc_tree { pa_ptr root; uint64_t count; } vc_tree;

/* Reservations one customer may hold (STAMP has no bound; a deviation, see
 * docs/pmalloc.md "Applications"). Deleting a customer is one transaction that
 * defers 3 + 2 x (its reservations) frees and logs an image of each reserved
 * item, and the undo log (pa_txlog) has fixed room: PA_TX_SLOTS deferred frees,
 * PA_TX_UNDO bytes of images. Unbounded, a customer that reserved more than 126
 * items could never be deleted (every attempt overflowed the log and failed).
 * A reservation beyond the bound is refused, like one of a sold-out item. */
#define VC_MAX_RES 96u
_Static_assert(3 + 2 * VC_MAX_RES <= PA_TX_SLOTS, "a customer's deletion fits the deferred-free slots");
_Static_assert(VC_MAX_RES * (32 + 40) + 8192 <= PA_TX_UNDO, "a customer's deletion fits the undo images (+ 8 KiB for the tree)");

typedef struct vc_root {
    uint64_t magic;
    uint64_t pad;
    vc_tree tables[VC_NTABLES];
    pa_ptr txlog[65]; /* per thread; [64]: init and recovery */
} vc_root;
_Static_assert(sizeof(vc_root) <= PA_ROOT_SIZE, "root area");
#define VC_MAGIC 0x5661636174e4dull

typedef struct vc_db {
    pa_heap *a;
    vc_root *root;
    pthread_mutex_t mu;
    uint64_t relations;
} vc_db;

#define G(p) ((vc_node *)pa_get(a, (p)))
#define P(x) pa_ptr_of(a, (x))
#define W(n) do { if (pa_tx_add(tx, (n), sizeof *(n))) return -1; } while (0)

/* ---- persistent red-black tree under the undo log ---- */

static vc_node *rb_find(pa_heap *a, vc_tree *t, uint64_t key)
{
    vc_node *n = G(t->root);
    while (n && n->key != key) n = key < n->key ? G(n->left) : G(n->right);
    return n;
}

static int rb_rotate_left(pa_tx *tx, vc_tree *t, vc_node *x)
{
    pa_heap *a = tx->a;
    vc_node *y = G(x->right), *xp = G(x->parent), *yl = G(y->left);
    W(x);
    W(y);
    x->right = y->left;
    if (yl) { W(yl); yl->parent = P(x); }
    y->parent = x->parent;
    if (!xp) { W(t); t->root = P(y); }
    else if (G(xp->left) == x) { W(xp); xp->left = P(y); }
    else { W(xp); xp->right = P(y); }
    y->left = P(x);
    x->parent = P(y);
    return 0;
}

static int rb_rotate_right(pa_tx *tx, vc_tree *t, vc_node *x)
{
    pa_heap *a = tx->a;
    vc_node *y = G(x->left), *xp = G(x->parent), *yr = G(y->right);
    W(x);
    W(y);
    x->left = y->right;
    if (yr) { W(yr); yr->parent = P(x); }
    y->parent = x->parent;
    if (!xp) { W(t); t->root = P(y); }
    else if (G(xp->right) == x) { W(xp); xp->right = P(y); }
    else { W(xp); xp->left = P(y); }
    y->right = P(x);
    x->parent = P(y);
    return 0;
}

static inline uint64_t color(pa_heap *a, pa_ptr p) { vc_node *n = G(p); return n ? n->color : VC_BLACK; }

/* Insert key -> val (the key is absent). */
static int rb_insert(pa_tx *tx, vc_tree *t, uint64_t key, pa_ptr val)
{
    pa_heap *a = tx->a;
    pa_ptr *slot = pa_tx_alloc(tx, sizeof(vc_node));
    if (!slot) return -1;
    vc_node *z = G(*slot);
    memset(z, 0, sizeof *z);
    z->key = key;
    z->val = val;
    z->color = VC_RED;
    pa_tx_new(tx, z, sizeof *z);
    vc_node *y = NULL, *x = G(t->root);
    while (x) {
        y = x;
        x = key < x->key ? G(x->left) : G(x->right);
    }
    z->parent = P(y);
    if (!y) { W(t); t->root = *slot; }
    else if (key < y->key) { W(y); y->left = *slot; }
    else { W(y); y->right = *slot; }
    W(t);
    t->count++;
    while (!pa_isnull(a, z->parent) && G(z->parent)->color == VC_RED) {
        vc_node *zp = G(z->parent), *zpp = G(zp->parent);
        if (zp == G(zpp->left)) {
            vc_node *u = G(zpp->right);
            if (u && u->color == VC_RED) {
                W(zp); zp->color = VC_BLACK;
                W(u); u->color = VC_BLACK;
                W(zpp); zpp->color = VC_RED;
                z = zpp;
            } else {
                if (z == G(zp->right)) {
                    z = zp;
                    if (rb_rotate_left(tx, t, z)) return -1;
                    zp = G(z->parent);
                    zpp = G(zp->parent);
                }
                W(zp); zp->color = VC_BLACK;
                W(zpp); zpp->color = VC_RED;
                if (rb_rotate_right(tx, t, zpp)) return -1;
            }
        } else {
            vc_node *u = G(zpp->left);
            if (u && u->color == VC_RED) {
                W(zp); zp->color = VC_BLACK;
                W(u); u->color = VC_BLACK;
                W(zpp); zpp->color = VC_RED;
                z = zpp;
            } else {
                if (z == G(zp->left)) {
                    z = zp;
                    if (rb_rotate_right(tx, t, z)) return -1;
                    zp = G(z->parent);
                    zpp = G(zp->parent);
                }
                W(zp); zp->color = VC_BLACK;
                W(zpp); zpp->color = VC_RED;
                if (rb_rotate_left(tx, t, zpp)) return -1;
            }
        }
    }
    vc_node *r = G(t->root);
    if (r->color != VC_BLACK) { W(r); r->color = VC_BLACK; }
    return 0;
}

static int rb_delete_fixup(pa_tx *tx, vc_tree *t, vc_node *x, vc_node *xp)
{
    pa_heap *a = tx->a;
    while (x != G(t->root) && (!x || x->color == VC_BLACK)) {
        if (x == G(xp->left)) {
            vc_node *w = G(xp->right);
            if (w->color == VC_RED) {
                W(w); w->color = VC_BLACK;
                W(xp); xp->color = VC_RED;
                if (rb_rotate_left(tx, t, xp)) return -1;
                w = G(xp->right);
            }
            if (color(a, w->left) == VC_BLACK && color(a, w->right) == VC_BLACK) {
                W(w); w->color = VC_RED;
                x = xp;
                xp = G(x->parent);
            } else {
                if (color(a, w->right) == VC_BLACK) {
                    vc_node *wl = G(w->left);
                    W(wl); wl->color = VC_BLACK;
                    W(w); w->color = VC_RED;
                    if (rb_rotate_right(tx, t, w)) return -1;
                    w = G(xp->right);
                }
                W(w); w->color = xp->color;
                W(xp); xp->color = VC_BLACK;
                vc_node *wr = G(w->right);
                if (wr) { W(wr); wr->color = VC_BLACK; }
                if (rb_rotate_left(tx, t, xp)) return -1;
                x = G(t->root);
                xp = NULL;
            }
        } else {
            vc_node *w = G(xp->left);
            if (w->color == VC_RED) {
                W(w); w->color = VC_BLACK;
                W(xp); xp->color = VC_RED;
                if (rb_rotate_right(tx, t, xp)) return -1;
                w = G(xp->left);
            }
            if (color(a, w->right) == VC_BLACK && color(a, w->left) == VC_BLACK) {
                W(w); w->color = VC_RED;
                x = xp;
                xp = G(x->parent);
            } else {
                if (color(a, w->left) == VC_BLACK) {
                    vc_node *wr = G(w->right);
                    W(wr); wr->color = VC_BLACK;
                    W(w); w->color = VC_RED;
                    if (rb_rotate_left(tx, t, w)) return -1;
                    w = G(xp->left);
                }
                W(w); w->color = xp->color;
                W(xp); xp->color = VC_BLACK;
                vc_node *wl = G(w->left);
                if (wl) { W(wl); wl->color = VC_BLACK; }
                if (rb_rotate_right(tx, t, xp)) return -1;
                x = G(t->root);
                xp = NULL;
            }
        }
    }
    if (x && x->color != VC_BLACK) { W(x); x->color = VC_BLACK; }
    return 0;
}

/* Remove node z (its value is the caller's to free); the node is freed at commit. */
static int rb_delete(pa_tx *tx, vc_tree *t, vc_node *z)
{
    pa_heap *a = tx->a;
    vc_node *y = z;
    if (!pa_isnull(a, z->left) && !pa_isnull(a, z->right)) { /* successor */
        y = G(z->right);
        while (!pa_isnull(a, y->left)) y = G(y->left);
    }
    vc_node *x = !pa_isnull(a, y->left) ? G(y->left) : G(y->right), *xp = G(y->parent);
    if (x) { W(x); x->parent = y->parent; }
    if (!xp) { W(t); t->root = P(x); }
    else if (G(xp->left) == y) { W(xp); xp->left = P(x); }
    else { W(xp); xp->right = P(x); }
    if (y != z) {
        W(z);
        z->key = y->key;
        z->val = y->val;
    }
    W(t);
    t->count--;
    if (y->color == VC_BLACK && rb_delete_fixup(tx, t, x, xp)) return -1;
    return pa_tx_free(tx, P(y));
}

/* ---- the manager (STAMP's manager.c) ---- */

/* Add num seats at price to item id (num < 0 removes; price < 0 keeps the price). */
static int vc_add_reservation(pa_tx *tx, vc_root *root, unsigned type, uint64_t id, int64_t num, int64_t price, bool *ok)
{
    pa_heap *a = tx->a;
    vc_tree *t = &root->tables[type];
    vc_node *n = rb_find(a, t, id);
    *ok = false;
    if (!n) {
        if (num < 1 || price < 0) return 0;
        pa_ptr *slot = pa_tx_alloc(tx, sizeof(vc_res));
        if (!slot) return -1;
        vc_res *r = pa_get(a, *slot);
        *r = (vc_res){id, 0, (uint64_t)num, (uint64_t)num, (uint64_t)price};
        pa_tx_new(tx, r, sizeof *r);
        *ok = true;
        return rb_insert(tx, t, id, *slot);
    }
    vc_res *r = pa_get(a, n->val);
    if ((int64_t)r->free + num < 0) return 0;
    W(r);
    r->free = (uint64_t)((int64_t)r->free + num);
    r->total = (uint64_t)((int64_t)r->total + num);
    *ok = true;
    if (r->total == 0) {
        pa_ptr rp = n->val;
        if (rb_delete(tx, t, n)) return -1;
        return pa_tx_free(tx, rp);
    }
    if (price >= 0) r->price = (uint64_t)price;
    return 0;
}

static int vc_add_customer(pa_tx *tx, vc_root *root, uint64_t id)
{
    pa_heap *a = tx->a;
    vc_tree *t = &root->tables[VC_CUSTOMER];
    if (rb_find(a, t, id)) return 0;
    pa_ptr *cs = pa_tx_alloc(tx, sizeof(vc_cust)), *ls = cs ? pa_tx_alloc(tx, sizeof(vc_list)) : NULL;
    if (!ls) return -1;
    vc_cust *c = pa_get(a, *cs);
    vc_list *l = pa_get(a, *ls);
    memset(l, 0, sizeof *l);
    memset(c, 0, sizeof *c);
    c->id = id;
    c->list = *ls;
    pa_tx_new(tx, c, sizeof *c);
    pa_tx_new(tx, l, sizeof *l);
    return rb_insert(tx, t, id, *cs);
}

/* Reserve item (type, id) for customer cid; *ok false if impossible. */
static int vc_reserve(pa_tx *tx, vc_root *root, unsigned type, uint64_t cid, uint64_t id, bool *ok)
{
    pa_heap *a = tx->a;
    *ok = false;
    vc_node *cn = rb_find(a, &root->tables[VC_CUSTOMER], cid), *rn = rb_find(a, &root->tables[type], id);
    if (!cn || !rn) return 0;
    vc_res *r = pa_get(a, rn->val);
    if (r->free < 1) return 0;
    vc_cust *c = pa_get(a, cn->val);
    vc_list *l = pa_get(a, c->list);
    if (l->size >= VC_MAX_RES) return 0; /* the customer holds as many as its deletion can undo-log */
    /* sorted insert into the customer's list; a duplicate (type, id) is refused */
    pa_ptr *link = &l->head;
    void *holder = l;
    size_t holder_size = sizeof *l;
    while (!pa_isnull(a, *link)) {
        vc_lnode *ln = pa_get(a, *link);
        const vc_info *in = pa_get(a, ln->data);
        if (in->type > type || (in->type == type && in->id >= id)) {
            if (in->type == type && in->id == id) return 0;
            break;
        }
        link = &ln->next;
        holder = ln;
        holder_size = sizeof *ln;
    }
    pa_ptr *ns = pa_tx_alloc(tx, sizeof(vc_lnode)), *is = ns ? pa_tx_alloc(tx, sizeof(vc_info)) : NULL;
    if (!is) return -1;
    vc_lnode *ln = pa_get(a, *ns);
    vc_info *in = pa_get(a, *is);
    *in = (vc_info){type, id, r->price};
    ln->data = *is;
    ln->next = *link;
    pa_tx_new(tx, ln, sizeof *ln);
    pa_tx_new(tx, in, sizeof *in);
    if (pa_tx_add(tx, holder, holder_size)) return -1;
    *link = *ns;
    W(l);
    l->size++;
    W(r);
    r->used++;
    r->free--;
    *ok = true;
    return 0;
}

static int vc_delete_customer(pa_tx *tx, vc_root *root, uint64_t cid)
{
    pa_heap *a = tx->a;
    vc_node *cn = rb_find(a, &root->tables[VC_CUSTOMER], cid);
    if (!cn) return 0;
    pa_ptr cp = cn->val;
    vc_cust *c = pa_get(a, cp);
    pa_ptr lp = c->list;
    vc_list *l = pa_get(a, lp);
    for (pa_ptr p = l->head; !pa_isnull(a, p);) { /* cancel its reservations */
        vc_lnode *ln = pa_get(a, p);
        const vc_info *in = pa_get(a, ln->data);
        vc_node *rn = rb_find(a, &root->tables[in->type], in->id);
        if (!rn) return -1; /* a reservation of an item that does not exist */
        vc_res *r = pa_get(a, rn->val);
        W(r);
        r->used--;
        r->free++;
        p = ln->next;
    }
    /* Deferred frees run in call order: referrers before what they point to (the
     * tree node rb_delete frees, the customer, its list, then each list node
     * before its info and the next node), so that a crash among them never leaves
     * a freed object pointed to by one still to be freed (PMAlloc-GC's
     * conservative mark would revive it). */
    if (rb_delete(tx, &root->tables[VC_CUSTOMER], cn)) return -1;
    if (pa_tx_free(tx, cp) || pa_tx_free(tx, lp)) return -1;
    for (pa_ptr p = l->head; !pa_isnull(a, p);) {
        vc_lnode *ln = pa_get(a, p);
        if (pa_tx_free(tx, p) || pa_tx_free(tx, ln->data)) return -1;
        p = ln->next;
    }
    return 0;
}

/* ---- clients ---- */

typedef struct vc_params { uint64_t relations, query_range; unsigned nquery, pct_user; } vc_params;

static void vc_params_of(uint64_t relations, vc_params *p)
{
    p->relations = relations;
    p->nquery = 5;
    p->pct_user = 80;
    p->query_range = (uint64_t)(0.90 * (double)relations + 0.5);
    if (p->query_range < 1) p->query_range = 1;
}

/* One client transaction (STAMP client_run); 0 or -1. */
static int vc_client_tx(vc_db *db, pa_tx *tx, const vc_params *p, nm_rng *r)
{
    pa_heap *a = db->a;
    vc_root *root = db->root;
    unsigned action = (unsigned)nm_rng_below(r, 100);
    unsigned types[16];
    uint64_t ids[16];
    int64_t prices[16];
    unsigned ops_[16];
    int rc = 0;
    if (action < p->pct_user) { /* make reservation */
        unsigned nq = 1 + (unsigned)nm_rng_below(r, p->nquery);
        uint64_t cid = 1 + nm_rng_below(r, p->query_range);
        for (unsigned i = 0; i < nq; i++) {
            types[i] = (unsigned)nm_rng_below(r, 3);
            ids[i] = 1 + nm_rng_below(r, p->query_range);
        }
        pthread_mutex_lock(&db->mu);
        pa_tx_begin(tx);
        int64_t maxp[3] = {-1, -1, -1};
        uint64_t maxid[3] = {0, 0, 0};
        bool found = false;
        for (unsigned i = 0; i < nq; i++) {
            vc_node *n = rb_find(a, &root->tables[types[i]], ids[i]);
            if (!n) continue;
            const vc_res *res = pa_get(a, n->val);
            if ((int64_t)res->price > maxp[types[i]]) { /* STAMP compares the price of any existing item */
                maxp[types[i]] = (int64_t)res->price;
                maxid[types[i]] = ids[i];
                found = true;
            }
        }
        if (found) rc = vc_add_customer(tx, root, cid);
        for (unsigned t = 0; t < 3 && !rc; t++) {
            bool ok;
            if (maxp[t] >= 0) rc = vc_reserve(tx, root, t, cid, maxid[t], &ok);
        }
    } else if (action & 1) { /* delete customer */
        uint64_t cid = 1 + nm_rng_below(r, p->query_range);
        pthread_mutex_lock(&db->mu);
        pa_tx_begin(tx);
        rc = vc_delete_customer(tx, root, cid);
    } else { /* update tables */
        unsigned nu = 1 + (unsigned)nm_rng_below(r, p->nquery);
        for (unsigned i = 0; i < nu; i++) {
            types[i] = (unsigned)nm_rng_below(r, 3);
            ids[i] = 1 + nm_rng_below(r, p->query_range);
            ops_[i] = (unsigned)nm_rng_below(r, 2);
            prices[i] = ops_[i] ? (int64_t)(nm_rng_below(r, 5) * 10 + 50) : -1;
        }
        pthread_mutex_lock(&db->mu);
        pa_tx_begin(tx);
        for (unsigned i = 0; i < nu && !rc; i++) {
            bool ok;
            rc = vc_add_reservation(tx, root, types[i], ids[i], ops_[i] ? 100 : -100, prices[i], &ok);
        }
    }
    if (!rc) rc = pa_tx_commit(tx);
    if (rc) pa_tx_abort(tx); /* before another thread's transaction sees its changes */
    pthread_mutex_unlock(&db->mu);
    return rc;
}

/* ---- setup, recovery and checks ---- */

static vc_db *vc_db_new(pa_heap *a, uint64_t relations)
{
    vc_db *db = calloc(1, sizeof *db);
    if (!db) return NULL;
    db->a = a;
    db->root = a->root;
    db->relations = relations;
    pthread_mutex_init(&db->mu, NULL);
    return db;
}

static void vc_db_free(vc_db *db)
{
    if (!db) return;
    pthread_mutex_destroy(&db->mu);
    free(db);
}

/* The log of thread `slot` (64: init and population); all are made with the database. */
static pa_txlog *vc_txlog(vc_db *db, unsigned slot) { return pa_get(db->a, db->root->txlog[slot]); }

/* STAMP's initializeManager: every id 1..relations gets a car, flight and room
 * (100-500 seats, price 50-90) and a customer, in shuffled order. */
static int vc_populate(vc_db *db, uint64_t seed)
{
    pa_heap *a = db->a;
    pa_txlog *log = vc_txlog(db, 64);
    if (!log) return -1;
    pa_tx *tx = malloc(sizeof *tx);
    uint64_t *ids = malloc(db->relations * sizeof *ids);
    if (!tx || !ids) { free(tx); free(ids); return -1; }
    pa_tx_init(tx, a, log);
    nm_rng r;
    nm_rng_seed(&r, seed);
    int rc = 0;
    for (unsigned t = 0; t < VC_NTABLES && !rc; t++) {
        for (uint64_t i = 0; i < db->relations; i++) ids[i] = i + 1;
        nm_rng_shuffle(&r, ids, db->relations, sizeof *ids);
        for (uint64_t i = 0; i < db->relations && !rc; i++) {
            pa_tx_begin(tx);
            bool ok;
            if (t == VC_CUSTOMER) rc = vc_add_customer(tx, db->root, ids[i]);
            else rc = vc_add_reservation(tx, db->root, t, ids[i], (int64_t)(nm_rng_below(&r, 5) + 1) * 100,
                                         (int64_t)(nm_rng_below(&r, 5) * 10 + 50), &ok);
            if (!rc) rc = pa_tx_commit(tx);
        }
    }
    free(tx);
    free(ids);
    return rc;
}

typedef struct vc_walk { pa_heap *a; const void **v; size_t n, cap; uint64_t *used[3]; uint64_t nrel; char *msg; size_t mcap; } vc_walk;

static int vw_add(vc_walk *w, const void *p)
{
    if (w->v == NULL && w->cap == (size_t)-1) return 0; /* not collecting */
    if (w->n == w->cap) {
        size_t c = w->cap ? w->cap * 2 : 4096;
        const void **v = realloc(w->v, c * sizeof *v);
        if (!v) return -1;
        w->v = v;
        w->cap = c;
    }
    w->v[w->n++] = p;
    return 0;
}

#define VFAIL(...) do { snprintf(w->msg, w->mcap, __VA_ARGS__); return -1; } while (0)

/* Red-black check of the subtree under n; returns its black height, -1 on error. */
static int vc_check_node(vc_walk *w, unsigned type, const vc_node *n, const vc_node *parent, uint64_t lo, uint64_t hi, uint64_t *count, unsigned depth)
{
    pa_heap *a = w->a;
    if (!n) return 1;
    if (depth > 128) VFAIL("table %u: tree too deep (cycle?)", type);
    if (pa_usable(a, n) < sizeof *n) VFAIL("table %u: a tree node is not allocated", type);
    if (G(n->parent) != parent) VFAIL("table %u: wrong parent link", type);
    if (n->key < lo || n->key > hi) VFAIL("table %u: keys out of order", type);
    if (n->color != VC_RED && n->color != VC_BLACK) VFAIL("table %u: bad color", type);
    if (n->color == VC_RED && parent && parent->color == VC_RED) VFAIL("table %u: red node with a red parent", type);
    if (vw_add(w, n)) VFAIL("out of memory");
    (*count)++;
    const void *v = pa_get(a, n->val);
    if (!v) VFAIL("table %u: node without a value", type);
    if (vw_add(w, v)) VFAIL("out of memory");
    if (type == VC_CUSTOMER) {
        const vc_cust *c = v;
        if (pa_usable(a, c) < sizeof *c || c->id != n->key) VFAIL("customer %llu: record damaged", (unsigned long long)n->key);
        const vc_list *l = pa_get(a, c->list);
        if (!l || pa_usable(a, l) < sizeof *l) VFAIL("customer %llu: no list", (unsigned long long)n->key);
        if (vw_add(w, l)) VFAIL("out of memory");
        uint64_t size = 0, prev = 0;
        for (pa_ptr p = l->head; !pa_isnull(a, p); size++) {
            const vc_lnode *ln = pa_get(a, p);
            const vc_info *in = ln ? pa_get(a, ln->data) : NULL;
            if (!in || pa_usable(a, ln) < sizeof *ln || pa_usable(a, in) < sizeof *in) VFAIL("customer %llu: list node damaged", (unsigned long long)n->key);
            if (in->type > 2 || in->id < 1 || in->id > w->nrel) VFAIL("customer %llu: bad reservation info", (unsigned long long)n->key);
            uint64_t k = in->type * (w->nrel + 1) + in->id;
            if (size && k <= prev) VFAIL("customer %llu: list not sorted or duplicate", (unsigned long long)n->key);
            prev = k;
            w->used[in->type][in->id]++;
            if (vw_add(w, ln) || vw_add(w, in)) VFAIL("out of memory");
            if (size > w->nrel * 3) VFAIL("customer list too long (cycle?)");
            p = ln->next;
        }
        if (size > VC_MAX_RES) VFAIL("customer %llu: %llu reservations, more than %u", (unsigned long long)n->key, (unsigned long long)size, VC_MAX_RES);
        if (size != l->size) VFAIL("customer %llu: list size %llu, %llu nodes", (unsigned long long)n->key, (unsigned long long)l->size, (unsigned long long)size);
    } else {
        const vc_res *r = v;
        if (pa_usable(a, r) < sizeof *r || r->id != n->key) VFAIL("table %u: reservation %llu damaged", type, (unsigned long long)n->key);
        if (r->used + r->free != r->total || (int64_t)r->used < 0 || (int64_t)r->free < 0 || r->total == 0)
            VFAIL("table %u item %llu: used %lld + free %lld != total %lld", type, (unsigned long long)r->id, (long long)r->used,
                  (long long)r->free, (long long)r->total);
    }
    int hl = vc_check_node(w, type, G(n->left), n, lo, n->key - 1, count, depth + 1);
    if (hl < 0) return -1;
    int hr = vc_check_node(w, type, G(n->right), n, n->key + 1, hi, count, depth + 1);
    if (hr < 0) return -1;
    if (hl != hr) VFAIL("table %u: black heights differ", type);
    return hl + (n->color == VC_BLACK);
}

/* Full consistency check; collects the reachable objects when objs != NULL. */
static int vc_check(vc_db *db, const void ***objs, size_t *nobj, char *msg, size_t cap)
{
    pa_heap *a = db->a;
    vc_root *root = db->root;
    vc_walk w = {a, NULL, 0, objs ? 0 : (size_t)-1, {NULL, NULL, NULL}, db->relations, msg, cap};
    int rc = -1;
    for (unsigned t = 0; t < 3; t++)
        if (!(w.used[t] = calloc(db->relations + 1, sizeof(uint64_t)))) { snprintf(msg, cap, "out of memory"); goto out; }
    if (root->magic != VC_MAGIC) { snprintf(msg, cap, "database not initialised"); goto out; }
    for (unsigned i = 0; i < 65; i++) {
        if (pa_isnull(a, root->txlog[i])) continue;
        pa_txlog *l = pa_get(a, root->txlog[i]);
        if (l->state != 0) { snprintf(msg, cap, "transaction log %u not idle", i); goto out; }
        for (unsigned k = 0; k < PA_TX_SLOTS; k++)
            if (!pa_isnull(a, l->alloc[k]) || !pa_isnull(a, l->frees[k])) { snprintf(msg, cap, "transaction log %u holds pointers", i); goto out; }
        if (vw_add(&w, l)) { snprintf(msg, cap, "out of memory"); goto out; }
    }
    for (unsigned t = 0; t < VC_NTABLES; t++) {
        uint64_t count = 0;
        const vc_node *r = G(root->tables[t].root);
        if (r && r->color != VC_BLACK) { snprintf(msg, cap, "table %u: red root", t); goto out; }
        if (vc_check_node(&w, t, r, NULL, 0, UINT64_MAX, &count, 0) < 0) goto out;
        if (count != root->tables[t].count) { snprintf(msg, cap, "table %u: %llu nodes, count %llu", t, (unsigned long long)count, (unsigned long long)root->tables[t].count); goto out; }
    }
    for (unsigned t = 0; t < 3; t++) /* every reservation is held by as many infos as it counts */
        for (uint64_t id = 1; id <= db->relations; id++) {
            const vc_node *n = rb_find(a, &root->tables[t], id);
            const vc_res *r = n ? pa_get(a, n->val) : NULL;
            uint64_t used = r ? r->used : 0;
            if (w.used[t][id] != used || (!r && w.used[t][id])) {
                snprintf(msg, cap, "table %u item %llu: %llu reservations held, used = %llu%s", t, (unsigned long long)id,
                         (unsigned long long)w.used[t][id], (unsigned long long)used, r ? "" : " (item absent)");
                goto out;
            }
        }
    rc = 0;
out:
    for (unsigned t = 0; t < 3; t++) free(w.used[t]);
    if (rc || !objs) free(w.v);
    else { *objs = w.v; *nobj = w.n; }
    return rc;
}

/* After an open: create the database in a new heap, else recover every log. */
static int vc_open_db(vc_db *db, uint64_t seed, int *undone, char *msg, size_t cap)
{
    pa_heap *a = db->a;
    vc_root *root = db->root;
    *undone = 0;
    if (root->magic == VC_MAGIC) {
        for (unsigned i = 0; i < 65; i++) {
            int r = pa_tx_recover(a, pa_get(a, root->txlog[i]));
            if (r < 0) { snprintf(msg, cap, "transaction log %u: recovery failed", i); return -1; }
            if (r == 1) (*undone)++;
        }
        return 0;
    }
    /* a new database (creation itself is not crash-safe: a crash inside it leaves a
     * heap this refuses) */
    for (unsigned t = 0; t < VC_NTABLES; t++)
        if (!pa_isnull(a, root->tables[t].root)) { snprintf(msg, cap, "database half populated before a crash"); return -1; }
    for (unsigned i = 0; i < 65; i++) {
        if (pa_isnull(a, root->txlog[i]) && pa_alloc(a, sizeof(pa_txlog), &root->txlog[i])) {
            snprintf(msg, cap, "transaction log allocation failed");
            return -1;
        }
        pa_txlog *l = pa_get(a, root->txlog[i]);
        memset(l, 0, sizeof *l);
        pa_persist(a, l, sizeof *l);
    }
    if (vc_populate(db, seed)) { snprintf(msg, cap, "populating the database failed"); return -1; }
    root->magic = VC_MAGIC;
    pa_persist(a, &root->magic, sizeof root->magic);
    return 0;
}

/* ---- the benchmark ---- */

typedef struct vc_state { vc_db *db; vc_params p; pa_tx *tx[64]; } vc_state;

static size_t vc_pool(const pa_cfg *c)
{
    uint64_t rel = c->n ? c->n : 16384;
    /* per relation: 4 nodes + 3 reservations + customer + list, and reservation infos */
    uint64_t bytes = rel * (4 * 128 + 3 * 64 + 64 + 64 + 30 * 96);
    return (((size_t)64 << 20) + (size_t)bytes + (size_t)c->threads * 65536) & ~(size_t)0xfffff;
}

static int vc_init(pa_ctx *x)
{
    if (x->c->threads > 64) return pa_fail(x, "at most 64 threads");
    vc_state *s = calloc(1, sizeof *s);
    if (!s) return pa_fail(x, "out of memory");
    x->st = s;
    uint64_t rel = x->c->n ? x->c->n : 16384;
    vc_params_of(rel, &s->p);
    if (!(s->db = vc_db_new(x->a, rel))) return pa_fail(x, "out of memory");
    int undone;
    if (vc_open_db(s->db, x->c->seed, &undone, x->msg, sizeof x->msg)) return -1;
    for (unsigned t = 0; t < x->c->threads; t++) {
        pa_txlog *l = vc_txlog(s->db, t);
        if (!l || !(s->tx[t] = malloc(sizeof(pa_tx)))) return pa_fail(x, "transaction log allocation failed");
        pa_tx_init(s->tx[t], x->a, l);
    }
    return 0;
}

static int vc_work(pa_ctx *x, unsigned tid, uint64_t *ops)
{
    vc_state *s = x->st;
    nm_rng r;
    pa_rng(x, tid, &r);
    pa_timed_begin(x);
    for (uint64_t i = 0; i < x->c->ops; i++)
        if (vc_client_tx(s->db, s->tx[tid], &s->p, &r)) return pa_fail(x, "transaction %llu of thread %u failed", (unsigned long long)i, tid);
    *ops = x->c->ops;
    return 0;
}

static int vc_verify(pa_ctx *x)
{
    vc_state *s = x->st;
    return vc_check(s->db, NULL, NULL, x->msg, sizeof x->msg) ? -1 : 0;
}

static void vc_fini(pa_ctx *x)
{
    vc_state *s = x->st;
    if (!s) return;
    for (unsigned t = 0; t < 64; t++) free(s->tx[t]);
    vc_db_free(s->db);
    free(s);
}

const pa_app pa_app_vacation = {"vacation", "transaction", true, vc_pool, vc_init, vc_work, vc_verify, vc_fini};

/* ---- crash checking ---- */

typedef struct vc_cstate { vc_db *db; vc_params p; pa_tx tx[8]; bool txinit[8]; } vc_cstate;

static void *vcc_open(pa_heap *a, uint64_t universe, int *recovered, char *msg, size_t cap)
{
    vc_cstate *c = calloc(1, sizeof *c);
    if (!c || !(c->db = vc_db_new(a, universe))) { free(c); snprintf(msg, cap, "out of memory"); return NULL; }
    vc_params_of(universe, &c->p);
    if (vc_open_db(c->db, 7, recovered, msg, cap)) { vc_db_free(c->db); free(c); return NULL; }
    for (unsigned t = 0; t < 8; t++) {
        pa_txlog *l = vc_txlog(c->db, t);
        if (!l) { snprintf(msg, cap, "transaction log allocation failed"); vc_db_free(c->db); free(c); return NULL; }
        pa_tx_init(&c->tx[t], a, l);
    }
    return c;
}

static int vcc_step(void *st, unsigned tid, nm_rng *r, char *msg, size_t cap)
{
    vc_cstate *c = st;
    if (tid >= 8) { snprintf(msg, cap, "vacation: thread %u beyond the 8 logs", tid); return -1; }
    if (vc_client_tx(c->db, &c->tx[tid], &c->p, r)) {
        snprintf(msg, cap, "vacation transaction failed%s", c->tx[tid].overflow ? " (its undo log is full)" : "");
        return -1;
    }
    return 0;
}

static int vcc_reachable(void *st, const void ***objs, size_t *n, char *msg, size_t cap)
{
    vc_cstate *c = st;
    return vc_check(c->db, objs, n, msg, cap);
}

static void vcc_close(void *st)
{
    vc_cstate *c = st;
    if (c) vc_db_free(c->db);
    free(c);
}

const pa_crash_app pa_crash_vacation = {"vacation", vcc_open, vcc_step, vcc_reachable, vcc_close};

/* Regression check (tests/pmalloc/test_apps.c): one customer reserves every item
 * of a fresh database (one transaction per reservation), then is deleted in one
 * transaction. Deleting a customer defers 3 + 2 x (its reservations) frees and
 * logs one image per reservation, so the deletion must fit the undo log
 * whatever the customer holds. *held = reservations the customer held. */
int pa_vacation_check_big_customer(pa_heap *a, uint64_t relations, unsigned *held, char *msg, size_t cap)
{
    int rec;
    *held = 0;
    vc_cstate *c = vcc_open(a, relations, &rec, msg, cap);
    if (!c) return -1;
    pa_tx *tx = &c->tx[0];
    vc_root *root = c->db->root;
    int rc = 0;
    for (unsigned t = 0; t < 3 && !rc; t++)
        for (uint64_t id = 1; id <= relations && !rc; id++) {
            bool ok = false;
            pa_tx_begin(tx);
            rc = vc_add_customer(tx, root, 1);
            if (!rc) rc = vc_reserve(tx, root, t, 1, id, &ok);
            if (!rc) rc = pa_tx_commit(tx);
            if (rc) snprintf(msg, cap, "reserving item (%u, %llu) for customer 1 failed", t, (unsigned long long)id);
        }
    if (!rc) {
        vc_node *cn = rb_find(a, &root->tables[VC_CUSTOMER], 1);
        const vc_cust *cu = cn ? pa_get(a, cn->val) : NULL;
        const vc_list *l = cu ? pa_get(a, cu->list) : NULL;
        *held = l ? (unsigned)l->size : 0;
        pa_tx_begin(tx);
        rc = vc_delete_customer(tx, root, 1);
        if (!rc) rc = pa_tx_commit(tx);
        if (rc) snprintf(msg, cap, "deleting customer 1 with %u reservations failed%s", *held, tx->overflow ? " (undo log full)" : "");
    }
    if (rc) pa_tx_recover(a, tx->log); /* leave the heap consistent for the caller's checks */
    else if (rb_find(a, &root->tables[VC_CUSTOMER], 1)) { snprintf(msg, cap, "customer 1 still present after its deletion"); rc = -1; }
    if (!rc && vc_check(c->db, NULL, NULL, msg, cap)) rc = -1;
    vcc_close(c);
    return rc;
}
