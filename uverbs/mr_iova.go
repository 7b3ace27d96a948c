package uverbs

// RegisterMRIOVA registers length bytes of b starting at off under the I/O
// virtual address iova instead of their address, as ibv_reg_mr_iova does:
// the region's SGEs (MR.SGE) and the remote addresses peers use (MR.Addr
// plus an offset) count from iova, whatever the memory's address. With
// AccessZeroBased, iova is 0.
func (pd *PD) RegisterMRIOVA(b *Buffer, off, length int, iova uint64, access Access) (*MR, error) {
	return pd.registerMR(b, off, length, iova, access)
}
