/*
 * sock-echo: a plain BSD-sockets program, with nothing of RDMA in it, for
 * the librspreload tests (integration/rspreload_test.go): run under
 * LD_PRELOAD=librspreload.so.1 its socket calls become librdmacm's
 * rsockets without a change to it, as any unmodified program's would.
 *
 * The client connects from SRC, then in chunks of CHUNK bytes writes TOTAL
 * bytes of a pattern (byte i is i*7+3 mod 256) and reads each chunk back
 * before the next, checking it; then it shuts down its sending side and
 * expects the end of the stream. The server accepts one connection and
 * echoes what it reads until the end of the stream, then closes. Its
 * waits are unbounded (rsockets refuse SO_RCVTIMEO with ENOTSUP): the
 * test that runs it bounds its life.
 *
 * usage: sock-echo server ADDR PORT
 *        sock-echo client ADDR PORT SRC TOTAL CHUNK
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void sockaddr_of(struct sockaddr_in *sin, const char *addr, int port)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(port);
	if (inet_pton(AF_INET, addr, &sin->sin_addr) != 1) {
		fprintf(stderr, "bad address %s\n", addr);
		exit(2);
	}
}

static void write_all(int fd, const unsigned char *b, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, b, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			die("write");
		}
		b += w;
		n -= w;
	}
}

/* read_full reads n bytes, or fewer at the end of the stream. */
static size_t read_full(int fd, unsigned char *b, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, b + got, n - got);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			die("read");
		}
		if (r == 0)
			break;
		got += r;
	}
	return got;
}

static int server(const char *addr, int port)
{
	struct sockaddr_in sin;
	unsigned char buf[65536];
	long long echoed = 0;
	int one = 1, lfd, fd;
	ssize_t r;

	sockaddr_of(&sin, addr, port);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		die("socket");
	if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		die("setsockopt SO_REUSEADDR");
	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)))
		die("bind");
	if (listen(lfd, 1))
		die("listen");
	printf("listening\n");
	fflush(stdout);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept");
	for (;;) {
		r = read(fd, buf, sizeof(buf));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			die("read");
		}
		if (r == 0)
			break;
		write_all(fd, buf, r);
		echoed += r;
	}
	printf("server: %lld bytes echoed\n", echoed);
	if (close(fd) || close(lfd))
		die("close");
	return 0;
}

static int client(const char *addr, int port, const char *src, long long total, size_t chunk)
{
	struct sockaddr_in sin, from;
	unsigned char *out, *in;
	long long off = 0;
	size_t i, n;
	int fd;

	if (chunk == 0 || total < 0) {
		fprintf(stderr, "bad sizes\n");
		return 2;
	}
	out = malloc(chunk);
	in = malloc(chunk);
	if (!out || !in)
		die("malloc");
	sockaddr_of(&sin, addr, port);
	sockaddr_of(&from, src, 0);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	if (bind(fd, (struct sockaddr *)&from, sizeof(from)))
		die("bind");
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)))
		die("connect");
	while (off < total) {
		n = total - off < (long long)chunk ? (size_t)(total - off) : chunk;
		for (i = 0; i < n; i++)
			out[i] = (unsigned char)((off + i) * 7 + 3);
		write_all(fd, out, n);
		if (read_full(fd, in, n) != n) {
			fprintf(stderr, "echo ended early at byte %lld\n", off);
			return 1;
		}
		if (memcmp(in, out, n)) {
			for (i = 0; in[i] == out[i]; i++)
				;
			fprintf(stderr, "echo differs at byte %lld\n", off + (long long)i);
			return 1;
		}
		off += n;
	}
	if (shutdown(fd, SHUT_WR))
		die("shutdown");
	if (read_full(fd, in, 1) != 0) {
		fprintf(stderr, "data after the echo\n");
		return 1;
	}
	if (close(fd))
		die("close");
	printf("client: %lld bytes verified\n", total);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "server"))
		return server(argv[2], atoi(argv[3]));
	if (argc == 7 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), argv[4], atoll(argv[5]), strtoul(argv[6], NULL, 0));
	fprintf(stderr, "usage: sock-echo server ADDR PORT\n"
			"       sock-echo client ADDR PORT SRC TOTAL CHUNK\n");
	return 2;
}
