/* Loading program files built by nearmem-dpu-cc (docs/pim-machine.md, "How
 * a program is loaded").
 *
 * A program file is an ELF shared object whose every symbol is internal
 * except one query function. The loader
 *   1. checks the file without mapping it: ELF64, x86-64, a shared object, a
 *      ".nearmem_dpu" section with nearmem's magic and ABI version (anything
 *      else is DPU_ERR_ELF_INVALID_FILE: no code of a file that is not a
 *      program ever runs);
 *   2. maps one instance per host worker thread of the system: a private
 *      memfd copy each, dlopen'ed RTLD_LOCAL, so each instance has its own
 *      WRAM data block and no two instances (or the host program, which may
 *      share headers and even function names with the DPU program) see each
 *      other's symbols;
 *   3. hands each instance the machine's service table (no -rdynamic needed
 *      in host programs) and keeps a copy of its freshly relocated WRAM block,
 *      the initial WRAM image of every DPU that runs on that instance.
 * Loading the same bytes again into the same system reuses the instances. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "nearmem/common/error.h"

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Finds the program header in the file's ".nearmem_dpu" section. */
static dpu_error_t check_elf(const char *name, const uint8_t *b, size_t n, nm_dpu_header *hdr)
{
    const Elf64_Ehdr *eh = (const void *)b;
    if (n < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
        return nm_fail(NM_EFORMAT, "%s: not a DPU program (not an ELF file)", name), DPU_ERR_ELF_INVALID_FILE;
    if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_machine != EM_X86_64 ||
        eh->e_type != ET_DYN)
        return nm_fail(NM_EINVAL, "%s: not a DPU program built by nearmem-dpu-cc for this host", name),
               DPU_ERR_ELF_INVALID_FILE;
    if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > n || eh->e_shnum == 0 ||
        (n - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum || eh->e_shstrndx >= eh->e_shnum)
        return nm_fail(NM_EINVAL, "%s: corrupt ELF section table", name), DPU_ERR_ELF_INVALID_FILE;
    const Elf64_Shdr *sh = (const void *)(b + eh->e_shoff);
    const Elf64_Shdr *strs = &sh[eh->e_shstrndx];
    if (strs->sh_offset > n || strs->sh_size > n - strs->sh_offset)
        return nm_fail(NM_EINVAL, "%s: corrupt ELF section names", name), DPU_ERR_ELF_INVALID_FILE;
    const char *names = (const char *)b + strs->sh_offset;
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_name >= strs->sh_size ||
            strnlen(names + sh[i].sh_name, strs->sh_size - sh[i].sh_name) == strs->sh_size - sh[i].sh_name ||
            strcmp(names + sh[i].sh_name, NM_DPU_SECTION) != 0)
            continue;
        if (sh[i].sh_size < sizeof(*hdr) || sh[i].sh_offset > n || sh[i].sh_size > n - sh[i].sh_offset)
            return nm_fail(NM_EINVAL, "%s: corrupt %s section", name, NM_DPU_SECTION), DPU_ERR_ELF_INVALID_FILE;
        memcpy(hdr, b + sh[i].sh_offset, sizeof(*hdr));
        if (memcmp(hdr->magic, NM_DPU_MAGIC, 8) != 0)
            return nm_fail(NM_EINVAL, "%s: bad DPU program magic", name), DPU_ERR_ELF_INVALID_FILE;
        if (hdr->abi_version != NM_DPU_ABI_VERSION)
            return nm_fail(NM_EINVAL, "%s: built for DPU program ABI %u, this nearmem loads %u: rebuild it", name,
                           hdr->abi_version, NM_DPU_ABI_VERSION),
                   DPU_ERR_ELF_INVALID_FILE;
        return DPU_OK;
    }
    return nm_fail(NM_EINVAL, "%s: not a DPU program (no %s section: build it with nearmem-dpu-cc)", name,
                   NM_DPU_SECTION),
           DPU_ERR_ELF_INVALID_FILE;
}

