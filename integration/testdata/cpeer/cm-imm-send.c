/*
 * cm-imm-send: a frame sender for pureverbs' server written against
 * librdmacm and libibverbs alone, the way a C program outside this
 * repository would connect to it. rxevm compiles it with the host's gcc
 * against Debian's librdmacm-dev/libibverbs-dev and places it in the guest
 * at /usr/local/bin/cm-imm-send; integration/server_cm_test.go runs it.
 *
 * It resolves the server's address from a bound source address
 * (rdma_resolve_addr, rdma_resolve_route), builds its PD, CQ and RC QP
 * (rdma_create_qp), connects with librdmacm's plain parameters and no
 * private data (rdma_connect), then sends -n frames as IBV_WR_SEND_WITH_IMM:
 * frame i goes on channel first+i%channels with ring position i mod 2^24,
 * the immediate being position<<8 | channel in network byte order. Payload
 * sizes and bytes come from a xorshift64 generator seeded by -r. Every
 * payload is also written to the -o file as a little-endian uint32 length
 * followed by the bytes, in sending order, so the test compares what the
 * server received with what was actually sent. At the end it disconnects
 * and waits for DISCONNECTED. Every wait is bounded: it fails with a
 * message instead of hanging.
 *
 * usage: cm-imm-send -b SRC [-p PORT] [-n FRAMES] [-s MIN-MAX] [-c CHANNELS]
 *                    [-C FIRST] [-q DEPTH] [-r SEED] [-o FILE] SERVER
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define WAIT_MS 30000 /* the longest any single step may take (a loaded TCG guest) */

static uint64_t rng_state;

static uint64_t next_random(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void die(const char *what, int err)
{
	if (err)
		fprintf(stderr, "cm-imm-send: %s: %s\n", what, strerror(err));
	else
		fprintf(stderr, "cm-imm-send: %s\n", what);
	exit(1);
}

/* wait_event takes the next CM event within WAIT_MS and fails unless it is
 * the one expected. */
static void wait_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int n;

	do {
		n = poll(&pfd, 1, WAIT_MS);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		die("poll the CM event channel", errno);
	if (n == 0) {
		fprintf(stderr, "cm-imm-send: no %s within %d ms\n", rdma_event_str(want), WAIT_MS);
		exit(1);
	}
	if (rdma_get_cm_event(ch, &ev))
		die("rdma_get_cm_event", errno);
	if (ev->event != want) {
		fprintf(stderr, "cm-imm-send: got %s (status %d), want %s\n",
			rdma_event_str(ev->event), ev->status, rdma_event_str(want));
		exit(1);
	}
	rdma_ack_cm_event(ev);
}

/* reap waits (within WAIT_MS) until at least one send completed and
 * returns how many did; any error status fails the run. */
static int reap(struct ibv_cq *cq, struct ibv_comp_channel *cc)
{
	struct ibv_wc wc[16];
	struct pollfd pfd = { .fd = cc->fd, .events = POLLIN };
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int n, i, armed = 0;

	for (;;) {
		n = ibv_poll_cq(cq, 16, wc);
		if (n < 0)
			die("ibv_poll_cq failed", 0);
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "cm-imm-send: send %llu completed with %s\n",
					(unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
				exit(1);
			}
		}
		if (n > 0)
			return n;
		if (!armed) {
			/* Arm, then poll once more: a completion that came
			 * before the arm raises no event. */
			if (ibv_req_notify_cq(cq, 0))
				die("ibv_req_notify_cq", errno);
			armed = 1;
			continue;
		}
		do {
			n = poll(&pfd, 1, WAIT_MS);
		} while (n < 0 && errno == EINTR);
		if (n <= 0) {
			fprintf(stderr, "cm-imm-send: no send completion within %d ms\n", WAIT_MS);
			exit(1);
		}
		if (ibv_get_cq_event(cc, &ev_cq, &ev_ctx))
			die("ibv_get_cq_event", errno);
		ibv_ack_cq_events(ev_cq, 1);
		armed = 0;
	}
}

