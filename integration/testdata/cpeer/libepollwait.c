/*
 * libepollwait: LD_PRELOAD it into a libibverbs program (Debian's perftest)
 * and its ibv_get_cq_event waits the way pureverbs' Go tools do, so that a
 * benchmark can charge that wait to C as well: one epoll_pwait2 on an epoll
 * set built once, holding the channel's fd and an eventfd (a Go Poller's
 * wake), with a timeout (the Go tools' stall limit, 30 s), then the read
 * that takes the event, which libibverbs' own ibv_get_cq_event makes. C's
 * own wait is that read alone, blocking.
 *
 * The set watches the first channel waited on; a program that waits on a
 * second one gets the real call for it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>

typedef int (*get_cq_event_fn)(struct ibv_comp_channel *, struct ibv_cq **, void **);

static get_cq_event_fn real_get;
static int epfd = -1;
static int watched = -1;
static unsigned long waits;

/* The count says in the program's output that the preload took. */
__attribute__((destructor)) static void report(void)
{
	fprintf(stderr, "libepollwait: %lu waits with epoll_pwait2\n", waits);
}

static void watch(int fd)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (wake < 0 || epfd < 0) {
		perror("libepollwait: set-up");
		exit(1);
	}
	ev.data.fd = fd;
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)) {
		perror("libepollwait: epoll_ctl");
		exit(1);
	}
	ev.data.fd = wake;
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, wake, &ev)) {
		perror("libepollwait: epoll_ctl");
		exit(1);
	}
	watched = fd;
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	struct timespec limit = { .tv_sec = 30 };
	struct epoll_event got[3];
	int n;

	if (!real_get) {
		real_get = (get_cq_event_fn)dlsym(RTLD_NEXT, "ibv_get_cq_event");
		if (!real_get) {
			fprintf(stderr, "libepollwait: no ibv_get_cq_event: %s\n", dlerror());
			exit(1);
		}
	}
	if (watched < 0)
		watch(channel->fd);
	if (channel->fd == watched) {
		do
			n = epoll_pwait2(epfd, got, 3, &limit, NULL);
		while (n < 0 && errno == EINTR);
		waits++;
		if (n <= 0) {
			if (n == 0)
				errno = ETIMEDOUT;
			return -1;
		}
	}
	return real_get(channel, cq, cq_context);
}
