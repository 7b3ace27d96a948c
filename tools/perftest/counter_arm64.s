#include "textflag.h"

// func readCounter() uint64
// The ISB keeps the read from being taken before earlier instructions,
// as the kernel's vDSO and perftest's get_cycles do.
TEXT ·readCounter(SB), NOSPLIT|NOFRAME, $0-8
	ISB  $15
	MRS  CNTVCT_EL0, R0
	MOVD R0, ret+0(FP)
	RET
