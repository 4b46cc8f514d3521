#define _GNU_SOURCE
#include "verbs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

// Enough work requests for one chained post; longer batches are split.
#define NT_CHAIN 64

int nt_post(struct ibv_qp *qp, struct ibv_srq *srq, struct nt_wr *wrs, int n, int *failed_op)
{
	struct ibv_send_wr swr[NT_CHAIN], *bad_s = NULL;
	struct ibv_recv_wr rwr[NT_CHAIN], *bad_r = NULL;
	struct ibv_sge ssge[NT_CHAIN], rsge[2 * NT_CHAIN];
	int i = 0;

	while (i < n) {
		int ns = 0, nr = 0, ret;
		for (; i < n && ns < NT_CHAIN && nr < NT_CHAIN; i++) {
			struct nt_wr *w = &wrs[i];
			if (w->op == NT_RECV) {
				struct ibv_recv_wr *r = &rwr[nr];
				struct ibv_sge *sg = &rsge[2 * nr];
				sg[0].addr = w->laddr;
				sg[0].length = w->len;
				sg[0].lkey = w->lkey;
				sg[1].addr = w->laddr2;
				sg[1].length = w->len2;
				sg[1].lkey = w->lkey;
				memset(r, 0, sizeof(*r));
				r->wr_id = w->wr_id;
				r->sg_list = sg;
				r->num_sge = w->len2 ? 2 : 1;
				if (nr > 0)
					rwr[nr - 1].next = r;
				nr++;
				continue;
			}
			struct ibv_send_wr *s = &swr[ns];
			memset(s, 0, sizeof(*s));
			ssge[ns].addr = w->laddr;
			ssge[ns].length = w->len;
			ssge[ns].lkey = w->lkey;
			s->wr_id = w->wr_id;
			s->sg_list = &ssge[ns];
			s->num_sge = w->len ? 1 : 0;
			s->send_flags = w->signaled ? IBV_SEND_SIGNALED : 0;
			switch (w->op) {
			case NT_SEND:
				s->opcode = IBV_WR_SEND;
				break;
			case NT_SEND_INV:
				s->opcode = IBV_WR_SEND_WITH_INV;
				s->invalidate_rkey = w->inv_rkey;
				break;
			case NT_WRITE:
				s->opcode = IBV_WR_RDMA_WRITE;
				s->wr.rdma.remote_addr = w->raddr;
				s->wr.rdma.rkey = w->rkey;
				break;
			case NT_READ:
				s->opcode = IBV_WR_RDMA_READ;
				s->wr.rdma.remote_addr = w->raddr;
				s->wr.rdma.rkey = w->rkey;
				break;
			}
			if (ns > 0)
				swr[ns - 1].next = s;
			ns++;
		}
		// Receives first: a host may answer a response with a new
		// command at once, and it must find a buffer posted.
		if (nr > 0) {
			ret = srq ? ibv_post_srq_recv(srq, rwr, &bad_r) : ibv_post_recv(qp, rwr, &bad_r);
			if (ret) {
				*failed_op = NT_RECV;
				return ret;
			}
		}
		if (ns > 0) {
			ret = ibv_post_send(qp, swr, &bad_s);
			if (ret) {
				*failed_op = NT_SEND;
				return ret;
			}
		}
	}
	return 0;
}

int nt_poll(struct ibv_cq *cq, struct nt_wc *wcs, int n)
{
	struct ibv_wc wc[32];
	if (n > 32)
		n = 32;
	int got = ibv_poll_cq(cq, n, wc);
	for (int i = 0; i < got; i++) {
		wcs[i].wr_id = wc[i].wr_id;
		wcs[i].status = wc[i].status;
		wcs[i].opcode = wc[i].opcode;
		wcs[i].byte_len = wc[i].byte_len;
		wcs[i].vendor_err = wc[i].vendor_err;
	}
	return got;
}

