/*
 * insnprof counts the guest instructions QEMU executes, per translation
 * block: loaded with -plugin (rxevm's RXEVM_PLUGIN), it writes one line
 * per block that ran when QEMU exits,
 *
 *	start-address(hex) instructions-in-block times-executed
 *
 * to the file its out= argument names. Under -icount the guest's clocks
 * count the same instructions, so the profile and what the guest measures
 * agree. integration/internal/insnprof names the addresses. Blocks are
 * keyed by virtual address: processes that map code at the same address
 * share a line, which is why the profiled Go tool is linked at an address
 * of its own (make profile-insn).
 *
 * The few declarations of QEMU's plugin interface (version 1, as QEMU 7.2
 * has it) are written out below: Debian packages no header for it.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct {
	const char *target_name;
	struct {
		int min, cur;
	} version;
	bool system_emulation;
	union {
		struct {
			int smp_vcpus, max_vcpus;
		} system;
	};
} qemu_info_t;
enum { qemu_plugin_inline_add_u64 = 0 };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, void (*)(qemu_plugin_id_t, struct qemu_plugin_tb *));
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *, int, void *, uint64_t);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, void (*)(qemu_plugin_id_t, void *), void *);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *);

#define EXPORT __attribute__((visibility("default")))

EXPORT int qemu_plugin_version = 1;

/* A block's counter. QEMU translates a block again after a flush or on
 * another page mapping; the same start and length share the counter. */
struct block {
	uint64_t vaddr, insns, execs;
	struct block *next;
};

#define BUCKET_BITS 20
static struct block **buckets;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* translation runs on every vCPU thread */
static const char *outpath;

static struct block *block_of(uint64_t vaddr, uint64_t insns)
{
	uint64_t h = (vaddr * 0x9e3779b97f4a7c15ull) >> (64 - BUCKET_BITS);
	struct block *b;

	for (b = buckets[h]; b; b = b->next)
		if (b->vaddr == vaddr && b->insns == insns)
			return b;
	b = calloc(1, sizeof *b);
	if (!b) {
		fprintf(stderr, "insnprof: out of memory\n");
		abort();
	}
	b->vaddr = vaddr;
	b->insns = insns;
	b->next = buckets[h];
	buckets[h] = b;
	return b;
}

static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	struct block *b;

	(void)id;
	pthread_mutex_lock(&lock);
	b = block_of(qemu_plugin_tb_vaddr(tb), qemu_plugin_tb_n_insns(tb));
	pthread_mutex_unlock(&lock);
	/* An add compiled into the block: no call per execution. It is not
	 * atomic, which the profiles' one vCPU (-icount) does not need. */
	qemu_plugin_register_vcpu_tb_exec_inline(tb, qemu_plugin_inline_add_u64, &b->execs, 1);
}

static void write_profile(qemu_plugin_id_t id, void *unused)
{
	FILE *f;
	struct block *b;
	uint64_t h;

	(void)id;
	(void)unused;
	f = fopen(outpath, "w");
	if (!f) {
		perror(outpath);
		return;
	}
	for (h = 0; h < (1u << BUCKET_BITS); h++)
		for (b = buckets[h]; b; b = b->next)
			if (b->execs)
				fprintf(f, "%llx %llu %llu\n", (unsigned long long)b->vaddr,
					(unsigned long long)b->insns, (unsigned long long)b->execs);
	if (fclose(f) != 0)
		perror(outpath);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	int i;

	(void)info;
	for (i = 0; i < argc; i++)
		if (!strncmp(argv[i], "out=", 4))
			outpath = argv[i] + 4;
	if (!outpath) {
		fprintf(stderr, "insnprof: needs out=FILE\n");
		return 1;
	}
	buckets = calloc(1u << BUCKET_BITS, sizeof *buckets);
	if (!buckets)
		return 1;
	qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
	qemu_plugin_register_atexit_cb(id, write_profile, NULL);
	return 0;
}