static void unload(nm_pim_loaded *l)
{
    for (uint32_t k = 0; k < l->nr_instances; k++) {
        if (l->inst[k].handle)
            dlclose(l->inst[k].handle);
        if (l->inst[k].fd >= 0)
            close(l->inst[k].fd);
        free(l->inst[k].pristine);
    }
    for (nm_pim_symbol *s = l->def.symbols, *n; s; s = n) {
        n = s->next;
        free((void *)s->name);
        free(s);
    }
    free(l->inst);
    free(l->bytes);
    free(l);
}

void nm_pim__unload_all(nm_pim_system *sys)
{
    for (nm_pim_loaded *l = sys->loaded, *n; l; l = n) {
        n = l->next;
        unload(l);
    }
    sys->loaded = NULL;
}

static dpu_error_t map_instance(nm_pim_loaded *l, nm_pim_instance *in)
{
    /* glibc's dlopen returns an already loaded object of the same name: each
     * instance's memfd stays open while it is mapped, so no two instances
     * (of this or any loaded program) ever share a /proc/self/fd/N name. */
    int fd = memfd_create("nearmem-dpu-program", MFD_CLOEXEC);
    in->fd = fd;
    if (fd < 0)
        return nm_fail(NM_EINVAL, "memfd_create: %s", strerror(errno)), DPU_ERR_SYSTEM;
    size_t done = 0;
    while (done < l->size) {
        ssize_t w = write(fd, l->bytes + done, l->size - done);
        if (w <= 0)
            return nm_fail(NM_EINVAL, "writing a program copy: %s", strerror(errno)), DPU_ERR_SYSTEM;
        done += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    in->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!in->handle) {
        const char *e = dlerror();
        return nm_fail(NM_EINVAL, "%s: cannot map the program: %s", l->name, e ? e : "dlopen failed"),
               DPU_ERR_ELF_INVALID_FILE;
    }
    nm_dpu_query_fn q;
    *(void **)&q = dlsym(in->handle, NM_DPU_QUERY_SYMBOL);
    if (!q)
        return nm_fail(NM_EINVAL, "%s: no %s: not a DPU program", l->name, NM_DPU_QUERY_SYMBOL),
               DPU_ERR_ELF_INVALID_FILE;
    memset(&in->info, 0, sizeof(in->info));
    q(&in->info);
    const nm_dpu_info *i = &in->info;
    if (i->abi_version != NM_DPU_ABI_VERSION || i->wram_data_size != l->hdr.wram_data_size ||
        i->nr_tasklets != l->hdr.nr_tasklets || !i->main_fn || !i->rt_slot || !i->wram_data)
        return nm_fail(NM_EINVAL, "%s: program description disagrees with its header", l->name),
               DPU_ERR_ELF_INVALID_FILE;
    *i->rt_slot = &nm_pim__rt;
    in->pristine = malloc(i->wram_data_size ? i->wram_data_size : 1);
    if (!in->pristine)
        return DPU_ERR_ALLOCATION;
    memcpy(in->pristine, i->wram_data, i->wram_data_size);
    return DPU_OK;
}

static dpu_error_t build_symbols(nm_pim_loaded *l)
{
    const nm_dpu_info *i = &l->inst[0].info;
    nm_pim_symbol **tail = &l->def.symbols;
    for (uint32_t k = 0; k < i->nr_symbols; k++) {
        const nm_dpu_symbol *ds = &i->symbols[k];
        nm_pim_symbol *s = calloc(1, sizeof(*s));
        char *nm = strdup(ds->name);
        if (!s || !nm) {
            free(s);
            free(nm);
            return DPU_ERR_ALLOCATION;
        }
        s->name = nm;
        s->size = ds->size;
        switch (ds->kind) {
        case NM_DPU_SYM_MRAM:
            s->kind = NM_PIM_SYM_MRAM;
            s->offset = ds->address - NM_PIM_MRAM_BASE;
            break;
        case NM_DPU_SYM_RODATA:
            s->kind = NM_PIM_SYM_RODATA;
            s->offset = ds->address - i->wram_data_size;
            break;
        default:
            s->kind = NM_PIM_SYM_WRAM;
            s->offset = ds->address;
            break;
        }
        *tail = s;
        tail = &s->next;
        l->def.nr_symbols++;
    }
    return DPU_OK;
}