int nt_arm_poll(struct ibv_cq *cq, struct nt_wc *wcs, int n)
{
	int ret = ibv_req_notify_cq(cq, 0);
	if (ret)
		return -ret;
	// Completions that arrived before arming raise no event.
	return nt_poll(cq, wcs, n);
}

int nt_event_poll(struct ibv_comp_channel *ch, struct ibv_cq *cq, struct nt_wc *wcs, int n)
{
	struct ibv_cq *ev_cq;
	void *ctx;
	if (ibv_get_cq_event(ch, &ev_cq, &ctx) == 0)
		ibv_ack_cq_events(ev_cq, 1);
	return nt_poll(cq, wcs, n);
}

int nt_set_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0)
		return -errno;
	if (fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

int nt_listen(struct rdma_event_channel *ch, struct rdma_cm_id **out, const char *addr, const char *port, int backlog)
{
	struct addrinfo hints, *res;
	struct rdma_cm_id *id;
	int ret;

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
	hints.ai_socktype = SOCK_STREAM;
	ret = getaddrinfo(addr, port, &hints, &res);
	if (ret)
		return -EINVAL;
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		ret = -errno;
		freeaddrinfo(res);
		return ret;
	}
	if (rdma_bind_addr(id, res->ai_addr)) {
		ret = -errno;
		freeaddrinfo(res);
		rdma_destroy_id(id);
		return ret;
	}
	freeaddrinfo(res);
	if (rdma_listen(id, backlog)) {
		ret = -errno;
		rdma_destroy_id(id);
		return ret;
	}
	*out = id;
	return 0;
}

int nt_get_event(struct rdma_event_channel *ch, struct rdma_cm_event **ev, int *type, struct rdma_cm_id **id, int *status)
{
	if (rdma_get_cm_event(ch, ev))
		return -errno;
	*type = (*ev)->event;
	*id = (*ev)->id;
	*status = (*ev)->status;
	return 0;
}

void nt_conn_req(struct rdma_cm_event *ev, struct nt_conn_req *out)
{
	struct rdma_conn_param *p = &ev->param.conn;
	struct sockaddr *sa = rdma_get_peer_addr(ev->id);
	int len = p->private_data_len;

	memset(out, 0, sizeof(*out));
	if (len > (int)sizeof(out->private_data))
		len = sizeof(out->private_data);
	if (p->private_data && len > 0)
		memcpy(out->private_data, p->private_data, len);
	else
		len = 0;
	out->private_data_len = len;
	out->responder_resources = p->responder_resources;
	out->initiator_depth = p->initiator_depth;
	if (sa && sa->sa_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)sa;
		char a[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &in->sin_addr, a, sizeof(a));
		snprintf(out->peer, sizeof(out->peer), "%s:%d", a, ntohs(in->sin_port));
	} else if (sa && sa->sa_family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
		char a[INET6_ADDRSTRLEN];
		inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof(a));
		snprintf(out->peer, sizeof(out->peer), "[%s]:%d", a, ntohs(in6->sin6_port));
	}
}

int nt_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq, int send_wr, int recv_wr, int recv_sge)
{
	struct ibv_qp_init_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.send_cq = cq;
	attr.recv_cq = cq;
	attr.srq = srq;
	attr.qp_type = IBV_QPT_RC;
	attr.cap.max_send_wr = send_wr;
	attr.cap.max_send_sge = 1;
	if (!srq) {
		attr.cap.max_recv_wr = recv_wr;
		attr.cap.max_recv_sge = recv_sge;
	}
	attr.sq_sig_all = 0;
	if (rdma_create_qp(id, pd, &attr))
		return -errno;
	return 0;
}

int nt_accept(struct rdma_cm_id *id, const void *priv, int len, uint8_t initiator_depth, uint8_t responder_resources)
{
	struct rdma_conn_param p;
	memset(&p, 0, sizeof(p));
	p.private_data = priv;
	p.private_data_len = len;
	p.initiator_depth = initiator_depth;
	p.responder_resources = responder_resources;
	p.flow_control = 1;
	p.rnr_retry_count = 7;
	if (rdma_accept(id, &p))
		return -errno;
	return 0;
}

