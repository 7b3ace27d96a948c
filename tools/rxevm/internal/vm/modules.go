package vm

// RxeModules are the modules a run asks for by name; their dependencies come
// from modules.dep (read with rxe/rxelink's ModuleIndex, the one rxe-link
// loads modules with).
//
// crc32_generic is not in rdma_rxe's modules.dep line: rxe asks the crypto
// API for "crc32" at run time (rxe_icrc), a request modules.dep cannot see.
// Without it, adding an rxe link fails with ENOENT.
//
// rdma_ucm gives /dev/infiniband/rdma_cm (RDMA CM, with rdma_cm, ib_cm and
// iw_cm beneath it); sch_netem lets tests put loss, delay and corruption on
// the veth pair; sch_prio and cls_u32 let them put it on some packets only
// (a prio band chosen by a u32 filter).
var RxeModules = []string{"crc32_generic", "rdma_rxe", "veth", "rdma_ucm", "sch_netem", "sch_prio", "cls_u32"}

// NICModules drive the virtio NIC of a two-VM run.
var NICModules = []string{"virtio_pci", "virtio_net"}
