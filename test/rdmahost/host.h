// The verbs and rdma_cm calls of a test host: blocking connection set-up
// with a timeout, one chained post, and a completion wait with a timeout.
#ifndef NVMEOF_TGT_RDMAHOST_H
#define NVMEOF_TGT_RDMAHOST_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

// One connection's verbs objects, created by rh_resolve and rh_create_qp.
struct rh_conn {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
};

struct rh_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
};

// rh_resolve creates the event channel and id, resolves the address and
// route and allocates the protection domain. Returns 0 or a negative errno.
int rh_resolve(struct rh_conn *c, const char *addr, const char *port, int timeout_ms);
// rh_create_qp creates the completion channel, the CQ and an RC queue pair.
int rh_create_qp(struct rh_conn *c, int send_wr, int recv_wr, int cqe, int max_inline);
int rh_reg(struct rh_conn *c, void *buf, size_t len);
// rh_connect sends the connection request with priv as its private data
// and waits for the outcome; on a reject *reject holds the NVMe-oF reject
// status from the target's private data (or 0xffff without one).
int rh_connect(struct rh_conn *c, const void *priv, int len, int timeout_ms, int *reject);
int rh_post_recv(struct rh_conn *c, uint64_t wr_id, uint64_t addr, uint32_t len);
int rh_post_send(struct rh_conn *c, uint64_t wr_id, uint64_t addr, uint32_t len);
// rh_wait returns completions already queued, or waits up to timeout_ms
// for the first one. 0 means none came.
int rh_wait(struct rh_conn *c, struct rh_wc *wcs, int n, int timeout_ms);
int rh_disconnect(struct rh_conn *c);
// rh_wait_disconnected waits up to timeout_ms for the target to
// disconnect: 0 once it has, -ETIMEDOUT if it has not.
int rh_wait_disconnected(struct rh_conn *c, int timeout_ms);
// rh_destroy frees whatever c holds, the queue pair first, without
// rdma_disconnect.
void rh_destroy(struct rh_conn *c);

#endif
