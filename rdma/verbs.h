// Thin C helpers over libibverbs and librdmacm for the hot path: one call
// posts a whole batch of work requests, one call polls a batch of
// completions, so the cost of crossing from Go to C is spread over many I/Os.
#ifndef NVMEOF_TGT_VERBS_H
#define NVMEOF_TGT_VERBS_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

enum nt_op {
	NT_SEND = 0,
	NT_SEND_INV = 1,
	NT_WRITE = 2,
	NT_READ = 3,
	NT_RECV = 4,
};

// One work request in the batch Go builds.
struct nt_wr {
	uint64_t wr_id;
	uint64_t laddr;
	uint64_t raddr;
	uint32_t len;
	uint32_t lkey;
	uint32_t rkey;
	uint32_t inv_rkey;
	uint8_t op;
	uint8_t signaled;
	uint8_t pad[2];
	// A receive's second segment: in-capsule data lands here, page
	// aligned, apart from the 64-byte command.
	uint32_t len2;
	uint64_t laddr2;
};

// One completion, reduced to what the transport uses.
struct nt_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t vendor_err;
};

// Connection request details copied out of an rdma_cm event.
struct nt_conn_req {
	uint8_t private_data[64];
	uint8_t private_data_len;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	char peer[64];
};

// Receives go to srq where it is not NULL, else to qp's own receive queue.
int nt_post(struct ibv_qp *qp, struct ibv_srq *srq, struct nt_wr *wrs, int n, int *failed_op);
struct ibv_srq *nt_create_srq(struct ibv_pd *pd, int max_wr, int max_sge, int *err);
// Arms the shared receive queue's limit: the device raises
// IBV_EVENT_SRQ_LIMIT_REACHED once, when fewer than limit receives are
// posted; it must be armed again after that.
int nt_arm_srq_limit(struct ibv_srq *srq, int limit);
int nt_poll(struct ibv_cq *cq, struct nt_wc *wcs, int n);
int nt_arm_poll(struct ibv_cq *cq, struct nt_wc *wcs, int n);
int nt_event_poll(struct ibv_comp_channel *ch, struct ibv_cq *cq, struct nt_wc *wcs, int n);

int nt_listen(struct rdma_event_channel *ch, struct rdma_cm_id **out, const char *addr, const char *port, int backlog);
int nt_get_event(struct rdma_event_channel *ch, struct rdma_cm_event **ev, int *type, struct rdma_cm_id **id, int *status);
void nt_conn_req(struct rdma_cm_event *ev, struct nt_conn_req *out);
int nt_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq, int send_wr, int recv_wr, int recv_sge);
int nt_accept(struct rdma_cm_id *id, const void *priv, int len, uint8_t initiator_depth, uint8_t responder_resources);
int nt_reject(struct rdma_cm_id *id, const void *priv, int len);
// What the transport needs to know of a device, queried once per device.
struct nt_device_info {
	int max_qp_wr;
	int max_cqe;
	int max_qp_init_rd_atom;
	// iWARP: an RDMA READ's sink must be remotely writable.
	uint8_t iwarp;
	// IBV_DEVICE_MEM_MGT_EXTENSIONS: Send with Invalidate works.
	uint8_t mem_mgt_ext;
	// Shared receive queues: how many, and how deep; 0 if none.
	int max_srq;
	int max_srq_wr;
	int max_srq_sge;
	int num_comp_vectors;
	char name[64];
};

// One asynchronous device event, reduced to what the transport uses.
struct nt_async_event {
	int type;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	int port;
};

int nt_device_info(struct ibv_context *ctx, struct nt_device_info *out);
int nt_get_async_event(struct ibv_context *ctx, struct ibv_async_event *raw, struct nt_async_event *out);
int nt_async_fd(struct ibv_context *ctx);
struct ibv_context *nt_id_verbs(struct rdma_cm_id *id);
struct ibv_qp *nt_id_qp(struct rdma_cm_id *id);
int nt_id_port(struct rdma_cm_id *id);
const char *nt_id_device_name(struct rdma_cm_id *id);
int nt_release_removed_context(struct ibv_context *ctx);
int nt_set_nonblock(int fd);
// Moves the queue pair to the error state: the device then completes every
// posted work request with a flush status.
int nt_qp_to_error(struct ibv_qp *qp);

#endif
