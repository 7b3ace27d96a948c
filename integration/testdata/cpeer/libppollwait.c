/*
 * libppollwait: LD_PRELOAD it into a libibverbs program (Debian's perftest)
 * and its ibv_get_cq_event waits the way pureverbs' Go perftest does when
 * no event is queued, so that a benchmark can charge that wait to C as
 * well: one ppoll, with no timeout, on the channel's fd and an eventfd (a
 * Go Poller's wake), then the read that takes the event, which libibverbs'
 * own ibv_get_cq_event makes. C's own wait is that read alone, blocking.
 *
 * Only the first channel waited on is watched; a program that waits on a
 * second one gets the real call for it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>

typedef int (*get_cq_event_fn)(struct ibv_comp_channel *, struct ibv_cq **, void **);

static get_cq_event_fn real_get;
static int wake = -1;
static int watched = -1;
static unsigned long waits;

/* The count says in the program's output that the preload took. */
__attribute__((destructor)) static void report(void)
{
	fprintf(stderr, "libppollwait: %lu waits with ppoll\n", waits);
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	struct pollfd fds[2];
	int n;

	if (!real_get) {
		real_get = (get_cq_event_fn)dlsym(RTLD_NEXT, "ibv_get_cq_event");
		if (!real_get) {
			fprintf(stderr, "libppollwait: no ibv_get_cq_event: %s\n", dlerror());
			exit(1);
		}
	}
	if (watched < 0) {
		wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (wake < 0) {
			perror("libppollwait: eventfd");
			exit(1);
		}
		watched = channel->fd;
	}
	if (channel->fd == watched) {
		fds[0] = (struct pollfd){ .fd = watched, .events = POLLIN };
		fds[1] = (struct pollfd){ .fd = wake, .events = POLLIN };
		do
			n = ppoll(fds, 2, NULL, NULL);
		while (n < 0 && errno == EINTR);
		waits++;
		if (n < 0)
			return -1;
	}
	return real_get(channel, cq, cq_context);
}
