/* Flush and fence counting (see pm_fences.h). */
#include "pm_fences.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *const pf_names[PF_NKINDS] = {"sfence", "mfence", "clwb", "clflushopt", "clflush"};

const char *pf_kind_name(pf_kind k) { return (unsigned)k < PF_NKINDS ? pf_names[k] : "?"; }

int pf_kind_of(const char *m, size_t len)
{
    for (int k = 0; k < PF_NKINDS; k++)
        if (strlen(pf_names[k]) == len && memcmp(pf_names[k], m, len) == 0) return k;
    return -1;
}

/* An instruction line of objdump -d --no-show-raw-insn: "  <hex>:\t<mnemonic> <operands>".
 * Prefix words (lock, rep, data16, cs, ds, notrack, bnd) are skipped; labels
 * ("0000000000001234 <f>:") start without blanks and are not instructions. */
size_t pf_scan_objdump(const char *text, const char *path, FILE *out, uint64_t per_kind[PF_NKINDS])
{
    static const char *const prefixes[] = {"lock", "rep", "repz", "repnz", "data16", "cs", "ds", "notrack", "bnd", NULL};
    size_t sites = 0;
    for (const char *line = text; line && *line;) {
        const char *eol = strchr(line, '\n');
        const char *end = eol ? eol : line + strlen(line);
        const char *c = line;
        if (c < end && (*c == ' ' || *c == '\t')) {
            while (c < end && (*c == ' ' || *c == '\t')) c++;
            const char *hex = c;
            while (c < end && isxdigit((unsigned char)*c)) c++;
            if (c > hex && c < end && *c == ':') {
                unsigned long long addr = strtoull(hex, NULL, 16);
                c++;
                for (;;) {
                    while (c < end && (*c == ' ' || *c == '\t')) c++;
                    const char *w = c;
                    while (c < end && !isspace((unsigned char)*c)) c++;
                    size_t wl = (size_t)(c - w);
                    bool prefix = false;
                    for (unsigned i = 0; prefixes[i]; i++)
                        if (strlen(prefixes[i]) == wl && memcmp(prefixes[i], w, wl) == 0) prefix = true;
                    if (prefix) continue;
                    int k = wl ? pf_kind_of(w, wl) : -1;
                    if (k >= 0) {
                        sites++;
                        if (per_kind) per_kind[k]++;
                        if (out) fprintf(out, "%s %llx %s\n", path, addr, pf_names[k]);
                    }
                    break;
                }
            }
        }
        line = eol ? eol + 1 : NULL;
    }
    return sites;
}

long pf_sites_of_object(const char *path, FILE *out, uint64_t per_kind[PF_NKINDS])
{
    if (strchr(path, '\'')) return -1;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "objdump -d --no-show-raw-insn '%s' 2>/dev/null", path);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t cap = 1 << 20, got = 0;
    char *buf = malloc(cap);
    long rc = -1;
    while (buf) {
        if (got + 65536 > cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
        size_t n = fread(buf + got, 1, cap - got - 1, p);
        if (n == 0) {
            buf[got] = 0;
            rc = 0;
            break;
        }
        got += n;
    }
    int st = pclose(p);
    if (rc == 0 && st == 0 && got > 0) rc = (long)pf_scan_objdump(buf, path, out, per_kind);
    else rc = -1;
    free(buf);
    return rc;
}

int pf_parse_counts(const char *out, uint64_t n[PF_NKINDS])
{
    memset(n, 0, PF_NKINDS * sizeof *n);
    bool done = false;
    for (const char *at = out; at && (at = strstr(at, "NMCOUNT")) != NULL; at += 7) {
        if (at != out && at[-1] != '\n') continue; /* only at the start of a line */
        if (strncmp(at, "NMCOUNT_DONE", 12) == 0) { done = true; continue; }
        if (at[7] != ' ') continue;
        const char *w = at + 8, *e = w;
        while (*e && *e != ' ' && *e != '\n') e++;
        int k = pf_kind_of(w, (size_t)(e - w));
        if (k < 0 || *e != ' ') return -1;
        n[k] += strtoull(e + 1, NULL, 10);
    }
    return done ? 0 : -1;
}

/* gdb's Python: break at pe_mark_begin, plant one counting breakpoint per site
 * (its stop() returns False: counted, not stopped), continue to pe_mark_end,
 * print the counts, let the helper finish (it prints its result line). */
static const char pf_script[] =
    "import gdb, os\n"
    "SITES = %s\n"
    "gdb.execute('set pagination off')\n"
    "gdb.execute('set confirm off')\n"
    "gdb.execute('set print thread-events off')\n"
    "counts = {}\n"
    "class Site(gdb.Breakpoint):\n"
    "    def __init__(self, addr, kind):\n"
    "        super().__init__('*0x%%x' %% addr, internal=True)\n"
    "        self.kind = kind\n"
    "    def stop(self):\n"
    "        counts[self.kind] = counts.get(self.kind, 0) + 1\n"
    "        return False\n"
    "def here():\n"
    "    try:\n"
    "        return gdb.selected_frame().name() or ''\n"
    "    except gdb.error:\n"
    "        return ''\n"
    "def base_of(pid, path):\n"
    "    real = os.path.realpath(path)\n"
    "    with open(path, 'rb') as f:\n"
    "        hdr = f.read(18)\n"
    "    if hdr[16] == 2:\n"
    "        return 0\n"
    "    for line in open('/proc/%%d/maps' %% pid):\n"
    "        f = line.split()\n"
    "        if len(f) >= 6 and int(f[2], 16) == 0 and os.path.realpath(f[5]) == real:\n"
    "            return int(f[0].split('-')[0], 16)\n"
    "    return None\n"
    "b1 = gdb.Breakpoint('pe_mark_begin', internal=True)\n"
    "b2 = gdb.Breakpoint('pe_mark_end', internal=True)\n"
    "gdb.execute('run')\n"
    "if here() != 'pe_mark_begin':\n"
    "    print('NMCOUNT_ERROR no begin mark')\n"
    "else:\n"
    "    pid = gdb.selected_inferior().pid\n"
    "    sites, bases, n = [], {}, 0\n"
    "    for line in open(SITES):\n"
    "        path, addr, kind = line.split()\n"
    "        if path not in bases:\n"
    "            bases[path] = base_of(pid, path)\n"
    "        if bases[path] is not None:\n"
    "            sites.append(Site(bases[path] + int(addr, 16), kind))\n"
    "    print('NMCOUNT_SITES %%d' %% len(sites))\n"
    "    gdb.execute('continue')\n"
    "    if here() != 'pe_mark_end':\n"
    "        print('NMCOUNT_ERROR no end mark')\n"
    "    else:\n"
    "        for s in sites:\n"
    "            s.delete()\n"
    "        for k, v in sorted(counts.items()):\n"
    "            print('NMCOUNT %%s %%d' %% (k, v))\n"
    "        print('NMCOUNT_DONE')\n"
    "        gdb.execute('continue')\n";

int pf_write_gdb_script(const char *script_path, const char *sites_path)
{
    if (strchr(sites_path, '\'') || strchr(sites_path, '\\')) return -1;
    FILE *f = fopen(script_path, "w");
    if (!f) return -1;
    char quoted[4200];
    snprintf(quoted, sizeof quoted, "'%s'", sites_path);
    fprintf(f, pf_script, quoted);
    return fclose(f) ? -1 : 0;
}