int nt_reject(struct rdma_cm_id *id, const void *priv, int len)
{
	if (rdma_reject(id, priv, len))
		return -errno;
	return 0;
}

int nt_device_info(struct ibv_context *ctx, struct nt_device_info *out)
{
	struct ibv_device_attr a;
	memset(out, 0, sizeof(*out));
	if (ibv_query_device(ctx, &a))
		return -errno;
	out->max_qp_wr = a.max_qp_wr;
	out->max_cqe = a.max_cqe;
	out->max_qp_init_rd_atom = a.max_qp_init_rd_atom;
	out->iwarp = ctx->device->transport_type == IBV_TRANSPORT_IWARP ||
		     ctx->device->node_type == IBV_NODE_RNIC;
	out->mem_mgt_ext = (a.device_cap_flags & IBV_DEVICE_MEM_MGT_EXTENSIONS) != 0;
	out->max_srq = a.max_srq;
	out->max_srq_wr = a.max_srq_wr;
	out->max_srq_sge = a.max_srq_sge;
	out->num_comp_vectors = ctx->num_comp_vectors;
	snprintf(out->name, sizeof(out->name), "%s", ibv_get_device_name(ctx->device));
	return 0;
}

int nt_async_fd(struct ibv_context *ctx) { return ctx->async_fd; }

// Takes one event off a non-blocking async fd into *raw and copies what we
// use. The caller acknowledges raw once it has dispatched the event: until
// then the queue pair or CQ it names cannot be destroyed (and its address
// reused by another).
int nt_get_async_event(struct ibv_context *ctx, struct ibv_async_event *raw, struct nt_async_event *out)
{
	struct ibv_async_event ev;
	if (ibv_get_async_event(ctx, &ev))
		return -errno;
	*raw = ev;
	memset(out, 0, sizeof(*out));
	out->type = ev.event_type;
	switch (ev.event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		out->qp = ev.element.qp;
		break;
	case IBV_EVENT_CQ_ERR:
		out->cq = ev.element.cq;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		out->srq = ev.element.srq;
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		out->port = ev.element.port_num;
		break;
	default:
		break;
	}
	return 0;
}

struct ibv_context *nt_id_verbs(struct rdma_cm_id *id) { return id->verbs; }
struct ibv_qp *nt_id_qp(struct rdma_cm_id *id) { return id->qp; }
int nt_id_port(struct rdma_cm_id *id) { return id->port_num; }

const char *nt_id_device_name(struct rdma_cm_id *id)
{
	if (!id || !id->verbs)
		return "";
	return ibv_get_device_name(id->verbs->device);
}

// librdmacm keeps the verbs context of a removed device open until it next
// syncs its device list, which it skips while no RDMA device exists at all.
// A device whose driver cannot disassociate user contexts (soft-RoCE)
// finishes its removal only once every process closed it, so the removal
// (and any re-creation) would hang. Once nothing uses the context any more,
// its command and async event files are swapped for /dev/null: the kernel
// sees the device closed, and the close librdmacm does later closes
// /dev/null instead.
int nt_release_removed_context(struct ibv_context *ctx)
{
	int ret = 0;
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (dup3(fd, ctx->cmd_fd, O_CLOEXEC) < 0 || dup3(fd, ctx->async_fd, O_CLOEXEC) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

int nt_qp_to_error(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_ERR;
	return ibv_modify_qp(qp, &attr, IBV_QP_STATE);
}

struct ibv_srq *nt_create_srq(struct ibv_pd *pd, int max_wr, int max_sge, int *err)
{
	struct ibv_srq_init_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.attr.max_wr = max_wr;
	attr.attr.max_sge = max_sge;
	struct ibv_srq *srq = ibv_create_srq(pd, &attr);
	*err = srq ? 0 : -errno;
	return srq;
}

int nt_arm_srq_limit(struct ibv_srq *srq, int limit)
{
	struct ibv_srq_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.srq_limit = limit;
	return ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT);
}
