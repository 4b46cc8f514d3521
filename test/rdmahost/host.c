#define _GNU_SOURCE
#include "host.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <string.h>
#include <time.h>

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// wait_fd waits up to timeout_ms for fd to be readable. The Go runtime's
// signals interrupt poll; it goes on waiting for the time left.
static int wait_fd(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int64_t deadline = now_ms() + timeout_ms;
	for (;;) {
		int left = (int)(deadline - now_ms());
		int ret = poll(&p, 1, left > 0 ? left : 0);
		if (ret > 0)
			return 0;
		if (ret == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

// get_event waits for the next CM event on c->ch, which must be want.
static int get_event(struct rh_conn *c, int want, int timeout_ms, int *reject)
{
	struct rdma_cm_event *ev;
	int ret = wait_fd(c->ch->fd, timeout_ms);
	if (ret)
		return ret;
	if (rdma_get_cm_event(c->ch, &ev))
		return -errno;
	int got = ev->event, status = ev->status;
	if (got == RDMA_CM_EVENT_REJECTED && reject) {
		const uint8_t *p = ev->param.conn.private_data;
		*reject = 0xffff;
		if (p && ev->param.conn.private_data_len >= 4)
			*reject = p[2] | p[3] << 8;
	}
	rdma_ack_cm_event(ev);
	if (got == want)
		return status ? (status < 0 ? status : -status) : 0;
	if (got == RDMA_CM_EVENT_REJECTED)
		return -ECONNREFUSED;
	return -EPROTO;
}

int rh_resolve(struct rh_conn *c, const char *addr, const char *port, int timeout_ms)
{
	struct addrinfo hints, *res;
	int ret;

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(addr, port, &hints, &res))
		return -EINVAL;
	c->ch = rdma_create_event_channel();
	if (!c->ch) {
		freeaddrinfo(res);
		return -errno;
	}
	int fl = fcntl(c->ch->fd, F_GETFL);
	fcntl(c->ch->fd, F_SETFL, fl | O_NONBLOCK);
	if (rdma_create_id(c->ch, &c->id, NULL, RDMA_PS_TCP)) {
		c->id = NULL;
		freeaddrinfo(res);
		return -errno;
	}
	ret = rdma_resolve_addr(c->id, NULL, res->ai_addr, timeout_ms);
	freeaddrinfo(res);
	if (ret)
		return -errno;
	if ((ret = get_event(c, RDMA_CM_EVENT_ADDR_RESOLVED, timeout_ms, NULL)))
		return ret;
	if (rdma_resolve_route(c->id, timeout_ms))
		return -errno;
	if ((ret = get_event(c, RDMA_CM_EVENT_ROUTE_RESOLVED, timeout_ms, NULL)))
		return ret;
	c->pd = ibv_alloc_pd(c->id->verbs);
	return c->pd ? 0 : -ENOMEM;
}

int rh_create_qp(struct rh_conn *c, int send_wr, int recv_wr, int cqe, int max_inline)
{
	struct ibv_qp_init_attr a;

	c->cc = ibv_create_comp_channel(c->id->verbs);
	if (!c->cc)
		return -errno;
	int fl = fcntl(c->cc->fd, F_GETFL);
	fcntl(c->cc->fd, F_SETFL, fl | O_NONBLOCK);
	c->cq = ibv_create_cq(c->id->verbs, cqe, NULL, c->cc, 0);
	if (!c->cq)
		return -errno;
	memset(&a, 0, sizeof(a));
	a.send_cq = c->cq;
	a.recv_cq = c->cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = send_wr;
	a.cap.max_recv_wr = recv_wr;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = max_inline;
	if (rdma_create_qp(c->id, c->pd, &a))
		return -errno;
	return 0;
}

int rh_reg(struct rh_conn *c, void *buf, size_t len)
{
	c->mr = ibv_reg_mr(c->pd, buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	return c->mr ? 0 : -errno;
}

int rh_connect(struct rh_conn *c, const void *priv, int len, int timeout_ms, int *reject)
{
	struct rdma_conn_param p;

	memset(&p, 0, sizeof(p));
	p.private_data = priv;
	p.private_data_len = len;
	p.responder_resources = 16;
	p.initiator_depth = 16;
	p.retry_count = 7;
	p.rnr_retry_count = 7;
	*reject = 0;
	if (rdma_connect(c->id, &p))
		return -errno;
	return get_event(c, RDMA_CM_EVENT_ESTABLISHED, timeout_ms, reject);
}

int rh_post_recv(struct rh_conn *c, uint64_t wr_id, uint64_t addr, uint32_t len)
{
	struct ibv_sge sge = {.addr = addr, .length = len, .lkey = c->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;

	return -ibv_post_recv(c->id->qp, &wr, &bad);
}

int rh_post_send(struct rh_conn *c, uint64_t wr_id, uint64_t addr, uint32_t len)
{
	struct ibv_sge sge = {.addr = addr, .length = len, .lkey = c->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
				 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED}, *bad;

	return -ibv_post_send(c->id->qp, &wr, &bad);
}

static int poll_cq(struct rh_conn *c, struct rh_wc *wcs, int n)
{
	struct ibv_wc wc[16];
	if (n > 16)
		n = 16;
	int got = ibv_poll_cq(c->cq, n, wc);
	for (int i = 0; i < got; i++) {
		wcs[i].wr_id = wc[i].wr_id;
		wcs[i].status = wc[i].status;
		wcs[i].opcode = wc[i].opcode;
		wcs[i].byte_len = wc[i].byte_len;
	}
	return got;
}

int rh_wait(struct rh_conn *c, struct rh_wc *wcs, int n, int timeout_ms)
{
	for (;;) {
		int got = poll_cq(c, wcs, n);
		if (got)
			return got;
		if (ibv_req_notify_cq(c->cq, 0))
			return -EIO;
		// Completions that came before arming raise no event.
		if ((got = poll_cq(c, wcs, n)))
			return got;
		int ret = wait_fd(c->cc->fd, timeout_ms);
		if (ret == -ETIMEDOUT)
			return 0;
		if (ret)
			return ret;
		struct ibv_cq *cq;
		void *ctx;
		if (ibv_get_cq_event(c->cc, &cq, &ctx) == 0)
			ibv_ack_cq_events(cq, 1);
	}
}

int rh_disconnect(struct rh_conn *c)
{
	if (!c->id)
		return 0;
	return rdma_disconnect(c->id) ? -errno : 0;
}

int rh_wait_disconnected(struct rh_conn *c, int timeout_ms)
{
	return get_event(c, RDMA_CM_EVENT_DISCONNECTED, timeout_ms, NULL);
}

void rh_destroy(struct rh_conn *c)
{
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->cc)
		ibv_destroy_comp_channel(c->cc);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->ch)
		rdma_destroy_event_channel(c->ch);
	memset(c, 0, sizeof(*c));
}