static void parse_addr(const char *s, uint16_t port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	if (inet_pton(AF_INET, s, &sa->sin_addr) != 1) {
		fprintf(stderr, "cm-imm-send: %s is not an IPv4 address\n", s);
		exit(2);
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: cm-imm-send -b SRC [-p PORT] [-n FRAMES] [-s MIN-MAX] [-c CHANNELS] "
			"[-C FIRST] [-q DEPTH] [-r SEED] [-o FILE] SERVER\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *src = NULL, *out_path = NULL;
	unsigned long port = 18515, frames = 1000, min_size = 1, max_size = 4096;
	unsigned long channels = 1, first = 0, depth = 16, seed = 1;
	struct sockaddr_in src_sa, dst_sa;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp_init_attr qpa;
	struct rdma_conn_param cp;
	unsigned long sent = 0, done = 0, i;
	unsigned long long bytes = 0;
	uint8_t *buf;
	FILE *out = NULL;
	int op;

	while ((op = getopt(argc, argv, "b:p:n:s:c:C:q:r:o:")) != -1) {
		switch (op) {
		case 'b': src = optarg; break;
		case 'p': port = strtoul(optarg, NULL, 0); break;
		case 'n': frames = strtoul(optarg, NULL, 0); break;
		case 's':
			if (sscanf(optarg, "%lu-%lu", &min_size, &max_size) != 2)
				min_size = max_size = strtoul(optarg, NULL, 0);
			break;
		case 'c': channels = strtoul(optarg, NULL, 0); break;
		case 'C': first = strtoul(optarg, NULL, 0); break;
		case 'q': depth = strtoul(optarg, NULL, 0); break;
		case 'r': seed = strtoul(optarg, NULL, 0); break;
		case 'o': out_path = optarg; break;
		default: usage();
		}
	}
	if (optind != argc - 1 || !src || port == 0 || port > 65535 || min_size == 0 ||
	    min_size > max_size || channels == 0 || first + channels > 256 || depth == 0)
		usage();
	parse_addr(src, 0, &src_sa);
	parse_addr(argv[optind], (uint16_t)port, &dst_sa);
	rng_state = seed ? seed : 1;

	if (!(ch = rdma_create_event_channel()))
		die("rdma_create_event_channel", errno);
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		die("rdma_create_id", errno);
	if (rdma_resolve_addr(id, (struct sockaddr *)&src_sa, (struct sockaddr *)&dst_sa, 5000))
		die("rdma_resolve_addr", errno);
	wait_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	if (rdma_resolve_route(id, 5000))
		die("rdma_resolve_route", errno);
	wait_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);

	if (!(pd = ibv_alloc_pd(id->verbs)))
		die("ibv_alloc_pd", errno);
	if (!(cc = ibv_create_comp_channel(id->verbs)))
		die("ibv_create_comp_channel", errno);
	if (!(cq = ibv_create_cq(id->verbs, (int)depth + 1, NULL, cc, 0)))
		die("ibv_create_cq", errno);
	if (!(buf = calloc(depth, max_size)))
		die("out of memory", 0);
	if (!(mr = ibv_reg_mr(pd, buf, depth * max_size, IBV_ACCESS_LOCAL_WRITE)))
		die("ibv_reg_mr", errno);
	memset(&qpa, 0, sizeof(qpa));
	qpa.send_cq = cq;
	qpa.recv_cq = cq;
	qpa.qp_type = IBV_QPT_RC;
	qpa.sq_sig_all = 1;
	qpa.cap.max_send_wr = (uint32_t)depth;
	qpa.cap.max_recv_wr = 1;
	qpa.cap.max_send_sge = 1;
	qpa.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, pd, &qpa))
		die("rdma_create_qp", errno);

	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 6;
	cp.rnr_retry_count = 7;
	if (rdma_connect(id, &cp))
		die("rdma_connect", errno);
	wait_event(ch, RDMA_CM_EVENT_ESTABLISHED);
	printf("connected %s -> %s:%lu, QPN 0x%06x\n", src, argv[optind], port, id->qp->qp_num);
	fflush(stdout);

	if (out_path && !(out = fopen(out_path, "w")))
		die(out_path, errno);
	while (done < frames) {
		while (sent < frames && sent - done < depth) {
			uint8_t *p = buf + (sent % depth) * max_size;
			uint32_t len = (uint32_t)(min_size + next_random() % (max_size - min_size + 1));
			uint32_t pos = (uint32_t)(sent & 0xffffff);
			uint8_t hdr[4] = { len, len >> 8, len >> 16, len >> 24 };
			struct ibv_sge sge = { .addr = (uintptr_t)p, .length = len, .lkey = mr->lkey };
			struct ibv_send_wr wr, *bad;

			for (i = 0; i < len; i += 8) {
				uint64_t r = next_random();
				memcpy(p + i, &r, len - i < 8 ? len - i : 8);
			}
			memset(&wr, 0, sizeof(wr));
			wr.wr_id = sent;
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_SEND_WITH_IMM;
			wr.imm_data = htonl(pos << 8 | (uint32_t)(first + sent % channels));
			if (ibv_post_send(id->qp, &wr, &bad))
				die("ibv_post_send", errno);
			if (out && (fwrite(hdr, 1, 4, out) != 4 || fwrite(p, 1, len, out) != len))
				die("write the payload file", errno);
			bytes += len;
			sent++;
		}
		done += (unsigned long)reap(cq, cc);
	}
	if (out && fclose(out))
		die("close the payload file", errno);
	printf("sent %lu frames, %llu bytes\n", done, bytes);
	fflush(stdout);

	if (rdma_disconnect(id))
		die("rdma_disconnect", errno);
	wait_event(ch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(id);
	ibv_dereg_mr(mr);
	free(buf);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(cc);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}