dpu_error_t nm_pim__load_image(nm_pim_system *sys, const char *name, const uint8_t *bytes, size_t size,
                               nm_pim_loaded **out)
{
    nm_dpu_header hdr;
    dpu_error_t e = check_elf(name, bytes, size, &hdr);
    if (e != DPU_OK)
        return e;
    if (hdr.nr_tasklets == 0 || hdr.nr_tasklets > NM_PIM_MAX_TASKLETS)
        return nm_fail(NM_EINVAL, "%s: built for %u tasklets; the DPU runs 1 to %u", name, hdr.nr_tasklets,
                       NM_PIM_MAX_TASKLETS),
               DPU_ERR_INVALID_THREAD_ID;
    uint64_t h = fnv1a(bytes, size);
    for (nm_pim_loaded *l = sys->loaded; l; l = l->next)
        if (l->hash == h && l->size == size && memcmp(l->bytes, bytes, size) == 0) {
            *out = l;
            return DPU_OK;
        }
    nm_pim_loaded *l = calloc(1, sizeof(*l));
    if (!l)
        return DPU_ERR_ALLOCATION;
    l->sys = sys;
    l->hdr = hdr;
    l->size = size;
    l->hash = h;
    snprintf(l->name, sizeof(l->name), "%s", name);
    l->bytes = malloc(size);
    l->nr_instances = sys->nr_threads;
    l->inst = calloc(l->nr_instances, sizeof(*l->inst));
    if (!l->bytes || !l->inst) {
        unload(l);
        return DPU_ERR_ALLOCATION;
    }
    for (uint32_t k = 0; k < l->nr_instances; k++)
        l->inst[k].fd = -1;
    memcpy(l->bytes, bytes, size);
    for (uint32_t k = 0; k < l->nr_instances && e == DPU_OK; k++) {
        e = map_instance(l, &l->inst[k]);
        for (uint32_t j = 0; j < k && e == DPU_OK; j++)
            if (l->inst[j].info.wram_data == l->inst[k].info.wram_data) {
                nm_fail(NM_ESTATE, "%s: the dynamic loader mapped one copy twice", name);
                e = DPU_ERR_SYSTEM;
            }
    }
    if (e == DPU_OK)
        e = build_symbols(l);
    if (e != DPU_OK) {
        unload(l);
        return e;
    }
    const nm_dpu_info *i = &l->inst[0].info;
    nm_pim_program_def *p = &l->def;
    p->name = l->name;
    p->main_fn = NULL; /* per instance */
    p->default_tasklets = hdr.nr_tasklets | 0x80000000u; /* fixed at build time */
    p->stack_size = hdr.stack_size;
    p->wram_globals_bytes = i->wram_data_size;
    p->wram_rodata_bytes = i->wram_rodata_size;
    p->mram_vars_bytes = i->mram_vars_size;
    p->sealed = true;
    p->file = l;
    l->next = sys->loaded;
    sys->loaded = l;
    *out = l;
    return DPU_OK;
}

dpu_error_t nm_pim__load_path(nm_pim_system *sys, const char *path, nm_pim_loaded **out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return nm_fail(NM_ENOENT, "%s: %s", path, strerror(errno)),
               errno == ENOENT || errno == ENOTDIR ? DPU_ERR_ELF_NO_SUCH_FILE : DPU_ERR_ELF_INVALID_FILE;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return nm_fail(NM_EINVAL, "%s: not a regular file", path), DPU_ERR_ELF_INVALID_FILE;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *b = malloc(n ? n : 1);
    if (!b) {
        close(fd);
        return DPU_ERR_ALLOCATION;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    dpu_error_t e = got == n ? nm_pim__load_image(sys, path, b, n, out) : DPU_ERR_ELF_INVALID_FILE;
    free(b);
    return e;
}
