/* SpeedMalloc: statistics (collected by the server, printed with write(2)).
 * (see sm_types.h for the data model, sm_internal.h for what the files share). */
#include "sm_internal.h"

void sm_fill_stats(nm_speedmalloc_stats *o)
{
    *o = sm_g.st;
    o->server_running = LOAD_ACQ(&sm_g.mode) == MODE_THREAD;
    o->server_busy_ns = LOAD_RLX(&sm_g.srv_busy_ns);
    o->server_sleeps = LOAD_RLX(&sm_g.srv_sleeps);
    o->server_wakeups = LOAD_RLX(&sm_g.srv_wakeups);
    o->server_oversub = LOAD_RLX(&sm_g.srv_oversub);
    o->clients_registered = LOAD_RLX(&sm_g.clients_registered);
    o->size_classes = sm_g.nclass;
    o->server_cpu_ns = 0;
    if (o->server_running) {
        clockid_t id;
        struct timespec ts;
        if (pthread_getcpuclockid(sm_g.server_thread, &id) == 0 && clock_gettime(id, &ts) == 0)
            o->server_cpu_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    }
    uint64_t act = 0;
    o->fast_mallocs = o->ring_mallocs = o->client_misses = o->inline_serves = 0;
    uint32_t nc = LOAD_ACQ(&sm_g.nclients);
    for (uint32_t i = 0; i < nc; i++) {
        struct client *c = sm_g.clients[i];
        if (LOAD_ACQ(&c->state) == ST_ACTIVE) act++;
        o->fast_mallocs += LOAD_RLX(&c->c_fast);
        o->ring_mallocs += LOAD_RLX(&c->c_ring);
        o->client_misses += LOAD_RLX(&c->c_miss);
        o->inline_serves += LOAD_RLX(&c->c_inline);
    }
    o->clients_active = act;
}

uint32_t sm_reported_client_double;
uint64_t sm_client_double_count, sm_client_invalid_count;
/* ---- statistics ----------------------------------------------------------------- */
SM_PUBLIC int nm_speedmalloc_get_stats(nm_speedmalloc_stats *out)
{
    if (!out) return EINVAL;
    if (LOAD_ACQ(&sm_g.init) != INIT_DONE && !sm_global_init()) return ENOMEM;
    memset(out, 0, sizeof *out);
    bool locked = false;
    struct client *c = sm_tls_state == 3 ? NULL : sm_client_or_fallback(&locked);
    if (c) STORE_REL(&c->free_tail, c->my_free_tail);
    bool l = sm_meta_lock();
    sm_drain_all_frees();
    sm_g.st.sync_requests++;
    sm_fill_stats(out);
    sm_meta_unlock(l);
    if (locked) pthread_mutex_unlock(&sm_g.fb_lock);
    int err = 0;
    out->double_frees += LOAD_RLX(&sm_client_double_count);
    out->invalid_frees += LOAD_RLX(&sm_client_invalid_count);
    return err;
}

SM_PUBLIC void nm_speedmalloc_stats_print(int fd)
{
    nm_speedmalloc_stats s;
    if (nm_speedmalloc_get_stats(&s) != 0) return;
    const struct { const char *k; uint64_t v; } kv[] = {
        {"server_running", s.server_running}, {"clients_active", s.clients_active},
        {"clients_registered", s.clients_registered}, {"clients_reclaimed", s.clients_reclaimed},
        {"size_classes", s.size_classes}, {"fast_mallocs", s.fast_mallocs}, {"ring_mallocs", s.ring_mallocs},
        {"client_misses", s.client_misses}, {"inline_serves", s.inline_serves},
        {"refill_blocks", s.refill_blocks}, {"refill_rounds", s.refill_rounds},
        {"frees_received", s.frees_received}, {"sync_requests", s.sync_requests},
        {"large_allocs", s.large_allocs}, {"large_live", s.large_live}, {"large_live_bytes", s.large_live_bytes},
        {"segments", s.segments}, {"pages_in_use", s.pages_in_use}, {"bytes_out", s.bytes_out},
        {"mapped_bytes", s.mapped_bytes}, {"madvised_bytes", s.madvised_bytes},
        {"server_sleeps", s.server_sleeps}, {"server_wakeups", s.server_wakeups},
        {"server_cpu_ns", s.server_cpu_ns}, {"server_busy_ns", s.server_busy_ns},
        {"server_oversub", s.server_oversub}, {"invalid_frees", s.invalid_frees}, {"double_frees", s.double_frees},
    };
    char line[96];
    sm_write_str(fd, "speedmalloc statistics:\n");
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        size_t n = 0, kl = strlen(kv[i].k);
        line[n++] = ' ';
        line[n++] = ' ';
        memcpy(line + n, kv[i].k, kl);
        n += kl;
        while (n < 24) line[n++] = ' ';
        n += sm_fmt_u64(line + n, kv[i].v);
        line[n++] = '\n';
        sm_write_all(fd, line, n);
    }
}

__attribute__((destructor)) static void sm_at_exit(void)
{
    if (LOAD_ACQ(&sm_g.init) == INIT_DONE && sm_g.print_stats) nm_speedmalloc_stats_print(2);
}

